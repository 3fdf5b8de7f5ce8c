import Foundation
import GotchuAPI
public import GotchuCore
import GotchuLedgerClient
public import Logging

/// The terminal: takes charges from the point-of-sale, one at a time, and drives each to an end — a ledger session,
/// its EID on the air, the session's status watched until paid, expired or cancelled.
///
/// Every change is written to the ``KioskStore`` before it is reported, so ``run()`` after a restart picks the active
/// charge up where it was: the same session keeps being advertised while it is live. Failures of the radio or the
/// ledger never end a charge; they show as a problem while the kiosk retries with backoff. Only the ledger ends one.
public actor Kiosk: KioskStatusSource {
    /// How the kiosk behaves.
    public struct Options: Sendable {
        /// The payee's name, shown on the customer display.
        public var payeeName: String
        /// The service UUID advertised.
        public var serviceUUID: BluetoothUUID
        /// How long a charge waits for a payer.
        public var sessionLifetime: Duration
        /// When the ledger's session expires before the charge's lifetime is over, advertise a new one.
        public var renewExpiredSessions: Bool
        /// How often a session's status is asked while all is well.
        public var statusInterval: Duration
        /// Delays between retries while the ledger or the radio fails.
        public var retry: Backoff

        /// Creates options.
        public init(
            payeeName: String = "Gotchu",
            serviceUUID: BluetoothUUID = .gotchu,
            sessionLifetime: Duration = .seconds(300),
            renewExpiredSessions: Bool = true,
            statusInterval: Duration = .milliseconds(500),
            retry: Backoff = Backoff()
        ) {
            self.payeeName = payeeName
            self.serviceUUID = serviceUUID
            self.sessionLifetime = sessionLifetime
            self.renewExpiredSessions = renewExpiredSessions
            self.statusInterval = statusInterval
            self.retry = retry
        }
    }

    private let store: KioskStore
    private let ledger: KioskLedger
    private let radio: any Radio
    private let options: Options
    private let logger: Logger

    /// The active charge, or the last one.
    private var record: KioskStore.Record?
    private var statusSubscribers: [UUID: AsyncStream<KioskStatus>.Continuation] = [:]
    private var eventSubscribers: [UUID: AsyncStream<KioskEvent>.Continuation] = [:]
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    /// The step of the driver that a cancel from the point-of-sale interrupts (advertising, a backoff wait).
    private var interruptible: Task<Void, Never>?
    /// Cancel requests waiting for the driver's next attempt to settle the charge with the ledger.
    private var settleWaiters: [UUID: CheckedContinuation<Void, Never>] = [:]

    /// Creates a kiosk over its store, ledger and radio; it does nothing until ``run()``.
    public init(store: KioskStore, ledger: KioskLedger, radio: any Radio, options: Options, logger: Logger) throws {
        self.store = store
        self.ledger = ledger
        self.radio = radio
        self.options = options
        self.logger = logger
        self.record = try store.active() ?? store.latest()
        (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: Point-of-sale

    /// Starts a charge; refused while another is active.
    public func charge(amountCents: Cents, reference: String) throws(KioskError) -> KioskCharge {
        guard amountCents > 0 else { throw .invalidAmount(amountCents) }
        guard reference.utf8.count <= KioskError.maximumReferenceLength else {
            throw .invalidReference("at most \(KioskError.maximumReferenceLength) bytes")
        }
        guard !reference.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalidReference("control characters are not allowed")
        }
        if let active = record, !active.charge.state.isFinal { throw .busy(activeID: active.charge.id) }
        let now = Date()
        var charge = KioskCharge(
            id: UUID().uuidString.lowercased(),
            amountCents: amountCents,
            reference: reference,
            createdAt: now,
            updatedAt: now
        )
        charge.expiresAt = deadline(of: charge)
        let new = KioskStore.Record(charge: charge)
        do {
            try store.insert(new)
        } catch KioskStore.StoreError.busy(let id) {
            throw .busy(activeID: id)
        } catch {
            throw .storage("\(error)")
        }
        logger.info("charge", metadata: ["charge": "\(charge.id)", "amount": "\(Money.format(amountCents))"])
        publish(from: nil, to: new)
        wake.yield()
        return charge
    }

    /// Cancels the active charge: stops advertising at once, then cancels its session on the ledger. Returns the
    /// charge as it ended — `paid` if a payer got there first. Throws ``KioskError/cancelPending(reason:)`` if the
    /// ledger could not confirm; the kiosk keeps trying and reports the end as usual.
    public func cancel(id: String) async throws(KioskError) -> KioskCharge {
        guard var current = record, current.charge.id == id else {
            let stored = try? store.record(id: id)
            guard let stored else { throw .notFound(id: id) }
            throw .alreadyFinal(stored.charge)
        }
        guard !current.charge.state.isFinal else { throw .alreadyFinal(current.charge) }
        if !current.cancelRequested {
            current.cancelRequested = true
            save(current)
            logger.info("cancel requested", metadata: ["charge": "\(id)"])
        }
        interruptible?.cancel()
        wake.yield()
        await waitForSettleAttempt(timeout: .seconds(15))
        guard let ended = record, ended.charge.id == id else { throw .notFound(id: id) }
        guard ended.charge.state.isFinal else {
            throw .cancelPending(reason: ended.charge.problem ?? "no answer yet")
        }
        return ended.charge
    }

    /// The charge with this id, active or past.
    public func charge(id: String) throws(KioskError) -> KioskCharge {
        if let record, record.charge.id == id { return record.charge }
        do {
            guard let stored = try store.record(id: id) else { throw KioskError.notFound(id: id) }
            return stored.charge
        } catch let error as KioskError {
            throw error
        } catch {
            throw .storage("\(error)")
        }
    }

    /// The active charge, or the last one.
    public var currentCharge: KioskCharge? { record?.charge }

    // MARK: Observing

    /// The status now.
    public func status() -> KioskStatus {
        let charge = record?.charge
        let state: KioskStatus.State
        switch charge?.state {
        case nil: state = .idle
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
            payeeName: options.payeeName,
            charge: charge,
            problem: charge?.problem,
            now: Date()
        )
    }

    /// Every status from now on, starting with the current one.
    public func statusUpdates() -> AsyncStream<KioskStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: KioskStatus.self, bufferingPolicy: .bufferingNewest(8))
        let id = UUID()
        statusSubscribers[id] = continuation
        continuation.yield(status())
        continuation.onTermination = { _ in Task { await self.unsubscribe(status: id) } }
        return stream
    }

    /// Every event from now on.
    public func events() -> AsyncStream<KioskEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: KioskEvent.self, bufferingPolicy: .bufferingNewest(64))
        let id = UUID()
        eventSubscribers[id] = continuation
        continuation.onTermination = { _ in Task { await self.unsubscribe(event: id) } }
        return stream
    }

    private func unsubscribe(status id: UUID) { statusSubscribers[id] = nil }
    private func unsubscribe(event id: UUID) { eventSubscribers[id] = nil }

    // MARK: Running

    /// Drives charges until the calling task is cancelled (the daemon shutting down). Shutting down leaves the active
    /// charge as it is on disk and on the ledger, for the next run to continue; it cancels nothing.
    public func run() async {
        if let active = record, !active.charge.state.isFinal {
            logger.notice(
                "continuing charge",
                metadata: ["charge": "\(active.charge.id)", "state": "\(active.charge.state)"]
            )
        }
        wake.yield()
        for await _ in wakeups {
            while let active = record, !active.charge.state.isFinal, !Task.isCancelled {
                await step(active)
            }
            if Task.isCancelled { break }
        }
        for subscriber in statusSubscribers.values { subscriber.finish() }
        for subscriber in eventSubscribers.values { subscriber.finish() }
        resumeSettleWaiters()
    }

    /// Moves the active charge one step on.
    private func step(_ current: KioskStore.Record) async {
        if current.cancelRequested {
            await settle(current, as: .cancelled)
        } else if current.charge.sessionID == nil {
            await createSession(current)
        } else if Date() >= lifetimeEnd(of: current.charge) {
            await settle(current, as: .expired)
        } else {
            await advertiseAndWatch(current)
        }
    }

    private func createSession(_ current: KioskStore.Record) async {
        let key = idempotencyKey(current)
        let amount = current.charge.amountCents
        do {
            let created = try await ledger.perform { client throws(LedgerClientError) in
                try await client.createSession(amountCents: amount, idempotencyKey: key)
            }
            var next = current
            next.sessionNumber += 1
            next.charge.sessionID = created.sid
            next.charge.eid = created.eid
            next.charge.expiresAt =
                options.renewExpiredSessions
                ? deadline(of: current.charge) : min(deadline(of: current.charge), created.expiresAt)
            next.charge.problem = nil
            next.charge.state = .advertising
            save(next)
            failures = 0
        } catch  where Self.isRefusal(error) {
            var next = current
            next.charge.state = .failed
            next.charge.problem = "the ledger refused the charge: \(error)"
            save(next)
        } catch {
            await retryLater(current, problem: "cannot reach the ledger: \(error)")
        }
    }

    /// Advertises the session's EID and watches its status until the session ends, the charge's lifetime is over,
    /// the advertisement fails, or the step is interrupted.
    private func advertiseAndWatch(_ current: KioskStore.Record) async {
        guard let sid = current.charge.sessionID, let eid = current.charge.eid else { return }
        let advertisement = Advertisement(eid: eid, serviceUUID: options.serviceUUID)
        let radio = self.radio
        let task = Task {
            do {
                try await radio.withAdvertisement(advertisement) { _ in
                    await self.advertisingStarted(current.charge.id)
                    await self.watch(sid: sid, chargeID: current.charge.id)
                }
            } catch is CancellationError {
            } catch {
                await self.advertisingFailed(current.charge.id, "\(error)")
            }
        }
        await runInterruptible(task)
        // A new status came from the watch or the radio's failure; an interruption leaves the record as it is.
    }

    private func advertisingStarted(_ chargeID: String) {
        guard var current = record, current.charge.id == chargeID, !current.charge.state.isFinal else { return }
        logger.info(
            "advertising",
            metadata: ["charge": "\(chargeID)", "eid": "\(current.charge.eid.map(\.rawValue) ?? "")"]
        )
        if current.charge.state == .creating { current.charge.state = .advertising }
        if current.charge.problem?.hasPrefix(Self.radioProblemPrefix) == true { current.charge.problem = nil }
        save(current)
        failures = 0
    }

    private func advertisingFailed(_ chargeID: String, _ reason: String) async {
        guard let current = record, current.charge.id == chargeID, !current.charge.state.isFinal else { return }
        logger.warning("advertising failed", metadata: ["charge": "\(chargeID)", "error": "\(reason)"])
        await retryLater(current, problem: Self.radioProblemPrefix + reason)
    }

    private static let radioProblemPrefix = "Bluetooth: "

    /// Polls the session's status until it is final or the charge's lifetime is over.
    private func watch(sid: String, chargeID: String) async {
        var failed = 0
        while !Task.isCancelled {
            guard let current = record, current.charge.id == chargeID, !current.charge.state.isFinal else { return }
            do {
                let status = try await ledger.perform { client throws(LedgerClientError) in
                    try await client.session(sid: sid)
                }
                failed = 0
                if applyStatus(status.status, sid: sid) { return }
            } catch  where Self.isRefusal(error) {
                // The ledger no longer knows the session, or not for this payee: nothing can pay this charge.
                var next = current
                next.charge.state = .failed
                next.charge.problem = "the ledger refused to report session \(sid): \(error)"
                save(next)
                return
            } catch {
                if Task.isCancelled { return }
                failed += 1
                var next = current
                next.charge.problem = "cannot reach the ledger: \(error)"
                save(next)
            }
            if Date() >= lifetimeEnd(of: current.charge) { return }
            let delay = failed == 0 ? options.statusInterval : options.retry.delay(attempt: failed)
            do { try await Task.sleep(for: delay) } catch { return }
        }
    }

    /// Records a status from the ledger; returns whether the session is over.
    private func applyStatus(_ status: SessionStatus, sid: String) -> Bool {
        guard var next = record, next.charge.sessionID == sid, !next.charge.state.isFinal else { return true }
        next.charge.problem = nil
        var over = true
        switch status {
        case .paid: next.charge.state = .paid
        case .cancelled: next.charge.state = .cancelled
        case .expired:
            if options.renewExpiredSessions, !next.cancelRequested, Date() < lifetimeEnd(of: next.charge) {
                logger.info("session expired; advertising a new one", metadata: ["charge": "\(next.charge.id)"])
                next.charge.state = .creating
                next.charge.sessionID = nil
                next.charge.eid = nil
            } else {
                next.charge.state = .expired
            }
        case .locked:
            next.charge.state = .locked
            over = false
        case .created, .advertising:
            next.charge.state = .advertising
            over = false
        }
        if next != record { save(next) }
        return over
    }

    /// Ends the charge as `outcome` (cancelled or expired): a session that may be live is cancelled on the ledger
    /// first, so no payment can arrive after the charge is reported over. A session paid meanwhile ends it as paid.
    private func settle(_ current: KioskStore.Record, as outcome: KioskChargeState) async {
        defer { resumeSettleWaiters() }
        var sid = current.charge.sessionID
        var next = current
        do {
            if sid == nil {
                // A create may have reached the ledger without its answer reaching us (a crash, a timeout): the same
                // key finds that session, or makes one that is cancelled right away.
                let key = idempotencyKey(current)
                let amount = current.charge.amountCents
                sid = try await ledger.perform { client throws(LedgerClientError) in
                    try await client.createSession(amountCents: amount, idempotencyKey: key)
                }.sid
                next.sessionNumber += 1
            }
            if let sid {
                let sessionID = sid
                do {
                    try await ledger.perform { client throws(LedgerClientError) in
                        try await client.cancel(sid: sessionID)
                    }
                } catch  where Self.isRefusal(error) {
                    // Already over on the ledger (paid, expired, cancelled): its status says how.
                    let status = try await ledger.perform { client throws(LedgerClientError) in
                        try await client.session(sid: sessionID)
                    }
                    next.charge.sessionID = sessionID
                    next.charge.problem = nil
                    next.charge.state = status.status == .paid ? .paid : outcome
                    save(next)
                    return
                }
            }
            next.charge.sessionID = sid
            next.charge.problem = nil
            next.charge.state = outcome
            save(next)
        } catch  where Self.isRefusal(error) && sid == nil {
            // The ledger refused to create the session: none exists.
            next.charge.problem = nil
            next.charge.state = outcome
            save(next)
        } catch {
            resumeSettleWaiters()
            await retryLater(next, problem: "cannot reach the ledger to cancel the session: \(error)")
        }
    }

    // MARK: Helpers

    /// Consecutive failures of the ledger or the radio, for the backoff.
    private var failures = 0

    /// Shows `problem` and waits before the next attempt; a cancel from the point-of-sale cuts the wait short.
    private func retryLater(_ current: KioskStore.Record, problem: String) async {
        var next = current
        next.charge.problem = problem
        if next != record { save(next) }
        failures += 1
        let delay = options.retry.delay(attempt: failures)
        logger.warning(
            "retrying",
            metadata: ["charge": "\(current.charge.id)", "in": "\(delay)", "problem": "\(problem)"]
        )
        await runInterruptible(Task { try? await Task.sleep(for: delay) })
    }

    /// Awaits `task`, cancelling it when the point-of-sale cancels the charge or the kiosk shuts down.
    private func runInterruptible(_ task: Task<Void, Never>) async {
        interruptible = task
        await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        interruptible = nil
    }

    private func waitForSettleAttempt(timeout: Duration) async {
        let id = UUID()
        await withCheckedContinuation { continuation in
            settleWaiters[id] = continuation
            Task {
                try? await Task.sleep(for: timeout)
                self.resumeSettleWaiter(id)
            }
        }
    }

    private func resumeSettleWaiter(_ id: UUID) {
        settleWaiters.removeValue(forKey: id)?.resume()
    }

    private func resumeSettleWaiters() {
        let waiters = settleWaiters
        settleWaiters = [:]
        for waiter in waiters.values { waiter.resume() }
    }

    /// The key of the next session's creation, `kiosk-<charge id>-<session number>`: the same after a crash, so the
    /// ledger answers with the session it already created.
    private func idempotencyKey(_ current: KioskStore.Record) -> String {
        "kiosk-\(current.charge.id)-\(current.sessionNumber + 1)"
    }

    private func lifetimeEnd(of charge: KioskCharge) -> Date {
        charge.createdAt.addingTimeInterval(Self.seconds(options.sessionLifetime))
    }

    private func deadline(of charge: KioskCharge) -> Date { lifetimeEnd(of: charge) }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Whether the ledger answered no for good (as opposed to not answering, or asking to retry).
    private static func isRefusal(_ error: any Error) -> Bool {
        guard let error = error as? LedgerClientError, let kind = error.problemKind else { return false }
        switch kind {
        case .unauthorized, .rateLimited, .internalError, .unavailable, .idempotencyInFlight: return false
        default: return true
        }
    }

    /// Writes the record, then tells subscribers.
    private func save(_ next: KioskStore.Record) {
        var next = next
        next.charge.updatedAt = Date()
        do {
            try store.update(next)
        } catch {
            // The charge goes on in memory; the operator sees the disk problem in the log.
            logger.critical("cannot write the kiosk's state", metadata: ["error": "\(error)"])
        }
        let previous = record?.charge.id == next.charge.id ? record?.charge : nil
        record = next
        publish(from: previous, to: next)
    }

    private func publish(from previous: KioskCharge?, to next: KioskStore.Record) {
        record = next
        let status = status()
        for subscriber in statusSubscribers.values { subscriber.yield(status) }
        for event in KioskEvent.between(previous, next.charge) {
            for subscriber in eventSubscribers.values { subscriber.yield(event) }
        }
    }
}
