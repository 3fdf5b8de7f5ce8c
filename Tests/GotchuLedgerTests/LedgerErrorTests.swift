import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerTesting
import PostgresNIO
import Testing

/// The problem each refusal is answered with over HTTP is tested beside the server, in LedgerErrorProblemTests.
@Suite("Ledger refusals: one domain type, stored outcomes that still replay", .timeLimit(.minutes(10)))
struct LedgerErrorTests {
    @Test(
        "A refusal stored under an idempotency key is replayed as the same kind and detail",
        arguments: StoreKind.available
    )
    func storedRefusal(store kind: StoreKind) async throws {
        try await TestStore.with(kind, clock: ManualClock()) { store, database, services in
            try await withServices(services) {
                try await store.migrate()
                let payee = try await store.login(email: "payee@example.com")
                let payer = try await store.login(email: "payer@example.com")
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: 100,
                    idempotencyKey: nil
                )
                // Rows as every version so far wrote them: the kind in `problem_type`, spelt as the problem type.
                let stored: [(key: String, kind: String, detail: String, expected: LedgerError)] = [
                    (
                        "written-earlier", "insufficient-funds", "balance 0.00 is below 1.00",
                        LedgerError(.insufficientFunds, detail: "balance 0.00 is below 1.00")
                    ),
                    (
                        "written-later", "a-kind-from-a-newer-version", "refused for a new reason",
                        LedgerError(.inconsistent, detail: "refused for a new reason")
                    ),
                ]
                for row in stored {
                    try await Self.insertRefusal(
                        database,
                        userID: payer.id,
                        key: row.key,
                        sid: session.sid,
                        kind: row.kind,
                        detail: row.detail
                    )
                    let (outcome, replayed) = try await store.send(
                        sid: session.sid,
                        payerID: payer.id,
                        idempotencyKey: row.key
                    )
                    #expect(replayed)
                    #expect(outcome == .refused(row.expected))
                }
                // Nothing was paid: a stored refusal is replayed, never run again.
                #expect(try await store.session(sid: session.sid, viewerID: payee.id).status == .advertising)
            }
        }
    }

    private static func insertRefusal(
        _ database: TestDatabase,
        userID: String,
        key: String,
        sid: String,
        kind: String,
        detail: String
    ) async throws {
        switch database {
        case .sqlite(let path):
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO idempotency_keys (user_id, key, sid, state, problem_type, problem_detail, created_at,
                        updated_at) VALUES (?, ?, ?, 'DONE', ?, ?, 0, 0)
                        """,
                    arguments: [userID, key, sid, kind, detail]
                )
            }
        case .postgres(let url):
            try await TestPostgres.withClient(url) { client in
                _ = try await client.query(
                    """
                    INSERT INTO idempotency_keys (user_id, key, sid, state, problem_type, problem_detail, created_at,
                    updated_at) VALUES (\(userID), \(key), \(sid), 'DONE', \(kind), \(detail), 0, 0)
                    """
                ).collect()
            }
        }
    }
}
