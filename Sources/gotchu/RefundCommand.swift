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
            Refunds --amount of session SID (by default whatever was paid, a tip included, that is not refunded \
            yet). Several partial refunds may follow each other; together they never exceed what was paid. "refunded" is \
            printed only once the ledger's signed receipt of the refund verifies against its receipt keys (pinned \
            for the server at first contact, or --receipt-keys FILE). Retrying with the same --idempotency-key \
            after a lost answer refunds once.

            A split session (gotchu receive --split) is refunded one payer's payment at a time: --payment ID \
            names it (gotchu status SID lists the payments and their ids; the payer's gotchu pay printed its \
            own), and by default its shares and its tip are refunded, less what was refunded of it already. \
            Without --payment, a split session is refused with the list of its payments.

            Examples:
              gotchu refund 6f1c2a7e-…                     # all of a paid session
              gotchu refund 6f1c2a7e-… --amount 5.00       # part of it
              gotchu status 6f1c2a7e-…                     # a split's payments and their ids
              gotchu refund 6f1c2a7e-… --payment 0c9d…     # one payer of a split: share and tip
              gotchu refund 6f1c2a7e-… --payment 0c9d… --amount 2.00
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
            "Of a split session, the payment to refund (its id, from gotchu status SID or the payer's gotchu pay).",
            valueName: "id"
        )
    )
    var payment: String?

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
        if let payment {
            guard (1...128).contains(payment.utf8.count), payment.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw ValidationError("--payment must be a payment id as gotchu status lists it")
            }
        }
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
        if let payment {
            cents = try await paymentAmount(payment, ledger: ledger)
        } else {
            // Read even with --amount: a split session needs --payment, and says which.
            let status = try await ledger.session(sid: sid)
            if status.shares > 1 { throw CLIError(Self.paymentRequired(status)) }
            if let amount {
                cents = try CLIAmount.parse(amount, option: "--amount")
            } else {
                guard status.status == .paid else {
                    throw CLIError("session \(sid) is \(status.status.rawValue); only a paid session can be refunded")
                }
                cents = status.paidCents + status.tipCents - status.refundedCents
                guard cents > 0 else {
                    throw CLIError(
                        "session \(sid) is refunded in full already (\(Money.format(status.refundedCents)))"
                    )
                }
            }
        }
        let key = idempotencyKey ?? UUID().uuidString.lowercased()
        output.line("idempotency key \(key)")
        let result = try await ledger.refund(sid: sid, amountCents: cents, paymentID: payment, idempotencyKey: key)
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
                + (payment.map { ", payment \(DisplayText.quoted($0))" } ?? "")
                + (result.replayed ? " (replayed)" : "")
                + "; refund \(DisplayText.quoted(refund.refundID)), \(Money.format(refund.refundedCents)) refunded in"
                + " total; receipt \(DisplayText.quoted(refund.receipt?.id ?? "")) verified"
        )
    }

    /// `--amount`, or else what of the payment is not refunded yet (its shares and tip), read from the session.
    private func paymentAmount(_ payment: String, ledger: LedgerClient) async throws -> Cents {
        if let amount { return try CLIAmount.parse(amount, option: "--amount") }
        let status = try await ledger.session(sid: sid)
        guard let paid = status.payments.first(where: { $0.paymentID == payment }) else {
            guard !status.payments.isEmpty else {
                throw CLIError(
                    "session \(sid) has no payment \(DisplayText.quoted(payment))"
                        + (status.shares > 1 ? " (no share is paid)" : "; it is not split: refund it without --payment")
                )
            }
            throw CLIError(
                "session \(sid) has no payment \(DisplayText.quoted(payment)); its payments:\n"
                    + Self.paymentList(status)
            )
        }
        let cents = paid.amountCents + paid.tipCents - paid.refundedCents
        guard cents > 0 else {
            throw CLIError(
                "payment \(DisplayText.quoted(payment)) is refunded in full already (\(Money.format(paid.refundedCents)))"
            )
        }
        return cents
    }

    /// The refusal of a split session's refund without `--payment`, with the payments to choose from.
    static func paymentRequired(_ status: SessionStatusResponse) -> String {
        let head =
            "session \(status.sid) is split into \(status.shares) shares, each payer paying its own: name the payment "
            + "to refund with --payment ID"
        guard !status.payments.isEmpty else { return head + "; it has no payments yet (no share is paid)" }
        return head + ". Its payments:\n" + paymentList(status)
    }

    /// One line per payment: its id, shares, amount, tip and what was refunded of it.
    static func paymentList(_ status: SessionStatusResponse) -> String {
        status.payments.map { "  " + StatusCommand.describe($0, shares: status.shares) }.joined(separator: "\n")
    }
}
