import ArgumentParser

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure throughput figures (not tests: run on a quiet machine and compare ratios).",
        subcommands: [
            BenchLedgerCommand.self, BenchLoginCommand.self, BenchAuthCommand.self, BenchDBusCommand.self,
            BenchNotifyCommand.self, BenchReceiptsCommand.self, BenchVerifyCommand.self,
        ]
    )
}
