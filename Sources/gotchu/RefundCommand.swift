import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuReceipts

struct RefundCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refund",
        abstract: "Return money of one of your paid sessions to its payer.",
        discussion: """
            Refunds --amount of session SID (by default whatever of the amount paid is not refunded yet). Several \
            partial refunds may follow each other; together they never exceed the amount paid. "refunded" is \
            printed only once the ledger's signed receipt of the refund verifies against its receipt keys (pinned \
            for the server at first contact, or --receipt-keys FILE). Retrying with the same --idempotency-key \
            after a lost answer refunds once.
            """
    )

    @Argument(help: ArgumentHelp("The paid session's id.", valueName: "sid"))
    var sid: String

    @Option(
        help: ArgumentHelp(
            "Amount to refund, such as 5.00 (default: the rest of the amount paid).",
            valueName: "amount"
        )
    )
    var amount: String?

    @Option(
        help: ArgumentHelp(
            "The refund's idempotency key (default: a new UUID, printed first so a retry can reuse it).",
            valueName: "key"
        )
    )
    var idempotencyKey: String?

    @Option(
        help: ArgumentHelp(
            "Check the receipt against the keys in this file (JWKS) instead of those pinned for the server.",
            valueName: "path"
        )
    )
    var receiptKeys: String?

    @OptionGroup var server: ServerOptions

    func validate() throws {
        guard UUID(uuidString: sid) != nil else {
            throw ValidationError("SID must be a session id (a UUID)")
        }
        if let amount { _ = try CLIAmount.parse(amount, option: "--amount") }
        if let idempotencyKey {
            guard (1...255).contains(idempotencyKey.utf8.count),
                idempotencyKey.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
            else { throw ValidationError("--idempotency-key must be 1 to 255 visible ASCII characters") }
        }
    }

    func run() async throws {
        let output = Console()
        let ledger = try server.client()
        let trust = try server.receiptTrust(keysFile: receiptKeys)
        let cents: Cents
        if let amount {
            cents = try CLIAmount.parse(amount, option: "--amount")
        } else {
            let status = try await ledger.session(sid: sid)
            guard status.status == .paid else {
                throw CLIError("session \(sid) is \(status.status.rawValue); only a paid session can be refunded")
            }
            cents = status.amountCents - status.refundedCents
            guard cents > 0 else {
                throw CLIError("session \(sid) is refunded in full already (\(Money.format(status.refundedCents)))")
            }
        }
        let key = idempotencyKey ?? UUID().uuidString.lowercased()
        output.line("idempotency key \(key)")
        let result = try await ledger.refund(sid: sid, amountCents: cents, idempotencyKey: key)
        let refund = result.refund
        do {
            try await trust.verify(refund.receipt, sessionID: sid, amountCents: cents, kind: .refund, ledger: ledger)
        } catch {
            throw CLIError(
                "the ledger answered refund \(DisplayText.quoted(refund.refundID)), but its receipt does not verify:"
                    + " \(error)"
            )
        }
        output.line(
            "refunded \(Money.format(refund.amountCents)) of session \(sid)"
                + (result.replayed ? " (replayed)" : "")
                + "; refund \(DisplayText.quoted(refund.refundID)), \(Money.format(refund.refundedCents)) refunded in"
                + " total; receipt \(DisplayText.quoted(refund.receipt?.id ?? "")) verified"
        )
    }
}
