import GotchuAPI
import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerTesting
import Logging
import PostgresNIO
import Testing

@Suite(
    "PostgreSQL prepared statements",
    .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason),
    .timeLimit(.minutes(10))
)
struct PostgresPreparedStatementTests {
    @Test("A payment's statements are prepared once on a connection; the next payment reuses every one")
    func preparedOncePerConnection() async throws {
        try await Self.withLockedSession { _, store, sid, payer, payee in
            #expect(
                try await store.send(sid: sid, payerID: payer, idempotencyKey: "k").0 == .paid(newBalanceCents: 500)
            )
            let first = try await Self.preparedStatements(store)
            #expect(first.count >= 20 && first.keys.allSatisfy { $0.hasPrefix("gotchu_") })
            // The payment's last writes went as one statement: the transfer's entries, the chain head, the session,
            // the receipt, the key's outcome and the notification.
            let joined = try #require(first.values.first { $0.contains("INSERT INTO receipts") }, "\(first)")
            for part in [
                "WITH w0 AS (", "INSERT INTO ledger_entries", "UPDATE ledger_chain", "UPDATE payment_sessions",
                "INSERT INTO idempotency_keys", "SELECT pg_notify(",
            ] {
                #expect(joined.contains(part), "\(joined)")
            }

            let (session, _) = try await store.createSession(payeeID: payee, amountCents: 100, idempotencyKey: nil)
            try await store.lock(sid: session.sid, payerID: payer)
            let (outcome, _) = try await store.send(sid: session.sid, payerID: payer, idempotencyKey: "k2")
            #expect(outcome == .paid(newBalanceCents: 400))
            #expect(try await Self.preparedStatements(store) == first)
        }
    }

    @Test("A statement whose preparation failed (its table was away) is prepared afresh: the next payment pays")
    func failedPreparationIsForgotten() async throws {
        try await Self.withLockedSession { url, store, sid, payer, _ in
            // The first send prepares the receipt's INSERT on the store's only connection; with the table renamed
            // away, that preparation fails.
            try await TestPostgres.withClient(url) { other in
                _ = try await other.query("ALTER TABLE receipts RENAME TO receipts_away")
                let error = await #expect(throws: PSQLError.self) {
                    _ = try await store.send(sid: sid, payerID: payer, idempotencyKey: "k")
                }
                #expect(error?.serverInfo?[.sqlState] == "42P01", "\(String(reflecting: error))")
                _ = try await other.query("ALTER TABLE receipts_away RENAME TO receipts")
            }
            #expect(
                try await store.send(sid: sid, payerID: payer, idempotencyKey: "k").0 == .paid(newBalanceCents: 500)
            )
            #expect(try await store.audit().isHealthy)
        }
    }

    @Test("With prepared_statements=off in the URL nothing is prepared, and payments still pay")
    func preparedStatementsOff() async throws {
        try await Self.withLockedSession(preparesStatements: false) { _, store, sid, payer, _ in
            let (outcome, _) = try await store.send(sid: sid, payerID: payer, idempotencyKey: "k")
            #expect(outcome == .paid(newBalanceCents: 500))
            let prepared = try await Self.preparedStatements(store)
            #expect(prepared.isEmpty, "\(prepared)")
        }
    }

    static let logger = Logger(label: "prepared") { _ in SwiftLogNoOpLogHandler() }

    /// A migrated store on a fresh database, its pool one connection, with a payee's session of 500 cents locked by
    /// a payer holding 1,000.
    static func withLockedSession(
        preparesStatements: Bool = true,
        _ body:
            @Sendable (PostgresURL, PostgresLedgerStore, _ sid: String, _ payerID: String, _ payeeID: String)
            async throws -> Void
    ) async throws {
        try await TestPostgres.withDatabase { url in
            var configured = url
            configured.preparesStatements = preparesStatements
            let store = PostgresLedgerStore(
                url: configured,
                maximumConnections: 1,
                connectionWait: TestPostgres.connectionWait,
                logger: logger
            )
            try await withServices([store.client]) {
                try await store.migrate()
                let payee = try await store.login(email: "payee@example.com")
                let payer = try await store.login(email: "payer@example.com")
                _ = try await store.fund(userID: payer.id, amountCents: 1_000)
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: 500,
                    idempotencyKey: nil
                )
                try await store.lock(sid: session.sid, payerID: payer.id)
                try await body(url, store, session.sid, payer.id, payee.id)
            }
        }
    }

    /// The statements prepared on the store's connection (its pool's only one), by name.
    static func preparedStatements(_ store: PostgresLedgerStore) async throws -> [String: String] {
        var statements: [String: String] = [:]
        for try await (name, text) in try await store.client.query(
            "SELECT name, statement FROM pg_prepared_statements"
        ).decode((String, String).self) {
            statements[name] = text
        }
        return statements
    }
}
