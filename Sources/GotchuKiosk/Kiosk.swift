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
        /// How long the end of a charge (paid, expired…) is shown before the kiosk reads ``KioskStatus/State/idle``
        /// again, so the next customer does not see the last one's outcome.
        public var idleAfter: Duration

        /// Creates options.
        public init(
            payeeName: String = "Gotchu",
            serviceUUID: BluetoothUUID = .gotchu,
            sessionLifetime: Duration = .seconds(300),
            renewExpiredSessions: Bool = true,
            statusInterval: Duration = .milliseconds(500),
            retry: Backoff = Backoff(),
            idleAfter: Duration = .seconds(60)
        ) {
            self.payeeName = payeeName
            self.serviceUUID = serviceUUID
            self.sessionLifetime = sessionLifetime
            self.renewExpiredSessions = renewExpiredSessions
            self.statusInterval = statusInterval
            self.retry = retry
            self.idleAfter = idleAfter
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
    /// Interrupts the step of the driver that a cancel from the point-of-sale cuts short (advertising, a wait).
    private var interrupt: (@Sendable () -> Void)?
    /// Publishes the return to idle after a charge ends.
    private var idleTimer: Task<Void, Never>?
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
        charge.expiresAt = lifetimeEnd(of: charge)
        let new = KioskStore.Record(charge: charge)
        do {
            try store.insert(new)
        } catch KioskStore.StoreError.busy(let id) {
            throw .busy(activeID: id)
        } catch {
            throw .storage("\(error)")
        }
        logger.info("charge", metadata: ["charge": "\(charge.id)", "amount": "\(Money.format(amountCents))"])
        record = new
        idleTimer?.cancel()
        publish(from: nil, to: new)
        wake.yield()
        return charge
    }

    /// Cancels the active charge: stops advertising at once, then cancels its session on the ledger. Returns the
    /// charge as it ended — `paid` if a payer got there first. Throws ``KioskError/cancelPending(reason:)`` if the
    /// ledger could not confirm; the kiosk keeps trying and reports the end as usual.
    public func cancel(id: String) async throws(KioskError) -> KioskCharge {
        guard let current = record, current.charge.id == id else {
            let stored = try? store.record(id: id)
            guard let stored else { throw .notFound(id: id) }
            throw .alreadyFinal(stored.charge)
        }
        guard !current.charge.state.isFinal else { throw .alreadyFinal(current.charge) }
        if !current.cancelRequested {
            guard update(id, { $0.cancelRequested = true }) else {
                throw .storage("could not record the cancel request")
            }
            logger.info("cancel requested", metadata: ["charge": "\(id)"])
        }
        interrupt?()
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
        case .some(let chargeState) where chargeState.isFinal && Date() >= idleTime(after: charge): state = .idle
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

    /// When a final charge stops being shown.
    private func idleTime(after charge: KioskCharge?) -> Date {
        let (seconds, attoseconds) = options.idleAfter.components
        return (charge?.updatedAt ?? .distantPast).addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// Tells subscribers when the shown end of the last charge gives way to idle.
    private func scheduleIdle() {
        idleTimer?.cancel()
        guard let charge = record?.charge, charge.state.isFinal else { return }
        let delay = idleTime(after: charge).timeIntervalSinceNow
        guard delay > 0 else { return }
        idleTimer = Task {
            try? await Task.sleep(for: .milliseconds(Int64(delay * 1000) + 1))
            guard !Task.isCancelled else { return }
            self.publishStatus()
        }
    }

    private func publishStatus() {
        let status = status()
        for subscriber in statusSubscribers.values { subscriber.yield(status) }
    }
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
        scheduleIdle()
        wake.yield()
        for await _ in wakeups {
            while let active = record, !active.charge.state.isFinal, !Task.isCancelled {
                await step(active)
                if storageFailed {
                    // Nothing was recorded, so the step runs again (creations replay through their key): slowly.
                    storageFailed = false
                    await pause(problem: nil)
                }
            }
            if Task.isCancelled { break }
        }
        idleTimer?.cancel()
        for subscriber in statusSubscribers.values { subscriber.finish() }
        for subscriber in eventSubscribers.values { subscriber.finish() }
        resumeSettleWaiters()
    }

    /// Moves the active charge one step on.
    private func step(_ current: KioskStore.Record) async {
        if current.cancelRequested {
            await settle(current, as: .cancelled)
        } else if Date() >= lifetimeEnd(of: current.charge) {
            await settle(current, as: .expired)
        } else if current.charge.sessionID == nil {
            await createSession(current)
        } else if current.charge.eid == nil {
            // A stored session without a readable EID cannot be advertised: end it rather than spin.
            await settle(current, as: .failed, reason: "the stored EID of its session cannot be read")
        } else {
            await advertiseAndWatch(current)
        }
    }

    private func createSession(_ current: KioskStore.Record) async {
        let id = current.charge.id
        do {
            let created = try await createLedgerSession(for: current)
            // Re-read after the wait: a cancel may have come in meanwhile, and must not be lost.
            update(id) { next in
                next.sessionNumber = current.sessionNumber + 1
                next.charge.sessionID = created.sid
                next.charge.eid = created.eid
                if !options.renewExpiredSessions {
                    next.charge.expiresAt = min(lifetimeEnd(of: next.charge), created.expiresAt)
                }
                next.charge.problem = nil
            }
            failures = 0
        } catch  where Self.isRefusalToCreate(error) {
            update(id) { next in
                next.charge.state = .failed
                next.charge.problem = "the ledger refused the charge: \(error)"
            }
        } catch {
            await pause(problem: Self.problem(error))
        }
    }

    /// Like ``createLedgerSession(for:)``, but `nil` when the ledger refuses for good.
    private func createLedgerSession(orNoneFor current: KioskStore.Record) async throws -> CreateSessionResponse? {
        do {
            return try await createLedgerSession(for: current)
        } catch  where Self.isRefusalToCreate(error) {
            return nil
        }
    }

    /// Creates (or, after a lost answer, finds again) the next ledger session of a charge.
    private func createLedgerSession(for current: KioskStore.Record) async throws -> CreateSessionResponse {
        let key = idempotencyKey(current)
        let amount = current.charge.amountCents
        return try await ledger.perform { client throws(LedgerClientError) in
            try await client.createSession(amountCents: amount, idempotencyKey: key)
        }
    }

    /// Advertises the session's EID and watches its status until the session ends, the charge's lifetime is over,
    /// the advertisement fails, or the step is interrupted.
    private func advertiseAndWatch(_ current: KioskStore.Record) async {
        guard let sid = current.charge.sessionID, let eid = current.charge.eid else { return }
        let id = current.charge.id
        let advertisement = Advertisement(eid: eid, serviceUUID: options.serviceUUID)
        let radio = self.radio
        let failure = await runInterruptible(
            Task { () -> String? in
                do {
                    try await radio.withAdvertisement(advertisement) { _ in
                        await self.advertisingStarted(id)
                        await self.watch(sid: sid, chargeID: id)
                    }
                    return nil
                } catch is CancellationError {
                    return nil
                } catch {
                    return "\(error)"
                }
            }
        )
        if let failure, record?.charge.id == id, record?.charge.state.isFinal == false {
            logger.warning("advertising failed", metadata: ["charge": "\(id)", "error": "\(failure)"])
            await pause(problem: Self.radioProblemPrefix + failure)
        }
    }

    private func advertisingStarted(_ id: String) {
        logger.info("advertising", metadata: ["charge": "\(id)", "eid": "\(record?.charge.eid?.rawValue ?? "")"])
        update(id) { next in
            if next.charge.state == .creating { next.charge.state = .advertising }
            if next.charge.problem?.hasPrefix(Self.radioProblemPrefix) == true { next.charge.problem = nil }
        }
        failures = 0
    }

    private static let radioProblemPrefix = "Bluetooth: "

    /// Polls the session's status until it is over or the charge's lifetime is.
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
            } catch {
                // Unreachable, or refusing to show the session (credentials changed): the session may still be
                // paid, so the charge goes on and says what is wrong.
                if Task.isCancelled { return }
                failed += 1
                update(chargeID) { $0.charge.problem = Self.problem(error) }
            }
            if Date() >= lifetimeEnd(of: current.charge) { return }
            let delay = failed == 0 ? options.statusInterval : options.retry.delay(attempt: failed)
            do { try await Task.sleep(for: delay) } catch { return }
        }
    }

    /// Records a status from the ledger; returns whether the session is over.
    private func applyStatus(_ status: SessionStatus, sid: String) -> Bool {
        guard let current = record, current.charge.sessionID == sid, !current.charge.state.isFinal else { return true }
        let renew = options.renewExpiredSessions && !current.cancelRequested && Date() < lifetimeEnd(of: current.charge)
        if status == .expired, renew {
            logger.info("session expired; advertising a new one", metadata: ["charge": "\(current.charge.id)"])
        }
        update(current.charge.id) { next in
            next.charge.problem = nil
            switch status {
            case .paid: next.charge.state = .paid
            case .cancelled: next.charge.state = .cancelled
            case .expired where renew:
                next.charge.state = .creating
                next.charge.sessionID = nil
                next.charge.eid = nil
            case .expired: next.charge.state = .expired
            case .locked: next.charge.state = .locked
            case .created, .advertising: next.charge.state = .advertising
            }
        }
        return status != .locked && status != .created && status != .advertising
    }

    /// Ends the charge as `outcome` (cancelled, expired, or failed for `reason`): a session that may be live is
    /// cancelled on the ledger first, so no payment can arrive after the charge is reported over. A session paid
    /// meanwhile ends it as paid.
    private func settle(_ current: KioskStore.Record, as outcome: KioskChargeState, reason: String? = nil) async {
        do {
            try await cancelSession(of: current, endingAs: outcome, reason: reason)
            resumeSettleWaiters()
        } catch {
            resumeSettleWaiters()
            await pause(problem: "cannot cancel the charge's session yet: " + Self.problem(error))
        }
    }

    private func cancelSession(
        of current: KioskStore.Record,
        endingAs outcome: KioskChargeState,
        reason: String?
    ) async throws {
        let id = current.charge.id
        let sessionID: String
        if let existing = current.charge.sessionID {
            sessionID = existing
        } else {
            // A create may have reached the ledger without its answer reaching us (a crash, a timeout): the same key
            // finds that session, or makes one that is cancelled right away.
            guard let created = try await createLedgerSession(orNoneFor: current) else {
                finish(id, as: outcome, reason: reason)  // The ledger refused: no session exists.
                return
            }
            // Recorded before it is cancelled, so that a failure below retries on this session, not a new one.
            guard record(session: created, number: current.sessionNumber + 1, of: id) else { return }
            sessionID = created.sid
        }
        finish(id, as: try await cancelOrLearnEnd(sessionID) == .paid ? .paid : outcome, reason: reason)
    }

    /// Cancels a session on the ledger; returns `.cancelled`, or how it ended if it was already over.
    private func cancelOrLearnEnd(_ sid: String) async throws(LedgerClientError) -> SessionStatus {
        do {
            try await ledger.perform { client throws(LedgerClientError) in try await client.cancel(sid: sid) }
            return .cancelled
        } catch {
            guard Self.isOver(error) else { throw error }
            return try await ledger.perform { client throws(LedgerClientError) in try await client.session(sid: sid) }
                .status
        }
    }

    /// Records a session created for the charge `id` as its `number`th; returns whether it was written.
    private func record(session created: CreateSessionResponse, number: Int, of id: String) -> Bool {
        update(id) { next in
            next.sessionNumber = number
            next.charge.sessionID = created.sid
            next.charge.eid = created.eid
        }
    }

    /// Ends the charge as `state`; `reason` is kept as the problem of a failed one.
    private func finish(_ id: String, as state: KioskChargeState, reason: String?) {
        update(id) { next in
            next.charge.state = state
            next.charge.problem = state == .failed ? reason : nil
        }
    }

    // MARK: Helpers

    /// Consecutive failures of the ledger or the radio, for the backoff.
    private var failures = 0
    /// A write of the state failed during the last step.
    private var storageFailed = false

    /// Shows `problem` (if any) and waits before the next attempt; a cancel from the point-of-sale cuts the wait short.
    private func pause(problem: String?) async {
        if let problem, let id = record?.charge.id { update(id) { $0.charge.problem = problem } }
        failures += 1
        let delay = options.retry.delay(attempt: failures)
        logger.warning("retrying", metadata: ["in": "\(delay)", "problem": "\(problem ?? "state not written")"])
        _ = await runInterruptible(Task { try? await Task.sleep(for: delay) })
    }

    /// Awaits `task`, cancelling it when the point-of-sale cancels the charge or the kiosk shuts down.
    private func runInterruptible<Value: Sendable>(_ task: Task<Value, Never>) async -> Value {
        interrupt = { task.cancel() }
        let value = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        interrupt = nil
        return value
    }

    /// Waits until the driver's next attempt to settle the charge with the ledger, the charge ending, or `timeout`.
    private func waitForSettleAttempt(timeout: Duration) async {
        let id = UUID()
        let timer = Task {
            try? await Task.sleep(for: timeout)
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

    /// The key of the next session's creation, `kiosk-<charge id>-<session number>`: the same after a crash, so the
    /// ledger answers with the session it already created.
    private func idempotencyKey(_ current: KioskStore.Record) -> String {
        "kiosk-\(current.charge.id)-\(current.sessionNumber + 1)"
    }

    private func lifetimeEnd(of charge: KioskCharge) -> Date {
        let (seconds, attoseconds) = options.sessionLifetime.components
        return charge.createdAt.addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// Whether the ledger refused to create a session for good: no session exists, none will.
    private static func isRefusalToCreate(_ error: any Error) -> Bool {
        guard let kind = (error as? LedgerClientError)?.problemKind else { return false }
        return [.badRequest, .invalidAmount, .idempotencyKeyReused].contains(kind)
    }

    /// Whether the ledger refused to cancel a session because it is already over (paid, expired or cancelled).
    private static func isOver(_ error: any Error) -> Bool {
        guard let kind = (error as? LedgerClientError)?.problemKind else { return false }
        return [.sessionAlreadyPaid, .sessionExpired, .sessionCancelled].contains(kind)
    }

    /// What a failed ledger call means for the person at the terminal.
    private static func problem(_ error: any Error) -> String {
        switch (error as? LedgerClientError)?.problemKind {
        case .unauthorized?: "the ledger rejected the kiosk's token (\(error)); check its credentials"
        case .sessionNotFound?, .forbidden?, .notFound?:
            "the ledger does not show this charge's session to the kiosk's account (\(error)); check its credentials"
        case .some: "the ledger answered: \(error)"
        case nil: "cannot reach the ledger: \(error)"
        }
    }

    /// Applies `change` to the active charge if it is still `id` and not final, writes it, then reports it. Returns
    /// `false` if the charge moved on meanwhile or the write failed (then nothing changes and the step is retried).
    @discardableResult
    private func update(_ id: String, _ change: (inout KioskStore.Record) -> Void) -> Bool {
        guard let current = record, current.charge.id == id, !current.charge.state.isFinal else { return false }
        var next = current
        change(&next)
        guard next != current else { return true }
        next.charge.updatedAt = Date()
        do {
            try store.update(next)
        } catch {
            logger.critical("cannot write the kiosk's state", metadata: ["error": "\(error)"])
            storageFailed = true
            return false
        }
        record = next
        publish(from: current.charge, to: next)
        if next.charge.state.isFinal {
            resumeSettleWaiters()
            scheduleIdle()
        }
        return true
    }

    /// Tells subscribers of a change already written.
    private func publish(from previous: KioskCharge?, to next: KioskStore.Record) {
        publishStatus()
        for event in KioskEvent.between(previous, next.charge) {
            for subscriber in eventSubscribers.values { subscriber.yield(event) }
        }
    }
}
