package import Foundation
package import GotchuLedgerPostgres
import GotchuTesting
import Testing

/// A primary and its synchronous standby started by `scripts/postgres-pair`, deleted by ``stop()``.
package struct PostgresPair: Sendable {
    /// `scripts/postgres-pair` of this checkout.
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/postgres-pair")

    package let directory: URL
    package let primaryPort: Int
    package let standbyPort: Int

    /// Starts the pair in a new temporary directory.
    package static func start() async throws -> PostgresPair {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-pair-\(UUID())")
        let output = try await run("start", directory)
        func port(_ name: String) throws -> Int {
            let line = output.first { $0.hasPrefix(name + " ") }
            return try #require(line.flatMap { Int($0.dropFirst(name.count + 1)) }, "\(output)")
        }
        return PostgresPair(directory: directory, primaryPort: try port("primary"), standbyPort: try port("standby"))
    }

    /// Runs `body` with a started pair, stopped and deleted afterwards whatever happens.
    package static func with<T: Sendable>(_ body: (PostgresPair) async throws -> T) async throws -> T {
        let pair = try await start()
        do {
            let result = try await body(pair)
            await pair.stop()
            return result
        } catch {
            await pair.stop()
            throw error
        }
    }

    @discardableResult
    private static func run(_ command: String, _ directory: URL) async throws -> [String] {
        let process = try RunningCommand(script, [command, directory.path])
        let status = try await process.waitForExit(timeout: .seconds(300))
        guard status == 0 else {
            throw TestPostgresError("postgres-pair \(command) failed (\(status)): \(process.standardError)")
        }
        return process.lines
    }

    /// SIGKILLs the primary's postmaster.
    package func killPrimary() async throws { try await Self.run("kill-primary", directory) }
    /// Stops the standby: the primary's commits wait for it.
    package func stopStandby() async throws { try await Self.run("stop-standby", directory) }
    /// Starts the standby again.
    package func startStandby() async throws { try await Self.run("start-standby", directory) }
    /// Promotes the standby, which then stops waiting for a standby of its own.
    package func promote() async throws { try await Self.run("promote", directory) }
    /// Stops both and deletes the directory.
    package func stop() async { _ = try? await Self.run("stop", directory) }

    /// `postgres://gotchu@PRIMARY,STANDBY/DATABASE`, the primary first.
    package func url(database: String = "postgres") throws -> PostgresURL {
        try PostgresURL("postgres://gotchu@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)/\(database)")
    }
}
