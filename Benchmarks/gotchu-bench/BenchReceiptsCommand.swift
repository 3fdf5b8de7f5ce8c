import ArgumentParser
import Foundation
import GotchuCore
import GotchuLedgerPostgres
import GotchuLedgerServer

struct BenchReceiptsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipts",
        abstract: "What signing receipts costs a payment, and how long `gotchu ledger verify` takes.",
        discussion: """
            Payments per second driven directly on the store (create + resolve + lock + send, K pairs \
            at once) with receipt signing off and on, alternating runs on fresh databases and keeping \
            each side's best, then the cost of signing in percent. Then a ledger of --entries entries \
            (half payments, half fundings) is written and `ledger verify` is timed on it.
            """
    )

    @Option(name: .customShort("k"), help: "Concurrent payer/payee pairs.")
    var pairs = 4

    @Option(help: "Payments per pair in each run.")
    var payments = 250

    @Option(help: "Runs of each side (signing off, on), alternated.")
    var rounds = 3

    @Option(help: "Entries in the ledger `verify` is timed on.")
    var entries = 100_000

    @Option(
        help: ArgumentHelp(
            "A PostgreSQL server to measure on (default: SQLite), as postgres://USER@HOST:PORT/DB.",
            valueName: "url"
        )
    )
    var database: String?

    func validate() throws {
        guard pairs > 0, payments > 0, rounds > 0, entries >= 4 else {
            throw ValidationError("-k, --payments and --rounds must be positive, --entries at least 4")
        }
        if let database { _ = try PostgresURL(database) }
    }

    func run() async throws {
        let backend = try database.map { BenchBackend.postgres(try PostgresURL($0)) } ?? .sqlite
        let total = pairs * payments
        print("receipt benchmark: \(pairs) pairs × \(payments) payments = \(total) payments per run (\(backend))")
        var best: [Bool: Double] = [:]
        for _ in 0..<rounds {
            for signing in [false, true] {
                var policy = LedgerPolicy()
                policy.signsReceipts = signing
                let seconds = try await backend.measure(servers: 0, policy: policy) { stores, _ in
                    try await BenchLedgerCommand.drive(pairs: pairs, payments: payments, store: stores[0])
                }
                best[signing] = min(best[signing] ?? .infinity, seconds)
            }
        }
        let off = Double(total) / best[false]!
        let on = Double(total) / best[true]!
        print(String(format: "signing off:  %8.1f payments/s", off))
        print(String(format: "signing on:   %8.1f payments/s", on))
        print(String(format: "cost of signing: %5.1f %% of throughput", (off - on) / off * 100))

        let transfers = entries / 2
        let paid = transfers / 2
        _ = try await backend.measure(servers: 0) { stores, _ in
            let store = stores[0]
            // Fundings fill what the payments leave of the entries; each pair's payer is funded for its payments.
            let perPair = max(paid / pairs, 1)
            try await BenchLedgerCommand.drive(pairs: pairs, payments: perPair, store: store)
            let written = pairs * (perPair + 1)
            let funder = try await store.login(email: "funder@bench.example")
            for _ in 0..<max(transfers - written, 0) { _ = try await store.fund(userID: funder.id, amountCents: 1) }
            let start = ContinuousClock.now
            let verification = try await store.verify()
            let elapsed = ContinuousClock.now - start
            guard verification.isValid else { throw CLIError("verify failed: \(verification.failure ?? "")") }
            let count = try await store.audit().entryCount
            print(String(format: "ledger verify: %d entries in %.2f s", count, elapsed / .seconds(1)))
            for line in verification.passed { print("  \(line)") }
        }
    }
}
