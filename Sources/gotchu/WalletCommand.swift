import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient

struct WalletCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wallet",
        abstract: "Show your balance and latest ledger entries."
    )

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let wallet = try await server.client().wallet()
        print("balance \(Money.format(wallet.availableCents))   wallet \(DisplayText.escaped(wallet.walletID))")
        guard !wallet.recent.isEmpty else {
            print("no entries yet")
            return
        }
        print(EntryTable.render(wallet.recent))
    }
}

/// Ledger entries as an aligned text table. The server's strings (type, reference) are shown escaped and bounded,
/// so a cell can neither rewrite the terminal nor push the table apart.
enum EntryTable {
    static func render(_ entries: [LedgerEntry]) -> String {
        let rows = entries.map { entry in
            [
                entry.createdAt.formatted(.iso8601.time(includingFractionalSeconds: false)),
                entry.direction.rawValue,
                (entry.direction == .credit ? "+" : "-") + Money.format(entry.amountCents),
                DisplayText.escaped(entry.type, maximumLength: 24),
                DisplayText.escaped("\(entry.refType) \(entry.refID.prefix(8))", maximumLength: 40),
            ]
        }
        let header = ["time (UTC)", "dir", "amount", "type", "reference"]
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        return ([header] + rows).map { row in
            zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
