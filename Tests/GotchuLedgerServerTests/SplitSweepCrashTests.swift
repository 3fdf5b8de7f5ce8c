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

/// A `gotchu server` killed with SIGKILL while it returns a cancelled split's payments, then restarted: the
/// restarted server's sweep returns the rest, and every payment is returned exactly once.
@Suite("A split's refund sweep interrupted by a crash", .timeLimit(.minutes(10)))
struct SplitSweepCrashTests {
    /// What the tests pay: a split of 1,000 cents in 5 shares, four of them paid by four payers, each with a tip.
    static let payers = 4
    static let funding: Cents = 1_000

    /// A payee and four payers on `url`, and a split with four of its five shares paid (tips 0, 5, 10, 15).
    static func partlyPaid(_ url: URL) async throws -> (sid: String, payee: LedgerClient, payers: [LedgerClient]) {
        let payee = try await CrashTests.login("payee@crash.example", url)
        var payers: [LedgerClient] = []
        for index in 0..<Self.payers {
            payers.append(try await CrashTests.login("payer\(index)@crash.example", url, funded: Self.funding))
        }
        let session = try await payee.createSession(amountCents: 1_000, shares: 5)
        for (index, payer) in payers.enumerated() {
            _ = try await payer.lock(sid: session.sid, shares: 1)
            _ = try await payer.send(sid: session.sid, idempotencyKey: "pay", tipCents: Cents(5 * index))
        }
        #expect(try await payee.session(sid: session.sid).status == .partiallyPaid)
        return (session.sid, payee, payers)
    }

    /// Waits until the session's refunds reach `cents`, as its payee reads its status.
    static func refunded(_ cents: Cents, _ sid: String, _ payee: LedgerClient) async throws -> Bool {
        try await eventually { (try? await payee.session(sid: sid).refundedCents) == cents }
    }

    /// The payments' refunds in the end: each payment returned whole by exactly one refund, every payer whole
    /// again, the payee back to nothing.
    static func checkReturnedOnce(
        _ sid: String,
        _ payee: LedgerClient,
        _ payers: [LedgerClient],
        refundRows: [String: Int]
    ) async throws {
        let view = try await payee.session(sid: sid)
        #expect(view.status == .cancelled && view.refundedCents == 800 + 30)
        #expect(view.payments.count == Self.payers)
        for payment in view.payments {
            #expect(payment.refundedCents == payment.amountCents + payment.tipCents)
            #expect(refundRows[payment.paymentID] == 1, "payment \(payment.paymentID): \(refundRows)")
        }
        #expect(refundRows.count == Self.payers)
        for payer in payers { #expect(try await payer.wallet().availableCents == Self.funding) }
        #expect(try await payee.wallet().availableCents == 0)
    }

    /// `gotchu ledger verify` on a stopped server's database: it must pass.
    static func ledgerVerify(_ database: String, _ environment: [String: String]) async throws {
        let verify = try RunningCommand(
            try BuiltProducts.gotchu,
            ["ledger", "verify", "--database", database],
            environment: environment
        )
        let status = try await verify.waitForExit(timeout: .seconds(120))
        #expect(status == 0, "\(verify.lines) \(verify.standardError)")
        #expect(verify.lines.contains { $0.hasPrefix("ledger verified") }, "\(verify.lines)")
    }

    @Test("SQLite: SIGKILL between a sweep's refunds (the third fails); the restarted server returns the rest, once")
    func sqlite() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        let environment = ["XDG_DATA_HOME": directory.url.path, "GOTCHU_JWT_SECRET": TestLedger.secret]
        let arguments = ["server", "--dev", "--database", path]
        var (server, url) = try await InterruptedSendTests.start(arguments, environment)
        let (sid, payee, payers) = try await Self.partlyPaid(url)

        // Each payment goes back in a transaction of its own; the third's fails at its last write, every time the
        // cancel or the sweep tries it.
        let database = try DatabaseQueue(path: path)
        try await database.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER refuse_third_refund BEFORE INSERT ON refunds
                    WHEN (SELECT COUNT(*) FROM refunds WHERE session_id = NEW.session_id) >= 2
                    BEGIN SELECT RAISE(ABORT, 'simulated failure'); END;
                    """
            )
        }
        try await payee.cancel(sid: sid)
        // The oldest two payments (shares 1 and 2: 200 + 0 and 200 + 5) went back; the sweep keeps failing on the
        // third.
        #expect(try await Self.refunded(405, sid, payee))
        #expect(try await server.stop(signal: SIGKILL) == SIGKILL)
        try await database.write { db in try db.execute(sql: "DROP TRIGGER refuse_third_refund") }
        #expect(try await Self.refundRows(database, sid).values.reduce(0, +) == 2)

        (server, _) = try await InterruptedSendTests.start(arguments, port: url.port!, environment)
        // No request but the status: the restarted server's sweep returns the other two.
        #expect(try await Self.refunded(830, sid, payee))
        let rows = try await Self.refundRows(database, sid)
        try await Self.checkReturnedOnce(sid, payee, payers, refundRows: rows)
        #expect(try await server.stop(signal: SIGTERM) == 0)
        #expect(try await Self.refundRows(database, sid) == rows)
        try await Self.ledgerVerify(path, environment)
    }

    @Test(
        "PostgreSQL: SIGKILL while a refund of the sweep waits inside its transaction; the restarted server returns the rest, once",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
    )
    func postgres() async throws {
        try await TestPostgres.withDatabase { database in
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let environment = ["XDG_DATA_HOME": directory.url.path, "GOTCHU_JWT_SECRET": TestLedger.secret]
            let arguments = ["server", "--dev", "--database", database.redacted]
            var (server, url) = try await InterruptedSendTests.start(arguments, environment)
            let (sid, payee, payers) = try await Self.partlyPaid(url)
            let logger = Logger(label: "crash-test") { _ in SwiftLogNoOpLogHandler() }

            // The third refund of the session stops inside its transaction, its transfer and receipt written.
            try await TestPostgres.withClient(database) { client in
                _ = try await client.query(
                    """
                    CREATE FUNCTION hold_third_refund() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF (SELECT COUNT(*) FROM refunds WHERE session_id = NEW.session_id) >= 2 THEN
                            PERFORM pg_sleep(3600);
                        END IF;
                        RETURN NEW;
                    END $$
                    """
                )
                _ = try await client.query(
                    """
                    CREATE TRIGGER hold_third_refund BEFORE INSERT ON refunds
                    FOR EACH ROW EXECUTE FUNCTION hold_third_refund()
                    """
                )
            }
            // The cancel returns the payments itself, and hangs on the third.
            let cancelling = Task { try await payee.cancel(sid: sid) }
            let killed = server
            try await TestPostgres.withClient(database) { client in
                try await client.withConnection { connection in
                    _ = try await InterruptedSendTests.waitForRow(connection, logger) {
                        """
                        SELECT pid FROM pg_stat_activity WHERE datname = current_database()
                        AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()
                        """
                    }
                    #expect(try await killed.stop(signal: SIGKILL) == SIGKILL)
                    await #expect(throws: LedgerClientError.self) { try await cancelling.value }
                    // The database finds the dead server's connections when it next talks to them; a sleeping one
                    // is ended here, which rolls its refund back.
                    _ = try await connection.query(
                        """
                        SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()
                        AND pid <> pg_backend_pid()
                        """,
                        logger: logger
                    ).collect()
                    _ = try await InterruptedSendTests.waitForRow(connection, logger) {
                        """
                        SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
                        AND pid <> pg_backend_pid())
                        """
                    }
                    _ = try await connection.query("DROP TRIGGER hold_third_refund ON refunds", logger: logger)
                        .collect()
                    _ = try await connection.query("DROP FUNCTION hold_third_refund()", logger: logger).collect()
                }
            }
            #expect(try await Self.refundRows(database, sid).values.reduce(0, +) == 2)

            (server, _) = try await InterruptedSendTests.start(arguments, port: url.port!, environment)
            #expect(try await Self.refunded(830, sid, payee))
            let rows = try await Self.refundRows(database, sid)
            try await Self.checkReturnedOnce(sid, payee, payers, refundRows: rows)
            #expect(try await server.stop(signal: SIGTERM) == 0)
            #expect(try await Self.refundRows(database, sid) == rows)
            try await Self.ledgerVerify(database.redacted, environment)
        }
    }

    /// How many refunds (rows, and REFUND_OUT entries: they must agree) each payment of `sid` has, SQLite.
    static func refundRows(_ database: DatabaseQueue, _ sid: String) async throws -> [String: Int] {
        try await database.read { db in
            let entries =
                try Int.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM ledger_entries WHERE ref_id = ? AND type = 'REFUND_OUT'",
                    arguments: [sid]
                ) ?? -1
            var rows: [String: Int] = [:]
            for row in try Row.fetchAll(
                db,
                sql: "SELECT payment_id, COUNT(*) AS n FROM refunds WHERE session_id = ? GROUP BY payment_id",
                arguments: [sid]
            ) {
                rows[row["payment_id"] ?? "none"] = row["n"]
            }
            #expect(rows.values.reduce(0, +) == entries, "refund rows \(rows), REFUND_OUT entries \(entries)")
            return rows
        }
    }

    /// The same, PostgreSQL.
    static func refundRows(_ database: PostgresURL, _ sid: String) async throws -> [String: Int] {
        try await TestPostgres.withClient(database) { client in
            var entries = -1
            for try await count in try await client.query(
                "SELECT COUNT(*) FROM ledger_entries WHERE ref_id = \(sid) AND type = 'REFUND_OUT'"
            ).decode(Int64.self) {
                entries = Int(count)
            }
            var rows: [String: Int] = [:]
            for try await (payment, count) in try await client.query(
                "SELECT COALESCE(payment_id, 'none'), COUNT(*) FROM refunds WHERE session_id = \(sid) GROUP BY payment_id"
            ).decode((String, Int64).self) {
                rows[payment] = Int(count)
            }
            #expect(rows.values.reduce(0, +) == entries, "refund rows \(rows), REFUND_OUT entries \(entries)")
            return rows
        }
    }
}
