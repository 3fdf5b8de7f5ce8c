import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import Testing

@Suite("Rotating a session's EID, and who may resolve one", .timeLimit(.minutes(10)))
struct EIDRotationTests {
    @Test(
        "A rotated EID resolves through the grace, then answers 410 eid-retired; the new one resolves and pays",
        arguments: StoreKind.available
    )
    func rotation(store: StoreKind) async throws {
        var policy = LedgerPolicy()
        policy.eidGrace = .seconds(10)
        try await TestLedger.with(store: store, policy: policy) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let session = try await payee.createSession(amountCents: 250)

            let rotated = try await payee.rotateEID(sid: session.sid)
            #expect(rotated.sid == session.sid)
            #expect(rotated.eid != session.eid)
            #expect(abs(rotated.previousValidUntil.timeIntervalSince(ledger.clock.now().addingTimeInterval(10))) < 1)
            #expect(abs(rotated.expiresAt.timeIntervalSince(session.expiresAt)) < 1)
            #expect(try await payer.resolve(eid: rotated.eid).sid == session.sid)
            #expect(try await payer.resolve(eid: session.eid).sid == session.sid)

            ledger.clock.advance(seconds: 9.9)
            #expect(try await payer.resolve(eid: session.eid).sid == session.sid)
            ledger.clock.advance(seconds: 0.1)
            #expect(await problemKind { try await payer.resolve(eid: session.eid) } == .eidRetired)
            #expect(try await payer.resolve(eid: rotated.eid).amountCents == 250)

            // Each rotation retires the EID before it; none repeats.
            let again = try await payee.rotateEID(sid: session.sid)
            #expect(Set([session.eid, rotated.eid, again.eid]).count == 3)
            ledger.clock.advance(seconds: 10)
            #expect(await problemKind { try await payer.resolve(eid: rotated.eid) } == .eidRetired)
            let resolved = try await payer.resolve(eid: again.eid)
            try await payer.lock(sid: resolved.sid)
            #expect(try await payer.send(sid: resolved.sid, idempotencyKey: "k").newBalanceCents == 750)
            #expect(try await ledger.store.audit().isHealthy)
        }
    }

    @Test(
        "Only the payee rotates, and only a live session; unknown and malformed ids are refused",
        arguments: StoreKind.available
    )
    func refusals(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let session = try await payee.createSession(amountCents: 250)
            #expect(await problemKind { try await payer.rotateEID(sid: session.sid) } == .forbidden)
            #expect(await problemKind { try await payee.rotateEID(sid: UUID().uuidString) } == .sessionNotFound)
            #expect(await problemKind { try await payee.rotateEID(sid: "nope") } == .badRequest)
            let unauthenticated = try await ledger.raw("POST", "/sessions/\(session.sid)/eids")
            #expect(unauthenticated.status == 401)

            try await payer.lock(sid: session.sid)
            _ = try await payer.send(sid: session.sid, idempotencyKey: "k")
            #expect(await problemKind { try await payee.rotateEID(sid: session.sid) } == .sessionAlreadyPaid)
            let cancelled = try await payee.createSession(amountCents: 100)
            try await payee.cancel(sid: cancelled.sid)
            #expect(await problemKind { try await payee.rotateEID(sid: cancelled.sid) } == .sessionCancelled)
            let expiring = try await payee.createSession(amountCents: 100)
            ledger.clock.advance(seconds: 301)
            #expect(await problemKind { try await payee.rotateEID(sid: expiring.sid) } == .sessionExpired)
        }
    }

    @Test("A session gets at most the policy's number of EIDs", arguments: StoreKind.available)
    func limit(store: StoreKind) async throws {
        var policy = LedgerPolicy()
        policy.maximumEIDsPerSession = 3
        try await TestLedger.with(store: store, policy: policy) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 250)
            _ = try await payee.rotateEID(sid: session.sid)
            let last = try await payee.rotateEID(sid: session.sid)
            #expect(await problemKind { try await payee.rotateEID(sid: session.sid) } == .eidLimitReached)
            // The refusal changed nothing: the last EID is still the one that resolves.
            let payer = try await ledger.client("payer@example.com")
            #expect(try await payer.resolve(eid: last.eid).sid == session.sid)
        }
    }

    @Test("A create replayed under its key answers the session's current EID", arguments: StoreKind.available)
    func replayedCreate(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let first = try await payee.createSession(amountCents: 250, idempotencyKey: "charge-1")
            let rotated = try await payee.rotateEID(sid: first.sid)
            let replayed = try await payee.createSession(amountCents: 250, idempotencyKey: "charge-1")
            #expect(replayed.sid == first.sid)
            #expect(replayed.eid == rotated.eid)
        }
    }

    @Test(
        "An EID stays taken when its session is over: no later session can be given it",
        arguments: StoreKind.available
    )
    func neverReused(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let cancelled = try await payee.createSession(amountCents: 100)
            try await payee.cancel(sid: cancelled.sid)
            let rotatedAway = try await payee.createSession(amountCents: 100)
            _ = try await payee.rotateEID(sid: rotatedAway.sid)
            ledger.clock.advance(seconds: 3600)
            #expect(try await Self.isAllocated(ledger.store, cancelled.eid))
            #expect(try await Self.isAllocated(ledger.store, rotatedAway.eid))
            var fresh = EID.random()
            while fresh == cancelled.eid || fresh == rotatedAway.eid { fresh = EID.random() }
            #expect(try await !Self.isAllocated(ledger.store, fresh))
        }
    }

    /// Whether the store's allocation would refuse `eid`, asked of its backend as the engine asks.
    private static func isAllocated(_ store: any LedgerStore, _ eid: EID) async throws -> Bool {
        if let sqlite = store as? SQLiteLedgerStore {
            return try await sqlite.backend.transaction { try await $0.isAllocated(eid: eid) }
        }
        let postgres = try #require(store as? PostgresLedgerStore)
        return try await postgres.backend.transaction { try await $0.isAllocated(eid: eid) }
    }

    @Test("By default only a logged-in user resolves; --resolve public lets anyone; the rate limit holds either way")
    func resolveAccess() async throws {
        var limits = LedgerLimits.unlimited
        limits.resolvePerAddress = RateLimit(perSecond: 0.001, burst: 3)
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let payer = try await ledger.client("payer@example.com")
            let session = try await payee.createSession(amountCents: 250)
            #expect(await problemKind { try await ledger.anonymous.resolve(eid: session.eid) } == .unauthorized)
            var forged = ledger.anonymous
            forged.token = "not-a-token"
            #expect(await problemKind { try await forged.resolve(eid: session.eid) } == .unauthorized)
            #expect(try await payer.resolve(eid: session.eid).sid == session.sid)
            #expect(await problemKind { try await payer.resolve(eid: session.eid) } == .rateLimited)
        }
        limits.resolveAccess = .public
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 250)
            #expect(try await ledger.anonymous.resolve(eid: session.eid).sid == session.sid)
            #expect(try await ledger.anonymous.resolve(eid: session.eid).amountCents == 250)
            _ = try? await ledger.anonymous.resolve(eid: session.eid)
            #expect(await problemKind { try await ledger.anonymous.resolve(eid: session.eid) } == .rateLimited)
        }
    }
}
