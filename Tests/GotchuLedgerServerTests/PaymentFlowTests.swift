import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import Testing

@Suite("Payment flow", .timeLimit(.minutes(10)))
struct PaymentFlowTests {
    @Test(
        "Alice ($100) pays Bob's $50 session; a retried send with the same key changes nothing",
        arguments: StoreKind.available
    )
    func specScenario(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let alice = try await ledger.client("alice@example.com", funded: 10_000)
            let bob = try await ledger.client("bob@example.com")
            let session = try await bob.createSession(amountCents: 5_000)
            #expect(session.eid.rawValue.count == 10)
            #expect(session.expiresAt == ledger.clock.now().addingTimeInterval(300))

            let resolved = try await alice.resolve(eid: session.eid)
            #expect(resolved.sid == session.sid)
            #expect(resolved.amountCents == 5_000)
            #expect(resolved.payeeDisplay.name == "bob")

            try await alice.lock(sid: session.sid)
            let key = UUID().uuidString
            let paid = try await alice.send(sid: session.sid, idempotencyKey: key)
            #expect(paid == SignedAnswer(newBalanceCents: 5_000, replayed: false))

            let aliceWallet = try await alice.wallet()
            let bobWallet = try await bob.wallet()
            #expect(aliceWallet.availableCents == 5_000)
            #expect(bobWallet.availableCents == 5_000)
            let debit = try #require(aliceWallet.recent.first)
            let credit = try #require(bobWallet.recent.first)
            #expect(debit.direction == .debit && debit.amountCents == 5_000 && debit.type == "SEND_P2P")
            #expect(credit.direction == .credit && credit.amountCents == 5_000 && credit.type == "RECEIVE_P2P")
            #expect(debit.refID == session.sid && credit.refID == session.sid)
            #expect(try await bob.session(sid: session.sid).status == .paid)
            #expect(try await bob.session(sid: session.sid).paidAt == ledger.clock.now())

            let retried = try await alice.send(sid: session.sid, idempotencyKey: key)
            #expect(retried == SignedAnswer(newBalanceCents: 5_000, replayed: true))
            #expect(try await alice.wallet().availableCents == 5_000)
            #expect(try await bob.wallet().availableCents == 5_000)

            let audit = try await ledger.store.audit()
            #expect(audit.isHealthy)
            #expect(audit.entryCount == 4)  // funding pair + payment pair
        }
    }

    @Test(
        "Session status moves ADVERTISING → LOCKED → ADVERTISING (lapse) → EXPIRED, and CANCELLED",
        arguments: StoreKind.available
    )
    func statuses(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let stranger = try await ledger.client("stranger@example.com")
            let session = try await payee.createSession(amountCents: 100)
            #expect(try await payee.session(sid: session.sid).status == .advertising)
            #expect(await problemKind { try await stranger.session(sid: session.sid) } == .sessionNotFound)
            try await payer.lock(sid: session.sid)
            #expect(try await payee.session(sid: session.sid).status == .locked)
            #expect(try await payer.session(sid: session.sid).status == .locked)
            ledger.clock.advance(seconds: 30)
            #expect(try await payee.session(sid: session.sid).status == .advertising)
            #expect(await problemKind { try await payer.session(sid: session.sid) } == .sessionNotFound)
            ledger.clock.advance(seconds: 270)
            #expect(try await payee.session(sid: session.sid).status == .expired)

            let other = try await payee.createSession(amountCents: 100)
            try await payee.cancel(sid: other.sid)
            try await payee.cancel(sid: other.sid)  // cancelling twice is fine
            #expect(try await payee.session(sid: other.sid).status == .cancelled)
            #expect(await problemKind { try await payer.resolve(eid: other.eid) } == .sessionCancelled)
            #expect(await problemKind { try await payer.lock(sid: other.sid) } == .sessionCancelled)
        }
    }

    @Test(
        "Sessions expire after 5 minutes by the store's clock: resolve, lock and pay get 410",
        arguments: StoreKind.available
    )
    func expiry(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 100)
            try await payer.lock(sid: session.sid)
            ledger.clock.advance(seconds: 299.999)
            _ = try await payer.resolve(eid: session.eid)
            ledger.clock.advance(seconds: 0.001)
            #expect(await problemKind { try await payer.resolve(eid: session.eid) } == .sessionExpired)
            #expect(await problemKind { try await payer.lock(sid: session.sid) } == .sessionExpired)
            #expect(
                await problemKind { try await payer.send(sid: session.sid, idempotencyKey: "k1") } == .sessionExpired
            )
            #expect(try await payer.wallet().availableCents == 1_000)
        }
    }

    @Test(
        "Lock: first wins, 409 for others while it holds, lapses after 30 s, payee cannot lock or pay its own",
        arguments: StoreKind.available
    )
    func locking(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let first = try await ledger.client("first@example.com", funded: 1_000)
            let second = try await ledger.client("second@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com", funded: 1_000)
            let session = try await payee.createSession(amountCents: 500)
            #expect(await problemKind { try await payee.lock(sid: session.sid) } == .ownSession)
            try await first.lock(sid: session.sid)
            try await first.lock(sid: session.sid)  // the holder may lock again
            #expect(await problemKind { try await second.lock(sid: session.sid) } == .sessionLocked)
            #expect(
                await problemKind { try await second.send(sid: session.sid, idempotencyKey: "a") } == .sessionLocked
            )
            #expect(await problemKind { try await payee.send(sid: session.sid, idempotencyKey: "b") } == .ownSession)
            ledger.clock.advance(seconds: 30)
            #expect(await problemKind { try await first.send(sid: session.sid, idempotencyKey: "c") } == .lockRequired)
            try await second.lock(sid: session.sid)
            #expect(await problemKind { try await first.lock(sid: session.sid) } == .sessionLocked)
            let paid = try await second.send(sid: session.sid, idempotencyKey: "d")
            #expect(paid.newBalanceCents == 500)
            #expect(await problemKind { try await first.lock(sid: session.sid) } == .sessionAlreadyPaid)
            #expect(await problemKind { try await first.resolve(eid: session.eid) } == .sessionAlreadyPaid)
            #expect(await problemKind { try await payee.cancel(sid: session.sid) } == .sessionAlreadyPaid)
            #expect(
                await problemKind { try await second.send(sid: session.sid, idempotencyKey: "e") }
                    == .sessionAlreadyPaid
            )
            #expect(try await payee.wallet().availableCents == 1_500)
        }
    }

    @Test(
        "Funds are checked at lock, against every lock the payer holds, and again at pay",
        arguments: StoreKind.available
    )
    func funds(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 700)
            let payee = try await ledger.client("payee@example.com")
            let big = try await payee.createSession(amountCents: 701)
            #expect(await problemKind { try await payer.lock(sid: big.sid) } == .insufficientFunds)

            let first = try await payee.createSession(amountCents: 500)
            let second = try await payee.createSession(amountCents: 500)
            try await payer.lock(sid: first.sid)
            // 500 is free, but the first lock already claims 500 of the 700: it could not pay both.
            #expect(await problemKind { try await payer.lock(sid: second.sid) } == .insufficientFunds)
            _ = try await payer.send(sid: first.sid, idempotencyKey: "first")
            #expect(await problemKind { try await payer.lock(sid: second.sid) } == .insufficientFunds)
            _ = try await payer.fund(amountCents: 1_000)
            try await payer.lock(sid: second.sid)
            #expect(try await payer.send(sid: second.sid, idempotencyKey: "second").newBalanceCents == 700)
            #expect(try await ledger.store.audit().isHealthy)
        }
    }

    @Test("A payee cancels; the payer's later pay is refused and nothing moves", arguments: StoreKind.available)
    func cancelThenPay(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 300)
            try await payer.lock(sid: session.sid)
            #expect(await problemKind { try await payer.cancel(sid: session.sid) } == .forbidden)
            try await payee.cancel(sid: session.sid)
            #expect(
                await problemKind { try await payer.send(sid: session.sid, idempotencyKey: "k") } == .sessionCancelled
            )
            #expect(try await payer.wallet().availableCents == 1_000)
            #expect(try await payee.wallet().availableCents == 0)
        }
    }

    @Test("EIDs are 10 lowercase hex characters and unique among live sessions", arguments: StoreKind.available)
    func eids(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            var seen = Set<EID>()
            for _ in 0..<200 {
                let session = try await payee.createSession(amountCents: 1)
                #expect(EID(rawValue: session.eid.rawValue) != nil)
                seen.insert(session.eid)
            }
            #expect(seen.count == 200)
        }
    }
}
