import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer
import GotchuTesting
import Logging
import PostgresNIO
import Testing

/// A refund interrupted by SIGKILL of the server, then retried with its key on a restarted server: exactly one
/// refund per key.
@Suite("A refund interrupted by a crash", .timeLimit(.minutes(10)))
struct InterruptedRefundTests {
    /// The refund entries of `sid` in a SQLite ledger.
    static func refundDebits(_ database: DatabaseQueue, _ sid: String) async throws -> Int {
        try await database.read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT COUNT(*) FROM ledger_entries WHERE ref_id = ? AND type = 'REFUND_OUT'",
                arguments: [sid]
            ) ?? -1
        }
    }

    @Test("SQLite: SIGKILL after a refund failed inside its transaction; the retry refunds once")
    func sqlite() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        let environment = ["XDG_DATA_HOME": directory.url.path, "GOTCHU_JWT_SECRET": TestLedger.secret]
        let arguments = ["server", "--dev", "--database", path]
        var (server, url) = try await InterruptedSendTests.start(arguments, environment)
        let payer = try await CrashTests.login("payer@crash.example", url, funded: 1_000)
        let payee = try await CrashTests.login("payee@crash.example", url)
        let sid = try await paidSession(payer: payer, payee: payee, amountCents: 250)

        // The refund's last write fails: its transfer and receipt were written in the same transaction, which must
        // leave nothing behind.
        let database = try DatabaseQueue(path: path)
        try await database.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER refuse_refund BEFORE INSERT ON refunds
                    BEGIN SELECT RAISE(ABORT, 'simulated failure'); END;
                    """
            )
        }
        #expect(
            await problemKind { try await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "k") }
                == .internalError
        )
        #expect(try await server.stop(signal: SIGKILL) == SIGKILL)
        try await database.write { db in try db.execute(sql: "DROP TRIGGER refuse_refund") }
        #expect(try await Self.refundDebits(database, sid) == 0)

        (server, _) = try await InterruptedSendTests.start(arguments, port: url.port!, environment)
        let first = try await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "k")
        #expect(!first.replayed)
        #expect(try await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "k").replayed)
        #expect(try await payer.wallet().availableCents == 850)
        #expect(try await server.stop(signal: SIGTERM) == 0)
        #expect(try await Self.refundDebits(database, sid) == 1)
    }

    @Test(
        "PostgreSQL: SIGKILL while the refund waits inside its transaction; the retry refunds once",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
    )
    func postgres() async throws {
        try await TestPostgres.withDatabase { database in
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let environment = ["XDG_DATA_HOME": directory.url.path, "GOTCHU_JWT_SECRET": TestLedger.secret]
            let arguments = ["server", "--dev", "--database", database.redacted]
            var (server, url) = try await InterruptedSendTests.start(arguments, environment)
            let payer = try await CrashTests.login("payer@crash.example", url, funded: 1_000)
            let payee = try await CrashTests.login("payee@crash.example", url)
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 250)

            // Holding the session's row makes the server's refund wait inside its transaction.
            try await InterruptedSendTests.kill(server, whileHolding: sid, in: database) {
                _ = try await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "k")
            }

            (server, _) = try await InterruptedSendTests.start(arguments, port: url.port!, environment)
            let first = try await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "k")
            #expect(!first.replayed && first.refund.refundedCents == 100)
            #expect(try await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "k").replayed)
            #expect(try await payer.wallet().availableCents == 850)
            #expect(try await server.stop(signal: SIGTERM) == 0)
            let count = try await TestPostgres.withClient(database) { client in
                var count: Int64 = -1
                let rows = try await client.query(
                    "SELECT COUNT(*) FROM ledger_entries WHERE ref_id = \(sid) AND type = 'REFUND_OUT'"
                )
                for try await value in rows.decode(Int64.self) { count = value }
                return count
            }
            #expect(count == 1)
        }
    }
}
