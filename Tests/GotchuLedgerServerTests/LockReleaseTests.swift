import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import Testing

@Suite("Releasing locks, and the funds a payer's locks need", .timeLimit(.minutes(10)))
struct LockReleaseTests {
    @Test(
        "The holder unlocks: another payer locks at once; unlocking again is ok; nobody else can unlock",
        arguments: StoreKind.available
    )
    func unlock(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let first = try await ledger.client("first@example.com", funded: 1_000)
            let second = try await ledger.client("second@example.com", funded: 1_000)
            let session = try await payee.createSession(amountCents: 300)

            #expect(await problemKind { try await first.unlock(sid: session.sid) } == .forbidden)
            try await first.lock(sid: session.sid)
            #expect(await problemKind { try await second.unlock(sid: session.sid) } == .sessionLocked)
            #expect(await problemKind { try await payee.unlock(sid: session.sid) } == .sessionLocked)
            #expect(try await payee.session(sid: session.sid).status == .locked)

            try await first.unlock(sid: session.sid)
            #expect(try await payee.session(sid: session.sid).status == .advertising)
            // A retry of the unlock (its answer was lost) is answered the same.
            try await first.unlock(sid: session.sid)
            #expect(await problemKind { try await first.send(sid: session.sid, idempotencyKey: "k") } == .lockRequired)
            #expect(await problemKind { try await payee.unlock(sid: session.sid) } == .forbidden)

            try await second.lock(sid: session.sid)
            // The earlier holder's unlock must not release the new holder's lock.
            #expect(await problemKind { try await first.unlock(sid: session.sid) } == .sessionLocked)
            #expect(try await second.send(sid: session.sid, idempotencyKey: "k").newBalanceCents == 700)
            // Paid: nothing left to release, and its payer is told so without an error.
            try await second.unlock(sid: session.sid)
            #expect(try await second.session(sid: session.sid).status == .paid)

            // A lapsed lock: its holder's unlock is ok.
            let lapsing = try await payee.createSession(amountCents: 100)
            try await first.lock(sid: lapsing.sid)
            ledger.clock.advance(seconds: 31)
            try await first.unlock(sid: lapsing.sid)
            #expect(await problemKind { try await first.unlock(sid: UUID().uuidString) } == .sessionNotFound)
            #expect(try await ledger.store.audit().isHealthy)
        }
    }

    @Test(
        "A payer's locks together may not exceed its balance; an unlocked, paid or lapsed lock frees its amount",
        arguments: StoreKind.available
    )
    func fundsCoverEveryLock(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 10_000)
            let first = try await payee.createSession(amountCents: 10_000)
            let second = try await payee.createSession(amountCents: 10_000)
            let small = try await payee.createSession(amountCents: 1)

            try await payer.lock(sid: first.sid)
            #expect(await problemKind { try await payer.lock(sid: second.sid) } == .insufficientFunds)
            #expect(await problemKind { try await payer.lock(sid: small.sid) } == .insufficientFunds)
            // Renewing the lock it holds is not a second claim on the same money.
            try await payer.lock(sid: first.sid)

            try await payer.unlock(sid: first.sid)
            try await payer.lock(sid: second.sid)
            #expect(try await payee.session(sid: second.sid).status == .locked)

            // Once the lock lapses its amount is free again.
            ledger.clock.advance(seconds: 31)
            try await payer.lock(sid: first.sid)
            // Paying releases the claim; the balance left is what later locks are measured against.
            _ = try await payer.send(sid: first.sid, idempotencyKey: "first")
            #expect(await problemKind { try await payer.lock(sid: small.sid) } == .insufficientFunds)
            _ = try await payer.fund(amountCents: 1)
            try await payer.lock(sid: small.sid)
            #expect(try await ledger.store.audit().isHealthy)
        }
    }
}
