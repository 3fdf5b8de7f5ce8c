import GotchuCore
import GotchuLedger
import GotchuLedgerTesting
import GotchuReceipts
import Testing

@Suite("Group splits and tips on the engine", .timeLimit(.minutes(10)))
struct SplitTests {
    @Test("1001 cents in 4: shares of 251, 250, 250, 250, paid by three payers with tips; PAID with the last")
    func payEveryShare() async throws {
        for kind in StoreKind.available {
            try await TestStore.with(kind, clock: ManualClock()) { store, _, services in
                try await withServices(services) {
                    try await store.migrate()
                    let payee = try await store.login(email: "bob@example.com")
                    let payers = [
                        try await store.login(email: "ann@example.com"),
                        try await store.login(email: "cat@example.com"),
                        try await store.login(email: "dan@example.com"),
                    ]
                    for payer in payers { _ = try await store.fund(userID: payer.id, amountCents: 10_000) }
                    let (session, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 1001,
                        shares: 4,
                        idempotencyKey: nil
                    )
                    #expect(session.shareCents == [251, 250, 250, 250])

                    let first = try await store.lock(sid: session.sid, payerID: payers[0].id, shares: 1)
                    #expect(first == LockedShares(amount: 251, shareNumbers: [1]))
                    // Ann holds share 1: the next free is share 2.
                    let resolved = try await store.resolve(eid: session.eid)
                    #expect(resolved.shares == 4 && resolved.sharesPaid == 0 && resolved.shareCents == 250)
                    let (paid, _) = try await store.send(
                        sid: session.sid,
                        payerID: payers[0].id,
                        idempotencyKey: "k1",
                        tipCents: 25
                    )
                    #expect(paid == .paid(newBalanceCents: 10_000 - 251 - 25))
                    let (receipt, paymentID) = try await store.sentPayment(
                        sid: session.sid,
                        payerID: payers[0].id,
                        idempotencyKey: "k1"
                    )
                    #expect(paymentID != nil && receipt?.id == paymentID)
                    #expect(receipt?.shareNumbers == [1] && receipt?.tipCents == 25 && receipt?.shares == 4)
                    #expect(receipt?.amountCents == 251)

                    var view = try await store.session(sid: session.sid, viewerID: payee.id)
                    #expect(view.status == .partiallyPaid && view.sharesPaid == 1 && view.paid == 251 && view.tip == 25)
                    #expect(view.payments.map(\.id) == [paymentID])

                    // Cat pays two shares (for a friend); one free share is left, Dan takes it.
                    #expect(try await store.lock(sid: session.sid, payerID: payers[1].id, shares: 2).amount == 500)
                    await #expect(throws: LedgerError.self) {
                        try await store.lock(sid: session.sid, payerID: payers[2].id, shares: 2)
                    }
                    _ = try await store.send(sid: session.sid, payerID: payers[1].id, idempotencyKey: "k2", tipCents: 0)
                    _ = try await store.lock(sid: session.sid, payerID: payers[2].id, shares: 1)
                    _ = try await store.send(sid: session.sid, payerID: payers[2].id, idempotencyKey: "k3", tipCents: 0)

                    view = try await store.session(sid: session.sid, viewerID: payee.id)
                    #expect(view.status == .paid && view.sharesPaid == 4 && view.paid == 1001 && view.tip == 25)
                    // A payer sees its own payment only.
                    let annView = try await store.session(sid: session.sid, viewerID: payers[0].id)
                    #expect(annView.payments.map(\.id) == [paymentID])
                    #expect(try await store.wallet(userID: payee.id, recentLimit: 0).balance == 1026)
                    let verification = try await store.verify()
                    #expect(verification.failure == nil, "\(verification)")
                }
            }
        }
    }

    @Test("A split cancelled with shares paid returns each payment and its tip, once, with a refund receipt")
    func cancelReturnsPayments() async throws {
        for kind in StoreKind.available {
            try await TestStore.with(kind, clock: ManualClock()) { store, _, services in
                try await withServices(services) {
                    try await store.migrate()
                    let payee = try await store.login(email: "bob@example.com")
                    let payer = try await store.login(email: "ann@example.com")
                    _ = try await store.fund(userID: payer.id, amountCents: 1000)
                    let (session, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 400,
                        shares: 4,
                        idempotencyKey: nil
                    )
                    _ = try await store.lock(sid: session.sid, payerID: payer.id, shares: 2)
                    _ = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: "k", tipCents: 20)
                    try await store.cancel(sid: session.sid, payeeID: payee.id)
                    let view = try await store.session(sid: session.sid, viewerID: payee.id)
                    #expect(view.status == .cancelled && view.refunded == 220)
                    #expect(view.payments.first?.refunded == 220)
                    #expect(try await store.wallet(userID: payer.id, recentLimit: 0).balance == 1000)
                    // The sweep finds nothing left to return.
                    #expect(try await store.returnDueSharePayments(limit: 10) == 0)
                    let verification = try await store.verify()
                    #expect(verification.failure == nil, "\(verification)")
                }
            }
        }
    }
}
