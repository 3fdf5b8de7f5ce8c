import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuTesting
import Synchronization
import Testing

@testable import GotchuLedgerSQLite

/// The SQLite store's writer: requests that queue up behind one another share one commit, each in a savepoint.
@Suite("SQLite group commit", .timeLimit(.minutes(10)))
struct GroupCommitTests {
    struct Refusal: Error {}

    /// What happened, in order: requests' parts done, commits, answers.
    final class Events: TransactionObserver, Sendable {
        private let log = Mutex<[String]>([])

        func append(_ event: String) { log.withLock { $0.append(event) } }
        var all: [String] { log.withLock { $0 } }

        func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { true }
        func databaseDidChange(with event: DatabaseEvent) {}
        func databaseDidCommit(_ db: Database) { append("commit") }
        func databaseDidRollback(_ db: Database) { append("rollback") }
    }

    /// A file in WAL mode with one table, a writer over it whose commits are logged to `events`, and a connection
    /// of its own to look at what is committed.
    static func withWriter(_ body: (SQLiteWriter, DatabaseQueue, Events) async throws -> Void) async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-group-commit")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        var configuration = Configuration()
        configuration.allowsUnsafeTransactions = true
        let pool = try DatabasePool(path: path, configuration: configuration)
        try await pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE parent (id INTEGER PRIMARY KEY);
                    CREATE TABLE t (x INTEGER PRIMARY KEY,
                        parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
                    """
            )
        }
        let events = Events()
        pool.add(transactionObserver: events, extent: .databaseLifetime)
        try await body(SQLiteWriter(database: pool), try DatabaseQueue(path: path), events)
    }

    static func insert(_ x: Int, _ writer: SQLiteWriter, parent: Int? = nil) throws {
        try writer.sync { db in try db.execute(sql: "INSERT INTO t (x, parent) VALUES (?, ?)", arguments: [x, parent]) }
    }

    static func rows(_ observer: DatabaseQueue) async throws -> [Int] {
        try await observer.read { db in try Int.fetchAll(db, sql: "SELECT x FROM t ORDER BY x") }
    }

    @Test("Three queued requests commit once; the one refused loses only its own write, not a batch-mate's")
    func savepoints() async throws {
        try await Self.withWriter { writer, observer, events in
            let (gate, open) = AsyncStream.makeStream(of: Void.self)
            let first = Task {
                try await writer.transaction {
                    try Self.insert(1, writer)
                    // Holds the writer until the other two wait for it.
                    for await _ in gate { break }
                }
            }
            #expect(try await eventually { !writer.isIdle })
            let second = Task { try await writer.transaction { try Self.insert(2, writer) } }
            #expect(try await eventually { writer.waitingCount == 1 })
            let third = Task {
                try await writer.transaction {
                    try Self.insert(3, writer)
                    throw Refusal()
                }
            }
            #expect(try await eventually { writer.waitingCount == 2 })
            let fourth = Task { try await writer.transaction { try Self.insert(4, writer) } }
            #expect(try await eventually { writer.waitingCount == 3 })
            open.yield()
            try await first.value
            // Answered only once the batch is committed: its write is visible to another connection.
            #expect(try await Self.rows(observer) == [1, 2, 4])
            try await second.value
            await #expect(throws: Refusal.self) { try await third.value }
            try await fourth.value
            #expect(writer.statistics == (4, 1))
            #expect(events.all == ["commit"])
            #expect(try await Self.rows(observer) == [1, 2, 4])
        }
    }

    @Test("No member of a batch, refused or not, is answered before the batch's commit")
    func answeredAfterCommit() async throws {
        try await Self.withWriter { writer, observer, events in
            let (firstGate, openFirst) = AsyncStream.makeStream(of: Void.self)
            let (secondGate, openSecond) = AsyncStream.makeStream(of: Void.self)
            let (secondEntered, enteredSecond) = AsyncStream.makeStream(of: Void.self)
            let first = Task {
                try await writer.transaction {
                    try Self.insert(1, writer)
                    for await _ in firstGate { break }
                    events.append("first done")
                }
                events.append("first answered")
            }
            #expect(try await eventually { !writer.isIdle })
            let refused = Task {
                do {
                    try await writer.transaction {
                        try Self.insert(5, writer)
                        events.append("refused done")
                        throw Refusal()
                    }
                } catch is Refusal {
                    events.append("refused answered")
                }
            }
            #expect(try await eventually { writer.waitingCount == 1 })
            let second = Task {
                try await writer.transaction {
                    enteredSecond.yield()
                    for await _ in secondGate { break }
                    try Self.insert(2, writer)
                    events.append("second done")
                }
                events.append("second answered")
            }
            #expect(try await eventually { writer.waitingCount == 2 })
            openFirst.yield()
            // The first two requests' parts are done and the third runs in the same transaction: nothing is
            // committed, so neither has an answer yet.
            for await _ in secondEntered { break }
            #expect(try await Self.rows(observer) == [])
            #expect(events.all == ["first done", "refused done"])
            openSecond.yield()
            try await first.value
            try await refused.value
            try await second.value
            let log = events.all
            #expect(Array(log.prefix(4)) == ["first done", "refused done", "second done", "commit"])
            #expect(Set(log.dropFirst(4)) == ["first answered", "refused answered", "second answered"])
            #expect(try await Self.rows(observer) == [1, 2])
            #expect(writer.statistics == (3, 1))
        }
    }

    @Test("A commit that fails fails every member of its batch, and keeps none of its writes")
    func failedCommit() async throws {
        try await Self.withWriter { writer, observer, _ in
            let (gate, open) = AsyncStream.makeStream(of: Void.self)
            let first = Task {
                try await writer.transaction {
                    try Self.insert(1, writer)
                    for await _ in gate { break }
                }
            }
            #expect(try await eventually { !writer.isIdle })
            // A deferred foreign key with no parent: the savepoint is released, the commit refuses.
            let second = Task { try await writer.transaction { try Self.insert(2, writer, parent: 99) } }
            #expect(try await eventually { writer.waitingCount == 1 })
            open.yield()
            await #expect(throws: DatabaseError.self) { try await first.value }
            await #expect(throws: DatabaseError.self) { try await second.value }
            #expect(try await Self.rows(observer) == [])
            // The writer is usable again.
            try await writer.transaction { try Self.insert(3, writer) }
            #expect(try await Self.rows(observer) == [3])
        }
    }

    @Test("Requests still on their way to the writer's thread join the batch of the request that holds it")
    func arrivalsJoinTheBatch() async throws {
        try await Self.withWriter { writer, observer, events in
            let released = Mutex(false)
            let first = Task {
                try await writer.transaction {
                    try Self.insert(1, writer)
                    // Keeps the writer's thread itself busy (no suspension), so the others cannot reach it yet.
                    while !released.withLock({ $0 }) { usleep(1_000) }
                }
            }
            #expect(try await eventually { !writer.isIdle })
            let others = (2...3).map { x in Task { try await writer.transaction { try Self.insert(x, writer) } } }
            #expect(try await eventually { writer.arrivingCount == 2 })
            #expect(writer.waitingCount == 0)
            // The pool gauge counts them as waiting.
            #expect(writer.usage == (true, 2))
            released.withLock { $0 = true }
            try await first.value
            for other in others { try await other.value }
            #expect(writer.statistics == (3, 1))
            #expect(events.all == ["commit"])
            #expect(try await Self.rows(observer) == [1, 2, 3])
        }
    }

    @Test("Alone, a request commits at once")
    func alone() async throws {
        try await Self.withWriter { writer, observer, events in
            try await writer.transaction { try Self.insert(1, writer) }
            #expect(events.all == ["commit"])
            await #expect(throws: Refusal.self) {
                try await writer.transaction {
                    try Self.insert(2, writer)
                    throw Refusal()
                }
            }
            try await writer.transaction { try Self.insert(3, writer) }
            #expect(try await Self.rows(observer) == [1, 3])
            #expect(writer.statistics == (3, 3))
        }
    }

    @Test("The store's writer commits with synchronous=FULL")
    func synchronousFull() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-group-commit")
        defer { directory.remove() }
        let backend = try SQLiteLedgerBackend(
            path: directory.url.appendingPathComponent("ledger.sqlite").path,
            clock: Date.init
        )
        // 2 is FULL; GRDB's own default for a pool in WAL mode is 1 (NORMAL).
        #expect(try backend.writer.sync { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") } == 2)
    }

    @Test("Concurrent locks of one session through the store: one wins, the refused ones undo nothing of it")
    func refusedLocksInABatch() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-group-commit")
        defer { directory.remove() }
        let store = try SQLiteLedgerStore(path: directory.url.appendingPathComponent("ledger.sqlite").path)
        try await store.migrate()
        let payee = try await store.login(email: "payee@example.com")
        var payers: [LedgerUser] = []
        for index in 0..<16 {
            let payer = try await store.login(email: "payer\(index)@example.com")
            _ = try await store.fund(userID: payer.id, amountCents: 1_000)
            payers.append(payer)
        }
        let (session, _) = try await store.createSession(payeeID: payee.id, amountCents: 500, idempotencyKey: nil)
        let before = store.backend.groupCommitStatistics
        let winners = try await withThrowingTaskGroup(of: String?.self) { group in
            for payer in payers {
                group.addTask {
                    do {
                        try await store.lock(sid: session.sid, payerID: payer.id)
                        return payer.id
                    } catch let error as LedgerError where error.kind == .sessionLocked {
                        return nil
                    }
                }
            }
            return try await group.reduce(into: [String]()) { if let id = $1 { $0.append(id) } }
        }
        #expect(winners.count == 1)
        let after = store.backend.groupCommitStatistics
        #expect(after.transactions - before.transactions == 16)
        // The winner's lock is what is committed, whichever batch-mates were refused around it.
        let locked = try #require(try await store.backend.session(id: session.sid))
        #expect(locked.lockedBy == winners.first)
        #expect(try await store.audit().isHealthy)
    }

    /// A store on a fresh file with a payee's session of 500 cents locked by a payer holding 1,000.
    static func withLockedSession(
        _ body: (SQLiteLedgerStore, _ path: String, _ sid: String, _ payerID: String) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-group-commit")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        let store = try SQLiteLedgerStore(path: path)
        try await store.migrate()
        let payee = try await store.login(email: "payee@example.com")
        let payer = try await store.login(email: "payer@example.com")
        _ = try await store.fund(userID: payer.id, amountCents: 1_000)
        let (session, _) = try await store.createSession(payeeID: payee.id, amountCents: 500, idempotencyKey: nil)
        try await store.lock(sid: session.sid, payerID: payer.id)
        try await body(store, path, session.sid, payer.id)
    }

    @Test("A payment is one write transaction: its key, transfer and outcome commit together")
    func oneTransactionPerPayment() async throws {
        try await Self.withLockedSession { store, _, sid, payerID in
            let before = store.backend.groupCommitStatistics
            let (outcome, replayed) = try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k")
            #expect(outcome == .paid(newBalanceCents: 500) && !replayed)
            let after = store.backend.groupCommitStatistics
            #expect(after.transactions - before.transactions == 1)
            #expect(after.commits - before.commits == 1)
            #expect(try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k") == (outcome, true))
        }
    }

    @Test("Concurrent sends with one key, batched together: one payment, and every other send replays it")
    func concurrentSendsWithOneKey() async throws {
        try await Self.withLockedSession { store, _, sid, payerID in
            let results = try await withThrowingTaskGroup(of: (SendOutcome, Bool).self) { group in
                for _ in 0..<12 {
                    group.addTask { try await store.send(sid: sid, payerID: payerID, idempotencyKey: "same") }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.allSatisfy { $0.0 == .paid(newBalanceCents: 500) })
            #expect(results.filter { !$0.1 }.count == 1)
            #expect(try await store.wallet(userID: payerID, recentLimit: 1).balance == 500)
            #expect(try await store.audit().isHealthy)
        }
    }

    @Test("A key left committed in flight (by a process that is gone) is released when the store opens; then it pays")
    func keyInFlightReleasedAtStart() async throws {
        try await Self.withLockedSession { store, path, sid, payerID in
            #expect(try await store.beginSend(sid: sid, payerID: payerID, idempotencyKey: "k") == .proceed)
            await #expect(throws: LedgerError.self) {
                _ = try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k")
            }
            let reopened = try SQLiteLedgerStore(path: path)
            try await reopened.migrate()
            let (outcome, replayed) = try await reopened.send(sid: sid, payerID: payerID, idempotencyKey: "k")
            #expect(outcome == .paid(newBalanceCents: 500) && !replayed)
        }
    }
}
