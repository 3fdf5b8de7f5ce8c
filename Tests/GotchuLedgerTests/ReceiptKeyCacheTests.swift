import Foundation
import GRDB
import GotchuAPI
import GotchuLedger
import GotchuLedgerTesting
import GotchuReceipts
import Testing

@testable import GotchuLedgerSQLite

@Suite("The receipt signing key a store caches", .timeLimit(.minutes(10)))
struct ReceiptKeyCacheTests {
    @Test("A key made by a payment that rolled back is never used: the next payment makes one that commits")
    func keyOfARolledBackPaymentIsNotCached() async throws {
        try await GroupCommitTests.withLockedSession { store, path, sid, payerID in
            let database = try DatabaseQueue(path: path)
            // No usable key: the next payment makes one inside its own transaction. Then it fails before commit.
            try await database.write { db in
                try db.execute(sql: "UPDATE receipt_keys SET retired_at = 1, private_key = NULL")
            }
            try await OutcomeFailure.impose(on: database)
            await #expect(throws: DatabaseError.self) {
                _ = try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k")
            }
            let rows = try await store.backend.receiptKeys()
            #expect(rows.count == 1 && rows.allSatisfy { $0.retiredAt != nil })
            try await OutcomeFailure.lift(on: database)

            let (outcome, _) = try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k")
            #expect(outcome == .paid(newBalanceCents: 500))
            let receipt = try #require(try await store.receipt(sessionID: sid))
            #expect(try await store.backend.receiptKeys().contains { $0.id == receipt.keyID && $0.retiredAt == nil })
            try receipt.verify(against: try await store.receiptKeys())
        }
    }
}
