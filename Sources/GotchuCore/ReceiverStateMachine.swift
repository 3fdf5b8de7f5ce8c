/// A payment session as the receiver holds it after creating it on the ledger.
public struct ReceiverSession: Hashable, Sendable {
    /// The session id (a UUID chosen by the server).
    public var sessionID: String
    /// The EID to advertise.
    public var eid: EID
    /// When the session expires, on the driver's clock (the driver converts the server's `exp_at`).
    public var expiresAt: Duration

    /// Creates a session.
    public init(sessionID: String, eid: EID, expiresAt: Duration) {
        self.sessionID = sessionID
        self.eid = eid
        self.expiresAt = expiresAt
    }
}

/// The receiver's flow, without I/O: create a session → advertise its EID → watch its status → stop when paid.
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

        /// Creates a configuration.
        public init(recreateOnExpiry: Bool = false, maximumSessions: Int? = nil, expiryGrace: Duration = .seconds(5)) {
            self.recreateOnExpiry = recreateOnExpiry
            self.maximumSessions = maximumSessions
            self.expiryGrace = expiryGrace
        }
    }

    /// The session's status as the ledger reports it.
    public enum SessionStatus: Hashable, Sendable {
        /// Waiting for a payer (possibly locked by one).
        case pending
        /// Paid.
        case paid
        /// Expired unpaid.
        case expired
        /// Cancelled on the server (by the payee elsewhere, or an operator).
        case cancelled
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
        /// The ledger reported a session's status; reports about any other session than the current one are ignored.
        case status(sessionID: String, SessionStatus)
        /// Time passed; lets the machine notice expiry when status updates stop arriving.
        case tick
        /// The user stopped the receiver.
        case cancel
    }

    /// What the driver must do next.
    public enum Action: Hashable, Sendable {
        /// Nothing; wait for the next event.
        case none
        /// Create a session on the ledger.
        case createSession
        /// Advertise this EID and watch the session's status.
        case startAdvertising(EID)
        /// Stop advertising and stop watching, then create a new session.
        case stopAdvertisingAndCreateSession
        /// Stop advertising and stop watching, cancel the session on the ledger, then report ``Outcome/cancelled``.
        case stopAdvertisingAndCancel(sessionID: String)
        /// Stop advertising and stop watching, then report.
        case stopAdvertisingAndReport(Outcome)
        /// Report; the flow is over.
        case report(Outcome)
    }

    /// How the flow ended.
    public enum Outcome: Hashable, Sendable {
        /// The session was paid.
        case paid(ReceiverSession)
        /// The last session expired unpaid and no new one is created.
        case expired(ReceiverSession)
        /// The session was cancelled, here or on the server.
        case cancelled
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
        /// Over.
        case finished(Outcome)
    }

    /// The configuration in use.
    public let configuration: Configuration
    /// Where the flow is.
    public private(set) var state: State = .idle
    /// Sessions created so far.
    public private(set) var sessionsCreated = 0

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

        case (.advertising(let session), .status(let sessionID, let status)) where sessionID == session.sessionID:
            switch status {
            case .pending: return .none
            case .paid: return finish(.paid(session), stoppingAdvertising: true)
            case .expired: return expire(session)
            case .cancelled: return finish(.cancelled, stoppingAdvertising: true)
            }
        case (.advertising(let session), .tick) where now >= session.expiresAt + configuration.expiryGrace:
            return expire(session)
        case (.advertising(let session), .cancel):
            state = .finished(.cancelled)
            return .stopAdvertisingAndCancel(sessionID: session.sessionID)
        case (.advertising, .advertisingFailed(let reason)):
            return finish(.advertisingFailed(reason: reason), stoppingAdvertising: true)

        default:
            return .none
        }
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
