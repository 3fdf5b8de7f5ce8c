import Foundation
import GotchuAPI
public import GotchuCore
public import GotchuLedgerClient
import GotchuReceipts

/// Drives the receiver's flow over a radio and the ledger: create a session, advertise its EID while watching the
/// session's status, stop when it is paid, expired or cancelled.
///
/// A split session stays on the air while its shares are paid, each share reported as it lands
/// (``Progress/sharesPaid(paid:of:)``), until every share is paid; cancelled or expired with shares paid, the flow
/// ends with what the ledger refunded.
public struct Receiver: Sendable {
    /// What the receiver asks for and how it behaves.
    public struct Options: Sendable {
        /// The amount asked of payers (of a split, of all of them together).
        public var amountCents: Cents
        /// Into how many equal shares the amount is split, each paid by a payer of its own (2 to 50); `nil` (or 1)
        /// for one payer.
        public var shares: Int?
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
        /// The tips the terminal suggests to payers (on the web checkout, and to `gotchu pay`); none by default.
        public var tipPrompt: TipPrompt = .none
        /// The payee's order reference (``OrderReference``), shown to payers; `nil` for none.
        public var reference: String?

        /// Creates options.
        public init(
            amountCents: Cents,
            serviceUUID: BluetoothUUID = .gotchu,
            statusInterval: Duration = .milliseconds(250),
            liveStatus: Bool = true,
            safetyInterval: Duration = .seconds(30),
            flow: ReceiverStateMachine.Configuration = .init(),
            rotateEvery: Duration? = nil,
            shares: Int? = nil
        ) {
            self.amountCents = amountCents
            self.shares = shares
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
        /// The ledger created a session; of a split, `shareCents` lists each share's amount (empty when not split).
        case created(sid: String, eid: EID, amountCents: Cents, shareCents: [Cents] = [])
        /// The EID is on the air.
        case advertising(EID)
        /// The session was given a new EID, now on the air in place of the last one.
        case rotated(EID)
        /// A rotation failed; the last EID stays on the air.
        case rotationFailed(String)
        /// The web checkout of the EID now on the air, `PUBLIC_URL/p/EID`, for payers without the app: after
        /// ``created(sid:eid:amountCents:shareCents:)`` and after each ``rotated(_:)``, when the ledger has a public
        /// URL (and states the address of that very EID).
        case checkout(String)
        /// A payer holds the lock.
        case locked
        /// The lock lapsed without payment.
        case unlocked
        /// More shares of the split session are paid: `paid` of its `of`; it stays on the air for the rest.
        case sharesPaid(paid: Int, of: Int)
        /// The ledger reports a payment, but its receipt does not verify against the trusted keys (yet): it is not
        /// counted, and the status is read again.
        case receiptUnverified(String)
        /// The ledger could not be reached; the receiver keeps trying.
        case ledgerUnreachable(String)
    }

    private let radio: any Radio
    private let ledger: LedgerClient
    private let receiptTrust: ReceiptTrust?

    /// Creates a receiver that advertises on `radio` and asks `ledger` (logged in as the payee).
    /// - Parameter receiptTrust: the keys every payment's receipt must verify against before the session counts as
    ///   paid (of a split, each payer's, and each share before it is reported); `nil` believes the ledger's status
    ///   as it is.
    public init(radio: any Radio, ledger: LedgerClient, receiptTrust: ReceiptTrust? = nil) {
        self.radio = radio
        self.ledger = ledger
        self.receiptTrust = receiptTrust
    }

    /// The flow's machine, fed by the loop and, while the session is on the air, by the watch: shares that land do
    /// not end the advertisement.
    private actor Flow {
        private var machine: ReceiverStateMachine
        private let radio: any Radio

        init(_ machine: ReceiverStateMachine, radio: any Radio) {
            self.machine = machine
            self.radio = radio
        }

        func receive(_ event: ReceiverStateMachine.Event) async -> ReceiverStateMachine.Action {
            let now = await radio.now()
            return machine.receive(event, now: now)
        }
    }

    /// Runs the flow until it ends. Cancelling the calling task cancels the session on the ledger and reports what
    /// the ledger says: ``ReceiverStateMachine/Outcome/paid(_:)`` if it was paid first,
    /// ``ReceiverStateMachine/Outcome/cancelUnconfirmed(_:reason:)`` if no cancel could be confirmed.
    public func run(
        _ options: Options,
        progress: @escaping @Sendable (Progress) -> Void = { _ in }
    ) async -> ReceiverStateMachine.Outcome {
        let flow = Flow(ReceiverStateMachine(configuration: options.flow), radio: radio)
        var action = await flow.receive(.start)
        var current: ReceiverSession?
        var answer = ReceiverStateMachine.CancelAnswer.cancelled
        while true {
            switch action {
            case .none, .showSharesPaid:
                // Only reachable if an event was ignored; watching again re-synchronises with the ledger.
                if case .showSharesPaid(let session) = action {
                    progress(.sharesPaid(paid: session.payments.sharesPaid, of: session.shares))
                }
                guard let session = current else { return .cancelled }
                action = await flow.receive(await advertise(session, options, flow, progress))
            case .createSession, .stopAdvertisingAndCreateSession:
                let event = await create(options, progress)
                if case .created(let session) = event { current = session }
                action = await flow.receive(event)
            case .startAdvertising:
                guard let session = current else { return .cancelled }
                action = await flow.receive(await advertise(session, options, flow, progress))
            case .stopAdvertisingAndCancel(let sid):
                // The caller was cancelled; the ledger client does not pass that on, so this request still goes out.
                answer = await cancel(sid)
                action = await flow.receive(
                    .cancelAnswered(sessionID: sid, answer, payments: await refunds(sid, current, after: answer))
                )
            case .cancelAgain(let sid, let delay):
                if case .unconfirmed(let reason) = answer { progress(.ledgerUnreachable(reason)) }
                await sleepThroughCancellation(delay)
                answer = await cancel(sid)
                action = await flow.receive(
                    .cancelAnswered(sessionID: sid, answer, payments: await refunds(sid, current, after: answer))
                )
            case .stopAdvertisingAndReport(let outcome), .report(let outcome):
                return outcome
            }
        }
    }

    /// What a split session's payments came to once a cancel was answered, its refunds made: read from the ledger
    /// (`nil` for a session that is not split, when the cancel is unconfirmed, or when the ledger cannot be read).
    private func refunds(
        _ sid: String,
        _ session: ReceiverSession?,
        after answer: ReceiverStateMachine.CancelAnswer
    ) async -> SessionPayments? {
        guard let session, session.shares > 1, session.sessionID == sid else { return nil }
        if case .unconfirmed = answer { return nil }
        guard let status = try? await ledger.session(sid: sid) else { return nil }
        return Self.payments(of: await refundsSettled(status))
    }

    /// `status` once the ledger has refunded everything a split session that ended unpaid took in: the ledger
    /// refunds a cancelled split at once and an expired one within seconds of its expiry, so the status is read
    /// again, a few times at most (about 10 s), until its refunds add up to what was paid.
    private func refundsSettled(_ status: SessionStatusResponse) async -> SessionStatusResponse {
        var status = status
        var reads = 0
        while status.status == .cancelled || status.status == .expired,
            status.refundedCents < status.paidCents + status.tipCents, reads < 20
        {
            reads += 1
            await sleepThroughCancellation(.milliseconds(500))
            guard let next = try? await ledger.session(sid: status.sid) else { break }
            status = next
        }
        return status
    }

    /// A split session's status once past its expiry and grace, when shares were paid: the ledger expires it and
    /// refunds its payments within seconds of its expiry, so its status is read a few times at most (about 10 s)
    /// until it has ended; the last status read (`nil` if none could be).
    private func lastWord(_ sid: String) async -> SessionStatusResponse? {
        var last: SessionStatusResponse?
        for read in 0..<20 {
            if read > 0 { try? await radio.sleep(for: .milliseconds(500)) }
            // A Ctrl-C meanwhile is the flow's to act on (the session may still be live): it is not held up here.
            if Task.isCancelled { break }
            guard let status = try? await ledger.session(sid: sid) else { continue }
            last = status
            if !status.status.isLive { break }
        }
        return last
    }

    /// The figures of a session's status the receiver's flow keeps.
    static func payments(of status: SessionStatusResponse) -> SessionPayments {
        SessionPayments(
            sharesPaid: status.sharesPaid,
            paidCents: status.paidCents,
            tipCents: status.tipCents,
            refundedCents: status.refundedCents,
            refundedPayments: status.payments.isEmpty
                ? (status.refundedCents > 0 ? 1 : 0) : status.payments.filter { $0.refundedCents > 0 }.count
        )
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
                case .created, .advertising, .locked, .partiallyPaid: break
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
            // One share is the ledger's default: a ledger that predates splits is sent what it knows.
            let shares = options.shares.flatMap { $0 > 1 ? $0 : nil }
            let created = try await ledger.createSession(
                amountCents: options.amountCents,
                shares: shares,
                tipPercents: options.tipPrompt.isEmpty ? nil : options.tipPrompt.percents,
                reference: options.reference
            )
            if let shares, created.shares != shares {
                return .createFailed(
                    reason: "the ledger made a session of \(created.shares) share(s), not \(shares): it may predate "
                        + "split sessions; the session is left to expire"
                )
            }
            progress(
                .created(
                    sid: created.sid,
                    eid: created.eid,
                    amountCents: options.amountCents,
                    shareCents: created.shares > 1 ? created.shareCents : []
                )
            )
            if let url = CheckoutURL.validated(created.checkoutURL, eid: created.eid) { progress(.checkout(url)) }
            // The ledger's expiry time, moved onto the radio's clock for the machine's local expiry check.
            let remaining = Duration.milliseconds(Int64(created.expiresAt.timeIntervalSinceNow * 1000))
            return .created(
                ReceiverSession(
                    sessionID: created.sid,
                    eid: created.eid,
                    expiresAt: await radio.now() + remaining,
                    shares: created.shares
                )
            )
        } catch {
            return .createFailed(reason: "\(error)")
        }
    }

    /// Advertises the session's EID while polling its status; returns the event that ends the advertisement.
    private func advertise(
        _ session: ReceiverSession,
        _ options: Options,
        _ flow: Flow,
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
                guard let every = options.rotateEvery else {
                    return await watch(session, options, flow, progress)
                }
                // The watch ends the advertisement; the rotation runs beside it until then.
                return await withTaskGroup(of: ReceiverStateMachine.Event?.self) { group in
                    group.addTask { await watch(session, options, flow, progress) }
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
                if let url = CheckoutURL.validated(rotated.checkoutURL, eid: rotated.eid) { progress(.checkout(url)) }
            } catch {
                if Task.isCancelled { return }
                progress(.rotationFailed("\(error)"))
            }
        }
    }

    /// Watches the session's status until it ends the advertisement: on its event stream, re-reading the status
    /// when the stream breaks or stays quiet, polling a ledger without event streams (``StatusWatch`` decides).
    /// Shares of a split that land go to the flow as they come, their receipts checked first when receipts are.
    private func watch(
        _ session: ReceiverSession,
        _ options: Options,
        _ flow: Flow,
        _ progress: @Sendable (Progress) -> Void
    ) async -> ReceiverStateMachine.Event {
        var locked = false
        var firstRead = true
        var known: SessionStatus?
        var knownSharesPaid: Int?
        var receipts = ReceiptCheck()
        var policy = StatusWatch(
            configuration: .init(
                live: options.liveStatus,
                pollInterval: options.statusInterval,
                safetyInterval: options.safetyInterval
            )
        )
        var step = policy.first
        var askedLastWord = false
        while !Task.isCancelled {
            var outcome: StatusWatch.Outcome
            var status: SessionStatusResponse?
            if askedLastWord {
                status = await lastWord(session.sessionID)
                outcome = status == nil ? .readFailed : .read
            } else {
                switch step {
                case .awaitChange(let timeout):
                    // The machine's local expiry check needs a word by expiry and its grace, stream or not.
                    let untilTick = session.expiresAt + options.flow.expiryGrace - (await radio.now())
                    let failure: String?
                    (outcome, status, failure) = await nextStatus(
                        session.sessionID,
                        after: known,
                        sharesPaid: session.shares > 1 ? knownSharesPaid : nil,
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
            }
            if var current = status {
                known = current.status
                knownSharesPaid = current.sharesPaid
                // An event may carry fewer of a split's payments than its shares paid: the session's own read has
                // every one of them, for the payee.
                if session.shares > 1, current.sharesPaid > current.payments.reduce(0, { $0 + $1.shareNumbers.count }),
                    let read = try? await ledger.session(sid: session.sessionID)
                {
                    current = read
                }
                if let reason = await receipts.check(current, trust: receiptTrust, ledger: ledger) {
                    // Not counted until it verifies: read again after the backoff. A paid session whose receipt
                    // keeps failing is reported so, not taken as paid.
                    if current.status == .paid, receipts.failures >= ReceiptCheck.attempts {
                        return .status(
                            sessionID: session.sessionID,
                            .paidUnverified(reason: reason),
                            payments: Self.payments(of: current)
                        )
                    }
                    progress(.receiptUnverified(reason))
                    outcome = outcome == .read ? .readFailed : .streamFailed
                    status = nil
                } else {
                    switch current.status {
                    case .paid:
                        return .status(sessionID: session.sessionID, .paid, payments: Self.payments(of: current))
                    case .expired:
                        let settled = await refundsSettled(current)
                        return .status(sessionID: session.sessionID, .expired, payments: Self.payments(of: settled))
                    case .cancelled:
                        let settled = await refundsSettled(current)
                        return .status(sessionID: session.sessionID, .cancelled, payments: Self.payments(of: settled))
                    case .locked, .created, .advertising, .partiallyPaid:
                        if (current.status == .locked) != locked {
                            locked.toggle()
                            progress(locked ? .locked : .unlocked)
                        }
                        let action = await flow.receive(
                            .status(
                                sessionID: session.sessionID,
                                current.status == .partiallyPaid ? .partiallyPaid : .pending,
                                payments: Self.payments(of: current)
                            )
                        )
                        if case .showSharesPaid(let updated) = action {
                            progress(.sharesPaid(paid: updated.payments.sharesPaid, of: updated.shares))
                        }
                    }
                }
            }
            if Task.isCancelled { break }
            if firstRead, status != nil {
                firstRead = false
                await FaultInjection.holdIfRequested(at: .holdWatching) { await Self.untilCancelled() }
            }
            // The ledger judges expiry; past the grace period the machine ends the session even without its word.
            if await radio.now() >= session.expiresAt + options.flow.expiryGrace {
                // A split with shares paid has refunds to report: the ledger's last word is waited for, once.
                guard !askedLastWord, session.shares > 1, (knownSharesPaid ?? 0) > 0 else { return .tick }
                askedLastWord = true
                continue
            }
            step = policy.next(after: outcome)
        }
        return .cancel
    }

    /// The session's next status other than `known` (or, of a split, with other than `sharesPaid` shares paid)
    /// from its event stream, or how waiting for it went (with why the stream failed): at most `timeout` on the
    /// radio's clock.
    private func nextStatus(
        _ sid: String,
        after known: SessionStatus?,
        sharesPaid: Int?,
        timeout: Duration
    ) async -> (StatusWatch.Outcome, SessionStatusResponse?, String?) {
        let (ledger, radio) = (self.ledger, self.radio)
        return await withTaskGroup(of: (StatusWatch.Outcome, SessionStatusResponse?, String?).self) { group in
            group.addTask {
                do throws(LedgerClientError) {
                    return (
                        .changed, try await ledger.nextSessionStatus(sid: sid, after: known, sharesPaid: sharesPaid),
                        nil
                    )
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

/// The receipts of a session's payments checked so far, so each is checked once: a split's, one per payment, as its
/// shares land; a session's that is not split, once it is paid.
private struct ReceiptCheck {
    /// How many reads of a paid session in a row may find a receipt that does not verify before it is reported so:
    /// a pinned key the ledger could not be asked for a moment is not a forgery.
    static let attempts = 3

    private var verified: Set<String> = []
    /// Checks in a row that failed.
    private(set) var failures = 0

    /// Why a payment of `status` does not verify against `trust` (`nil` when every one does, or receipts are not
    /// checked).
    mutating func check(_ status: SessionStatusResponse, trust: ReceiptTrust?, ledger: LedgerClient) async -> String? {
        guard let trust else { return nil }
        do throws(ReceiptError) {
            if status.payments.isEmpty {
                // Not split: one receipt, once paid.
                guard status.status == .paid, !verified.contains(status.sid) else { return nil }
                try await trust.verify(
                    status.receipt,
                    sessionID: status.sid,
                    amountCents: status.amountCents,
                    tipCents: status.tipCents,
                    ledger: ledger
                )
                verified.insert(status.sid)
            } else {
                for payment in status.payments where !verified.contains(payment.paymentID) {
                    do {
                        try await trust.verify(
                            payment.receipt,
                            sessionID: status.sid,
                            amountCents: payment.amountCents,
                            tipCents: payment.tipCents,
                            shareNumbers: payment.shareNumbers,
                            ledger: ledger
                        )
                    } catch {
                        throw ReceiptError("payment \(DisplayText.quoted(payment.paymentID)): \(error.description)")
                    }
                    verified.insert(payment.paymentID)
                }
            }
            failures = 0
            return nil
        } catch {
            failures += 1
            return "the ledger reports a payment, but its receipt does not verify: \(error.description)"
        }
    }
}
