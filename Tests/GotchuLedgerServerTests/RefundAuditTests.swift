import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import Testing

@Suite("Refunds under ledger verify and gotchu refund", .timeLimit(.minutes(3)))
struct RefundAuditTests {
    /// A ledger with one session of 700 cents paid and refunded 300, its snapshot, and the refund's receipt.
    static func refunded(_ body: @Sendable (LedgerSnapshot) throws -> Void) async throws {
        try await TestLedger.with(store: .sqlite) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            // Funded, so a forged refund leaves no balance below zero and only the refund rule is broken.
            let payee = try await ledger.client("payee@example.com", funded: 1_000)
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            _ = try await payee.refund(sid: sid, amountCents: 300, idempotencyKey: "r")
            let store = try #require(ledger.store as? SQLiteLedgerStore)
            try body(try await store.backend.snapshot())
        }
    }

    @Test("A refund transfer forged outside the ledger, chained and balanced, takes the total above the payment")
    func forgedRefundAbovePayment() async throws {
        try await Self.refunded { original in
            #expect(LedgerVerifier.verify(original).isValid)
            var snapshot = original
            // A forger who rewrites the chain and the balances too: only the refund rule is left to catch it.
            let refund = snapshot.entries.filter { $0.type == "REFUND_OUT" || $0.type == "REFUND_IN" }
            #expect(refund.count == 2)
            var head = snapshot.chainHead
            let transferID = UUID().uuidString.lowercased()
            for var entry in refund.sorted(by: { $0.seq < $1.seq }) {
                entry.seq = (snapshot.entries.last?.seq ?? 0) + 1
                entry.id = UUID().uuidString.lowercased()
                entry.transferID = transferID
                entry.amount = 500
                head.hash = LedgerChain.hash(previous: head.hash, entry: entry)
                head.count += 1
                entry.hash = head.hash
                snapshot.entries.append(entry)
                let index = try #require(snapshot.wallets.firstIndex { $0.id == entry.walletID })
                snapshot.wallets[index].balance += entry.direction == .credit ? 500 : -500
            }
            snapshot.chainHead = head
            let verification = LedgerVerifier.verify(snapshot)
            #expect(verification.failure?.contains("brings its refunds above that") == true, "\(verification)")
            #expect(verification.failure?.contains(transferID) == true, "\(verification)")
        }
    }

    @Test("A refund receipt edited after signing is named by verify")
    func editedRefundReceipt() async throws {
        try await Self.refunded { original in
            var snapshot = original
            let index = try #require(snapshot.receipts.firstIndex { $0.kind == "refund" })
            snapshot.receipts[index].body = snapshot.receipts[index].body.replacingOccurrences(
                of: #""amount_cents":300"#,
                with: #""amount_cents":3000"#
            )
            #expect(snapshot.receipts[index].body != original.receipts[index].body)
            let verification = LedgerVerifier.verify(snapshot)
            #expect(verification.failure?.contains("receipt \(snapshot.receipts[index].id)") == true, "\(verification)")
            #expect(verification.passed.contains { $0.hasPrefix("refunds: 1,") })
        }
    }

    @Test("gotchu refund: part, then the rest by default, each receipt verified; nothing left is refused")
    func refundCommand() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        try await TestLedger.with { ledger in
            let url = ledger.url.absoluteString
            let payer = try await ledger.client("payer@example.com", funded: 2_000)
            let payee = try await ledger.client("shop@example.com")
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 1_250)
            try await processes.run(["login", "--email", "shop@example.com", "--server", url], user: "shop")

            let part = try await processes.run(
                ["refund", sid, "--amount", "5.00", "--idempotency-key", "part-1", "--server", url],
                user: "shop"
            )
            #expect(part.first == "idempotency key part-1")
            #expect(part.last?.hasPrefix("refunded $5.00 of session \(sid); refund \"") == true, "\(part)")
            #expect(part.last?.contains("$5.00 refunded in total; receipt \"") == true, "\(part)")
            #expect(part.last?.hasSuffix("verified") == true, "\(part)")
            // The same key again: the same refund, replayed.
            let again = try await processes.run(
                ["refund", sid, "--amount", "5.00", "--idempotency-key", "part-1", "--server", url],
                user: "shop"
            )
            #expect(again.last?.contains("(replayed)") == true, "\(again)")
            let rest = try await processes.run(["refund", sid, "--server", url], user: "shop")
            #expect(rest.last?.hasPrefix("refunded $7.50 of session \(sid)") == true, "\(rest)")
            #expect(rest.last?.contains("$12.50 refunded in total") == true, "\(rest)")
            #expect(try await payer.wallet().availableCents == 2_000)

            let nothing = try processes.start(["refund", sid, "--server", url], user: "shop")
            #expect(try await nothing.waitForExit() != 0)
            #expect(nothing.standardError.contains("refunded in full already"), "\(nothing.standardError)")
            let bad = try processes.start(["refund", "not-a-session", "--server", url], user: "shop")
            #expect(try await bad.waitForExit() != 0)
            #expect(bad.standardError.contains("SID must be a session id"), "\(bad.standardError)")
        }
    }

    @Test("A refund is a new state of a paid session: a stream resumed at the paid state gets refunded_cents")
    func eventStreamShowsRefunds() async throws {
        try await TestLedger.with(limits: SessionEventTests.noticesOnly) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 5_000)
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 700)
            let paid = try #require(try await EventReader(payee.sessionEvents(sid: sid)).next())
            #expect(paid.kind == .paid && paid.session.refundedCents == 0)
            _ = try await payee.refund(sid: sid, amountCents: 300, idempotencyKey: "r")
            let resumed = EventReader(payee.sessionEvents(sid: sid, lastEventID: paid.id))
            let refunded = try #require(try await resumed.next())
            #expect(refunded.id != paid.id)
            #expect(refunded.session.status == .paid && refunded.session.refundedCents == 300)
            #expect(try await resumed.next() == nil)
            // Resumed at that state, nothing new: the stream of a paid session ends at once.
            #expect(try await EventReader(payee.sessionEvents(sid: sid, lastEventID: refunded.id)).next() == nil)
        }
    }
}
