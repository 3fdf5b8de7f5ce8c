import ArgumentParser
import Foundation
import GotchuCore
import GotchuLedgerSQLite
import GotchuLedgerServer

struct BenchVerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "How long `gotchu ledger verify` takes on a large SQLite ledger.",
        discussion: """
            Writes a fresh SQLite ledger of --entries entries through the ledger engine: --payments \
            payments (create + resolve + lock + send, each with its signed receipt) and fundings for \
            the rest, the fundings a thousand transfers to a transaction so that a large ledger is \
            written in seconds. Every entry is chained as a server chains it. Then times the check \
            `gotchu ledger verify` makes and prints entries per second. With --keep the ledger stays \
            at that path, for timing `gotchu ledger verify --database PATH` itself.
            """
    )

    @Option(help: "Entries in the ledger.")
    var entries = 100_000

    @Option(help: "Payments among them (two entries each).")
    var payments = 1_000

    @Option(help: ArgumentHelp("Keep the ledger at this path (which must not exist yet).", valueName: "path"))
    var keep: String?

    func validate() throws {
        guard entries >= 4, payments >= 1, payments * 2 <= entries - 2 else {
            throw ValidationError("--entries must be at least 4 and leave room for --payments (≥ 1) and one funding")
        }
        if let keep, FileManager.default.fileExists(atPath: keep) {
            throw ValidationError("\(keep) exists already; give a new path")
        }
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-bench-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = keep ?? directory.appendingPathComponent("ledger.sqlite").path
        let store = try SQLiteLedgerStore(path: path)
        try await store.migrate()

        let built = ContinuousClock.now
        // The payer's funding is one of the transfers; the fundings written in batches make up the rest.
        try await BenchLedgerCommand.drive(pairs: 1, payments: payments, store: store)
        let funder = try await store.login(email: "funder@bench.example")
        var remaining = (entries - 2 * payments - 2) / 2
        while remaining > 0 {
            let batch = min(remaining, 1_000)
            try await store.fund(userID: funder.id, amountCents: 1, times: batch)
            remaining -= batch
        }
        let buildSeconds = (ContinuousClock.now - built) / .seconds(1)
        let count = try await store.audit().entryCount
        print(String(format: "ledger of %d entries written in %.1f s", count, buildSeconds))
        if let keep { print("kept at \(keep)") }

        let start = ContinuousClock.now
        let verification = try await store.verify()
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        guard verification.isValid else { throw CLIError("verify failed: \(verification.failure ?? "")") }
        for line in verification.passed { print("  \(line)") }
        print(
            String(
                format: "ledger verify: %d entries in %.2f s = %.0f entries/s",
                count,
                seconds,
                Double(count) / seconds
            )
        )
    }
}
