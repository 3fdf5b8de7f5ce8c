import Foundation
import GRDB
import GotchuLedger
import GotchuTesting
import Testing

@testable import GotchuLedgerSQLite

/// The SQLite store's lookup connections: one statement each, no transaction, on the calling thread.
@Suite("SQLite lookups")
struct LookupReadersTests {
    struct Failure: Error {}

    /// A file in WAL mode with one table, the pool that writes it, and lookup connections over it.
    static func withReaders(
        limit: Int,
        _ body: (SQLiteLookupReaders, DatabasePool) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-lookups")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        let pool = try DatabasePool(path: path)
        try await pool.write { db in try db.execute(sql: "CREATE TABLE t (x INTEGER PRIMARY KEY)") }
        try await body(SQLiteLookupReaders(path: path, configuration: Configuration(), limit: limit), pool)
    }

    static func count(_ db: Database) throws -> Int {
        try Int.fetchOne(cached: db, sql: "SELECT COUNT(*) FROM t") ?? -1
    }

    @Test("A connection's next lookup sees what committed since its last, even after a lookup that threw")
    func freshSnapshot() async throws {
        try await Self.withReaders(limit: 1) { readers, pool in
            #expect(try readers.read(Self.count) == 0)
            try await pool.write { db in try db.execute(sql: "INSERT INTO t (x) VALUES (1)") }
            #expect(try readers.read(Self.count) == 1)
            #expect(throws: Failure.self) {
                try readers.read { db in
                    _ = try Self.count(db)
                    throw Failure()
                }
            }
            try await pool.write { db in try db.execute(sql: "INSERT INTO t (x) VALUES (2)") }
            #expect(try readers.read(Self.count) == 2)
            // All on the one connection, which came back each time.
            #expect(readers.openedCount == 1)
        }
    }

    @Test("Lookups beyond the limit find no connection, and the store answers them from its pool")
    func beyondLimit() async throws {
        try await Self.withReaders(limit: 2) { readers, _ in
            let innermost = try readers.read { _ in
                try readers.read { _ in try readers.read(Self.count) }
            }
            #expect(innermost == .some(.some(nil)))
            #expect(readers.openedCount == 2)
            #expect(try readers.read(Self.count) == 0)
        }
        let directory = try TemporaryDirectory(prefix: "gotchu-lookups")
        defer { directory.remove() }
        let backend = try SQLiteLedgerBackend(
            path: directory.url.appendingPathComponent("ledger.sqlite").path,
            clock: Date.init
        )
        try await backend.migrate()
        let limit = backend.lookupReaders.limit
        func nested(_ depth: Int) throws -> Int {
            try backend.lookup { db in
                depth == 0 ? try Int.fetchOne(db, sql: "SELECT 7") ?? 0 : try nested(depth - 1)
            }
        }
        #expect(try nested(limit) == 7)
        #expect(backend.lookupReaders.openedCount == limit)
    }
}
