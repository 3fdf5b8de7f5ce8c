import Foundation
import GRDB
import GotchuLedger
import GotchuTesting
import Synchronization
import Testing

@testable import GotchuLedgerSQLite

/// The SQLite store's lookup connections: one statement each, no transaction, on the calling thread.
@Suite("SQLite lookups", .timeLimit(.minutes(10)))
struct LookupReadersTests {
    struct Failure: Error {}

    /// Readers that hold their connection until released.
    final class Holders: Sendable {
        private let gate = DispatchSemaphore(value: 0)
        private let state = Mutex((holding: 0, released: false))

        var holding: Int { state.withLock { $0.holding } }

        func hold() {
            let released = state.withLock { state in
                state.holding += 1
                return state.released
            }
            guard !released else { return }
            gate.wait()
            gate.signal()  // For the next holder.
        }

        /// Lets every holder go, those holding and any still to come; more calls change nothing.
        func release() {
            let first = state.withLock { state in
                defer { state.released = true }
                return !state.released
            }
            if first { gate.signal() }
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
        // Whatever fails below, the readers held come free, so that the test ends.
        defer { holders.release() }
        // A lookup that blocked the pool's threads would stop this test for good: nothing could run to fail it, not
        // even its time limit. A thread of its own then says so and ends the process, once the time limit would
        // have failed the test had it been able to.
        let finished = Mutex(false)
        Thread.detachNewThread {
            for _ in 0..<900 {
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

        // More lookups than the concurrency pool has threads; each finds every lookup connection busy, then waits
        // for a reader of the pool, which must not hold a thread: had the first few kept theirs, the rest could not
        // run to get this far.
        let lookups = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<16 {
                    group.addTask { try await backend.lookup { db in try Int.fetchOne(db, sql: "SELECT 7") ?? 0 } }
                }
                return try await group.reduce(0, +)
            }
        }
        #expect(try await eventually { backend.lookupReaders.busyCount == 16 })
        // A task that needs a thread of the pool still runs while they wait.
        #expect(await Task { true }.value)
        holders.release()
        #expect(try await lookups.value == 16 * 7)
        for task in held { try await task.value }
    }
}
