import ArgumentParser
import Foundation

/// `gotchu bench`, hidden: the benchmarks left the installed program for the package's `gotchu-bench` target, which
/// runs from a checkout. Says so, and fails, so a script that still calls it stops instead of measuring nothing.
struct BenchMovedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Moved: the benchmarks are `swift run -c release gotchu-bench …` in a checkout of gotchu.",
        shouldDisplay: false
    )

    @Argument(parsing: .captureForPassthrough)
    var arguments: [String] = []

    func run() throws {
        let rest = arguments.isEmpty ? "…" : arguments.joined(separator: " ")
        FileHandle.standardError.write(
            Data(
                """
                gotchu bench has moved out of the installed program: the benchmarks are the gotchu-bench program of \
                the source package. From a checkout of gotchu, run:
                  swift run -c release gotchu-bench \(rest)

                """.utf8
            )
        )
        throw ExitCode(2)
    }
}
