import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuReceipts

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a session's status, its shares and its payments, with their receipts checked.",
        discussion: """
            Shows session SID as the ledger tells it to you: its status, amount and expiry; of a split \
            session (gotchu receive --split), how many shares are paid, the tips and the refunds, and one \
            line per payment with the id that `gotchu refund SID --payment ID` names. Its payee sees every \
            payment, a payer its own. Each payment's signed receipt is checked against the ledger's \
            receipt keys (pinned for the server at first contact, or --receipt-keys FILE).

            Exit status: 0, or 1 when a receipt does not verify.

            Examples:
              gotchu status 6f1c2a7e-0000-4000-8000-000000000001
              gotchu status 6f1c2a7e-… --receipt-keys gotchu-receipt-keys.json
            """
    )

    @Argument(help: ArgumentHelp("The session's id, as gotchu receive printed it.", valueName: "sid"))
    var sid: String

    @Option(
        help: ArgumentHelp(
            "Check receipts against the keys in this file (JWKS) instead of those pinned for the server.",
            valueName: "path"
        )
    )
    var receiptKeys: String?

    @OptionGroup var server: ServerOptions

    func validate() throws {
        guard UUID(uuidString: sid) != nil else { throw ValidationError("SID must be a session id (a UUID)") }
    }

    func run() async throws {
        let output = Console()
        let ledger = try server.client()
        let trust = try server.receiptTrust(keysFile: receiptKeys)
        let status = try await ledger.session(sid: sid)
        output.line(Self.summary(status))
        var unverified = false
        if status.payments.isEmpty {
            if status.status == .paid {
                let check = await Self.check(
                    status.receipt,
                    status.amountCents,
                    status.tipCents,
                    nil,
                    status,
                    trust,
                    ledger
                )
                unverified = check != nil
                output.line("receipt " + (check.map { "does not verify: \($0)" } ?? "verified"))
            }
        } else {
            output.line("payments:")
            for payment in status.payments {
                let check = await Self.check(
                    payment.receipt,
                    payment.amountCents,
                    payment.tipCents,
                    payment.shareNumbers,
                    status,
                    trust,
                    ledger
                )
                unverified = unverified || check != nil
                output.line(
                    "  " + Self.describe(payment, shares: status.shares) + "; receipt "
                        + (check.map { "does not verify: \($0)" } ?? "verified")
                )
            }
        }
        if unverified { throw ExitCode.failure }
    }

    /// Why a receipt does not verify, or `nil` when it does.
    private static func check(
        _ receipt: Receipt?,
        _ amountCents: Cents,
        _ tipCents: Cents,
        _ shareNumbers: [Int]?,
        _ status: SessionStatusResponse,
        _ trust: ReceiptTrust,
        _ ledger: LedgerClient
    ) async -> String? {
        do {
            try await trust.verify(
                receipt,
                sessionID: status.sid,
                amountCents: amountCents,
                tipCents: tipCents,
                shareNumbers: shareNumbers,
                ledger: ledger
            )
            return nil
        } catch {
            return error.description
        }
    }

    /// `session SID: PARTIALLY_PAID, $40.00 in 4 shares, 2 paid ($20.00), + $3.00 in tips; expires at …`.
    static func summary(_ status: SessionStatusResponse) -> String {
        var text = "session \(status.sid): \(status.status.rawValue), \(Money.format(status.amountCents))"
        if status.shares > 1 {
            text += " in \(status.shares) shares, \(status.sharesPaid) paid (\(Money.format(status.paidCents)))"
        }
        if status.tipCents > 0 { text += ", + \(Money.format(status.tipCents)) in tips" }
        if status.refundedCents > 0 { text += ", \(Money.format(status.refundedCents)) refunded" }
        if let paidAt = status.paidAt {
            text += "; paid at \(paidAt.formatted(.iso8601))"
        } else if status.status.isLive {
            text += "; expires at \(status.expiresAt.formatted(.iso8601))"
        }
        return text
    }

    /// `payment 0c9d…: share 3 of 4, $10.00 + tip $1.50, paid at …, $1.50 refunded`: one payment, as the ledger
    /// reports it (its id escaped: it came from the server).
    static func describe(_ payment: SharePayment, shares: Int) -> String {
        let numbers = payment.shareNumbers.sorted().map(String.init).joined(separator: ", ")
        var text =
            "payment \(DisplayText.escaped(payment.paymentID)): share\(payment.shareNumbers.count == 1 ? "" : "s") "
            + "\(numbers) of \(shares), \(Money.format(payment.amountCents))"
        if payment.tipCents > 0 { text += " + tip \(Money.format(payment.tipCents))" }
        text += ", paid at \(payment.paidAt.formatted(.iso8601))"
        if payment.refundedCents > 0 { text += ", \(Money.format(payment.refundedCents)) refunded" }
        return text
    }
}
