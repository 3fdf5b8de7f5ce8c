/// A payment session as the ledger's resolve call describes it: the figures the payer confirms come from the server,
/// never from the advertisement.
public struct PaymentOffer: Hashable, Sendable {
    /// The EID that was resolved.
    public var eid: EID
    /// The session id (a UUID chosen by the server).
    public var sessionID: String
    /// The amount in cents.
    public var amountCents: Int64
    /// The payee's display name: text from elsewhere, shown only through ``DisplayText``.
    public var payeeName: String
    /// The domain that tells payees of one name apart (``DisplayText`` too), when the ledger gives one.
    public var payeeDomain: String?

    /// Creates an offer.
    public init(eid: EID, sessionID: String, amountCents: Int64, payeeName: String, payeeDomain: String? = nil) {
        self.eid = eid
        self.sessionID = sessionID
        self.amountCents = amountCents
        self.payeeName = payeeName
        self.payeeDomain = payeeDomain
    }

    /// The payee for a person to read: the name quoted and escaped, then the domain, such as
    /// `"bob" (example.com)`; nothing in either can rewrite, reorder or imitate the text around it.
    public var payeeDescription: String {
        let name = DisplayText.quoted(payeeName)
        guard let payeeDomain else { return name }
        return name + " (" + DisplayText.escaped(payeeDomain, maximumLength: 253) + ")"
    }
}

/// The payer's flow, without I/O: scan → select → resolve → confirm → lock → send.
///
/// The driver feeds it ``Event``s (results of the I/O it performed, user input, clock ticks) with the current time
/// and performs the ``Action`` it returns. Events that do not apply in the current state (a late sighting after the
/// scan stopped, a second confirmation) are ignored and return ``Action/none``. Every path ends in
/// ``State/finished(_:)`` with a ``Outcome``, and the action that leads there is a `report`.
///
/// The scan runs exactly while the state is ``State/scanning``: the action that leaves that state says so by name
/// (`stopScanAnd…`).
public struct PayerStateMachine: Sendable {
    /// How the payer wants to pay.
    public struct Configuration: Hashable, Sendable {
        /// The proximity selector's tunables.
        public var selector: ProximitySelector.Configuration
        /// When `true`, never auto-select: present the candidates after ``chooseAfter`` so the user picks one.
        public var alwaysChoose: Bool
        /// In choose mode, how long to listen before presenting the list.
        public var chooseAfter: Duration
        /// In auto mode, how long to wait for a clear nearest terminal before presenting the list instead.
        public var selectionTimeout: Duration
        /// How long to scan with nothing near before giving up.
        public var scanTimeout: Duration
        /// When `true`, skip the confirmation question (within ``maximumAmountCents``).
        public var preApproved: Bool
        /// Sessions above this amount are refused without asking; `nil` for no limit.
        public var maximumAmountCents: Int64?

        /// Creates a configuration.
        public init(
            selector: ProximitySelector.Configuration = .init(),
            alwaysChoose: Bool = false,
            chooseAfter: Duration = .seconds(1),
            selectionTimeout: Duration = .seconds(3),
            scanTimeout: Duration = .seconds(15),
            preApproved: Bool = false,
            maximumAmountCents: Int64? = nil
        ) {
            self.selector = selector
            self.alwaysChoose = alwaysChoose
            self.chooseAfter = chooseAfter
            self.selectionTimeout = selectionTimeout
            self.scanTimeout = scanTimeout
            self.preApproved = preApproved
            self.maximumAmountCents = maximumAmountCents
        }
    }

    /// What the driver reports.
    public enum Event: Hashable, Sendable {
        /// Begin paying. Valid once, in ``State/idle``.
        case start
        /// The scan heard an advertisement.
        case sighting(Sighting)
        /// Time passed; the driver sends this periodically (for example every 100 ms) while scanning.
        case tick
        /// The user picked a candidate from the presented list.
        case chose(EID)
        /// The ledger resolved the EID.
        case resolved(sessionID: String, amountCents: Int64, payeeName: String, payeeDomain: String? = nil)
        /// The ledger could not resolve the EID.
        case resolveFailed(ResolveFailure)
        /// The user accepted the confirmation question.
        case confirmed
        /// The user refused the confirmation question.
        case declined
        /// The ledger locked the session for this payer.
        case locked
        /// The ledger refused the lock (busy, expired, …).
        case lockFailed(reason: String)
        /// The ledger accepted the payment.
        case sent(newBalanceCents: Int64)
        /// The payment failed or its outcome is unknown.
        case sendFailed(reason: String)
        /// The user gave up.
        case cancel
    }

    /// Why resolving an EID failed.
    public enum ResolveFailure: Hashable, Sendable {
        /// No live session has this EID.
        case notFound
        /// The session expired.
        case expired
        /// Anything else (network, server error), described.
        case other(String)
    }

    /// What the driver must do next.
    public enum Action: Hashable, Sendable {
        /// Nothing; wait for the next event.
        case none
        /// Start scanning for Gotchu advertisements and send each sighting, plus ticks.
        case startScan
        /// Stop scanning, then resolve this EID on the ledger.
        case stopScanAndResolve(EID)
        /// Stop scanning, then show these candidates (nearest first) as a numbered list and send ``Event/chose(_:)``.
        case stopScanAndPresentCandidates([ProximityCandidate])
        /// Stop scanning, then report the outcome.
        case stopScanAndReport(Outcome)
        /// Resolve this EID on the ledger.
        case resolve(EID)
        /// Ask "Pay $X.XX to NAME?" with the figures in the offer, and send ``Event/confirmed`` or ``Event/declined``.
        case askConfirmation(PaymentOffer)
        /// Lock the session.
        case lock(sessionID: String)
        /// Choose an idempotency key, persist it with the session id, and only then send the payment with it.
        /// If the outcome stays unknown, retry later with the same persisted key.
        case send(sessionID: String)
        /// Report the outcome; the flow is over.
        case report(Outcome)
    }

    /// How the flow ended.
    public enum Outcome: Hashable, Sendable {
        /// Paid; the wallet now holds `newBalanceCents`.
        case paid(PaymentOffer, newBalanceCents: Int64)
        /// Not paid, for this reason.
        case failed(Failure)
    }

    /// Why the flow ended without paying.
    public enum Failure: Hashable, Sendable {
        /// No terminal was near within the scan timeout.
        case noTerminalNearby
        /// The EID could not be resolved.
        case resolveFailed(EID, ResolveFailure)
        /// The session asks for more than the configured maximum.
        case amountAboveLimit(PaymentOffer, limitCents: Int64)
        /// The user refused the confirmation question.
        case declined(PaymentOffer)
        /// The ledger refused the lock.
        case lockFailed(PaymentOffer, reason: String)
        /// The payment failed, or its outcome is unknown: the persisted idempotency key settles it on retry.
        case sendFailed(PaymentOffer, reason: String)
        /// The user cancelled before the payment was sent.
        case cancelled
    }

    /// Where the flow is.
    public enum State: Hashable, Sendable {
        /// Not started.
        case idle
        /// Scanning since `since`.
        case scanning(since: Duration)
        /// Waiting for the user to pick one of these.
        case choosing([ProximityCandidate])
        /// Waiting for the ledger to resolve this EID.
        case resolving(EID)
        /// Waiting for the user to confirm.
        case confirming(PaymentOffer)
        /// Waiting for the lock.
        case locking(PaymentOffer)
        /// Waiting for the payment's outcome.
        case sending(PaymentOffer)
        /// Over.
        case finished(Outcome)
    }

    /// The configuration in use.
    public let configuration: Configuration
    /// Where the flow is.
    public private(set) var state: State = .idle
    private var selector: ProximitySelector

    /// Creates a flow in ``State/idle``.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.selector = ProximitySelector(configuration: configuration.selector)
    }

    /// Feeds one event at time `now` (on the radio's clock) and returns what to do.
    public mutating func receive(_ event: Event, now: Duration) -> Action {
        switch (state, event) {
        case (.idle, .start):
            state = .scanning(since: now)
            return .startScan

        case (.scanning(let since), .sighting(let sighting)):
            selector.record(sighting)
            return evaluateScan(since: since, now: now)
        case (.scanning(let since), .tick):
            return evaluateScan(since: since, now: now)
        case (.scanning, .cancel):
            return finish(.failed(.cancelled), stoppingScan: true)

        case (.choosing(let candidates), .chose(let eid)):
            // Only what was shown can be chosen: a stale or mistyped EID is ignored.
            guard candidates.contains(where: { $0.eid == eid }) else { return .none }
            state = .resolving(eid)
            return .resolve(eid)
        case (.choosing, .cancel):
            return finish(.failed(.cancelled))

        case (.resolving(let eid), .resolved(let sessionID, let amountCents, let payeeName, let payeeDomain)):
            let offer = PaymentOffer(
                eid: eid,
                sessionID: sessionID,
                amountCents: amountCents,
                payeeName: payeeName,
                payeeDomain: payeeDomain
            )
            if let limit = configuration.maximumAmountCents, amountCents > limit {
                return finish(.failed(.amountAboveLimit(offer, limitCents: limit)))
            }
            if configuration.preApproved {
                state = .locking(offer)
                return .lock(sessionID: sessionID)
            }
            state = .confirming(offer)
            return .askConfirmation(offer)
        case (.resolving(let eid), .resolveFailed(let failure)):
            return finish(.failed(.resolveFailed(eid, failure)))
        case (.resolving, .cancel):
            return finish(.failed(.cancelled))

        case (.confirming(let offer), .confirmed):
            state = .locking(offer)
            return .lock(sessionID: offer.sessionID)
        case (.confirming(let offer), .declined):
            return finish(.failed(.declined(offer)))
        case (.confirming, .cancel):
            return finish(.failed(.cancelled))

        case (.locking(let offer), .locked):
            state = .sending(offer)
            return .send(sessionID: offer.sessionID)
        case (.locking(let offer), .lockFailed(let reason)):
            return finish(.failed(.lockFailed(offer, reason: reason)))
        case (.locking, .cancel):
            // The lock, if granted, expires on its own; nothing was paid.
            return finish(.failed(.cancelled))

        case (.sending(let offer), .sent(let newBalanceCents)):
            return finish(.paid(offer, newBalanceCents: newBalanceCents))
        case (.sending(let offer), .sendFailed(let reason)):
            return finish(.failed(.sendFailed(offer, reason: reason)))
        // A payment in flight cannot be called back: `.cancel` while sending is ignored and the outcome is awaited.

        default:
            return .none
        }
    }

    private mutating func evaluateScan(since: Duration, now: Duration) -> Action {
        let elapsed = now - since
        if !configuration.alwaysChoose, let candidate = selector.decide(now: now).selected {
            state = .resolving(candidate.eid)
            return .stopScanAndResolve(candidate.eid)
        }
        let listAfter = configuration.alwaysChoose ? configuration.chooseAfter : configuration.selectionTimeout
        let candidates = selector.rankedCandidates(now: now)
        if elapsed >= listAfter, !candidates.isEmpty {
            state = .choosing(candidates)
            return .stopScanAndPresentCandidates(candidates)
        }
        if elapsed >= configuration.scanTimeout {
            return finish(.failed(.noTerminalNearby), stoppingScan: true)
        }
        return .none
    }

    private mutating func finish(_ outcome: Outcome, stoppingScan: Bool = false) -> Action {
        state = .finished(outcome)
        return stoppingScan ? .stopScanAndReport(outcome) : .report(outcome)
    }
}
