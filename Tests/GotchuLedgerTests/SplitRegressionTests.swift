import Foundation
import GotchuCore
import GotchuLedger
import GotchuLedgerTesting
import Testing

/// What the model test found in splits, each as a test of its own.
@Suite("Group splits: what the model test found", .serialized, .timeLimit(.minutes(10)))
struct SplitRegressionTests {
    @Test(
        "A sweep passes over a split whose payee cannot cover its refunds: the others are returned, that one later",
        arguments: StoreKind.available
    )
    func stuckSplitHoldsBackNone(kind: StoreKind) async throws {
        let clock = ManualClock()
        try await TestStore.with(kind, clock: clock) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let broke = try await store.login(email: "broke@example.com")
                let solvent = try await store.login(email: "solvent@example.com")
                let payer = try await store.login(email: "payer@example.com")
                _ = try await store.fund(userID: payer.id, amountCents: 10_000)
                // The broke payee's split expires first, so the sweep meets it first.
                var sids: [String] = []
                for payee in [broke, solvent] {
                    let (session, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 400,
                        shares: 2,
                        idempotencyKey: nil
                    )
                    _ = try await store.lock(sid: session.sid, payerID: payer.id, shares: 1)
                    _ = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: session.sid)
                    sids.append(session.sid)
                    clock.advance(seconds: 1)
                }
                _ = try await store.requestPayout(userID: broke.id, amountCents: 200, idempotencyKey: "out")
                clock.advance(seconds: 300)
                await #expect(throws: LedgerError.self) { try await store.returnDueSharePayments(limit: 100) }
                #expect(try await store.session(sid: sids[1], viewerID: solvent.id).refunded == 200)
                #expect(try await store.session(sid: sids[0], viewerID: broke.id).refunded == 0)
                #expect(try await store.wallet(userID: payer.id, recentLimit: 0).balance == 10_000 - 200)
                // Once the payee can cover it, the next sweep returns it.
                _ = try await store.fund(userID: broke.id, amountCents: 200)
                #expect(try await store.returnDueSharePayments(limit: 100) == 1)
                #expect(try await store.session(sid: sids[0], viewerID: broke.id).refunded == 200)
                #expect(try await store.wallet(userID: payer.id, recentLimit: 0).balance == 10_000)
                let verification = try await store.verify()
                #expect(verification.failure == nil, "\(verification)")
            }
        }
    }

    @Test(
        "A store's audit counts a split paid once per payment, not as paid twice",
        arguments: StoreKind.available
    )
    func auditCountsEachPayment(kind: StoreKind) async throws {
        try await TestStore.with(kind, clock: ManualClock()) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let payee = try await store.login(email: "payee@example.com")
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: 300,
                    shares: 3,
                    idempotencyKey: nil
                )
                for index in 0..<3 {
                    let payer = try await store.login(email: "payer\(index)@example.com")
                    _ = try await store.fund(userID: payer.id, amountCents: 100)
                    _ = try await store.lock(sid: session.sid, payerID: payer.id, shares: 1)
                    _ = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: "k")
                }
                let audit = try await store.audit()
                #expect(audit.isHealthy && audit.sessionsPaidTwice.isEmpty, "\(audit)")
            }
        }
    }

    @Test(
        "One payer's payments of equal amounts in one millisecond, the later share first: verify matches each to its own transfer",
        arguments: StoreKind.available
    )
    func samePayerSameMillisecond(kind: StoreKind) async throws {
        try await TestStore.with(kind, clock: ManualClock()) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let payee = try await store.login(email: "payee@example.com")
                let payer = try await store.login(email: "payer@example.com")
                let friend = try await store.login(email: "friend@example.com")
                _ = try await store.fund(userID: payer.id, amountCents: 1_000)
                _ = try await store.fund(userID: friend.id, amountCents: 1_000)
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: 1_000,
                    shares: 4,
                    idempotencyKey: nil
                )
                // The friend holds share 1, so the payer pays share 2; then the friend lets go, and the payer pays
                // share 1 too. The clock stands still: both payments are of 250 cents, by one payer, at one time.
                #expect(try await store.lock(sid: session.sid, payerID: friend.id, shares: 1).shareNumbers == [1])
                #expect(try await store.lock(sid: session.sid, payerID: payer.id, shares: 1).shareNumbers == [2])
                _ = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: "second")
                try await store.unlock(sid: session.sid, payerID: friend.id)
                #expect(try await store.lock(sid: session.sid, payerID: payer.id, shares: 1).shareNumbers == [1])
                let (outcome, _) = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: "first")
                #expect(outcome == .paid(newBalanceCents: 500))
                let view = try await store.session(sid: session.sid, viewerID: payee.id)
                #expect(view.payments.map(\.shareNumbers) == [[1], [2]])
                let verification = try await store.verify()
                // Until the verifier tells such payments apart (by their receipts' entries, or a transfer id kept
                // with the shares), it may pair each with the other's transfer and fail the receipts.
                #expect(verification.failure == nil, "\(verification)")
            }
        }
    }
}
