import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import PostgresNIO
import Testing

@Suite("Idempotency-Key on /wallet/send", .timeLimit(.minutes(10)))
struct IdempotencyTests {
    /// A payer who has locked a fresh session of `cents`, and the session id.
    private func lockedSession(_ ledger: TestLedger, cents: Cents = 100) async throws -> (LedgerClient, String) {
        let payer = try await ledger.client("payer@example.com", funded: 10_000)
        let payee = try await ledger.client("payee\(UUID().uuidString.prefix(6))@example.com")
        let session = try await payee.createSession(amountCents: cents)
        try await payer.lock(sid: session.sid)
        return (payer, session.sid)
    }

    @Test("Without a key → 400 idempotency-key-missing; an invalid key → 400", arguments: StoreKind.available)
    func missingKey(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            let auth = ["Authorization": "Bearer \(payer.token!)"]
            let missing = try await ledger.raw("POST", "/wallet/send", body: #"{"sid":"\#(sid)"}"#, headers: auth)
            #expect(missing.status == 400 && TestLedger.problemKind(missing.body) == .idempotencyKeyMissing)
            let tooLong = auth.merging(["Idempotency-Key": String(repeating: "k", count: 256)]) { $1 }
            let invalid = try await ledger.raw("POST", "/wallet/send", body: #"{"sid":"\#(sid)"}"#, headers: tooLong)
            #expect(invalid.status == 400 && TestLedger.problemKind(invalid.body) == .badRequest)
            #expect(try await payer.wallet().availableCents == 10_000)
        }
    }

    @Test(
        "Same key, same request → replayed with Idempotent-Replayed; a quoted sf-string key is the same key",
        arguments: StoreKind.available
    )
    func replay(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            let first = try await payer.send(sid: sid, idempotencyKey: "key-1")
            let again = try await payer.send(sid: sid, idempotencyKey: "\"key-1\"")
            #expect(!first.replayed && again.replayed)
            #expect(first.newBalanceCents == again.newBalanceCents)
            #expect(try await ledger.store.audit().entryCount == 4)
        }
    }

    @Test("Same key, different session → 422 idempotency-key-reused", arguments: StoreKind.available)
    func reusedKey(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            _ = try await payer.send(sid: sid, idempotencyKey: "key-1")
            let payee = try await ledger.client("other@example.com")
            let other = try await payee.createSession(amountCents: 100)
            try await payer.lock(sid: other.sid)
            #expect(
                await problemKind { try await payer.send(sid: other.sid, idempotencyKey: "key-1") }
                    == .idempotencyKeyReused
            )
            #expect(try await payer.send(sid: other.sid, idempotencyKey: "key-2").replayed == false)
        }
    }

    @Test("Keys are scoped per user: another user's identical key is a different key", arguments: StoreKind.available)
    func scopedPerUser(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            _ = try await payer.send(sid: sid, idempotencyKey: "shared")
            let other = try await ledger.client("other-payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee2@example.com")
            let session = try await payee.createSession(amountCents: 100)
            try await other.lock(sid: session.sid)
            let result = try await other.send(sid: session.sid, idempotencyKey: "shared")
            #expect(result == SignedAnswer(newBalanceCents: 900, replayed: false))
        }
    }

    @Test(
        "A key still in flight → 409 idempotency-in-flight, told apart from session-locked; abandoned keys recover",
        arguments: StoreKind.available
    )
    func inFlight(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            let user = try #require(try await ledger.store.login(email: "payer@example.com").id as String?)
            // Another replica admitted this key and has not finished.
            let admitting = try #require(ledger.store as? any SendAdmitting)
            #expect(try await admitting.beginSend(sid: sid, payerID: user, idempotencyKey: "k") == .proceed)
            let auth = ["Authorization": "Bearer \(payer.token!)", "Idempotency-Key": "k"]
            let response = try await ledger.raw("POST", "/wallet/send", body: #"{"sid":"\#(sid)"}"#, headers: auth)
            #expect(response.status == 409)
            #expect(TestLedger.problemKind(response.body) == .idempotencyInFlight)
            #expect(ProblemKind.idempotencyInFlight.typeURI != ProblemKind.sessionLocked.typeURI)
            #expect(try await payer.wallet().availableCents == 10_000)
            ledger.clock.advance(seconds: 59)
            let stillRunning = try await ledger.raw("POST", "/wallet/send", body: #"{"sid":"\#(sid)"}"#, headers: auth)
            #expect(TestLedger.problemKind(stillRunning.body) == .idempotencyInFlight)
            // That replica died without writing anything (its transaction never committed): after the in-flight
            // timeout a retry with the same key runs the payment, once.
            ledger.clock.advance(seconds: 1)
            try await payer.lock(sid: sid)
            #expect(
                try await payer.send(sid: sid, idempotencyKey: "k")
                    == SignedAnswer(newBalanceCents: 9_900, replayed: false)
            )
            #expect(try await payer.send(sid: sid, idempotencyKey: "k").replayed)
        }
    }

    @Test(
        "A lapsed lock's refusal is not stored under the key: after a fresh lock the same key pays, once",
        arguments: StoreKind.available
    )
    func lockRequiredReleasesKey(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            ledger.clock.advance(seconds: 31)
            #expect(await problemKind { try await payer.send(sid: sid, idempotencyKey: "resume") } == .lockRequired)
            #expect(try await ledger.idempotencyKeyCount() == 0)
            // Not a replay either: asked again without a lock, it is refused afresh, and still not stored.
            let auth = ["Authorization": "Bearer \(payer.token!)", "Idempotency-Key": "resume"]
            let again = try await ledger.raw("POST", "/wallet/send", body: #"{"sid":"\#(sid)"}"#, headers: auth)
            #expect(TestLedger.problemKind(again.body) == .lockRequired && again.headers["idempotent-replayed"] == nil)

            try await payer.lock(sid: sid)
            #expect(
                try await payer.send(sid: sid, idempotencyKey: "resume")
                    == SignedAnswer(newBalanceCents: 9_900, replayed: false)
            )
            #expect(try await payer.send(sid: sid, idempotencyKey: "resume").replayed)
            #expect(try await ledger.store.audit().entryCount == 4)
        }
    }

    @Test(
        "Another payer's lock refuses without storing the key; once it is released the same key pays",
        arguments: StoreKind.available
    )
    func sessionLockedReleasesKey(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (holder, sid) = try await lockedSession(ledger)
            let payer = try await ledger.client("second@example.com", funded: 1_000)
            #expect(await problemKind { try await payer.send(sid: sid, idempotencyKey: "mine") } == .sessionLocked)
            #expect(try await ledger.idempotencyKeyCount() == 0)
            try await holder.unlock(sid: sid)
            try await payer.lock(sid: sid)
            #expect(
                try await payer.send(sid: sid, idempotencyKey: "mine")
                    == SignedAnswer(newBalanceCents: 900, replayed: false)
            )
        }
    }

    @Test(
        "Final refusals (expired, paid, cancelled, own session) are stored and replayed under the key",
        arguments: StoreKind.available
    )
    func finalRefusalsReplay(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            let payee = try await ledger.client("payee-final@example.com")
            let cancelled = try await payee.createSession(amountCents: 100)
            try await payer.lock(sid: cancelled.sid)
            try await payee.cancel(sid: cancelled.sid)
            let own = try await payee.createSession(amountCents: 100)
            let paid = try await payee.createSession(amountCents: 100)
            try await payer.lock(sid: paid.sid)
            _ = try await payer.send(sid: paid.sid, idempotencyKey: "pays")
            let late = try await ledger.client("late@example.com", funded: 1_000)
            ledger.clock.advance(seconds: 301)
            let cases: [(LedgerClient, String, String, ProblemKind)] = [
                (payer, sid, "expired", .sessionExpired),
                (payer, cancelled.sid, "cancelled", .sessionCancelled),
                (payee, own.sid, "own", .ownSession),
                (late, paid.sid, "paid", .sessionAlreadyPaid),
            ]
            for (client, sid, key, kind) in cases {
                let auth = ["Authorization": "Bearer \(client.token!)", "Idempotency-Key": key]
                let first = try await ledger.raw("POST", "/wallet/send", body: #"{"sid":"\#(sid)"}"#, headers: auth)
                let second = try await ledger.raw("POST", "/wallet/send", body: #"{"sid":"\#(sid)"}"#, headers: auth)
                #expect(TestLedger.problemKind(first.body) == kind && first.headers["idempotent-replayed"] == nil)
                #expect(TestLedger.problemKind(second.body) == kind && second.headers["idempotent-replayed"] == "true")
            }
            #expect(try await ledger.idempotencyKeyCount() == 5)
        }
    }

    @Test("Keys older than 24 h are pruned; younger ones are kept", arguments: StoreKind.available)
    func pruning(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            _ = try await payer.send(sid: sid, idempotencyKey: "old")
            ledger.clock.advance(seconds: 24 * 3600 - 1)
            #expect(try await ledger.store.pruneIdempotencyKeys() == 0)
            let relogged = try await ledger.client("payer@example.com")  // the first token has expired by now
            #expect(try await relogged.send(sid: sid, idempotencyKey: "old").replayed)
            ledger.clock.advance(seconds: 2)
            #expect(try await ledger.store.pruneIdempotencyKeys() == 1)
        }
    }

    @Test("SQLite: the key's outcome and the ledger entries commit together: if one cannot be written, neither is")
    func sameTransaction() async throws {
        try await TestLedger.with(store: .sqlite) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            let database = try DatabaseQueue(path: try ledger.databasePath)
            try await OutcomeFailure.impose(on: database)
            #expect(await problemKind { try await payer.send(sid: sid, idempotencyKey: "atomic") } == .internalError)
            #expect(try await payer.wallet().availableCents == 10_000)
            #expect(try await ledger.store.audit().entryCount == 2)  // only the funding pair
            #expect(try await payer.session(sid: sid).status == .locked)

            try await OutcomeFailure.lift(on: database)
            #expect(
                try await payer.send(sid: sid, idempotencyKey: "atomic")
                    == SignedAnswer(newBalanceCents: 9_900, replayed: false)
            )
            #expect(try await ledger.store.audit().isHealthy)
        }
    }

    @Test(
        "PostgreSQL: the key's outcome and the ledger entries commit together: if one cannot be written, neither is",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
    )
    func sameTransactionPostgres() async throws {
        try await TestLedger.with(store: .postgres) { ledger in
            let (payer, sid) = try await lockedSession(ledger)
            guard case .postgres(let url) = ledger.database else { throw TestPostgresError("not PostgreSQL") }
            try await TestPostgres.withClient(url) { client in
                _ = try await client.query(
                    """
                    CREATE FUNCTION refuse_outcome() RETURNS trigger LANGUAGE plpgsql
                    AS $$ BEGIN RAISE EXCEPTION 'simulated failure'; END $$
                    """
                ).collect()
                _ = try await client.query(
                    """
                    CREATE TRIGGER refuse_outcome BEFORE UPDATE ON idempotency_keys FOR EACH ROW
                    WHEN (NEW.state = 'DONE') EXECUTE FUNCTION refuse_outcome()
                    """
                ).collect()
            }
            #expect(await problemKind { try await payer.send(sid: sid, idempotencyKey: "atomic") } == .internalError)
            #expect(try await payer.wallet().availableCents == 10_000)
            #expect(try await ledger.store.audit().entryCount == 2)  // only the funding pair
            #expect(try await payer.session(sid: sid).status == .locked)

            try await TestPostgres.withClient(url) { client in
                _ = try await client.query("DROP TRIGGER refuse_outcome ON idempotency_keys").collect()
            }
            #expect(
                try await payer.send(sid: sid, idempotencyKey: "atomic")
                    == SignedAnswer(newBalanceCents: 9_900, replayed: false)
            )
            #expect(try await ledger.store.audit().isHealthy)
        }
    }
}
