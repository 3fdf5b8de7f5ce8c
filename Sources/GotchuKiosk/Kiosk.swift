import Foundation
package import GotchuAPI
package import GotchuCore
import GotchuLedgerClient
package import Logging

/// The terminal: takes charges from the point-of-sale, one at a time, and drives each to an end — a ledger session,
/// its EID on the air, the session's status watched until paid, expired or cancelled.
///
/// Every change is written to the ``KioskStore`` before it is reported, so ``run()`` after a restart picks the active
/// charge up where it was: the same session keeps being advertised while it is live. Failures of the radio or the
/// ledger never end a charge; they show as a problem while the kiosk retries with backoff. Only the ledger ends one.
///
/// The decisions are ``KioskChargeMachine``'s; this actor performs its actions (the store, the ledger, the radio)
/// and feeds it their results. Time is the radio's: every wait is ``Radio/sleep(for:)`` and every date is read from
/// ``Radio/now()``, so on a simulated air the kiosk runs on the air's virtual clock.
package actor Kiosk: KioskStatusSource {
    /// How the kiosk behaves.
    package struct Options: Sendable {
        /// The payee's name, shown on the customer display.
        package var payeeName: String
        /// The service UUID advertised.
        package var serviceUUID: BluetoothUUID
        /// How charges behave: lifetimes, status polling, retries, how long an outcome is shown.
        package var charges: KioskChargeMachine.Configuration
        /// The terminal's calibration, advertised beside each EID; `nil` for none.
        package var calibratedRSSI: Int16?
        /// The tips a charge's sessions suggest to payers unless the point-of-sale asks for others (`tip_percents`).
        package var tipPrompt: TipPrompt

        /// Creates options.
        package init(
            payeeName: String = "Gotchu",
            serviceUUID: BluetoothUUID = .gotchu,
            charges: KioskChargeMachine.Configuration = .init(),
            calibratedRSSI: Int16? = nil,
            tipPrompt: TipPrompt = .none
        ) {
            self.tipPrompt = tipPrompt
            self.payeeName = payeeName
            self.serviceUUID = serviceUUID
            self.charges = charges
            self.calibratedRSSI = calibratedRSSI
        }
    }

    private let store: KioskStore
    private let ledger: any KioskLedgerService
    private let radio: any Radio
    private let options: Options
    private let logger: Logger

    private var machine: KioskChargeMachine
    /// Dates are read from the radio's clock: `dateOrigin` is the date at the radio time `radioOrigin`.
    private let dateOrigin = Date()
    private var radioOrigin: Duration?
    private var stopped = false
    private var statusSubscribers: [UUID: AsyncStream<KioskStatus>.Continuation] = [:]
    private var eventSubscribers: [UUID: AsyncStream<KioskEvent>.Continuation] = [:]
    /// Cancel requests waiting for the next attempt to settle the charge with the ledger.
    private var settleWaiters: [UUID: CheckedContinuation<Void, Never>] = [:]

    // What the machine asked for that is under way: at most one of each. Cancelling one ends it; its result, if it
    // still arrives, is one the machine ignores.
    private var advertisement: Task<Void, Never>?
    /// The advertisement last stopped, until it is off the air.
    private var retiredAdvertisement: Task<Void, Never>?
    private var ledgerCall: Task<Void, Never>?
    private var timer: Task<Void, Never>?
    private var idleTimer: Task<Void, Never>?
    /// The refund work under way, which the next waits for.
    private var refundLine: Task<Void, Never>?
    /// Sends the refunds left pending at start.
    private var refundResumption: Task<Void, Never>?
    private var resumingRefunds = false
    /// The payments of a charge as read after it ended (by a refund), which its record does not take.
    private var refreshedPayments: (id: String, payments: [KioskPayment])?
    /// The payee's name as the ledger shows it to payers, from its last answer to a create; until then the
    /// configured ``Options/payeeName``.
    private var ledgerPayeeName: String?

    /// Creates a kiosk over its store, ledger and radio; it does nothing until ``run()``.
    package init(
        store: KioskStore,
        ledger: any KioskLedgerService,
        radio: any Radio,
        options: Options,
        logger: Logger
    ) throws {
        self.store = store
        self.ledger = ledger
        self.radio = radio
        self.options = options
        self.logger = logger
        self.machine = KioskChargeMachine(configuration: options.charges, record: try store.active() ?? store.latest())
    }

    // MARK: Point-of-sale

    /// Starts a charge of `amountCents` split into `shares` equal shares (1: one payer pays it whole), whose sessions
    /// suggest the tips of `tipPrompt` to payers (`nil`: the kiosk's, ``Options/tipPrompt``); refused while another
    /// is active.
    package func charge(
        amountCents: Cents,
        reference: String,
        shares: Int = 1,
        tipPrompt: TipPrompt? = nil
    ) async throws(KioskError) -> KioskCharge {
        let id = UUID().uuidString.lowercased()
        let request = KioskChargeMachine.Event.chargeRequested(
            id: id,
            amountCents: amountCents,
            shares: shares,
            reference: reference,
            tipPercents: (tipPrompt ?? options.tipPrompt).percents
        )
        if let refusal = await handle(request) { throw refusal }
        guard let charge = machine.record?.charge, charge.id == id else { throw .storage("the charge was not kept") }
        var metadata: Logger.Metadata = ["charge": "\(charge.id)", "amount": "\(Money.format(amountCents))"]
        if charge.isSplit { metadata["shares"] = "\(charge.shares)" }
        logger.info("charge", metadata: metadata)
        return charge
    }

    /// Cancels the active charge: stops advertising at once, then cancels its session on the ledger. Returns the
    /// charge as it ended — `paid` if a payer got there first. Throws ``KioskError/cancelPending(reason:)`` if the
    /// ledger could not confirm; the kiosk keeps trying and reports the end as usual.
    package func cancel(id: String) async throws(KioskError) -> KioskCharge {
        guard machine.record?.charge.id == id else {
            let stored = try? store.record(id: id)
            guard let stored else { throw .notFound(id: id) }
            throw .alreadyFinal(stored.charge)
        }
        if let refusal = await handle(.cancelRequested(id: id)) { throw refusal }
        logger.info("cancel requested", metadata: ["charge": "\(id)"])
        if machine.record?.charge.state.isFinal == false { await waitForSettleAttempt(timeout: .seconds(15)) }
        await retiredAdvertisement?.value
        guard let ended = machine.record, ended.charge.id == id else { throw .notFound(id: id) }
        guard ended.charge.state.isFinal else {
            throw .cancelPending(reason: ended.charge.problem ?? "no answer yet")
        }
        return ended.charge
    }

    /// Refunds `amountCents` of paid charge `id` to its payer (`nil`: whatever is not refunded yet; of a split
    /// charge, every payment's rest, each a refund of its own) and answers once the refund's receipt verifies. An
    /// amount of a split charge must name its payment: ``refund(id:paymentID:amountCents:)``.
    package func refund(id: String, amountCents: Cents?) async throws(KioskError) -> [RefundResponse] {
        try await refund(id: id, paymentID: nil, amountCents: amountCents)
    }

    /// Refunds `amountCents` of payment `paymentID` of paid charge `id` (`nil` payment: of the charge; `nil` amount:
    /// all that is left of it) and answers the refunds made, once their receipts verify.
    ///
    /// Each refund is written to the store, under the idempotency key it is sent with, before the ledger sees it;
    /// one the ledger did not answer (a crash, the ledger unreachable) is sent again with its key, when the kiosk
    /// starts and before any other refund of its charge, so the ledger makes it exactly once. A request for all that
    /// is left that finds nothing left once those are answered answers them. Refunds run beside the charges, which
    /// they do not change: they are ledger calls, not steps of the charge machine.
    package func refund(
        id: String,
        paymentID: String?,
        amountCents: Cents?
    ) async throws(KioskError) -> [RefundResponse] {
        if let amountCents, amountCents <= 0 { throw .invalidAmount(amountCents) }
        let charge = try charge(id: id)
        guard charge.state == .paid, let sid = charge.sessionID else { throw .notPaid(charge) }
        let result = await oneRefundAtATime { () async -> Result<[RefundResponse], KioskError> in
            do throws(KioskError) {
                return .success(
                    try await self.performRefund(charge, sid: sid, paymentID: paymentID, amountCents: amountCents)
                )
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private func performRefund(
        _ charge: KioskCharge,
        sid: String,
        paymentID: String?,
        amountCents: Cents?
    ) async throws(KioskError) -> [RefundResponse] {
        // What an earlier request left unanswered goes first, with its own key.
        let earlier = try await finishPendingRefunds(chargeID: charge.id)
        let state: KioskChargeMachine.SessionState
        do throws(LedgerClientError) {
            state = try await ledger.sessionState(sid: sid)
        } catch {
            throw Self.refundFailure(error)
        }
        await keep(state.payments, of: charge.id)
        let planned: [(paymentID: String?, cents: Cents)]
        do throws(KioskRefundPlan.Refusal) {
            planned = try KioskRefundPlan.refunds(
                paymentID: paymentID,
                amountCents: amountCents,
                split: charge.isSplit,
                payments: state.payments,
                refundableCents: state.paidCents + state.tipCents - state.refundedCents
            )
        } catch {
            switch error {
            case .unknownPayment(let payment, let known):
                throw .unknownPayment(chargeID: charge.id, paymentID: payment, known: known)
            case .notSplit: throw .notSplit(chargeID: charge.id)
            case .paymentRequired(let known): throw .paymentRequired(chargeID: charge.id, known: known)
            case .nothingLeft(let payment):
                // A request for the rest that an unanswered one already carried out is answered by it.
                let answered = earlier.filter { paymentID == nil || $0.paymentID == paymentID }
                if amountCents == nil, !answered.isEmpty { return answered.map(\.response) }
                let what = payment.map { "payment \($0) of charge \(charge.id)" } ?? "charge \(charge.id)"
                throw .refundFailed(reason: "\(ProblemKind.refundExceedsPayment.rawValue): \(what) is refunded in full")
            }
        }
        let now = await date()
        let refunds = planned.map {
            KioskRefund(chargeID: charge.id, sessionID: sid, paymentID: $0.paymentID, amountCents: $0.cents, at: now)
        }
        do {
            try store.insert(refunds)
        } catch {
            throw .storage("\(error)")
        }
        var made: [RefundResponse] = []
        var failures: [String] = []
        for refund in refunds {
            switch await send(refund) {
            case .made(let response): made.append(response)
            case .refused(let error), .pending(let error):
                failures.append(refund.paymentID.map { "payment \($0): \(error)" } ?? "\(error)")
            }
        }
        await refreshPayments(of: charge.id, sid: sid)
        resumeRefundsLater()
        guard failures.isEmpty else {
            guard refunds.count > 1 else { throw .refundFailed(reason: Self.reason(failures[0])) }
            let ids = made.map(\.refundID).joined(separator: ", ")
            throw .refundFailed(
                reason: "\(made.count) of \(refunds.count) payments refunded" + (made.isEmpty ? "" : " (\(ids))") + "; "
                    + failures.joined(separator: "; ")
            )
        }
        return made
    }

    /// A refund failure's text without the prefix the kiosk's error adds.
    private static func reason(_ failure: String) -> String {
        let prefix = "the refund failed: "
        return failure.hasPrefix(prefix) ? String(failure.dropFirst(prefix.count)) : failure
    }

    /// Sends every pending refund of charge `chargeID` again, with its key; returns those the ledger made. Throws
    /// when one cannot be answered now (it stays pending); one the ledger refuses is over, and does not stop the rest.
    private func finishPendingRefunds(
        chargeID: String
    ) async throws(KioskError) -> [(paymentID: String?, response: RefundResponse)] {
        let pending: [KioskRefund]
        do {
            pending = try store.pendingRefunds().filter { $0.chargeID == chargeID }
        } catch {
            throw .storage("\(error)")
        }
        var made: [(paymentID: String?, response: RefundResponse)] = []
        var unanswered: KioskError?
        for refund in pending {
            switch await send(refund) {
            case .made(let response): made.append((refund.paymentID, response))
            case .refused: break
            case .pending(let error): unanswered = unanswered ?? error
            }
        }
        if let sid = pending.first?.sessionID, !made.isEmpty { await refreshPayments(of: chargeID, sid: sid) }
        if let unanswered { throw unanswered }
        return made
    }

    /// How sending a stored refund went.
    private enum SendOutcome {
        /// The ledger made it (or replayed it) and its receipt verified.
        case made(RefundResponse)
        /// The ledger refused it: nothing was refunded, and it is over.
        case refused(KioskError)
        /// No answer that counts (the ledger unreachable, a receipt that did not verify): it stays pending.
        case pending(KioskError)
    }

    /// Sends one stored refund under its key and records the answer.
    private func send(_ refund: KioskRefund) async -> SendOutcome {
        var next = refund
        let response: RefundResponse
        do throws(LedgerClientError) {
            response = try await ledger.refund(
                sid: refund.sessionID,
                paymentID: refund.paymentID,
                amountCents: refund.amountCents,
                idempotencyKey: refund.key
            )
        } catch {
            let failure = Self.refundFailure(error)
            next.problem = failure.description
            next.updatedAt = await date()
            if let kind = error.problemKind, Self.refusedForGood.contains(kind) { next.state = .refused }
            try? store.update(next)
            logger.warning(
                next.state == .refused ? "refund refused" : "refund not answered",
                metadata: ["charge": "\(refund.chargeID)", "key": "\(refund.key)", "problem": "\(failure)"]
            )
            return next.state == .refused ? .refused(failure) : .pending(failure)
        }
        next.state = .done
        next.refundID = response.refundID
        next.problem = nil
        next.updatedAt = await date()
        do {
            try store.update(next)
        } catch {
            // The ledger made it: the next attempt replays it under the same key and records it then.
            logger.critical("cannot write the kiosk's state", metadata: ["error": "\(error)"])
        }
        var metadata: Logger.Metadata = [
            "charge": "\(refund.chargeID)", "refund": "\(response.refundID)",
            "amount": "\(Money.format(response.amountCents))",
        ]
        if let payment = refund.paymentID { metadata["payment"] = "\(payment)" }
        logger.info("refund", metadata: metadata)
        if let charge = try? charge(id: refund.chargeID) {
            let event = KioskEvent(.refunded(refundID: response.refundID, amountCents: response.amountCents), charge)
            for subscriber in eventSubscribers.values { subscriber.yield(event) }
        }
        return .made(response)
    }

    /// The refusals that end a refund: nothing was refunded, and sending it again would be refused again.
    private static let refusedForGood: [ProblemKind] = [
        .refundExceedsPayment, .insufficientFunds, .sessionNotPaid, .notFound, .sessionNotFound,
        .badRequest, .invalidAmount, .forbidden, .idempotencyKeyReused,
    ]

    /// A failed refund call as the point-of-sale hears it: the problem type first, so it can tell refusals apart.
    private static func refundFailure(_ error: LedgerClientError) -> KioskError {
        if case .problem(let problem) = error, let kind = problem.kind {
            return .refundFailed(reason: "\(kind.rawValue): \(problem.detail ?? problem.title)")
        }
        return .refundFailed(reason: error.description)
    }

    /// Runs refund work one piece at a time, in the order asked: two requests for "all that is left" never count
    /// the same rest.
    private func oneRefundAtATime<T: Sendable>(_ work: @escaping @Sendable () async -> T) async -> T {
        let previous = refundLine
        let task = Task {
            await previous?.value
            return await work()
        }
        refundLine = Task { _ = await task.value }
        return await task.value
    }

    /// Sends the refunds a crash or an unreachable ledger left pending, with their keys, until none is left; retried
    /// with backoff.
    private func resumePendingRefunds() async {
        resumingRefunds = true
        defer { resumingRefunds = false }
        var attempt = 0
        while !Task.isCancelled {
            let charges = Set(((try? store.pendingRefunds()) ?? []).map(\.chargeID))
            guard !charges.isEmpty else { return }
            var left = false
            for chargeID in charges.sorted() {
                let result = await oneRefundAtATime { () async -> Bool in
                    do throws(KioskError) {
                        _ = try await self.finishPendingRefunds(chargeID: chargeID)
                        return true
                    } catch {
                        return false
                    }
                }
                if !result { left = true }
            }
            guard left else { return }
            attempt += 1
            do { try await radio.sleep(for: options.charges.retry.delay(attempt: attempt)) } catch { return }
        }
    }

    /// Starts sending the pending refunds again unless that is under way (or the kiosk is not running).
    private func resumeRefundsLater() {
        guard !stopped, !resumingRefunds, refundResumption != nil else { return }
        guard (try? store.pendingRefunds().isEmpty) == false else { return }
        refundResumption = Task { await self.resumePendingRefunds() }
    }

    /// Keeps `payments`, as the ledger just reported them, for charge `id`.
    private func keep(_ payments: [KioskPayment], of id: String) async {
        guard !payments.isEmpty else { return }
        do {
            try store.updatePayments(chargeID: id, payments)
        } catch {
            logger.warning("cannot write the kiosk's state", metadata: ["error": "\(error)"])
            return
        }
        guard refreshedPayments?.id != id || refreshedPayments?.payments != payments else { return }
        refreshedPayments = (id, payments)
        if machine.record?.charge.id == id { publishStatus(now: await date()) }
    }

    /// Reads the charge's payments again after refunds, for what the point-of-sale is shown of them.
    private func refreshPayments(of id: String, sid: String) async {
        guard let state = try? await ledger.sessionState(sid: sid) else { return }
        await keep(state.payments, of: id)
    }

    /// `charge` with the payments read since it ended, if any.
    private func shown(_ charge: KioskCharge) -> KioskCharge {
        guard let refreshed = refreshedPayments, refreshed.id == charge.id else { return charge }
        var shown = charge
        shown.payments = refreshed.payments
        return shown
    }

    /// The charge with this id, active or past, with what was refunded of it: the refunds the ledger made for this
    /// kiosk (and, of a split, what its payments say), beside what a cancelled or expired split returned.
    package func charge(id: String) throws(KioskError) -> KioskCharge {
        do {
            var charge: KioskCharge
            if let record = machine.record, record.charge.id == id {
                charge = shown(record.charge)
            } else {
                guard let stored = try store.record(id: id) else { throw KioskError.notFound(id: id) }
                charge = stored.charge
            }
            let made = try store.refunds(chargeID: id).filter { $0.state == .done }.reduce(0) { $0 + $1.amountCents }
            let ofPayments = charge.payments.reduce(0) { $0 + $1.refundedCents }
            charge.refundedCents = max(charge.refundedCents, made, ofPayments)
            return charge
        } catch let error as KioskError {
            throw error
        } catch {
            throw .storage("\(error)")
        }
    }

    /// The active charge, or the last one.
    package var currentCharge: KioskCharge? { machine.record.map { shown($0.charge) } }

    // MARK: Observing

    /// The status now.
    package func status() async -> KioskStatus {
        status(now: await date())
    }

    private func status(now: Date) -> KioskStatus {
        let charge = machine.record.map { shown($0.charge) }
        let state: KioskStatus.State
        switch charge?.state {
        case nil: state = .idle
        case .some(let chargeState) where chargeState.isFinal && now >= idleTime(after: charge): state = .idle
        case .some(let chargeState) where !chargeState.isFinal && charge?.problem != nil: state = .error
        case .creating: state = .creating
        case .advertising: state = .advertising
        case .locked: state = .locked
        case .paid: state = .paid
        case .expired: state = .expired
        case .cancelled: state = .cancelled
        case .failed: state = .failed
        }
        return KioskStatus(
            state: state,
            payeeName: ledgerPayeeName ?? options.payeeName,
            charge: charge,
            problem: charge?.problem,
            now: now,
            onAir: !(radio is NoRadio)
        )
    }

    /// Every status from now on, starting with the current one.
    package func statusUpdates() async -> AsyncStream<KioskStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: KioskStatus.self, bufferingPolicy: .bufferingNewest(8))
        let id = UUID()
        statusSubscribers[id] = continuation
        continuation.yield(await status())
        continuation.onTermination = { _ in Task { await self.unsubscribe(status: id) } }
        return stream
    }

    /// Every event from now on.
    package func events() -> AsyncStream<KioskEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: KioskEvent.self, bufferingPolicy: .bufferingNewest(64))
        let id = UUID()
        eventSubscribers[id] = continuation
        continuation.onTermination = { _ in Task { await self.unsubscribe(event: id) } }
        return stream
    }

    private func unsubscribe(status id: UUID) { statusSubscribers[id] = nil }
    private func unsubscribe(event id: UUID) { eventSubscribers[id] = nil }

    /// When a final charge stops being shown.
    private func idleTime(after charge: KioskCharge?) -> Date {
        (charge?.updatedAt ?? .distantPast).addingTimeInterval(options.charges.idleAfter.seconds)
    }

    private func publishStatus(now: Date) {
        let status = status(now: now)
        for subscriber in statusSubscribers.values { subscriber.yield(status) }
    }

    /// Tells subscribers of a change already written.
    private func publish(from previous: KioskCharge?, to next: KioskCharge, now: Date) {
        if let problem = next.problem, problem != previous?.problem {
            logger.warning("problem", metadata: ["charge": "\(next.id)", "problem": "\(problem)"])
        }
        if next.state != previous?.state {
            logger.info("charge \(next.state.rawValue)", metadata: ["charge": "\(next.id)"])
        }
        if next.sharesPaid != previous?.sharesPaid ?? 0, next.isSplit {
            logger.info("shares paid", metadata: ["charge": "\(next.id)", "paid": "\(next.sharesPaid)/\(next.shares)"])
        }
        if next.refundedCents > 0, next.refundedCents != previous?.refundedCents {
            logger.info(
                "shares refunded",
                metadata: ["charge": "\(next.id)", "amount": "\(Money.format(next.refundedCents))"]
            )
        }
        publishStatus(now: now)
        for event in KioskEvent.between(previous, next) {
            for subscriber in eventSubscribers.values { subscriber.yield(event) }
        }
    }

    // MARK: Running

    /// Drives charges until the calling task is cancelled (the daemon shutting down). Shutting down leaves the active
    /// charge as it is on disk and on the ledger, for the next run to continue; it cancels nothing.
    package func run() async {
        if let active = machine.record, !active.charge.state.isFinal {
            logger.notice(
                "continuing charge",
                metadata: ["charge": "\(active.charge.id)", "state": "\(active.charge.state)"]
            )
        }
        await handle(.start)
        refundResumption = Task { await self.resumePendingRefunds() }
        await Self.parkUntilCancelled()
        stopped = true
        for task in [advertisement, ledgerCall, timer, idleTimer, refundResumption] { task?.cancel() }
        // Off the air before returning.
        await advertisement?.value
        await retiredAdvertisement?.value
        for subscriber in statusSubscribers.values { subscriber.finish() }
        for subscriber in eventSubscribers.values { subscriber.finish() }
        resumeSettleWaiters()
    }

    /// Feeds the machine one event and performs what it asks; returns a refusal for the point-of-sale, if any. Only
    /// the clock is awaited, before the machine runs: each batch of actions is performed whole before another event
    /// is handled.
    @discardableResult
    private func handle(_ event: KioskChargeMachine.Event) async -> KioskError? {
        let now = await date()
        guard !stopped else { return nil }
        var refusal: KioskError?
        var actions = machine.receive(event, now: now)[...]
        while let action = actions.popFirst() {
            switch action {
            case .persist(let record, let isNew):
                do {
                    if isNew { try store.insert(record) } else { try store.update(record) }
                } catch {
                    logger.critical("cannot write the kiosk's state", metadata: ["error": "\(error)"])
                    // The rest of the batch is dropped: the machine is back where it was, and says what to do.
                    actions = machine.receive(.persistFailed, now: now)[...]
                    if case KioskStore.StoreError.busy(let id) = error {
                        refusal = .busy(activeID: id)
                    } else if case .cancelRequested = event {
                        refusal = .storage("could not record the cancel request")
                    } else {
                        refusal = .storage("\(error)")
                    }
                }
            case .publish(let previous, let next):
                publish(from: previous, to: next, now: now)
            case .refuse(let error):
                refusal = error
            case .createSession(let amountCents, let shares, let tipPercents, let reference, let key):
                startLedgerCall { ledger async -> KioskChargeMachine.Event in
                    do throws(LedgerClientError) {
                        let created = try await ledger.createSession(
                            amountCents: amountCents,
                            shares: shares,
                            tipPercents: tipPercents,
                            reference: reference,
                            idempotencyKey: key
                        )
                        // The display names the payee as payers' phones do, not as the config file does.
                        if let payee = created.payeeDisplay { await self.showPayee(payee.name) }
                        return .sessionCreated(
                            .init(
                                sessionID: created.sid,
                                eid: created.eid,
                                expiresAt: created.expiresAt,
                                shares: created.shares,
                                checkoutURL: CheckoutURL.validated(created.checkoutURL, eid: created.eid)
                            )
                        )
                    } catch {
                        return .createFailed(Self.problem(error, creating: true))
                    }
                }
            case .fetchStatus(let sid):
                startLedgerCall { ledger async -> KioskChargeMachine.Event in
                    do throws(LedgerClientError) {
                        return .statusSeen(try await ledger.sessionState(sid: sid))
                    } catch {
                        return .statusFailed(Self.problem(error))
                    }
                }
            case .awaitStatusChange(let sid, let after, let timeout):
                startLedgerCall { [radio] ledger async -> KioskChargeMachine.Event in
                    await Self.firstOf(
                        {
                            do throws(LedgerClientError) {
                                return .statusSeen(try await ledger.nextState(sid: sid, after: after))
                            } catch {
                                if LedgerClient.eventStreamsUnsupported(error) { return .statusStreamUnsupported }
                                return .statusFailed(Self.problem(error))
                            }
                        },
                        {
                            // The safety read: a change whose event was lost is seen by now.
                            do { try await radio.sleep(for: timeout) } catch { return nil }
                            do throws(LedgerClientError) {
                                return .statusSeen(try await ledger.sessionState(sid: sid))
                            } catch {
                                return .statusFailed(Self.problem(error))
                            }
                        }
                    )
                }
            case .stopAwaitingStatus:
                ledgerCall?.cancel()
                ledgerCall = nil
            case .cancelSession(let sid):
                startLedgerCall { ledger async -> KioskChargeMachine.Event in
                    do throws(LedgerClientError) {
                        try await ledger.cancelSession(sid: sid)
                        return .sessionCancelled
                    } catch {
                        let over: [ProblemKind] = [.sessionAlreadyPaid, .sessionExpired, .sessionCancelled]
                        if let kind = error.problemKind, over.contains(kind) { return .sessionAlreadyOver }
                        return .cancelFailed(Self.problem(error))
                    }
                }
            case .rotateEID(let sid):
                let logger = self.logger
                startLedgerCall { ledger async -> KioskChargeMachine.Event in
                    do throws(LedgerClientError) {
                        let rotated = try await ledger.rotateEID(sid: sid)
                        return .eidRotated(
                            sessionID: sid,
                            eid: rotated.eid,
                            checkoutURL: CheckoutURL.validated(rotated.checkoutURL, eid: rotated.eid)
                        )
                    } catch {
                        logger.notice("EID rotation failed", metadata: ["error": "\(error)"])
                        return .rotateFailed(Self.problem(error))
                    }
                }
            case .advertise(let eid, let token):
                advertise(eid, token: token)
            case .stopAdvertising:
                advertisement?.cancel()
                retiredAdvertisement = advertisement
                advertisement = nil
            case .retryAfter(let delay, let token):
                timer?.cancel()
                timer = Task { [radio] in
                    do { try await radio.sleep(for: delay) } catch { return }
                    await self.handle(.timerFired(token: token))
                }
            case .stopTimer:
                timer?.cancel()
                timer = nil
            case .settleAttempted:
                resumeSettleWaiters()
            case .publishStatus(let delay):
                idleTimer?.cancel()
                idleTimer = Task { [radio] in
                    // A millisecond past, so the date read then is surely past the end of the showing.
                    do { try await radio.sleep(for: delay + .milliseconds(1)) } catch { return }
                    await self.publishStatus(now: self.date())
                }
            }
        }
        return refusal
    }

    /// Shows `name` (the ledger's) as the payee's from now on: the status published with the created session
    /// carries it.
    private func showPayee(_ name: String) {
        if !name.isEmpty { ledgerPayeeName = name }
    }

    private func startLedgerCall(
        _ call: @escaping @Sendable (any KioskLedgerService) async -> KioskChargeMachine.Event
    ) {
        ledgerCall = Task { [ledger] in
            let event = await call(ledger)
            guard !Task.isCancelled else { return }
            await self.handle(event)
        }
    }

    /// Advertises `eid` until the task is cancelled, telling the machine when it is on the air or why it is not.
    private func advertise(_ eid: EID, token: Int) {
        let advertisement = Advertisement(
            eid: eid,
            serviceUUID: options.serviceUUID,
            calibratedRSSI: options.calibratedRSSI
        )
        let (radio, logger) = (self.radio, self.logger)
        self.advertisement = Task {
            do {
                try await radio.withAdvertisement(advertisement) { _ in
                    logger.info("advertising", metadata: ["eid": "\(eid.rawValue)"])
                    await self.handle(.advertisingStarted(token: token))
                    await Self.parkUntilCancelled()
                }
            } catch is CancellationError {
            } catch {
                guard !Task.isCancelled else { return }
                logger.warning("advertising failed", metadata: ["error": "\(error)"])
                await self.handle(.advertisingFailed(token: token, .radio("\(error)")))
            }
        }
    }

    // MARK: Helpers

    /// The event of whichever of `a` and `b` ends first with one (`b` may end without one); the other is cancelled.
    private static func firstOf(
        _ a: @escaping @Sendable () async -> KioskChargeMachine.Event,
        _ b: @escaping @Sendable () async -> KioskChargeMachine.Event?
    ) async -> KioskChargeMachine.Event {
        await withTaskGroup(of: KioskChargeMachine.Event?.self) { group in
            group.addTask { await a() }
            group.addTask { await b() }
            var result: KioskChargeMachine.Event?
            while result == nil, let next = await group.next() { result = next }
            group.cancelAll()
            // Only reachable when both ended without an event: the task was cancelled, and nothing is reported.
            return result ?? .statusFailed(.ledgerUnreachable("cancelled"))
        }
    }

    /// The date now, on the radio's clock.
    private func date() async -> Date {
        let time = await radio.now()
        let origin = radioOrigin ?? time
        radioOrigin = origin
        return dateOrigin.addingTimeInterval((time - origin).seconds)
    }

    /// Returns when the calling task is cancelled.
    private static func parkUntilCancelled() async {
        let (parked, continuation) = AsyncStream.makeStream(of: Void.self)
        for await _ in parked {}
        continuation.finish()
    }

    /// Waits until the next attempt to settle the charge with the ledger, the charge ending, or `timeout` on the
    /// radio's clock.
    private func waitForSettleAttempt(timeout: Duration) async {
        let id = UUID()
        let timer = Task { [radio] in
            try? await radio.sleep(for: timeout)
            self.resumeSettleWaiter(id)
        }
        await withCheckedContinuation { continuation in settleWaiters[id] = continuation }
        timer.cancel()
    }

    private func resumeSettleWaiter(_ id: UUID) {
        settleWaiters.removeValue(forKey: id)?.resume()
    }

    private func resumeSettleWaiters() {
        let waiters = settleWaiters
        settleWaiters = [:]
        for waiter in waiters.values { waiter.resume() }
    }

    /// What a failed ledger call means for the person at the terminal; `creating` tells refusals for good apart.
    private static func problem(_ error: LedgerClientError, creating: Bool = false) -> KioskProblem {
        let refusals: [ProblemKind] = [.badRequest, .invalidAmount, .invalidShares, .idempotencyKeyReused]
        switch error.problemKind {
        case let kind? where creating && refusals.contains(kind): return .chargeRefused("\(error)")
        case .unauthorized?: return .credentialsRejected("\(error)")
        case .sessionNotFound?, .forbidden?, .notFound?: return .sessionNotShown("\(error)")
        case .some: return .ledgerAnswered("\(error)")
        case nil: return .ledgerUnreachable("\(error)")
        }
    }
}
