import ArgumentParser
import Foundation
import GotchuCore
import GotchuPeer
import GotchuQR

/// One line per step on the terminal, as a person at a counter reads it.
///
/// Names from the ledger are shown quoted through ``DisplayText``; every line is escaped as well, so a reason or a
/// problem's detail quoted from a server cannot move the cursor, erase or reorder what the terminal shows.
struct Console: Sendable {
    /// Writes straight to the file descriptor, so a line is seen at once even when standard output is a pipe (and
    /// the command ends quietly once that pipe's reader has gone: ``StandardOutput``).
    func line(_ text: String) {
        StandardOutput.write(Self.safe(text) + "\n")
    }

    /// Writes `warning: text` to standard error, beside the progress lines.
    func warning(_ text: String) {
        FileHandle.standardError.write(Data((Self.safe("warning: " + text) + "\n").utf8))
    }

    /// Writes `url`'s QR code (`QRCode.terminalText(colors:)`), drawn by this program and so written as it is: with
    /// colours only on a terminal, and not when `NO_COLOR` is set.
    func qrCode(_ url: String) {
        guard let code = try? QRCode(encoding: url, correction: .medium) else {
            return warning("\(url) does not fit a QR code")
        }
        let environment = ProcessInfo.processInfo.environment
        let colors = isatty(STDOUT_FILENO) == 1 && (environment["NO_COLOR"] ?? "").isEmpty
        StandardOutput.write(code.terminalText(colors: colors))
    }

    /// `text` with every character that could rewrite the terminal escaped; line feeds are kept.
    static func safe(_ text: String) -> String {
        DisplayText.escaped(text, maximumLength: .max, keepingNewlines: true)
    }

    func receiver(_ progress: Receiver.Progress) {
        switch progress {
        case .created(let sid, let eid, let amount, let shareCents):
            line(
                "session \(sid): \(Money.format(amount))\(Self.shares(shareCents)), EID \(eid.grouped), code "
                    + ConfirmationCode.of(sessionID: sid)
            )
        case .advertising(let eid): line("advertising \(eid)…")
        case .rotated(let eid): line("new EID \(eid.grouped) on the air")
        case .rotationFailed(let reason): line("could not rotate the EID (\(reason)); still advertising the last one")
        case .checkout(let url): line("pay on a phone: \(url)")
        case .locked: line("a payer locked the session")
        case .unlocked: line("the lock lapsed; still advertising")
        case .sharesPaid(let paid, let shares): line("\(paid) of \(shares) paid")
        case .receiptUnverified(let reason): line("\(reason); checking again")
        case .ledgerUnreachable(let reason): line("ledger unreachable (\(reason)); retrying")
        }
    }

    /// ` in 4 shares of $10.00` (or `of $2.50 to $2.51` when the cents do not divide evenly); nothing when the
    /// amount is not split.
    static func shares(_ shareCents: [Cents]) -> String {
        guard shareCents.count > 1, let least = shareCents.min(), let most = shareCents.max() else { return "" }
        let each = least == most ? Money.format(least) : Money.format(least) + " to " + Money.format(most)
        return " in \(shareCents.count) shares of \(each)"
    }

    /// `refunded $20.00 to 2 payers`, and what is still to come back if the ledger has not refunded all yet.
    static func refunds(_ payments: SessionPayments) -> String {
        let payers = payments.refundedPayments == 1 ? "1 payer" : "\(payments.refundedPayments) payers"
        let owed = payments.paidCents + payments.tipCents - payments.refundedCents
        return "refunded \(Money.format(payments.refundedCents)) to \(payers)"
            + (owed > 0 ? "; \(Money.format(owed)) more is still to be refunded by the ledger" : "")
    }

    /// What a payer pays, for a person: `$12.50`, `$10.00 (share 3 of 4)`, `$20.00 (shares 3, 4 of 4)`, with
    /// ` + tip $1.50` when there is one.
    static func paying(_ offer: PaymentOffer) -> String {
        var text = Money.format(offer.payCents)
        if offer.isSplit, !offer.shareNumbers.isEmpty {
            let numbers = offer.shareNumbers.sorted().map(String.init).joined(separator: ", ")
            text += " (share\(offer.shareNumbers.count == 1 ? "" : "s") \(numbers) of \(offer.shares))"
        }
        if offer.tipCents > 0 { text += " + tip \(Money.format(offer.tipCents))" }
        return text
    }

    func payer(_ progress: Payer.Progress) {
        switch progress {
        case .scanning: line("scanning…")
        case .sighted(let sighting):
            let rssi = sighting.rssi.map { "\($0) dBm" } ?? "unknown RSSI"
            line("sighted \(sighting.eid) at \(rssi)")
        case .selected(let eid): line("nearest: \(eid)")
        case .resolved(let offer):
            let split = offer.isSplit ? " in \(offer.shares) shares, \(offer.sharesPaid) paid" : ""
            line(
                "resolved \(Money.format(offer.amountCents))\(split) → \(offer.payeeDescription)\(Self.reference(offer))"
            )
            if let suggestion = Self.tipSuggestion(offer) { line(suggestion) }
        case .locked(let offer):
            guard offer.isSplit, !offer.shareNumbers.isEmpty else { return line("locked") }
            let numbers = offer.shareNumbers.sorted().map(String.init).joined(separator: ", ")
            line(
                "locked share\(offer.shareNumbers.count == 1 ? "" : "s") \(numbers) of \(offer.shares) "
                    + "(\(Money.format(offer.payCents)))"
            )
        case .retrying(let reason): line("ledger did not answer (\(reason)); retrying with the same key")
        }
    }

    /// ` for "order 1017"`: the payee's order reference, quoted and escaped; empty for none.
    static func reference(_ offer: PaymentOffer) -> String {
        offer.reference.map { " for " + DisplayText.quoted($0, maximumLength: 140) } ?? ""
    }

    /// `the payee suggests a tip: 10% ($4.00), 15% ($6.00), 20% ($8.00) (pay one with --tip 15%)`, each on what this
    /// payer pays; `nil` when the terminal suggests none.
    static func tipSuggestion(_ offer: PaymentOffer) -> String? {
        guard let example = offer.suggestedTips.tips.first else { return nil }
        let choices = offer.suggestedTips.tips.map { tip in "\(tip) (\(Money.format(tip.cents(on: offer.payCents))))" }
        return "the payee suggests a tip: " + choices.joined(separator: ", ") + " (pay one with --tip \(example))"
    }

    func resumed(_ result: PaymentResumer.Result) {
        switch result {
        case .paid(let entry, let balance, let replayed):
            let tip = entry.tipCents > 0 ? " + tip \(Money.format(entry.tipCents))" : ""
            line(
                "finished an interrupted payment: \(Money.format(entry.amountCents))\(tip) to \(DisplayText.quoted(entry.payeeName)) "
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
                "\(Money.format(offer.totalCents)) to \(offer.payeeDescription) is above your limit of \(Money.format(limit))"
        case .tipTooLarge(let offer):
            return
                "the tip \(Money.format(offer.tipCents)) is more than the \(Money.format(offer.payCents)) it goes with; "
                + "a tip is at most the amount paid; nothing was paid"
        case .declined: return "declined; nothing was paid"
        case .lockFailed(let offer, let reason):
            return "could not lock the session of \(offer.payeeDescription): " + lockHint(offer, reason) + reason
        case .sendFailed(let offer, let reason):
            return "paying \(paying(offer)) to \(offer.payeeDescription) failed: \(reason)"
        case .outcomeUnknown(let offer, let reason):
            return "the payment of \(paying(offer)) to \(offer.payeeDescription) got no answer "
                + "(\(reason)); it is still pending: run `gotchu pay` again to settle it with the same key"
        case .cancelled: return "cancelled; nothing was paid"
        case .cancelledWhileSending(_, let reason):
            return "cancelled; nothing was paid (the ledger refused it: \(reason))"
        }
    }

    /// What to make of a lock the ledger refused for want of a free share, before its own words.
    private static func lockHint(_ offer: PaymentOffer, _ reason: String) -> String {
        guard reason.contains("No share of this session is free") || reason.contains("no-free-share") else {
            return ""
        }
        if !offer.isSplit { return "the session is not split into shares, so it is paid whole: leave out --shares; " }
        if offer.sharesToPay > 1 {
            return "fewer than \(offer.sharesToPay) shares are free (the others are paid, or locked by payers paying "
                + "now); ask for fewer with --shares; "
        }
        return "no share is free (the others are paid, or locked by payers paying now); try again if a lock lapses; "
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
        let split = offer.isSplit ? " (\(offer.shares) shares, \(offer.sharesPaid) paid)" : ""
        return Money.format(offer.amountCents) + split + " to " + offer.payeeDescription + ", code "
            + offer.confirmationCode + "  [" + describe(candidate) + "]"
    }

    /// The amount (the ledger's) comes first and the payee, quoted and escaped, after it: no name can change what
    /// is asked. The code is the one the terminal shows, so the payer can check it is the one in front of them.
    func confirm(_ offer: PaymentOffer) async -> Bool {
        let answer = await ask(Self.question(offer))
        return ["y", "yes"].contains(answer?.lowercased() ?? "")
    }

    /// `Pay $12.50 to "bob" (example.com), code 47? [y/N] ` (`…, for "order 1017", code 47?` with a reference); of
    /// a split, `Pay your share $10.00 of $40.00 to …
    /// (2 of 4 paid), …` (`Pay 2 shares, $20.00 of $40.00 …` for more than one); a tip as `+ tip $1.50 ($11.50 in
    /// all)` after the amount. Every figure is the ledger's, or computed from it.
    static func question(_ offer: PaymentOffer) -> String {
        let verification = offer.payeeVerification.map { ", " + $0 } ?? ""
        var amount: String
        if offer.isSplit {
            amount =
                (offer.sharesToPay == 1 ? "your share " : "\(offer.sharesToPay) shares, ")
                + "\(Money.format(offer.payCents)) of \(Money.format(offer.amountCents))"
        } else {
            amount = Money.format(offer.payCents)
        }
        if offer.tipCents > 0 {
            amount += " + tip \(Money.format(offer.tipCents)) (\(Money.format(offer.totalCents)) in all)"
        }
        let progress = offer.isSplit ? " (\(offer.sharesPaid) of \(offer.shares) paid)" : ""
        return
            "Pay \(amount) to \(offer.payeeDescription)\(progress)\(verification)\(Console.reference(offer)), "
            + "code \(offer.confirmationCode)? [y/N] "
    }

    func progress(_ progress: Payer.Progress) { console.payer(progress) }

    func settling(_ offer: PaymentOffer) {
        console.line("interrupted while paying; settling the payment's outcome with the ledger…")
    }

    /// Reads a line without blocking the cooperative pool; `nil` at end of input or when the task is cancelled
    /// (Ctrl-C), which does not wait for the line.
    private func ask(_ prompt: String) async -> String? {
        StandardOutput.write(Console.safe(prompt))
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
