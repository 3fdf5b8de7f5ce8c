import ArgumentParser
import Foundation
import GotchuCore
import GotchuPeer

/// One line per step on the terminal, as a person at a counter reads it.
///
/// Names from the ledger are shown quoted through ``DisplayText``; every line is escaped as well, so a reason or a
/// problem's detail quoted from a server cannot move the cursor, erase or reorder what the terminal shows.
struct Console: Sendable {
    /// Writes straight to the file descriptor, so a line is seen at once even when standard output is a pipe.
    func line(_ text: String) {
        FileHandle.standardOutput.write(Data((Self.safe(text) + "\n").utf8))
    }

    /// Writes `warning: text` to standard error, beside the progress lines.
    func warning(_ text: String) {
        FileHandle.standardError.write(Data((Self.safe("warning: " + text) + "\n").utf8))
    }

    /// `text` with every character that could rewrite the terminal escaped; line feeds are kept.
    static func safe(_ text: String) -> String {
        DisplayText.escaped(text, maximumLength: .max, keepingNewlines: true)
    }

    func receiver(_ progress: Receiver.Progress) {
        switch progress {
        case .created(let sid, let eid, let amount):
            line(
                "session \(sid): \(Money.format(amount)), EID \(eid.grouped), code "
                    + ConfirmationCode.of(sessionID: sid)
            )
        case .advertising(let eid): line("advertising \(eid)…")
        case .rotated(let eid): line("new EID \(eid.grouped) on the air")
        case .rotationFailed(let reason): line("could not rotate the EID (\(reason)); still advertising the last one")
        case .locked: line("a payer locked the session")
        case .unlocked: line("the lock lapsed; still advertising")
        case .ledgerUnreachable(let reason): line("ledger unreachable (\(reason)); retrying")
        }
    }

    func payer(_ progress: Payer.Progress) {
        switch progress {
        case .scanning: line("scanning…")
        case .sighted(let sighting):
            let rssi = sighting.rssi.map { "\($0) dBm" } ?? "unknown RSSI"
            line("sighted \(sighting.eid) at \(rssi)")
        case .selected(let eid): line("nearest: \(eid)")
        case .resolved(let offer): line("resolved \(Money.format(offer.amountCents)) → \(offer.payeeDescription)")
        case .locked: line("locked")
        case .retrying(let reason): line("ledger did not answer (\(reason)); retrying with the same key")
        }
    }

    func resumed(_ result: PaymentResumer.Result) {
        switch result {
        case .paid(let entry, let balance, let replayed):
            line(
                "finished an interrupted payment: \(Money.format(entry.amountCents)) to \(DisplayText.quoted(entry.payeeName)) "
                    + (replayed ? "(it had gone through)" : "(sent now)") + "; new balance \(Money.format(balance))"
            )
        case .failed(let entry, let reason):
            line(
                "an interrupted payment of \(Money.format(entry.amountCents)) to \(DisplayText.quoted(entry.payeeName)) "
                    + "did not go through: \(reason)"
            )
        case .stillPending(let entry, let reason):
            line(
                "an interrupted payment of \(Money.format(entry.amountCents)) to \(DisplayText.quoted(entry.payeeName)) "
                    + "is still pending (\(reason)); run `gotchu pay` again when the ledger is reachable"
            )
        }
    }

    static func describe(_ failure: PayerStateMachine.Failure) -> String {
        switch failure {
        case .noTerminalNearby: return "no terminal nearby; move closer and try again"
        case .resolveFailed(let eid, let reason): return "could not resolve \(eid): \(reason)"
        case .amountAboveLimit(let offer, let limit):
            return
                "\(Money.format(offer.amountCents)) to \(offer.payeeDescription) is above your limit of \(Money.format(limit))"
        case .declined: return "declined; nothing was paid"
        case .lockFailed(let offer, let reason):
            return "could not lock the session of \(offer.payeeDescription): \(reason)"
        case .sendFailed(let offer, let reason):
            return "paying \(Money.format(offer.amountCents)) to \(offer.payeeDescription) failed: \(reason)"
        case .outcomeUnknown(let offer, let reason):
            return "the payment of \(Money.format(offer.amountCents)) to \(offer.payeeDescription) got no answer "
                + "(\(reason)); it is still pending: run `gotchu pay` again to settle it with the same key"
        case .cancelled: return "cancelled; nothing was paid"
        case .cancelledWhileSending(_, let reason):
            return "cancelled; nothing was paid (the ledger refused it: \(reason))"
        }
    }
}

/// Asks the person at the terminal.
struct TerminalInteraction: PayerInteraction {
    let console: Console

    func choose(from candidates: [ProximityCandidate]) async -> EID? {
        await choose(from: candidates, offers: [:])
    }

    func choose(from candidates: [ProximityCandidate], offers: [EID: PaymentOffer]) async -> EID? {
        console.line("no terminal is clearly nearest; which one? (nearest first; check the code on its screen)")
        for (index, candidate) in candidates.enumerated() {
            console.line("  \(index + 1)) " + Self.describe(candidate, offer: offers[candidate.eid]))
        }
        guard let answer = await ask("number (Enter to cancel): "), let number = Int(answer),
            candidates.indices.contains(number - 1)
        else { return nil }
        return candidates[number - 1].eid
    }

    /// One line of the list: the EID grouped as terminals show it, and how strong it was heard, or that the radio
    /// could not say.
    static func describe(_ candidate: ProximityCandidate) -> String {
        guard let rssi = candidate.rssi else {
            return candidate.eid.grouped + "  (RSSI unknown: distance not measured)"
        }
        let attenuation = candidate.attenuation.map { String(format: ", attenuation %.0f dB", $0) } ?? ""
        return candidate.eid.grouped + "  " + String(format: "%.0f dBm", rssi) + attenuation
    }

    /// One line of the list with what the ledger says of the session: the amount first, then the payee quoted and
    /// escaped, then the code the terminal shows; or that the ledger does not know the session.
    static func describe(_ candidate: ProximityCandidate, offer: PaymentOffer?) -> String {
        guard let offer else { return describe(candidate) + "  (session unknown or ended)" }
        return Money.format(offer.amountCents) + " to " + offer.payeeDescription + ", code "
            + offer.confirmationCode + "  [" + describe(candidate) + "]"
    }

    /// The amount (the ledger's) comes first and the payee, quoted and escaped, after it: no name can change what
    /// is asked. The code is the one the terminal shows, so the payer can check it is the one in front of them.
    func confirm(_ offer: PaymentOffer) async -> Bool {
        let verification = offer.payeeVerification.map { ", " + $0 } ?? ""
        let answer = await ask(
            "Pay \(Money.format(offer.amountCents)) to \(offer.payeeDescription)\(verification), code \(offer.confirmationCode)? [y/N] "
        )
        return ["y", "yes"].contains(answer?.lowercased() ?? "")
    }

    func progress(_ progress: Payer.Progress) { console.payer(progress) }

    func settling(_ offer: PaymentOffer) {
        console.line("interrupted while paying; settling the payment's outcome with the ledger…")
    }

    /// Reads a line without blocking the cooperative pool; `nil` at end of input or when the task is cancelled
    /// (Ctrl-C), which does not wait for the line.
    private func ask(_ prompt: String) async -> String? {
        FileHandle.standardOutput.write(Data(Console.safe(prompt).utf8))
        let answer = PromptAnswer()
        let line = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                answer.wait(with: continuation)
                // A thread of its own: the read blocks until a line comes, and is abandoned if none is needed.
                Thread.detachNewThread { answer.give(readLine()?.trimmingCharacters(in: .whitespaces)) }
            }
        } onCancel: {
            answer.give(nil)
        }
        // The prompt has no newline of its own: end its line before anything else is said.
        if Task.isCancelled { console.line("") }
        return line
    }
}

/// The answer to a prompt: the first of the line read and the cancellation wins.
private final class PromptAnswer: @unchecked Sendable {
    // Unchecked: the state is guarded by `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<String?, Never>?
    private var answer: String??

    func wait(with continuation: CheckedContinuation<String?, Never>) {
        let given: String?? = lock.withLock {
            if answer == nil { self.continuation = continuation }
            return answer
        }
        if let given { continuation.resume(returning: given) }
    }

    func give(_ line: String?) {
        let waiting: CheckedContinuation<String?, Never>? = lock.withLock {
            guard answer == nil else { return nil }
            answer = .some(line)
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(returning: line)
    }
}

/// Runs `body`, cancelling it on SIGINT or SIGTERM so flows can stop cleanly (cancel the session, stop advertising).
func withTaskCancellationOnSignals<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let task = Task { try await body() }
    let sources = [SIGINT, SIGTERM].map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number)
        source.setEventHandler { task.cancel() }
        source.resume()
        return source
    }
    defer {
        for source in sources { source.cancel() }
    }
    return try await task.value
}

/// Waits until Ctrl-C or SIGTERM.
func waitForInterrupt() async {
    _ = try? await withTaskCancellationOnSignals {
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}

/// Amounts typed on the command line.
enum CLIAmount {
    static func parse(_ text: String, option: String) throws -> Cents {
        do {
            return try Money.parse(text)
        } catch {
            throw ValidationError("\(option): \(error)")
        }
    }
}
