import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuPeer

struct PayoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payout",
        abstract: "Withdraw money from your wallet to your bank (the ledger's operator pays it out).",
        discussion: """
            The amount leaves your wallet at once and waits, pending, until the operator settles the payout \
            (paid out) or fails it (the money comes back to your wallet). The request carries an \
            Idempotency-Key: if the answer is lost, run the command again with the --idempotency-key it \
            printed, and the ledger answers the first request again instead of taking a second payout.

            Example:
              gotchu payout --amount 25.00
            """
    )

    @Option(help: ArgumentHelp("Amount to withdraw, such as 25.00.", valueName: "amount"))
    var amount: String

    @Option(
        help: ArgumentHelp(
            "The request's key (default: a new one); the same key again is the same payout.",
            valueName: "key"
        )
    )
    var idempotencyKey: String?

    @OptionGroup var server: ServerOptions

    func validate() throws {
        if let idempotencyKey {
            guard (1...255).contains(idempotencyKey.utf8.count),
                idempotencyKey.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
            else { throw ValidationError("--idempotency-key must be 1 to 255 visible ASCII characters") }
        }
    }

    func run() async throws {
        let cents = try CLIAmount.parse(amount, option: "--amount")
        let key = idempotencyKey ?? UUID().uuidString.lowercased()
        let client = try server.client()
        do {
            let (payout, replayed) = try await client.requestPayout(amountCents: cents, idempotencyKey: key)
            Console().line(
                "payout \(DisplayText.escaped(payout.payoutID, maximumLength: 64)) of "
                    + "\(Money.format(payout.amountCents)) is pending; balance \(Money.format(payout.newBalanceCents))"
                    + (replayed ? " (answered again: this key's payout was taken before)" : "")
            )
        } catch {
            if !PaymentResumer.isFinal(error) {
                FileHandle.standardError.write(
                    Data("the outcome is unknown; to retry safely run again with --idempotency-key \(key)\n".utf8)
                )
            }
            throw error
        }
    }
}
