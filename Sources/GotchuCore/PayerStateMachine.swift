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
    /// Whether the ledger's operator verified the payee's name (`true`) or the payee chose it (`false`); `nil` when
    /// the ledger does not say.
    public var payeeVerified: Bool?
    /// Into how many shares the amount is split (1: one payer pays it whole).
    public var shares: Int
    /// How many shares were paid when the ledger resolved the session.
    public var sharesPaid: Int
    /// How many shares this payer takes (1 unless it pays for friends too).
    public var sharesToPay: Int
    /// What this payer pays, before the tip: the whole amount of a session that is not split; of a split, its
    /// shares, as reckoned from the resolve until the lock gives the ledger's figure.
    public var payCents: Cents
    /// The tip this payer adds for the payee, on top of ``payCents``.
    public var tipCents: Cents
    /// The numbers of the shares the lock reserved (1 is the first); empty before the lock, or from a ledger that
    /// predates splits.
    public var shareNumbers: [Int]
    /// The payment's id once paid, when the ledger gives one (a payment of a split session): what a refund of it
    /// names.
    public var paymentID: String?
    /// The tips the terminal suggests, in percent of ``payCents``: shown to the payer, never added by themselves.
    public var suggestedTips: TipPrompt = .none
    /// The payee's order reference: text from elsewhere, shown only through ``DisplayText``; `nil` for none.
    public var reference: String?

    /// The code the terminal shows beside its EID, derived from the session id (``ConfirmationCode``).
    public var confirmationCode: String { ConfirmationCode.of(sessionID: sessionID) }

    /// Whether the session's amount is shared by more than one payer.
    public var isSplit: Bool { shares > 1 }

    /// What leaves the payer's wallet: its shares (or the whole amount) and the tip.
    public var totalCents: Cents { payCents + tipCents }

    /// An offer as the ledger resolved `eid`: the session, its amount in cents and its payee as the ledger
    /// names it; `payeeDomain` and `payeeVerified` are `nil` when the ledger does not send them. Not split, and
    /// paid whole without a tip, unless told otherwise: `payCents` `nil` is the whole amount.
    public init(
        eid: EID,
        sessionID: String,
        amountCents: Int64,
        payeeName: String,
        payeeDomain: String? = nil,
        payeeVerified: Bool? = nil,
        shares: Int = 1,
        sharesPaid: Int = 0,
        sharesToPay: Int = 1,
        payCents: Cents? = nil,
        tipCents: Cents = 0,
        shareNumbers: [Int] = [],
        paymentID: String? = nil,
        reference: String? = nil
    ) {
        self.reference = reference
        self.eid = eid
        self.sessionID = sessionID
        self.amountCents = amountCents
        self.payeeName = payeeName
        self.payeeDomain = payeeDomain
        self.payeeVerified = payeeVerified
        self.shares = shares
        self.sharesPaid = sharesPaid
        self.sharesToPay = sharesToPay
        self.payCents = payCents ?? amountCents
        self.tipCents = tipCents
        self.shareNumbers = shareNumbers
        self.paymentID = paymentID
    }

    /// What the payer is told of the name before it confirms: verified by the ledger's operator, or chosen by the
    /// payee itself; `nil` when the ledger does not say.
    public var payeeVerification: String? {
        payeeVerified.map { $0 ? "verified merchant" : "name chosen by the payee, not verified" }
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
///
/// ``Event/cancel`` (Ctrl-C) may arrive at any time, including while a lock or a payment is in flight. Before the
/// payment is sent, cancelling stops the flow and nothing is paid; a lock granted meanwhile is released
/// (``Action/unlock(sessionID:)``). Once the payment may have left, it cannot be called back: its outcome is settled
/// with the same idempotency key (``Action/settle(_:)``) and reported as the ledger gives it.
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
        /// Pay this EID, typed by the payer from the terminal's screen, without scanning.
        public var eid: EID?
        /// How many shares of a split session to take (1: one's own; more pays for friends too). The ledger refuses
        /// more than one of a session that is not split.
        public var shares: Int
        /// The tip to add for the payee, on top of the amount paid; `nil` for none.
        public var tip: Tip?
        /// How many times in all a payment without a definite answer is sent (always with the same key) before its
        /// outcome is reported unknown.
        public var sendAttempts: Int
        /// The wait before the second send; each further wait doubles.
        public var sendRetryDelay: Duration

        /// The payer's behaviour; the defaults wait up to 3 s for a clear nearest terminal before listing the
        /// candidates, give up after 15 s with nothing near, ask before paying, send an unanswered payment up
        /// to 4 times, 200 ms apart at first, and pay one share without a tip.
        public init(
            selector: ProximitySelector.Configuration = .init(),
            alwaysChoose: Bool = false,
            chooseAfter: Duration = .seconds(1),
            selectionTimeout: Duration = .seconds(3),
            scanTimeout: Duration = .seconds(15),
            preApproved: Bool = false,
            maximumAmountCents: Int64? = nil,
            sendAttempts: Int = 4,
            sendRetryDelay: Duration = .milliseconds(200),
            eid: EID? = nil,
            shares: Int = 1,
            tip: Tip? = nil
        ) {
            self.eid = eid
            self.shares = shares
            self.tip = tip
            self.selector = selector
            self.alwaysChoose = alwaysChoose
            self.chooseAfter = chooseAfter
            self.selectionTimeout = selectionTimeout
            self.scanTimeout = scanTimeout
            self.preApproved = preApproved
            self.maximumAmountCents = maximumAmountCents
            self.sendAttempts = sendAttempts
            self.sendRetryDelay = sendRetryDelay
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
        /// The ledger resolved the EID; `shares` says how the amount is split, `nil` (or one share) when it is not;
        /// `tipPrompt` the tips the terminal suggests; `reference` the payee's order reference.
        case resolved(
            sessionID: String,
            amountCents: Int64,
            payeeName: String,
            payeeDomain: String? = nil,
            payeeVerified: Bool? = nil,
            shares: SessionShares? = nil,
            tipPrompt: TipPrompt = .none,
            reference: String? = nil
        )
        /// The ledger could not resolve the EID.
        case resolveFailed(ResolveFailure)
        /// The user accepted the confirmation question.
        case confirmed
        /// The user refused the confirmation question.
        case declined
        /// The ledger locked the session for this payer, for the amount confirmed (a ledger that predates splits).
        case locked
        /// The ledger reserved these shares for this payer, who pays `amountCents` for them (before the tip).
        case lockedShares(amountCents: Cents, shareNumbers: [Int])
        /// The ledger refused the lock (busy, expired, …).
        case lockFailed(reason: String)
        /// The ledger accepted the payment; `paymentID` names it when the ledger gives one (a split session's).
        case sent(newBalanceCents: Int64, paymentID: String? = nil)
        /// The ledger refused the payment for good: no money moved, and none will under its key.
        case sendFailed(reason: String)
        /// The payment got no definite answer (the ledger unreachable, a timeout, an error on its side): it may or
        /// may not have gone through.
        case sendUnanswered(reason: String)
        /// The lock was released.
        case unlocked
        /// Releasing the lock failed; it lapses by itself.
        case unlockFailed(reason: String)
        /// The user gave up (Ctrl-C). Valid in every state; what it does depends on how far the payment went.
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
        /// Stop scanning, then show these candidates (nearest first, then those heard without RSSI) as a numbered
        /// list and send ``Event/chose(_:)``.
        case stopScanAndPresentCandidates([ProximityCandidate])
        /// Stop scanning, then report the outcome.
        case stopScanAndReport(Outcome)
        /// Resolve this EID on the ledger.
        case resolve(EID)
        /// Ask "Pay $X.XX to NAME?" with the figures in the offer (of a split, this payer's shares of the amount and
        /// how many are paid; the tip), and send ``Event/confirmed`` or ``Event/declined``.
        case askConfirmation(PaymentOffer)
        /// Lock the session (of a split: reserve the offer's ``PaymentOffer/sharesToPay`` shares).
        case lock(sessionID: String)
        /// Choose an idempotency key, persist it with the session id, and only then send the payment with it (and
        /// the offer's tip). If the outcome stays unknown, retry later with the same persisted key.
        case send(sessionID: String)
        /// Wait `after`, then send the payment again with the same key.
        case retrySend(sessionID: String, after: Duration)
        /// The user cancelled while the payment may be in flight: say that its outcome is being settled. The
        /// payment in flight (and its retries, as asked) goes on; its answer decides the outcome.
        case settle(PaymentOffer)
        /// The user cancelled before the payment was sent, but the lock was granted (or the lock reserved shares
        /// that cost more than was confirmed): mark the persisted payment as never sent, release the lock, and send
        /// ``Event/unlocked`` or ``Event/unlockFailed(reason:)``.
        case unlock(sessionID: String)
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
        /// The session asks for more than the configured maximum (what this payer would pay, tip included).
        case amountAboveLimit(PaymentOffer, limitCents: Int64)
        /// The tip is more than the amount it goes with; nothing was paid.
        case tipTooLarge(PaymentOffer)
        /// The user refused the confirmation question.
        case declined(PaymentOffer)
        /// The ledger refused the lock.
        case lockFailed(PaymentOffer, reason: String)
        /// The ledger refused the payment for good; nothing was paid.
        case sendFailed(PaymentOffer, reason: String)
        /// The payment got no definite answer within the attempts allowed: it may have gone through. The persisted
        /// idempotency key settles it when the payment is resumed.
        case outcomeUnknown(PaymentOffer, reason: String)
        /// The user cancelled before the payment was sent; nothing was paid.
        case cancelled
        /// The user cancelled while the payment was in flight, and the ledger settled it as not paid.
        case cancelledWhileSending(PaymentOffer, reason: String)
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
        /// Cancelled after the lock was granted, or the lock refused after the fact; waiting for its release.
        case unlocking(PaymentOffer)
        /// Over.
        case finished(Outcome)
    }

    /// The configuration in use.
    public let configuration: Configuration
    /// Where the flow is.
    public private(set) var state: State = .idle
    private var selector: ProximitySelector
    /// Terminals heard only without RSSI, and when last: the selector cannot range them, but a payer who sees the
    /// terminal may pick one from the list.
    private var unranged: [EID: (lastSeen: Duration, count: Int)] = [:]
    /// Whether the user cancelled while a lock or a payment was in flight.
    private var cancelRequested = false
    /// Sends made so far for the payment.
    private var sendsMade = 0
    /// Why a granted lock is being released when it was not the user's cancel.
    private var releaseReason: Failure?

    /// Creates a flow in ``State/idle``.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.selector = ProximitySelector(configuration: configuration.selector)
    }

    /// Feeds one event at time `now` (on the radio's clock) and returns what to do.
    public mutating func receive(_ event: Event, now: Duration) -> Action {
        switch (state, event) {
        case (.idle, .start):
            if let eid = configuration.eid {
                state = .resolving(eid)
                return .resolve(eid)
            }
            state = .scanning(since: now)
            return .startScan

        case (.scanning(let since), .sighting(let sighting)):
            if sighting.rssi == nil {
                let count = (unranged[sighting.eid]?.count ?? 0) + 1
                unranged[sighting.eid] = (max(unranged[sighting.eid]?.lastSeen ?? sighting.time, sighting.time), count)
            } else {
                selector.record(sighting)
            }
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

        case (
            .resolving(let eid),
            .resolved(
                let sessionID,
                let amountCents,
                let payeeName,
                let payeeDomain,
                let payeeVerified,
                let split,
                let tipPrompt,
                let reference
            )
        ):
            var offer = PaymentOffer(
                eid: eid,
                sessionID: sessionID,
                amountCents: amountCents,
                payeeName: payeeName,
                payeeDomain: payeeDomain,
                payeeVerified: payeeVerified,
                shares: split?.count ?? 1,
                sharesPaid: split?.paid ?? 0,
                sharesToPay: max(configuration.shares, 1)
            )
            // Of a session that is not split, the whole amount, however many shares were asked for: the ledger
            // refuses more than one share of it, and the payer is told so by its lock.
            if let split, split.isSplit {
                offer.payCents = split.cents(ofShares: offer.sharesToPay, amountCents: amountCents)
            }
            offer.tipCents = configuration.tip?.cents(on: offer.payCents) ?? 0
            offer.suggestedTips = tipPrompt
            offer.reference = reference
            if offer.tipCents > offer.payCents { return finish(.failed(.tipTooLarge(offer))) }
            if let limit = configuration.maximumAmountCents, offer.totalCents > limit {
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
            if cancelRequested {
                // Nothing was sent: give the lock back so the next payer need not wait for it to lapse.
                state = .unlocking(offer)
                return .unlock(sessionID: offer.sessionID)
            }
            state = .sending(offer)
            sendsMade = 1
            return .send(sessionID: offer.sessionID)
        case (.locking(var offer), .lockedShares(let amountCents, let shareNumbers)):
            let confirmed = offer
            offer.shareNumbers = shareNumbers
            offer.payCents = amountCents
            // A percentage is of what is paid; a fixed tip stays as confirmed.
            if case .percent = configuration.tip { offer.tipCents = configuration.tip?.cents(on: amountCents) ?? 0 }
            if cancelRequested {
                state = .unlocking(offer)
                return .unlock(sessionID: offer.sessionID)
            }
            // Never more than was confirmed: the shares free may have changed since the resolve.
            if amountCents > confirmed.payCents {
                releaseReason = .lockFailed(
                    offer,
                    reason: "the shares free now cost \(Money.format(amountCents)), not the "
                        + "\(Money.format(confirmed.payCents)) confirmed; nothing was paid, try again"
                )
                state = .unlocking(offer)
                return .unlock(sessionID: offer.sessionID)
            }
            if offer.tipCents > amountCents {
                releaseReason = .tipTooLarge(offer)
                state = .unlocking(offer)
                return .unlock(sessionID: offer.sessionID)
            }
            state = .sending(offer)
            sendsMade = 1
            return .send(sessionID: offer.sessionID)
        case (.locking(let offer), .lockFailed(let reason)):
            return finish(.failed(cancelRequested ? .cancelled : .lockFailed(offer, reason: reason)))
        case (.locking, .cancel):
            // The lock request is in flight: its answer says whether there is a lock to release.
            cancelRequested = true
            return .none
        case (.unlocking, .cancel):
            // The lock is being given back already; the outcome is then the user's cancel.
            cancelRequested = true
            return .none

        case (.unlocking, .unlocked), (.unlocking, .unlockFailed):
            // A user's cancel wins over the reason the lock was to be released anyway.
            return finish(.failed(cancelRequested ? .cancelled : releaseReason ?? .cancelled))

        case (.sending(var offer), .sent(let newBalanceCents, let paymentID)):
            // Paid is paid, cancelled meanwhile or not.
            offer.paymentID = paymentID
            return finish(.paid(offer, newBalanceCents: newBalanceCents))
        case (.sending(let offer), .sendFailed(let reason)):
            return finish(
                .failed(
                    cancelRequested
                        ? .cancelledWhileSending(offer, reason: reason) : .sendFailed(offer, reason: reason)
                )
            )
        case (.sending(let offer), .sendUnanswered(let reason)):
            guard sendsMade < configuration.sendAttempts else {
                return finish(.failed(.outcomeUnknown(offer, reason: reason)))
            }
            let delay = configuration.sendRetryDelay * (1 << min(sendsMade - 1, 16))
            sendsMade += 1
            return .retrySend(sessionID: offer.sessionID, after: delay)
        case (.sending(let offer), .cancel) where !cancelRequested:
            // A payment in flight cannot be called back: its outcome is settled with the same key.
            cancelRequested = true
            return .settle(offer)

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
        let ranked = selector.rankedCandidates(now: now)
        // Terminals heard without RSSI come after every ranged one: nothing says how near they are. They are kept
        // for the whole scan, since BlueZ reports an unchanged advertisement without RSSI only once; one that has
        // gone since is refused by the ledger when chosen.
        let heardOnly = unranged.filter { eid, _ in !ranked.contains { $0.eid == eid } }
            .map { eid, seen in
                ProximityCandidate(
                    eid: eid,
                    rssi: nil,
                    attenuation: nil,
                    sampleCount: seen.count,
                    lastSeen: seen.lastSeen
                )
            }
            .sorted { $0.eid < $1.eid }
        let candidates = ranked + heardOnly
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
