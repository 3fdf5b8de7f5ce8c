/// A payment session as the receiver holds it after creating it on the ledger.
public struct ReceiverSession: Hashable, Sendable {
    /// The session id (a UUID chosen by the server).
    public var sessionID: String
    /// The EID to advertise.
    public var eid: EID
    /// When the session expires, on the driver's clock (the driver converts the server's `exp_at`).
    public var expiresAt: Duration
    /// Into how many shares the amount is split (1: one payer pays it whole).
    public var shares: Int
    /// What the ledger last reported of its payments.
    public var payments: SessionPayments

    /// The session `sessionID` the ledger created, advertised as `eid` until `expiresAt`, a time on the
    /// driver's clock; split into `shares` (1: not split), nothing paid yet unless `payments` says otherwise.
    public init(
        sessionID: String,
        eid: EID,
        expiresAt: Duration,
        shares: Int = 1,
        payments: SessionPayments = SessionPayments()
    ) {
        self.sessionID = sessionID
        self.eid = eid
        self.expiresAt = expiresAt
        self.shares = shares
        self.payments = payments
    }
}

/// What the ledger reports of a session's payments: the shares paid and what they brought, tips, and what was
/// refunded (a split session cancelled or expired with shares paid refunds every payment).
public struct SessionPayments: Hashable, Sendable {
    /// How many shares are paid (1 once a session that is not split is paid).
    public var sharesPaid: Int
    /// What the shares paid add up to, without tips.
    public var paidCents: Cents
    /// The tips paid on top.
    public var tipCents: Cents
    /// What was refunded to payers, tips included.
    public var refundedCents: Cents
    /// How many payments (one per payer's send) were refunded, in part or whole.
    public var refundedPayments: Int

    /// The figures as the ledger reports them; all zero by default: nothing paid.
    public init(
        sharesPaid: Int = 0,
        paidCents: Cents = 0,
        tipCents: Cents = 0,
        refundedCents: Cents = 0,
        refundedPayments: Int = 0
    ) {
        self.sharesPaid = sharesPaid
        self.paidCents = paidCents
        self.tipCents = tipCents
        self.refundedCents = refundedCents
        self.refundedPayments = refundedPayments
    }

    /// Whether anything was paid (and so, of a session that ends unpaid, is refunded).
    public var anyPaid: Bool { sharesPaid > 0 || paidCents > 0 || refundedCents > 0 }
}

/// The receiver's flow, without I/O: create a session → advertise its EID → watch its status → stop when paid.
///
/// A split session stays on the air while its shares are paid one by one (``SessionStatus/partiallyPaid``): each
/// share that lands is shown (``Action/showSharesPaid(_:)``), and the flow ends paid once every share is. A split
/// cancelled or expired with shares paid ends with what the ledger refunded (``Outcome/cancelledWithRefunds(_:)``,
/// ``Outcome/expired(_:)``).
///
/// The driver feeds it ``Event``s with the current time and performs the ``Action`` it returns. Events that do not
/// apply in the current state are ignored and return ``Action/none``. The advertisement runs exactly while the state
/// is ``State/advertising(_:)``: actions that leave that state say so by name (`stopAdvertisingAnd…`).
public struct ReceiverStateMachine: Sendable {
    /// How the receiver behaves.
    public struct Configuration: Hashable, Sendable {
        /// When a session expires unpaid, create a new one (with a new EID) instead of stopping.
        public var recreateOnExpiry: Bool
        /// At most this many sessions in total (the first one included), so a forgotten terminal stops eventually;
        /// `nil` for no limit.
        public var maximumSessions: Int?
        /// The ledger judges expiry; a ``Event/tick`` ends the session locally only this long after ``ReceiverSession/expiresAt``,
        /// in case status updates stopped arriving, so a payment accepted at the last moment is still reported.
        public var expiryGrace: Duration
        /// How many times a cancel the ledger did not confirm is sent in all before it is reported unconfirmed.
        public var cancelAttempts: Int
        /// The wait before the second cancel; each further wait doubles.
        public var cancelRetryDelay: Duration
        /// No cancel is retried once this long has passed since the first, however many attempts are left: a
        /// person pressed Ctrl-C and is waiting.
        public var cancelPatience: Duration

        /// The receiver's behaviour; the defaults stop when a session expires unpaid (no new one), end a session
        /// locally 5 s past its expiry, and send an unconfirmed cancel up to 4 times, 500 ms apart at first, for
        /// at most 15 s.
        public init(
            recreateOnExpiry: Bool = false,
            maximumSessions: Int? = nil,
            expiryGrace: Duration = .seconds(5),
            cancelAttempts: Int = 4,
            cancelRetryDelay: Duration = .milliseconds(500),
            cancelPatience: Duration = .seconds(15)
        ) {
            self.recreateOnExpiry = recreateOnExpiry
            self.maximumSessions = maximumSessions
            self.expiryGrace = expiryGrace
            self.cancelAttempts = cancelAttempts
            self.cancelRetryDelay = cancelRetryDelay
            self.cancelPatience = cancelPatience
        }
    }

    /// The session's status as the ledger reports it.
    public enum SessionStatus: Hashable, Sendable {
        /// Waiting for a payer (possibly locked by one).
        case pending
        /// Some shares of a split session are paid, not all: still waiting for payers.
        case partiallyPaid
        /// Paid (of a split: every share), its receipts checked where the driver checks them.
        case paid
        /// The ledger reports the session paid, but a receipt does not verify against the trusted keys: the
        /// signature does not back the payment.
        case paidUnverified(reason: String)
        /// Expired unpaid (of a split with shares paid, they are refunded).
        case expired
        /// Cancelled on the server (by the payee elsewhere, or an operator; of a split with shares paid, they are
        /// refunded).
        case cancelled
    }

    /// What the ledger said to a cancel, once the driver has asked (and, if the cancel got no answer, read the
    /// session's status).
    public enum CancelAnswer: Hashable, Sendable {
        /// The session is cancelled: nobody can pay it any more.
        case cancelled
        /// The cancel was refused because the session is paid, or its status reads PAID.
        case paid
        /// The session expired unpaid before the cancel.
        case expired
        /// No confirmation: the ledger could not be reached or did not say. The session may still be paid.
        case unconfirmed(reason: String)
    }

    /// What the driver reports.
    public enum Event: Hashable, Sendable {
        /// Begin. Valid once, in ``State/idle``.
        case start
        /// The ledger created a session.
        case created(ReceiverSession)
        /// The ledger refused to create a session.
        case createFailed(reason: String)
        /// The advertisement could not be started or was lost (adapter gone, advertising refused).
        case advertisingFailed(reason: String)
        /// The ledger reported a session's status, with its payments when the driver read them (`nil` leaves the
        /// figures known as they are); reports about any other session than the current one are ignored.
        case status(sessionID: String, SessionStatus, payments: SessionPayments? = nil)
        /// Time passed; lets the machine notice expiry when status updates stop arriving.
        case tick
        /// The user stopped the receiver.
        case cancel
        /// The ledger answered (or did not) the cancel of this session; `payments` are the session's figures read
        /// after it (of a split with shares paid: what was refunded), `nil` when not read.
        case cancelAnswered(sessionID: String, CancelAnswer, payments: SessionPayments? = nil)
    }

    /// What the driver must do next.
    public enum Action: Hashable, Sendable {
        /// Nothing; wait for the next event.
        case none
        /// Create a session on the ledger.
        case createSession
        /// Advertise this EID and watch the session's status.
        case startAdvertising(EID)
        /// More shares of the split session are paid (``ReceiverSession/payments``): show how many of how many;
        /// keep advertising and watching.
        case showSharesPaid(ReceiverSession)
        /// Stop advertising and stop watching, then create a new session.
        case stopAdvertisingAndCreateSession
        /// Stop advertising and stop watching, then cancel the session on the ledger (even though the caller was
        /// cancelled) and send ``Event/cancelAnswered(sessionID:_:payments:)`` (of a split, with the figures read
        /// after the cancel, which say what was refunded).
        case stopAdvertisingAndCancel(sessionID: String)
        /// Wait `after`, then send the cancel again and report its answer; the wait must not be cut short by the
        /// cancellation that started it.
        case cancelAgain(sessionID: String, after: Duration)
        /// Stop advertising and stop watching, then report.
        case stopAdvertisingAndReport(Outcome)
        /// Report; the flow is over.
        case report(Outcome)
    }

    /// How the flow ended.
    public enum Outcome: Hashable, Sendable {
        /// The session was paid (of a split: every share); its payments say what came in.
        case paid(ReceiverSession)
        /// The ledger reports the session paid, but a receipt does not verify: the payment is not taken as made.
        case paidUnverified(ReceiverSession, reason: String)
        /// The last session expired unpaid and no new one is created; of a split with shares paid, its payments say
        /// what the ledger refunded.
        case expired(ReceiverSession)
        /// The session was cancelled, here or on the server, with nothing paid.
        case cancelled
        /// The split session was cancelled, here or on the server, after shares were paid: its payments say what
        /// the ledger refunded.
        case cancelledWithRefunds(ReceiverSession)
        /// The receiver was stopped but the ledger never confirmed the cancel: until it expires, the session may
        /// still be paid.
        case cancelUnconfirmed(ReceiverSession, reason: String)
        /// Creating a session failed.
        case createFailed(reason: String)
        /// Advertising failed.
        case advertisingFailed(reason: String)
    }

    /// Where the flow is.
    public enum State: Hashable, Sendable {
        /// Not started.
        case idle
        /// Waiting for the ledger to create a session.
        case creating
        /// Advertising the session's EID and watching its status.
        case advertising(ReceiverSession)
        /// Stopped advertising; waiting for the ledger to confirm the cancel of this session.
        case cancelling(ReceiverSession)
        /// Over.
        case finished(Outcome)
    }

    /// The configuration in use.
    public let configuration: Configuration
    /// Where the flow is.
    public private(set) var state: State = .idle
    /// Sessions created so far.
    public private(set) var sessionsCreated = 0
    /// Cancels sent for the current session, and when the first was asked for.
    private var cancelsSent = 0
    private var cancelStartedAt: Duration = .zero

    /// Creates a flow in ``State/idle``.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Feeds one event at time `now` (on the driver's clock) and returns what to do.
    public mutating func receive(_ event: Event, now: Duration) -> Action {
        switch (state, event) {
        case (.idle, .start):
            state = .creating
            return .createSession

        case (.creating, .created(let session)):
            sessionsCreated += 1
            state = .advertising(session)
            return .startAdvertising(session.eid)
        case (.creating, .createFailed(let reason)):
            return finish(.createFailed(reason: reason), stoppingAdvertising: false)
        case (.creating, .cancel):
            // A session created after this point is left to expire on the server.
            return finish(.cancelled, stoppingAdvertising: false)

        case (.advertising(var session), .status(let sessionID, let status, let payments))
        where sessionID == session.sessionID:
            let before = session.payments.sharesPaid
            if let payments { session.payments = payments }
            switch status {
            case .pending, .partiallyPaid:
                state = .advertising(session)
                // Each share shown once, however often the same count is reported.
                return session.payments.sharesPaid > before ? .showSharesPaid(session) : .none
            case .paid: return finish(.paid(session), stoppingAdvertising: true)
            case .paidUnverified(let reason):
                return finish(.paidUnverified(session, reason: reason), stoppingAdvertising: true)
            case .expired: return expire(session)
            case .cancelled: return finish(cancelled(session), stoppingAdvertising: true)
            }
        case (.advertising(let session), .tick) where now >= session.expiresAt + configuration.expiryGrace:
            return expire(session)
        case (.advertising(let session), .cancel):
            state = .cancelling(session)
            cancelsSent = 1
            cancelStartedAt = now
            return .stopAdvertisingAndCancel(sessionID: session.sessionID)
        case (.advertising, .advertisingFailed(let reason)):
            return finish(.advertisingFailed(reason: reason), stoppingAdvertising: true)

        // What the ledger says wins over what was asked: a paid session is reported paid.
        case (.cancelling(var session), .cancelAnswered(let sessionID, let answer, let payments))
        where sessionID == session.sessionID:
            if let payments { session.payments = payments }
            switch answer {
            case .cancelled: return finish(cancelled(session), stoppingAdvertising: false)
            case .paid: return finish(.paid(session), stoppingAdvertising: false)
            case .expired: return finish(.expired(session), stoppingAdvertising: false)
            case .unconfirmed(let reason): return retryCancel(session, reason: reason, now: now)
            }

        default:
            return .none
        }
    }

    private mutating func retryCancel(_ session: ReceiverSession, reason: String, now: Duration) -> Action {
        // Past expiry and its grace, nobody can pay it any more: the ledger judges expiry the same way.
        if now >= session.expiresAt + configuration.expiryGrace {
            return finish(.expired(session), stoppingAdvertising: false)
        }
        let delay = configuration.cancelRetryDelay * (1 << min(cancelsSent - 1, 16))
        guard cancelsSent < configuration.cancelAttempts,
            now + delay - cancelStartedAt <= configuration.cancelPatience
        else {
            return finish(.cancelUnconfirmed(session, reason: reason), stoppingAdvertising: false)
        }
        cancelsSent += 1
        return .cancelAgain(sessionID: session.sessionID, after: delay)
    }

    /// A cancelled session's outcome: with the refunds, when shares were paid.
    private func cancelled(_ session: ReceiverSession) -> Outcome {
        session.payments.anyPaid ? .cancelledWithRefunds(session) : .cancelled
    }

    private mutating func expire(_ session: ReceiverSession) -> Action {
        let mayCreate = configuration.maximumSessions.map { sessionsCreated < $0 } ?? true
        if configuration.recreateOnExpiry && mayCreate {
            state = .creating
            return .stopAdvertisingAndCreateSession
        }
        return finish(.expired(session), stoppingAdvertising: true)
    }

    private mutating func finish(_ outcome: Outcome, stoppingAdvertising: Bool) -> Action {
        state = .finished(outcome)
        return stoppingAdvertising ? .stopAdvertisingAndReport(outcome) : .report(outcome)
    }
}
