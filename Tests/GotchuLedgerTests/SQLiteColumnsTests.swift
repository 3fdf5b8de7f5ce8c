import Foundation
import GRDB
import GotchuAPI
import GotchuLedger
import Testing

@testable import GotchuLedgerSQLite

/// The SQLite store's rows decoded by position, straight from the stepped statement.
@Suite("SQLite rows read by position", .timeLimit(.minutes(10)))
struct SQLiteColumnsTests {
    static func isInconsistent(_ error: any Error) -> Bool { (error as? LedgerError)?.kind == .inconsistent }

    @Test("A stored amount of the wrong class is an inconsistency, not a zero: nothing is paid until it is mended")
    func wrongStorageClass() async throws {
        try await GroupCommitTests.withLockedSession { store, path, sid, payerID in
            let database = try DatabaseQueue(path: path)
            try await database.write { db in
                try db.execute(
                    sql: "UPDATE payment_sessions SET amount_cents = 'five hundred' WHERE id = ?",
                    arguments: [sid]
                )
            }
            await #expect(performing: { try await store.backend.session(id: sid) }, throws: Self.isInconsistent)
            await #expect(
                performing: { try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k") },
                throws: Self.isInconsistent
            )
            #expect(try await store.wallet(userID: payerID, recentLimit: 1).balance == 1_000)

            try await database.write { db in
                try db.execute(sql: "UPDATE payment_sessions SET amount_cents = 500 WHERE id = ?", arguments: [sid])
            }
            let (outcome, _) = try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k")
            #expect(outcome == .paid(newBalanceCents: 500))
        }
    }

    @Test("NULL: an optional column reads nil, a required one is an inconsistency")
    func null() async throws {
        try await LookupReadersTests.withReaders(limit: 1) { readers, pool in
            try await pool.write { db in
                try db.execute(sql: "CREATE TABLE n (a INTEGER, b TEXT)")
                try db.execute(sql: "INSERT INTO n (a, b) VALUES (NULL, 'x')")
            }
            let row = try #require(
                try readers.read { db in
                    try db.fetchOne(cached: "SELECT a, b FROM n") { row in
                        (try row.optional(0) as Int64?, try row(1) as String)
                    }
                } ?? nil
            )
            #expect(row.0 == nil && row.1 == "x")
            #expect(
                performing: {
                    try readers.read { db in try db.fetchOne(cached: "SELECT a FROM n") { try $0(0) as Int64 } }
                },
                throws: Self.isInconsistent
            )
        }
    }

    @Test("A lookup that reads the first of several rows ends its read: the connection's next lookup sees new commits")
    func firstRowEndsTheRead() async throws {
        try await LookupReadersTests.withReaders(limit: 1) { readers, pool in
            try await pool.write { db in try db.execute(sql: "INSERT INTO t (x) VALUES (1), (2)") }
            let first = try readers.read { db in
                try db.fetchOne(cached: "SELECT x FROM t ORDER BY x") { try $0(0) as Int64 }
            }
            #expect(first == .some(1))
            try await pool.write { db in try db.execute(sql: "INSERT INTO t (x) VALUES (3)") }
            #expect(try readers.read(LookupReadersTests.count) == 3)
            #expect(readers.openedCount == 1)
        }
    }
}
