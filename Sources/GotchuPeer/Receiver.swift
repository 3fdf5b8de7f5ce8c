import Foundation
import GotchuAPI
public import GotchuCore
public import GotchuLedgerClient

/// Drives the receiver's flow over a radio and the ledger: create a session, advertise its EID while watching the
/// session's status, stop when it is paid, expired or cancelled.
public struct Receiver: Sendable {
    /// What the receiver asks for and how it behaves.
    public struct Options: Sendable {
        /// The amount asked of payers.
        public var amountCents: Cents
        /// The service UUID advertised.
        public var serviceUUID: BluetoothUUID
        /// How often the session's status is polled when the ledger has no event streams (or `liveStatus` is off).
        public var statusInterval: Duration
        /// Learn the session's status from its event stream (`GET /sessions/{sid}/events`) instead of polling.
        public var liveStatus: Bool
        /// The longest wait on the event stream before the status is read anyway.
        public var safetyInterval: Duration
        /// The flow's rules (re-create on expiry, at most N sessions).
        public var flow: ReceiverStateMachine.Configuration
        /// How long one EID stays on the air before the session is given a new one (on the radio's clock); `nil`
        /// never rotates.
        public var rotateEvery: Duration?
        /// The terminal's calibration, advertised beside the EID (see ``Advertisement/calibratedRSSI``); `nil` for
        /// none.
        public var calibratedRSSI: Int16?

        /// Creates options.
        public init(
            amountCents: Cents,
            serviceUUID: BluetoothUUID = .gotchu,
            statusInterval: Duration = .milliseconds(250),
            liveStatus: Bool = true,
            safetyInterval: Duration = .seconds(30),
            flow: ReceiverStateMachine.Configuration = .init(),
            rotateEvery: Duration? = nil
        ) {
            self.amountCents = amountCents
            self.serviceUUID = serviceUUID
            self.statusInterval = statusInterval
            self.liveStatus = liveStatus
            self.safetyInterval = safetyInterval
            self.flow = flow
            self.rotateEvery = rotateEvery
        }
    }

    /// A step worth showing to the person at the terminal.
    public enum Progress: Sendable, Hashable {
        /// The ledger created a session.
        case created(sid: String, eid: EID, amountCents: Cents)
        /// The EID is on the air.
        case advertising(EID)
        /// The session was given a new EID, now on the air in place of the last one.
        case rotated(EID)
        /// A rotation failed; the last EID stays on the air.
        case rotationFailed(String)
        /// A payer holds the lock.
        case locked
        /// The lock lapsed without payment.
        case unlocked
        /// The ledger could not be reached; the receiver keeps trying.
        case ledgerUnreachable(String)
    }

    private let radio: any Radio
    private let ledger: LedgerClient

    /// Creates a receiver that advertises on `radio` and asks `ledger` (logged in as the payee).
    public init(radio: any Radio, ledger: LedgerClient) {
        self.radio = radio
        self.ledger = ledger
    }

    /// Runs the flow until it ends. Cancelling the calling task cancels the session on the ledger and reports what
    /// the ledger says: ``ReceiverStateMachine/Outcome/paid(_:)`` if it was paid first,
    /// ``ReceiverStateMachine/Outcome/cancelUnconfirmed(_:reason:)`` if no cancel could be confirmed.
    public func run(
        _ options: Options,
        progress: @escaping @Sendable (Progress) -> Void = { _ in }
    ) async -> ReceiverStateMachine.Outcome {
        var machine = ReceiverStateMachine(configuration: options.flow)
        var action = machine.receive(.start, now: await radio.now())
        var current: ReceiverSession?
        var answer = ReceiverStateMachine.CancelAnswer.cancelled
        while true {
            switch action {
            case .none:
                // Only reachable if an event was ignored; watching again re-synchronises with the ledger.
                guard let session = current else { return .cancelled }
                action = machine.receive(await advertise(session, options, progress), now: await radio.now())
            case .createSession, .stopAdvertisingAndCreateSession:
                let event = await create(options, progress)
                if case .created(let session) = event { current = session }
                action = machine.receive(event, now: await radio.now())
            case .startAdvertising:
                guard let session = current else { return .cancelled }
                action = machine.receive(await advertise(session, options, progress), now: await radio.now())
            case .stopAdvertisingAndCancel(let sid):
                // The caller was cancelled; the ledger client does not pass that on, so this request still goes out.
                answer = await cancel(sid)
                action = machine.receive(.cancelAnswered(sessionID: sid, answer), now: await radio.now())
            case .cancelAgain(let sid, let delay):
                if case .unconfirmed(let reason) = answer { progress(.ledgerUnreachable(reason)) }
                await sleepThroughCancellation(delay)
                answer = await cancel(sid)
                action = machine.receive(.cancelAnswered(sessionID: sid, answer), now: await radio.now())
            case .stopAdvertisingAndReport(let outcome), .report(let outcome):
                return outcome
            }
        }
    }

    /// Asks the ledger to cancel `sid`; without an answer, reads its status, which may still say how it ended.
    private func cancel(_ sid: String) async -> ReceiverStateMachine.CancelAnswer {
        do {
            try await ledger.cancel(sid: sid)
            return .cancelled
        } catch {
            switch error.problemKind {
            case .sessionAlreadyPaid?: return .paid
            case .sessionExpired?: return .expired
            case .sessionCancelled?: return .cancelled
            default: break
            }
            if let status = try? await ledger.session(sid: sid) {
                switch status.status {
                case .paid: return .paid
                case .cancelled: return .cancelled
                case .expired: return .expired
                case .created, .advertising, .locked: break
                }
            }
            return .unconfirmed(reason: "\(error)")
        }
    }

    /// Waits on the radio's clock even though the calling task is cancelled: the wait between two cancels is the
    /// cancellation's own work.
    private func sleepThroughCancellation(_ duration: Duration) async {
        let radio = self.radio
        await Task { try? await radio.sleep(for: duration) }.value
    }

    private func create(
        _ options: Options,
        _ progress: @Sendable (Progress) -> Void
    ) async -> ReceiverStateMachine.Event {
        if Task.isCancelled { return .cancel }
        do {
            let created = try await ledger.createSession(amountCents: options.amountCents)
            progress(.created(sid: created.sid, eid: created.eid, amountCents: options.amountCents))
            // The ledger's expiry time, moved onto the radio's clock for the machine's local expiry check.
            let remaining = Duration.milliseconds(Int64(created.expiresAt.timeIntervalSinceNow * 1000))
            return .created(
                ReceiverSession(sessionID: created.sid, eid: created.eid, expiresAt: await radio.now() + remaining)
            )
        } catch {
            return .createFailed(reason: "\(error)")
        }
    }

    /// Advertises the session's EID while polling its status; returns the event that ends the advertisement.
    private func advertise(
        _ session: ReceiverSession,
        _ options: Options,
        _ progress: @escaping @Sendable (Progress) -> Void
    ) async -> ReceiverStateMachine.Event {
        let advertisement = Advertisement(
            eid: session.eid,
            serviceUUID: options.serviceUUID,
            calibratedRSSI: options.calibratedRSSI
        )
        do {
            return try await radio.withAdvertisement(advertisement) { handle in
                progress(.advertising(session.eid))
                guard let every = options.rotateEvery else { return await watch(session, options, progress) }
                // The watch ends the advertisement; the rotation runs beside it until then.
                return await withTaskGroup(of: ReceiverStateMachine.Event?.self) { group in
                    group.addTask { await watch(session, options, progress) }
                    group.addTask {
                        await rotate(session, every: every, handle: handle, options, progress)
                        return nil
                    }
                    var ended: ReceiverStateMachine.Event = .cancel
                    while let next = await group.next() {
                        if let event = next {
                            ended = event
                            break
                        }
                    }
                    group.cancelAll()
                    return ended
                }
            }
        } catch {
            return .advertisingFailed(reason: "\(error)")
        }
    }

    /// Every `every` on the radio's clock, asks the ledger for a new EID and puts it on the air in place of the
    /// last; returns when cancelled. A rotation that fails leaves the last EID on the air (it still resolves) and is
    /// tried again after another interval; a session that is over is the watch's to report.
    private func rotate(
        _ session: ReceiverSession,
        every: Duration,
        handle: any AdvertisingHandle,
        _ options: Options,
        _ progress: @Sendable (Progress) -> Void
    ) async {
        while !Task.isCancelled {
            do {
                try await radio.sleep(for: every)
            } catch {
                return
            }
            if Task.isCancelled { return }
            do {
                let rotated = try await ledger.rotateEID(sid: session.sessionID)
                try await handle.update(
                    Advertisement(
                        eid: rotated.eid,
                        serviceUUID: options.serviceUUID,
                        calibratedRSSI: options.calibratedRSSI
                    )
                )
                progress(.rotated(rotated.eid))
            } catch {
                if Task.isCancelled { return }
                progress(.rotationFailed("\(error)"))
            }
        }
    }

    /// Watches the session's status until it ends the advertisement: on its event stream, re-reading the status
    /// when the stream breaks or stays quiet, polling a ledger without event streams (``StatusWatch`` decides).
    private func watch(
        _ session: ReceiverSession,
        _ options: Options,
        _ progress: @Sendable (Progress) -> Void
    ) async -> ReceiverStateMachine.Event {
        var locked = false
        var firstRead = true
        var known: SessionStatus?
        var policy = StatusWatch(
            configuration: .init(
                live: options.liveStatus,
                pollInterval: options.statusInterval,
                safetyInterval: options.safetyInterval
            )
        )
        var step = policy.first
        while !Task.isCancelled {
            let outcome: StatusWatch.Outcome
            var status: SessionStatusResponse?
            switch step {
            case .awaitChange(let timeout):
                // The machine's local expiry check needs a word by expiry and its grace, stream or not.
                let untilTick = session.expiresAt + options.flow.expiryGrace - (await radio.now())
                let failure: String?
                (outcome, status, failure) = await nextStatus(
                    session.sessionID,
                    after: known,
                    timeout: min(timeout, untilTick)
                )
                if let failure, outcome == .streamFailed, !Task.isCancelled {
                    progress(.ledgerUnreachable("the session's event stream failed: \(failure)"))
                }
            case .read(let delay):
                if delay > .zero {
                    do { try await Task.sleep(for: delay) } catch { return .cancel }
                }
                do {
                    status = try await ledger.session(sid: session.sessionID)
                    outcome = .read
                } catch {
                    if Task.isCancelled { return .cancel }
                    progress(.ledgerUnreachable("\(error)"))
                    outcome = .readFailed
                }
            }
            if let status {
                known = status.status
                switch status.status {
                case .paid: return .status(sessionID: session.sessionID, .paid)
                case .expired: return .status(sessionID: session.sessionID, .expired)
                case .cancelled: return .status(sessionID: session.sessionID, .cancelled)
                case .locked, .created, .advertising:
                    if (status.status == .locked) != locked {
                        locked.toggle()
                        progress(locked ? .locked : .unlocked)
                    }
                }
            }
            if Task.isCancelled { break }
            if firstRead, status != nil {
                firstRead = false
                await FaultInjection.holdIfRequested(at: .holdWatching) { await Self.untilCancelled() }
            }
            // The ledger judges expiry; past the grace period the machine ends the session even without its word.
            if await radio.now() >= session.expiresAt + options.flow.expiryGrace { return .tick }
            step = policy.next(after: outcome)
        }
        return .cancel
    }

    /// The session's next status other than `known` from its event stream, or how waiting for it went (with why
    /// the stream failed): at most `timeout` on the radio's clock.
    private func nextStatus(
        _ sid: String,
        after known: SessionStatus?,
        timeout: Duration
    ) async -> (StatusWatch.Outcome, SessionStatusResponse?, String?) {
        let (ledger, radio) = (self.ledger, self.radio)
        return await withTaskGroup(of: (StatusWatch.Outcome, SessionStatusResponse?, String?).self) { group in
            group.addTask {
                do throws(LedgerClientError) {
                    return (.changed, try await ledger.nextSessionStatus(sid: sid, after: known), nil)
                } catch {
                    let unsupported = LedgerClient.eventStreamsUnsupported(error)
                    return (unsupported ? .streamUnsupported : .streamFailed, nil, "\(error)")
                }
            }
            group.addTask {
                try? await radio.sleep(for: max(timeout, .zero))
                return (.timedOut, nil, nil)
            }
            let first = await group.next() ?? (.timedOut, nil, nil)
            group.cancelAll()
            return first
        }
    }

    private static func untilCancelled() async {
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
    }
}
