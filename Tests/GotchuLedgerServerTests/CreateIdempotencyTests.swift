import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerAPI
import GotchuLedgerClient
import GotchuLedgerServer
import PostgresNIO
import Testing

@Suite("Idempotency-Key on /sessions/create", .timeLimit(.minutes(10)))
struct CreateIdempotencyTests {
    /// A raw `POST /sessions/create` by `client`, with `key` as the Idempotency-Key when given.
    private func create(
        _ ledger: TestLedger,
        _ client: LedgerClient,
        cents: Cents,
        key: String?
    ) async throws -> (status: Int, body: Data, replayed: Bool) {
        var headers = ["Authorization": "Bearer \(client.token!)"]
        if let key { headers["Idempotency-Key"] = key }
        let response = try await ledger.raw(
            "POST",
            "/sessions/create",
            body: #"{"amount_cents":\#(cents)}"#,
            headers: headers
        )
        return (response.status, response.body, response.headers["idempotent-replayed"] == "true")
    }

    /// The number of sessions in the database, read under the store.
    private func sessionCount(_ ledger: TestLedger) async throws -> Int {
        switch ledger.database {
        case .sqlite(let path):
            return try await DatabaseQueue(path: path).read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM payment_sessions") ?? -1
            }
        case .postgres(let url):
            return try await TestPostgres.withClient(url) { client in
                var count = -1
                for try await value in try await client.query("SELECT COUNT(*) FROM payment_sessions")
                    .decode(Int64.self)
                {
                    count = Int(value)
                }
                return count
            }
        }
    }

    @Test(
        "Same key, same amount → the first answer byte for byte, with Idempotent-Replayed, even once the session ended",
        arguments: StoreKind.available
    )
    func replay(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let first = try await create(ledger, payee, cents: 250, key: "charge-1")
            #expect(first.status == 200 && !first.replayed)
            let again = try await create(ledger, payee, cents: 250, key: "charge-1")
            #expect(again.status == 200 && again.replayed)
            #expect(again.body == first.body)
            let session = try APIJSON.decoder().decode(CreateSessionResponse.self, from: first.body)
            // A quoted sf-string is the same key.
            let quoted = try await create(ledger, payee, cents: 250, key: "\"charge-1\"")
            #expect(quoted.replayed && quoted.body == first.body)

            try await payee.cancel(sid: session.sid)
            ledger.clock.advance(seconds: 600)
            let afterwards = try await create(ledger, payee, cents: 250, key: "charge-1")
            #expect(afterwards.status == 200 && afterwards.replayed && afterwards.body == first.body)
            #expect(try await payee.session(sid: session.sid).status == .cancelled)
            #expect(try await sessionCount(ledger) == 1)
        }
    }

    @Test("Same key, another amount → 422 idempotency-key-reused, and no new session", arguments: StoreKind.available)
    func reusedKey(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            _ = try await payee.createSession(amountCents: 250, idempotencyKey: "charge-1")
            let other = try await create(ledger, payee, cents: 300, key: "charge-1")
            #expect(other.status == 422 && TestLedger.problemKind(other.body) == .idempotencyKeyReused)
            #expect(
                await problemKind { try await payee.createSession(amountCents: 251, idempotencyKey: "charge-1") }
                    == .idempotencyKeyReused
            )
            #expect(try await sessionCount(ledger) == 1)
        }
    }

    @Test(
        "Keys are scoped per payee: another payee's identical key makes its own session",
        arguments: StoreKind.available
    )
    func scopedPerPayee(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let first = try await ledger.client("first@example.com")
            let second = try await ledger.client("second@example.com")
            let one = try await create(ledger, first, cents: 100, key: "shared")
            let two = try await create(ledger, second, cents: 100, key: "shared")
            #expect(one.status == 200 && two.status == 200 && !one.replayed && !two.replayed)
            let decoder = APIJSON.decoder()
            let sessionOne = try decoder.decode(CreateSessionResponse.self, from: one.body)
            let sessionTwo = try decoder.decode(CreateSessionResponse.self, from: two.body)
            #expect(sessionOne.sid != sessionTwo.sid && sessionOne.eid != sessionTwo.eid)
            #expect(try await sessionCount(ledger) == 2)
        }
    }

    @Test("Without a key every create makes a new session; an invalid key → 400", arguments: StoreKind.available)
    func withoutKey(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let one = try await create(ledger, payee, cents: 100, key: nil)
            let two = try await create(ledger, payee, cents: 100, key: nil)
            #expect(one.status == 200 && two.status == 200 && !one.replayed && !two.replayed)
            #expect(one.body != two.body)
            for invalid in [String(repeating: "k", count: 256), "two words", "\"\""] {
                let refused = try await create(ledger, payee, cents: 100, key: invalid)
                #expect(refused.status == 400 && TestLedger.problemKind(refused.body) == .badRequest, "\(invalid)")
            }
            #expect(try await sessionCount(ledger) == 2)
        }
    }

    @Test(
        "Twenty concurrent creates with one key make one session; all but one answer as replays",
        arguments: StoreKind.available
    )
    func concurrentCreates(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let responses = try await withThrowingTaskGroup(of: (status: Int, body: Data, replayed: Bool).self) {
                group in
                for _ in 0..<20 { group.addTask { try await create(ledger, payee, cents: 700, key: "charge-7") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(responses.allSatisfy { $0.status == 200 })
            #expect(Set(responses.map(\.body)).count == 1)
            #expect(responses.filter { !$0.replayed }.count == 1)
            #expect(try await sessionCount(ledger) == 1)
        }
    }

    @Test("The client sends the key: the store answers its request again as a replay", arguments: StoreKind.available)
    func clientSendsKey(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let created = try await payee.createSession(amountCents: 400, idempotencyKey: "charge-9")
            let user = try await ledger.store.login(email: "payee@example.com")
            let (session, replayed) = try await ledger.store.createSession(
                payeeID: user.id,
                amountCents: 400,
                idempotencyKey: "charge-9"
            )
            #expect(replayed && CreateSessionResponse(session) == created)
            #expect(try await payee.createSession(amountCents: 400, idempotencyKey: "charge-9") == created)
            #expect(try await payee.createSession(amountCents: 400).sid != created.sid)
        }
    }
}
