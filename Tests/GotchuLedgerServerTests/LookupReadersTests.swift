import Foundation
import GRDB
import GotchuLedger
import GotchuTesting
import Synchronization
import Testing

@testable import GotchuLedgerSQLite

/// The SQLite store's lookup connections: one statement each, no transaction, on the calling thread.
@Suite("SQLite lookups")
struct LookupReadersTests {
    struct Failure: Error {}

    /// Readers that hold their connection until released, or by themselves for 10 s, which the test counts as a
    /// failure.
    final class Holders: Sendable {
        let release = DispatchSemaphore(value: 0)
        private let state = Mutex((holding: 0, timedOut: false))

        var holding: Int { state.withLock { $0.holding } }
        var timedOut: Bool { state.withLock { $0.timedOut } }

        func hold() {
            state.withLock { $0.holding += 1 }
            if release.wait(timeout: .now() + 10) == .timedOut { state.withLock { $0.timedOut = true } }
        }
    }

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

    @Test("Lookups beyond the limit find no connection")
    func beyondLimit() async throws {
        try await Self.withReaders(limit: 2) { readers, _ in
            let innermost = try readers.read { _ in
                try readers.read { _ in try readers.read(Self.count) }
            }
            #expect(innermost == .some(.some(nil)))
            #expect(readers.openedCount == 2)
            #expect(try readers.read(Self.count) == 0)
        }
    }

    @Test(
        "With every lookup connection and every reader of the pool taken, lookups wait without holding a thread",
        .timeLimit(.minutes(1))
    )
    func fallbackWaitsWithoutBlocking() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-lookups")
        defer { directory.remove() }
        let backend = try SQLiteLedgerBackend(
            path: directory.url.appendingPathComponent("ledger.sqlite").path,
            clock: Date.init
        )
        try await backend.migrate()
        let limit = backend.lookupReaders.limit
        let poolReaders = backend.database.configuration.maximumReaderCount
        let holders = Holders()
        // A lookup that blocked the pool's threads would stop this test for good (nothing could run to fail it):
        // after 30 s a thread of its own says so and ends the process.
        let finished = Mutex(false)
        Thread.detachNewThread {
            for _ in 0..<300 {
                if finished.withLock({ $0 }) { return }
                Thread.sleep(forTimeInterval: 0.1)
            }
            FileHandle.standardError.write(Data("lookups blocked every thread of the concurrency pool\n".utf8))
            abort()
        }
        defer { finished.withLock { $0 = true } }
        // Every lookup connection, nested on a thread of its own.
        Thread.detachNewThread {
            func nest(_ depth: Int) {
                _ = try? backend.lookupReaders.read { _ in depth == 1 ? holders.hold() : nest(depth - 1) }
            }
            nest(limit)
        }
        // Every reader of the pool, each held by a read whose body blocks its reader's queue.
        let held = (0..<poolReaders).map { _ in Task { try await backend.database.read { _ in holders.hold() } } }
        #expect(try await eventually { holders.holding == 1 + poolReaders })
        #expect(backend.lookupReaders.openedCount == limit)

        // More lookups than the concurrency pool has threads; each must wait for a reader without blocking one.
        let lookups = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<16 {
                    group.addTask { try await backend.lookup { db in try Int.fetchOne(db, sql: "SELECT 7") ?? 0 } }
                }
                return try await group.reduce(0, +)
            }
        }
        // A task that needs a thread of the pool still runs while they wait.
        try await Task.sleep(for: .milliseconds(200))
        #expect(await Task { true }.value)
        for _ in 0..<(1 + poolReaders) { holders.release.signal() }
        #expect(try await lookups.value == 16 * 7)
        for task in held { try await task.value }
        #expect(!holders.timedOut)
    }
}
