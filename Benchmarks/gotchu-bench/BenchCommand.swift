import ArgumentParser
import Foundation

@main
struct GotchuBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gotchu-bench",
        abstract: "Measure throughput figures (not tests: run on a quiet machine and compare ratios).",
        discussion: """
            Run from a checkout, in release mode: `swift run -c release gotchu-bench ledger`. The helper files \
            the anchors need (Benchmarks/ledger_sqlite.py) are found in the package this program was built from, \
            located from its source path (\(BenchPaths.packageRoot.path)); give another with the subcommand's \
            option (`ledger --python-script PATH`). The anchors' tools (python3, pgbench, wrk) are looked up on \
            PATH; an anchor whose tool is missing is skipped with a note.
            """,
        subcommands: [
            BenchLedgerCommand.self, BenchLoginCommand.self, BenchAuthCommand.self, BenchDBusCommand.self,
            BenchNotifyCommand.self, BenchReceiptsCommand.self, BenchVerifyCommand.self, BenchSplitsCommand.self,
            BenchWebhooksCommand.self,
            BenchQRCommand.self, BenchCheckoutCommand.self,
        ]
    )
}

/// Where the benchmarks' helper files are.
enum BenchPaths {
    /// The root of the package this program was built from: two folders above this source file
    /// (`Benchmarks/gotchu-bench/`).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `relativePath` in the package's root.
    static func helper(_ relativePath: String) -> String {
        packageRoot.appendingPathComponent(relativePath).path
    }
}

/// A failure reported as one sentence, with exit status 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
