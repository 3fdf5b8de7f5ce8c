import Foundation
import GotchuAPI
public import GotchuCore
public import GotchuLedgerClient

/// What the payer's flow needs from the person holding the device. A question (``choose(from:)``, ``confirm(_:)``)
/// still open when the flow is cancelled has its task cancelled and is waited for, so it must then return promptly.
public protocol PayerInteraction: Sendable {
    /// Picks one of the ranked candidates when no terminal is clearly nearest; `nil` gives up.
    func choose(from candidates: [ProximityCandidate]) async -> EID?
    /// Picks one of the ranked candidates (nearest first), each with what the ledger said of its session: payee,
    /// amount and confirmation code, or `nil` when it could not be resolved (expired, unknown, unreachable).
    /// Whatever is picked is resolved again and confirmed as usual. By default, ``choose(from:)``.
    func choose(from candidates: [ProximityCandidate], offers: [EID: PaymentOffer]) async -> EID?
    /// Asks "Pay $X.XX to NAME?" with the figures fetched from the ledger.
    func confirm(_ offer: PaymentOffer) async -> Bool
    /// Shows a step.
    func progress(_ progress: Payer.Progress)
    /// Says that the user cancelled while the payment may be in flight, so its outcome is being settled with the
    /// ledger before it is reported.
    func settling(_ offer: PaymentOffer)
}

extension PayerInteraction {
    /// Says nothing.
    public func settling(_ offer: PaymentOffer) {}

    /// Shows the candidates without their sessions.
    public func choose(from candidates: [ProximityCandidate], offers: [EID: PaymentOffer]) async -> EID? {
        await choose(from: candidates)
    }
}

/// Drives the payer's flow over a radio, the ledger and the journal: scan, select the nearest terminal, resolve,
/// confirm, lock, pay. The intent and its idempotency key are journaled before the lock, so a crash anywhere ends
/// in exactly one payment or none once ``PaymentResumer`` has run.
///
/// Cancelling the task that runs the flow (Ctrl-C) is one more event for ``PayerStateMachine``: before the payment
/// is sent, the flow stops, marks the journaled payment as never sent and releases a lock it holds; once the payment
/// may have left, its outcome is settled with the same key and reported as the ledger gives it.
public struct Payer: Sendable {
    /// A step worth showing.
    public enum Progress: Sendable, Hashable {
        /// Scanning started.
        case scanning
        /// An EID was heard for the first time.
        case sighted(Sighting)
        /// The selector settled on a terminal.
        case selected(EID)
        /// The ledger described the session.
        case resolved(PaymentOffer)
        /// The session is locked for this payer (of a split, the offer's ``PaymentOffer/shareNumbers`` and
        /// ``PaymentOffer/payCents`` are the lock's).
        case locked(PaymentOffer)
        /// The ledger could not be reached while paying; retrying with the same key.
        case retrying(String)
    }

    /// How the payer scans and pays.
    public struct Options: Sendable {
        /// What to scan for.
        public var filter: ScanFilter
        /// The flow's rules: selector tunables, choice, pre-approval, amount limit, timeouts, send retries.
        public var flow: PayerStateMachine.Configuration
        /// How often the selector is re-evaluated when no sighting arrives.
        public var tick: Duration

        /// Creates options.
        public init(
            filter: ScanFilter = ScanFilter(),
            flow: PayerStateMachine.Configuration = .init(),
            tick: Duration = .milliseconds(100)
        ) {
            self.filter = filter
            self.flow = flow
            self.tick = tick
        }
    }

    private let radio: any Radio
    private let ledger: LedgerClient
    private let journal: PaymentJournal
    private let receiptTrust: ReceiptTrust?

    /// Creates a payer scanning on `radio` and paying through `ledger` (logged in), journaling to `journal`.
    /// - Parameter receiptTrust: the keys a payment's receipt must verify against before it counts as paid; `nil`
    ///   believes the ledger's answer as it is.
    public init(radio: any Radio, ledger: LedgerClient, journal: PaymentJournal, receiptTrust: ReceiptTrust? = nil) {
        self.radio = radio
        self.ledger = ledger
        self.journal = journal
        self.receiptTrust = receiptTrust
    }

    /// What reaches the flow's loop: an event for the machine, or an I/O step's error that ends the flow.
    private enum Input: Sendable {
        case event(PayerStateMachine.Event)
        case failed(any Error)
        case scanEnded
    }

    /// Runs the flow to its end. Cancelling the calling task cancels the payment as far as it still can be; the
    /// outcome says how it ended.
    public func run(_ options: Options, interaction: some PayerInteraction) async throws -> PayerStateMachine.Outcome {
        let (inputs, input) = AsyncStream.makeStream(of: Input.self)
        let interrupted = Latch()
        // The flow runs in a task of its own that the caller's cancellation does not reach: the cancellation becomes
        // an event the machine judges, so a lock or a payment in flight is never abandoned halfway.
        let flow = Task {
            try await drive(options, interaction, inputs: inputs, input: input, interrupted: interrupted)
        }
        return try await withTaskCancellationHandler {
            try await flow.value
        } onCancel: {
            input.yield(.event(.cancel))
            interrupted.fire()
        }
    }

    private func drive(
        _ options: Options,
        _ interaction: some PayerInteraction,
        inputs: AsyncStream<Input>,
        input: AsyncStream<Input>.Continuation,
        interrupted: Latch
    ) async throws -> PayerStateMachine.Outcome {
        var machine = PayerStateMachine(configuration: options.flow)
        var scanning: [Task<Void, Never>] = []
        var prompts: [Task<Void, Never>] = []
        var entry: PaymentJournal.Entry?
        var heard = Set<EID>()
        var lastSendFailure = ""
        defer {
            for task in scanning + prompts { task.cancel() }
        }
        /// Stops the prompts still open and waits for them, so nothing they print follows the outcome.
        func closePrompts() async {
            for prompt in prompts { prompt.cancel() }
            for prompt in prompts { await prompt.value }
            prompts = []
        }
        func stopScan() {
            for task in scanning { task.cancel() }
            scanning = []
        }

        var action = machine.receive(.start, now: await radio.now())
        var iterator = inputs.makeAsyncIterator()
        while true {
            switch action {
            case .none:
                break
            case .startScan:
                interaction.progress(.scanning)
                scanning = startScan(options, input)
            case .stopScanAndResolve(let eid), .resolve(let eid):
                stopScan()
                interaction.progress(.selected(eid))
                perform(input) { await resolve(eid) }
            case .stopScanAndPresentCandidates(let candidates):
                stopScan()
                prompts.append(
                    Task {
                        // Never a guess: the list names what each terminal asks, so the payer can match it.
                        let offers = await describe(candidates)
                        let choice = await interaction.choose(from: candidates, offers: offers)
                        input.yield(.event(choice.map { .chose($0) } ?? .cancel))
                    }
                )
            case .askConfirmation(let offer):
                interaction.progress(.resolved(offer))
                prompts.append(
                    Task { input.yield(.event(await interaction.confirm(offer) ? .confirmed : .declined)) }
                )
            case .lock(let sid):
                guard case .locking(let offer) = machine.state else { return .failed(.cancelled) }
                if options.flow.preApproved { interaction.progress(.resolved(offer)) }
                // Journal first: from here on, a crash must be resumable with this key.
                let begun = try journal.begin(
                    server: ledger.baseURL.absoluteString,
                    sid: sid,
                    amountCents: offer.payCents,
                    payeeName: offer.payeeName,
                    tipCents: offer.tipCents,
                    shares: offer.sharesToPay
                )
                entry = begun
                perform(input) { try await lock(sid: sid, offer: offer, key: begun.key, interaction, interrupted) }
            case .unlock(let sid):
                // Nothing was sent under this key, and nothing will be: the next run must not resume it.
                if let entry { try journal.markFailed(key: entry.key, reason: "cancelled before it was sent") }
                perform(input) {
                    do {
                        try await ledger.unlock(sid: sid)
                        return .unlocked
                    } catch {
                        return .unlockFailed(reason: "\(error)")
                    }
                }
            case .send(let sid):
                guard var settled = entry, case .sending(let offer) = machine.state else { return .failed(.cancelled) }
                // What the lock settled (a split's shares, the tip on them) is journaled before it is sent.
                if settled.amountCents != offer.payCents || settled.tipCents != offer.tipCents {
                    settled =
                        try journal.settleAmount(
                            key: settled.key,
                            amountCents: offer.payCents,
                            tipCents: offer.tipCents
                        )
                        ?? settled
                    entry = settled
                }
                let shareNumbers = offer.isSplit && !offer.shareNumbers.isEmpty ? offer.shareNumbers : nil
                perform(input) { [settled] in
                    await FaultInjection.holdIfRequested(at: .holdBeforeSend) { await interrupted.wait() }
                    return try await send(sid: sid, entry: settled, shareNumbers: shareNumbers)
                }
            case .retrySend(let sid, let delay):
                guard let entry, case .sending(let offer) = machine.state else { return .failed(.cancelled) }
                interaction.progress(.retrying(lastSendFailure))
                let radio = self.radio
                let shareNumbers = offer.isSplit && !offer.shareNumbers.isEmpty ? offer.shareNumbers : nil
                perform(input) {
                    try? await radio.sleep(for: delay)
                    return try await send(sid: sid, entry: entry, shareNumbers: shareNumbers)
                }
            case .settle(let offer):
                interaction.settling(offer)
            case .stopScanAndReport(let outcome), .report(let outcome):
                stopScan()
                await closePrompts()
                return outcome
            }
            // Wait for the next input that matters; stale ones (a late sighting, a tick) are handed to the machine,
            // which ignores what does not apply.
            guard let next = await iterator.next() else { return .failed(.cancelled) }
            switch next {
            case .event(let event):
                if case .sighting(let sighting) = event, case .scanning = machine.state,
                    heard.insert(sighting.eid).inserted
                {
                    interaction.progress(.sighted(sighting))
                }
                if case .sendUnanswered(let reason) = event { lastSendFailure = reason }
                action = machine.receive(event, now: await radio.now())
            case .failed(let error):
                throw error
            case .scanEnded:
                guard case .scanning = machine.state else {
                    action = .none
                    continue
                }
                throw PayerError.scanEnded
            }
        }
    }

    /// Runs one I/O step in a task of its own and feeds its event (or its error) back to the loop.
    private func perform(
        _ input: AsyncStream<Input>.Continuation,
        _ step: @escaping @Sendable () async throws -> PayerStateMachine.Event
    ) {
        Task {
            do {
                input.yield(.event(try await step()))
            } catch {
                input.yield(.failed(error))
            }
        }
    }

    /// Starts the scan and its ticker; both feed the loop until cancelled.
    private func startScan(_ options: Options, _ input: AsyncStream<Input>.Continuation) -> [Task<Void, Never>] {
        let radio = self.radio
        let tick = options.tick
        let filter = options.filter
        let sightings = Task {
            do {
                for try await sighting in try await radio.scan(filter) {
                    input.yield(.event(.sighting(sighting)))
                }
                if !Task.isCancelled { input.yield(.scanEnded) }
            } catch {
                if !Task.isCancelled { input.yield(.failed(error)) }
            }
        }
        let ticker = Task {
            while !Task.isCancelled {
                do { try await radio.sleep(for: tick) } catch { return }
                input.yield(.event(.tick))
            }
        }
        return [sightings, ticker]
    }

    /// The most candidates resolved for the list; further ones are listed by EID alone.
    static let maximumDescribedCandidates = 8

    /// What the ledger says of each candidate's session, resolved concurrently; candidates it does not describe are
    /// left out.
    private func describe(_ candidates: [ProximityCandidate]) async -> [EID: PaymentOffer] {
        let ledger = self.ledger
        return await withTaskGroup(of: PaymentOffer?.self) { group in
            for candidate in candidates.prefix(Self.maximumDescribedCandidates) {
                group.addTask {
                    guard let resolved = try? await ledger.resolve(eid: candidate.eid) else { return nil }
                    return PaymentOffer(
                        eid: candidate.eid,
                        sessionID: resolved.sid,
                        amountCents: resolved.amountCents,
                        payeeName: resolved.payeeDisplay.name,
                        payeeDomain: resolved.payeeDisplay.domain,
                        payeeVerified: resolved.payeeDisplay.verified,
                        shares: resolved.shares,
                        sharesPaid: resolved.sharesPaid,
                        payCents: resolved.shares > 1 ? resolved.shareCents : nil,
                        reference: resolved.reference
                    )
                }
            }
            var offers: [EID: PaymentOffer] = [:]
            for await offer in group {
                if let offer { offers[offer.eid] = offer }
            }
            return offers
        }
    }

    private func resolve(_ eid: EID) async -> PayerStateMachine.Event {
        do {
            let resolved = try await ledger.resolve(eid: eid)
            return .resolved(
                sessionID: resolved.sid,
                amountCents: resolved.amountCents,
                payeeName: resolved.payeeDisplay.name,
                payeeDomain: resolved.payeeDisplay.domain,
                payeeVerified: resolved.payeeDisplay.verified,
                shares: resolved.shares > 1
                    ? SessionShares(
                        count: resolved.shares,
                        paid: resolved.sharesPaid,
                        nextShareCents: resolved.shareCents,
                        remainingCents: resolved.remainingCents
                    ) : nil,
                // A suggestion the ledger would not accept from a terminal is not shown.
                tipPrompt: (try? TipPrompt(percents: resolved.tipPercents ?? [])) ?? .none,
                reference: resolved.reference
            )
        } catch {
            switch error.problemKind {
            case .sessionNotFound?: return .resolveFailed(.notFound)
            case .sessionExpired?, .sessionCancelled?, .sessionAlreadyPaid?: return .resolveFailed(.expired)
            default: return .resolveFailed(.other("\(error)"))
            }
        }
    }

    private func lock(
        sid: String,
        offer: PaymentOffer,
        key: String,
        _ interaction: some PayerInteraction,
        _ interrupted: Latch
    ) async throws -> PayerStateMachine.Event {
        let lock: LockResponse
        do {
            // One share is the ledger's default: a ledger that predates splits is sent what it knows.
            lock = try await ledger.lock(sid: sid, shares: offer.sharesToPay > 1 ? offer.sharesToPay : nil)
        } catch {
            try journal.markFailed(key: key, reason: "\(error)")
            return .lockFailed(reason: "\(error)")
        }
        var locked = offer
        if lock.amountCents > 0 {
            locked.payCents = lock.amountCents
            locked.shareNumbers = lock.shareNumbers
        }
        interaction.progress(.locked(locked))
        FaultInjection.crashIfRequested(at: .afterLock)
        await FaultInjection.holdIfRequested(at: .holdAfterLock) { await interrupted.wait() }
        // A ledger that predates splits says no amount: the one resolved holds.
        return lock.amountCents > 0
            ? .lockedShares(amountCents: lock.amountCents, shareNumbers: lock.shareNumbers) : .locked
    }

    /// Sends once with the journaled key (and tip) and records a definite answer; the server runs the key at most
    /// once. A success counts only with a receipt that verifies (its amount, tip and, of a split, `shareNumbers`),
    /// when receipts are checked.
    private func send(
        sid: String,
        entry: PaymentJournal.Entry,
        shareNumbers: [Int]?
    ) async throws -> PayerStateMachine.Event {
        let key = entry.key
        do {
            let result = try await ledger.send(
                sid: sid,
                idempotencyKey: key,
                tipCents: entry.tipCents > 0 ? entry.tipCents : nil
            )
            FaultInjection.crashIfRequested(at: .afterSend)
            if let receiptTrust {
                do {
                    try await receiptTrust.verify(
                        result.receipt,
                        sessionID: sid,
                        amountCents: entry.amountCents,
                        tipCents: entry.tipCents,
                        shareNumbers: shareNumbers,
                        ledger: ledger
                    )
                } catch {
                    let reason = "the ledger answered paid, but its receipt does not verify: \(error)"
                    try journal.markFailed(key: key, reason: reason)
                    return .sendFailed(reason: reason)
                }
            }
            try journal.markPaid(key: key, newBalanceCents: result.newBalanceCents)
            return .sent(newBalanceCents: result.newBalanceCents, paymentID: result.paymentID)
        } catch let error where PaymentResumer.isFinal(error) {
            try journal.markFailed(key: key, reason: "\(error)")
            return .sendFailed(reason: "\(error)")
        } catch {
            // The entry stays pending: `PaymentResumer` settles it with the same key if no retry does.
            return .sendUnanswered(reason: "\(error)")
        }
    }
}

/// Why the payer's flow stopped abnormally.
public enum PayerError: Error, Hashable, Sendable {
    /// The radio stopped delivering sightings.
    case scanEnded
}
