import Foundation
import GotchuLedgerSQLite
import GotchuLedgerServer

/// A ledger on a fresh SQLite file in a temporary directory, deleted afterwards: for the demo, the simulator and
/// the benchmarks.
struct TemporaryLedger: Sendable {
    /// The directory holding the database (and anything else the caller puts there).
    let directory: URL
    /// The migrated store.
    let store: SQLiteLedgerStore
    /// A token authority with a random secret.
    let tokens: TokenAuthority

    static func with<T: Sendable>(_ body: (TemporaryLedger) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteLedgerStore(path: directory.appendingPathComponent("ledger.sqlite").path)
        try await store.migrate()
        let tokens = try await TokenAuthority(secret: UUID().uuidString + UUID().uuidString)
        return try await body(TemporaryLedger(directory: directory, store: store, tokens: tokens))
    }

    /// Serves the ledger over HTTP on a free loopback port while `body` runs.
    func serving<T: Sendable>(developmentMode: Bool = true, _ body: @Sendable (URL) async throws -> T) async throws -> T
    {
        try await LedgerServer.withRunning(
            store: store,
            .inProcess(tokens: tokens) { $0.developmentMode = developmentMode },
            body
        )
    }
}
