import Foundation
import GotchuAPI
public import GotchuCore
public import GotchuLedgerClient

/// What the payer's flow needs from the person holding the device.
public protocol PayerInteraction: Sendable {
    /// Picks one of the ranked candidates when no terminal is clearly nearest; `nil` gives up.
    func choose(from candidates: [ProximityCandidate]) async -> EID?
    /// Asks "Pay $X.XX to NAME?" with the figures fetched from the ledger.
    func confirm(_ offer: PaymentOffer) async -> Bool
    /// Shows a step.
    func progress(_ progress: Payer.Progress)
}

/// Drives the payer's flow over a radio, the ledger and the journal: scan, select the nearest terminal, resolve,
/// confirm, lock, pay. The intent and its idempotency key are journaled before the lock, so a crash anywhere ends
/// in exactly one payment or none once ``PaymentResumer`` has run.
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
        /// The session is locked for this payer.
        case locked(PaymentOffer)
        /// The ledger could not be reached while paying; retrying with the same key.
        case retrying(String)
    }

    /// How the payer scans and pays.
    public struct Options: Sendable {
        /// What to scan for.
        public var filter: ScanFilter
        /// The flow's rules: selector tunables, choice, pre-approval, amount limit, timeouts.
        public var flow: PayerStateMachine.Configuration
        /// How often the selector is re-evaluated when no sighting arrives.
        public var tick: Duration
        /// How many times a send whose outcome is unknown is retried (same key) before leaving it to a resume.
        public var sendAttempts: Int

        /// Creates options.
        public init(
            filter: ScanFilter = ScanFilter(),
            flow: PayerStateMachine.Configuration = .init(),
            tick: Duration = .milliseconds(100),
            sendAttempts: Int = 4
        ) {
            self.filter = filter
            self.flow = flow
            self.tick = tick
            self.sendAttempts = sendAttempts
        }
    }

    private let radio: any Radio
    private let ledger: LedgerClient
    private let journal: PaymentJournal

    /// Creates a payer scanning on `radio` and paying through `ledger` (logged in), journaling to `journal`.
    public init(radio: any Radio, ledger: LedgerClient, journal: PaymentJournal) {
        self.radio = radio
        self.ledger = ledger
        self.journal = journal
    }

    /// Runs the flow to its end.
    public func run(_ options: Options, interaction: some PayerInteraction) async throws -> PayerStateMachine.Outcome {
        var machine = PayerStateMachine(configuration: options.flow)
        var action = machine.receive(.start, now: await radio.now())
        var entry: PaymentJournal.Entry?
        while true {
            let event: PayerStateMachine.Event
            switch action {
            case .none:
                return .failed(.cancelled)
            case .startScan:
                interaction.progress(.scanning)
                (action, machine) = try await scan(options, machine, interaction)
                continue
            case .stopScanAndResolve(let eid), .resolve(let eid):
                interaction.progress(.selected(eid))
                event = await resolve(eid)
            case .stopScanAndPresentCandidates(let candidates):
                event = await interaction.choose(from: candidates).map { .chose($0) } ?? .cancel
            case .askConfirmation(let offer):
                interaction.progress(.resolved(offer))
                event = await interaction.confirm(offer) ? .confirmed : .declined
            case .lock(let sid):
                guard case .locking(let offer) = machine.state else { return .failed(.cancelled) }
                if options.flow.preApproved { interaction.progress(.resolved(offer)) }
                // Journal first: from here on, a crash must be resumable with this key.
                let begun = try journal.begin(
                    server: ledger.baseURL.absoluteString,
                    sid: sid,
                    amountCents: offer.amountCents,
                    payeeName: offer.payeeName
                )
                entry = begun
                do {
                    try await ledger.lock(sid: sid)
                    interaction.progress(.locked(offer))
                    FaultInjection.crashIfRequested(at: .afterLock)
                    event = .locked
                } catch {
                    try journal.markFailed(key: begun.key, reason: "\(error)")
                    event = .lockFailed(reason: "\(error)")
                }
            case .send(let sid):
                guard let entry else { return .failed(.cancelled) }
                event = try await send(sid: sid, key: entry.key, attempts: options.sendAttempts, interaction)
            case .stopScanAndReport(let outcome), .report(let outcome):
                return outcome
            }
            action = machine.receive(event, now: await radio.now())
        }
    }

    /// Scans until the machine decides; returns its action and state.
    private func scan(
        _ options: Options,
        _ machine: PayerStateMachine,
        _ interaction: some PayerInteraction
    ) async throws -> (PayerStateMachine.Action, PayerStateMachine) {
        var machine = machine
        let sightings = try await radio.scan(options.filter)
        let (inputs, continuation) = AsyncStream.makeStream(
            of: PayerStateMachine.Event.self,
            bufferingPolicy: .bufferingNewest(256)
        )
        let radio = self.radio
        let tick = options.tick
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await sighting in sightings { continuation.yield(.sighting(sighting)) }
                continuation.finish()
            }
            group.addTask {
                while !Task.isCancelled {
                    try await radio.sleep(for: tick)
                    continuation.yield(.tick)
                }
            }
            defer { group.cancelAll() }
            var heard = Set<EID>()
            for await input in inputs {
                if case .sighting(let sighting) = input, heard.insert(sighting.eid).inserted {
                    interaction.progress(.sighted(sighting))
                }
                let now = await radio.now()
                let action = machine.receive(input, now: now)
                if action != .none { return (action, machine) }
            }
            if Task.isCancelled { return (machine.receive(.cancel, now: await radio.now()), machine) }
            throw PayerError.scanEnded
        }
    }

    private func resolve(_ eid: EID) async -> PayerStateMachine.Event {
        do {
            let resolved = try await ledger.resolve(eid: eid)
            return .resolved(
                sessionID: resolved.sid,
                amountCents: resolved.amountCents,
                payeeName: resolved.payeeDisplay.name,
                payeeDomain: resolved.payeeDisplay.domain
            )
        } catch {
            switch error.problemKind {
            case .sessionNotFound?: return .resolveFailed(.notFound)
            case .sessionExpired?, .sessionCancelled?, .sessionAlreadyPaid?: return .resolveFailed(.expired)
            default: return .resolveFailed(.other("\(error)"))
            }
        }
    }

    /// Sends with the journaled key, retrying transport failures with the same key; the server runs it at most once.
    private func send(
        sid: String,
        key: String,
        attempts: Int,
        _ interaction: some PayerInteraction
    ) async throws -> PayerStateMachine.Event {
        var delay = Duration.milliseconds(200)
        for attempt in 1...max(1, attempts) {
            do {
                let result = try await ledger.send(sid: sid, idempotencyKey: key)
                FaultInjection.crashIfRequested(at: .afterSend)
                try journal.markPaid(key: key, newBalanceCents: result.newBalanceCents)
                return .sent(newBalanceCents: result.newBalanceCents)
            } catch let error where PaymentResumer.isFinal(error) {
                try journal.markFailed(key: key, reason: "\(error)")
                return .sendFailed(reason: "\(error)")
            } catch {
                guard attempt < attempts else {
                    return .sendFailed(reason: "outcome unknown (\(error)); it will be resumed with the same key")
                }
                interaction.progress(.retrying("\(error)"))
                try await Task.sleep(for: delay)
                delay *= 2
            }
        }
        return .sendFailed(reason: "outcome unknown")
    }
}

/// Why the payer's flow stopped abnormally.
public enum PayerError: Error, Hashable, Sendable {
    /// The radio stopped delivering sightings.
    case scanEnded
}
