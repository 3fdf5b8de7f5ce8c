import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuReceipts
import Testing

/// A session of `payee` paid by `payer`.
func paidSession(payer: LedgerClient, payee: LedgerClient, amountCents: Cents) async throws -> String {
    let session = try await payee.createSession(amountCents: amountCents)
    try await payer.lock(sid: session.sid)
    _ = try await payer.send(sid: session.sid, idempotencyKey: "pay-\(session.sid)")
    return session.sid
}

@Suite("Refunds", .timeLimit(.minutes(5)))
struct RefundTests {
    @Test(
        "A full refund moves the amount back, shows in both wallets and the status, and carries a verifying receipt",
        arguments: StoreKind.available
    )
    func fullRefund(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            let result = try await payee.refund(sid: sid, amountCents: 700, idempotencyKey: "r1")
            #expect(!result.replayed)
            #expect(result.refund.sid == sid && result.refund.amountCents == 700 && result.refund.refundedCents == 700)
            #expect(try await payer.wallet().availableCents == 1_000)
            #expect(try await payee.wallet().availableCents == 0)

            let receipt = try #require(result.refund.receipt)
            let keys = try await ledger.anonymous.receiptKeys()
            try receipt.verify(against: keys)
            try receipt.requireMatches(sessionID: sid, amountCents: 700, kind: .refund)
            #expect(throws: ReceiptError.self) { try receipt.requireMatches(sessionID: sid, amountCents: 700) }
            let payerID = try await ledger.store.login(email: "payer@example.com").id
            #expect(receipt.payerReference == Receipt.payerReference(receiptID: receipt.id, payerID: payerID))

            // Linked to the session, one entry in each wallet, the ones the receipt names.
            let out = try #require(try await payee.wallet().recent.first)
            let back = try #require(try await payer.wallet().recent.first)
            #expect(out.type == "REFUND_OUT" && out.direction == .debit && out.refType == "session" && out.refID == sid)
            #expect(back.type == "REFUND_IN" && back.direction == .credit && back.refID == sid)
            #expect(receipt.entryIDs == [out.id, back.id])

            // The status, for the payee and the payer, still carries the payment's receipt.
            let status = try await payee.session(sid: sid)
            #expect(status.status == .paid && status.refundedCents == 700 && status.receipt?.kind == .payment)
            #expect(try await payer.session(sid: sid).refundedCents == 700)
            let verification = try await ledger.store.verify()
            #expect(verification.isValid, "\(verification)")
            #expect(verification.passed.contains { $0.hasPrefix("refunds: 1,") }, "\(verification.passed)")

            // Nothing is left to refund.
            #expect(
                await problemKind { try await payee.refund(sid: sid, amountCents: 1, idempotencyKey: "r2") }
                    == .refundExceedsPayment
            )
        }
    }

    @Test("Partial refunds add up to the amount paid, and not one cent more", arguments: StoreKind.available)
    func partialRefunds(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com", funded: 50)
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            let first = try await payee.refund(sid: sid, amountCents: 300, idempotencyKey: "a")
            #expect(first.refund.refundedCents == 300)
            #expect(try await payee.session(sid: sid).refundedCents == 300)
            // 401 would take the total to 701: refused with a clear type, nothing moved.
            let error = await #expect(throws: LedgerClientError.self) {
                try await payee.refund(sid: sid, amountCents: 401, idempotencyKey: "b")
            }
            #expect(error?.problemKind == .refundExceedsPayment)
            #expect(error?.description.contains("at most 400") == true, "\(String(describing: error))")
            #expect(try await payee.wallet().availableCents == 450)
            let second = try await payee.refund(sid: sid, amountCents: 400, idempotencyKey: "c")
            #expect(second.refund.refundedCents == 700 && second.refund.refundID != first.refund.refundID)
            #expect(try await payer.wallet().availableCents == 1_000)
            #expect(try await payee.wallet().availableCents == 50)
            #expect(try await ledger.store.verify().isValid)
        }
    }

    @Test("Refused: an unpaid session, a payer or a stranger, the payee's funds short", arguments: StoreKind.available)
    func refusals(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let stranger = try await ledger.client("stranger@example.com", funded: 1_000)
            let unpaid = try await payee.createSession(amountCents: 200)
            #expect(
                await problemKind { try await payee.refund(sid: unpaid.sid, amountCents: 100, idempotencyKey: "u") }
                    == .sessionNotPaid
            )
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            for client in [payer, stranger] {
                #expect(
                    await problemKind { try await client.refund(sid: sid, amountCents: 100, idempotencyKey: "x") }
                        == .forbidden
                )
            }
            #expect(
                await problemKind {
                    try await payee.refund(sid: UUID().uuidString.lowercased(), amountCents: 1, idempotencyKey: "n")
                } == .sessionNotFound
            )
            // The payee spends most of what it was paid: its balance must cover the refund.
            let elsewhere = try await stranger.createSession(amountCents: 600)
            try await payee.lock(sid: elsewhere.sid)
            _ = try await payee.send(sid: elsewhere.sid, idempotencyKey: "spend")
            #expect(
                await problemKind { try await payee.refund(sid: sid, amountCents: 200, idempotencyKey: "f") }
                    == .insufficientFunds
            )
            _ = try await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "g")
            #expect(try await payee.session(sid: sid).refundedCents == 100)
            #expect(try await ledger.store.verify().isValid)
        }
    }

    @Test(
        "The same key replays the same refund; with another amount or session it is refused",
        arguments: StoreKind.available
    )
    func replay(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            let other = try await paidSession(payer: payer, payee: payee, amountCents: 200)
            let first = try await payee.refund(sid: sid, amountCents: 250, idempotencyKey: "k")
            let again = try await payee.refund(sid: sid, amountCents: 250, idempotencyKey: "k")
            #expect(again.replayed && again.refund == first.refund)
            #expect(again.refund.receipt != nil)
            #expect(
                await problemKind { try await payee.refund(sid: sid, amountCents: 251, idempotencyKey: "k") }
                    == .idempotencyKeyReused
            )
            #expect(
                await problemKind { try await payee.refund(sid: other, amountCents: 250, idempotencyKey: "k") }
                    == .idempotencyKeyReused
            )
            #expect(try await payee.session(sid: sid).refundedCents == 250)
            #expect(try await payer.wallet().availableCents == 1_000 - 900 + 250)
            // The header is required.
            let answer = try await ledger.raw(
                "POST",
                "/sessions/\(sid)/refunds",
                body: #"{"amount_cents": 1}"#,
                headers: ["Authorization": "Bearer \(payee.token ?? "")", "Content-Type": "application/json"]
            )
            #expect(answer.status == 400 && TestLedger.problemKind(answer.body) == .idempotencyKeyMissing)
        }
    }

    @Test("A terminal key refunds only with refunds:create", arguments: StoreKind.available)
    func apiKeyScope(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("shop@example.com")
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            let without = try await ledger.store.createAPIKey(
                email: "shop@example.com",
                name: "till without",
                scopes: Set(APIKeyScope.allCases).subtracting([.refundsCreate]),
                actor: "test"
            ).secret
            let with = try await ledger.store.createAPIKey(
                email: "shop@example.com",
                name: "till",
                scopes: [.refundsCreate],
                actor: "test"
            ).secret
            let denied = LedgerClient(baseURL: ledger.url, token: without)
            let error = await #expect(throws: LedgerClientError.self) {
                try await denied.refund(sid: sid, amountCents: 100, idempotencyKey: "t")
            }
            #expect(error?.problemKind == .forbidden && error?.description.contains("refunds:create") == true)
            let terminal = LedgerClient(baseURL: ledger.url, token: with)
            let refund = try await terminal.refund(sid: sid, amountCents: 100, idempotencyKey: "t")
            #expect(refund.refund.refundedCents == 100)
            // A key that reads sessions sees the refunded total in the status.
            #expect(try await denied.session(sid: sid).refundedCents == 100)
            // The key's refund is the payee's: the payee's own token replays it under the same key.
            #expect(try await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "t").replayed)
            #expect(try await payer.wallet().availableCents == 400)
        }
    }

    @Test("Concurrent refunds of one session never add up to more than was paid", arguments: StoreKind.available)
    func concurrentRefunds(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com", funded: 10_000)
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            let answers = await Self.race(clients: Array(repeating: payee, count: 20), sid: sid, amountCents: 100)
            #expect(answers.filter { $0 == .refunded }.count == 7, "\(answers)")
            #expect(Set(answers.filter { $0 != .refunded }) == [.refused(409, .refundExceedsPayment)])
            #expect(try await payee.session(sid: sid).refundedCents == 700)
            #expect(try await payer.wallet().availableCents == 1_000)
            let verification = try await ledger.store.verify()
            #expect(verification.isValid, "\(verification)")
        }
    }

    @Test(
        "2 replicas: concurrent refunds of one session never add up to more than was paid, no 5xx",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
    )
    func concurrentRefundsAcrossReplicas() async throws {
        try await TestReplicas.with(count: 2) { replicas in
            let payer = try await replicas.client("payer@example.com", replica: 0, funded: 1_000)
            let payees = [
                try await replicas.client("payee@example.com", replica: 0, funded: 10_000),
                try await replicas.client("payee@example.com", replica: 1),
            ]
            let sid = try await paidSession(payer: payer, payee: payees[0], amountCents: 700)
            let clients = (0..<30).map { payees[$0 % 2] }
            let answers = await Self.race(clients: clients, sid: sid, amountCents: 100)
            #expect(answers.filter { $0 == .refunded }.count == 7, "\(answers)")
            #expect(Set(answers.filter { $0 != .refunded }) == [.refused(409, .refundExceedsPayment)])
            #expect(try await payees[1].session(sid: sid).refundedCents == 700)
            #expect(try await payer.wallet().availableCents == 1_000)
            let verification = try await replicas.store.verify()
            #expect(verification.isValid, "\(verification)")
        }
    }

    /// The same key sent by many requests at once: one refund.
    @Test("Concurrent requests with one key make one refund", arguments: StoreKind.available)
    func concurrentSameKey(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            let ids = await withTaskGroup(of: String?.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try? await payee.refund(sid: sid, amountCents: 100, idempotencyKey: "same").refund.refundID
                    }
                }
                return await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(Set(ids.compactMap { $0 }).count == 1 && ids.allSatisfy { $0 != nil }, "\(ids)")
            #expect(try await payee.session(sid: sid).refundedCents == 100)
        }
    }

    enum Answer: Hashable {
        case refunded
        case refused(Int, ProblemKind?)
    }

    /// Each client refunds `amountCents` of `sid` at once, each under its own key.
    static func race(clients: [LedgerClient], sid: String, amountCents: Cents) async -> [Answer] {
        await withTaskGroup(of: Answer.self) { group in
            for (index, client) in clients.enumerated() {
                group.addTask {
                    do {
                        _ = try await client.refund(sid: sid, amountCents: amountCents, idempotencyKey: "race-\(index)")
                        return .refunded
                    } catch let error as LedgerClientError {
                        if case .problem(let problem) = error { return .refused(problem.status, problem.kind) }
                        return .refused(0, nil)
                    } catch {
                        return .refused(0, nil)
                    }
                }
            }
            return await group.reduce(into: [Answer]()) { $0.append($1) }
        }
    }
}
