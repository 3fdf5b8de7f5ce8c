import ArgumentParser
import GotchuAPI
import GotchuCore
import GotchuLedgerClient

struct FundCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fund",
        abstract: "Add money to your wallet on a development ledger (server started with --dev).",
        discussion: "The money comes from the ledger's system funding account, through two ledger entries."
    )

    @Option(help: ArgumentHelp("Amount to add, such as 100.00.", valueName: "amount"))
    var amount: String

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let cents = try CLIAmount.parse(amount, option: "--amount")
        let result = try await server.client().fund(amountCents: cents)
        Console().line("funded \(Money.format(cents)); balance \(Money.format(result.newBalanceCents))")
    }
}
