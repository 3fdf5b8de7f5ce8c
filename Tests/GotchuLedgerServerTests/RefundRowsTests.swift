import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerSQLite
import GotchuLedgerServer
import PostgresNIO
import Testing

/// The `refunds` table beside the ledger: the refund limit comes from the entries that moved money back, and
/// `ledger verify` holds the table to those entries and their receipts.
@Suite("Refund rows against the ledger", .timeLimit(.minutes(3)))
struct RefundRowsTests {
    @Test(
        "Deleting a session's refund rows frees no money and is named by verify",
        arguments: StoreKind.available
    )
    func deletedRows(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            // Funded, so only the refund rule stands between the payee and a second refund.
            let payee = try await ledger.client("payee@example.com", funded: 1_000)
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 1_000)
            _ = try await payee.refund(sid: sid, amountCents: 940, idempotencyKey: "first")
            let sound = try await ledger.store.verify()
            #expect(sound.isValid, "\(sound)")
            #expect(sound.passed.contains { $0.hasPrefix("refund rows: 1,") }, "\(sound.passed)")

            try await ledger.execute("DELETE FROM refunds WHERE session_id = '\(sid)'")

            let verification = try await ledger.store.verify()
            let failure = try #require(verification.failure)
            #expect(failure.hasPrefix("session \(sid): refund transfer "), "\(failure)")
            #expect(failure.contains("has no refunds row"), "\(failure)")

            // The entries still say 940 went back: at most 60 more.
            let error = await #expect(throws: LedgerClientError.self) {
                try await payee.refund(sid: sid, amountCents: 940, idempotencyKey: "second")
            }
            #expect(error?.problemKind == .refundExceedsPayment, "\(String(describing: error))")
            #expect(error?.description.contains("at most 60") == true, "\(String(describing: error))")
            #expect(try await payee.session(sid: sid).refundedCents == 940)
            #expect(try await payer.wallet().availableCents == 940)
            let last = try await payee.refund(sid: sid, amountCents: 60, idempotencyKey: "third")
            #expect(last.refund.refundedCents == 1_000)
            #expect(
                await problemKind { try await payee.refund(sid: sid, amountCents: 1, idempotencyKey: "fourth") }
                    == .refundExceedsPayment
            )
        }
    }

    @Test("A refund row edited down leaves the limit where the entries put it", arguments: StoreKind.available)
    func editedRow(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com", funded: 1_000)
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 500)
            _ = try await payee.refund(sid: sid, amountCents: 400, idempotencyKey: "a")
            try await ledger.execute(
                "UPDATE refunds SET amount_cents = 1, refunded_total_cents = 1 WHERE session_id = '\(sid)'"
            )
            let failure = try #require(try await ledger.store.verify().failure)
            #expect(failure.hasPrefix("refund ") && failure.contains("of session \(sid) is of 1 cents"), "\(failure)")
            #expect(
                await problemKind { try await payee.refund(sid: sid, amountCents: 101, idempotencyKey: "b") }
                    == .refundExceedsPayment
            )
            #expect(try await payee.session(sid: sid).refundedCents == 400)
        }
    }

    @Test("Verify holds each refund row to its transfer, its receipt and its session's running total")
    func rowChecks() async throws {
        try await RefundAuditTests.refunded { original in
            #expect(LedgerVerifier.verify(original).isValid)
            let row = try #require(original.refunds.first)
            #expect(original.refunds.count == 1 && row.refundedTotal == 300 && row.receiptID != nil)
            let sid = row.sessionID
            let payment = try #require(
                original.entries.first { $0.type == "SEND_P2P" && $0.refID == sid }
            )

            func failure(_ edit: (inout LedgerSnapshot) -> Void) -> String {
                var snapshot = original
                edit(&snapshot)
                return LedgerVerifier.verify(snapshot).failure ?? "passed"
            }
            let cases: [(String, String)] = [
                (failure { $0.refunds[0].refundedTotal = 299 }, "records 299 cents refunded in total"),
                (failure { $0.refunds[0].amount = 200 }, "is of 200 cents but its transfer"),
                (failure { $0.refunds[0].transferID = payment.transferID }, "which is not a refund transfer"),
                (failure { $0.refunds[0].receiptID = nil }, "was made after receipts began but names no receipt"),
                (failure { $0.refunds[0].receiptID = "someone-else" }, "names receipt someone-else"),
                (failure { $0.refunds[0].requestedBy = "stranger" }, "was made by stranger"),
                (failure { $0.refunds[0].sessionID = "gone" }, "refund \(row.id) of session gone names a session"),
                (failure { $0.refunds.append($0.refunds[0]) }, "both name transfer \(row.transferID)"),
                (failure { $0.refunds = [] }, "session \(sid): refund transfer \(row.transferID) has no refunds row"),
            ]
            for (found, expected) in cases {
                #expect(found.contains(expected), "\(found) does not say \(expected)")
            }
        }
    }
}

extension TestLedger {
    /// Runs `sql` on the ledger's database behind the server's back, as an operator with a SQL shell could.
    func execute(_ sql: String) async throws {
        switch database {
        case .sqlite(let path):
            try await DatabaseQueue(path: path).write { db in try db.execute(sql: sql) }
        case .postgres(let url):
            try await TestPostgres.withClient(url) { client in
                _ = try await client.query(PostgresQuery(unsafeSQL: sql))
            }
        }
    }
}
