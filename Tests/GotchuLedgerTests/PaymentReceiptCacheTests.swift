import Foundation
import GRDB
import GotchuAPI
import GotchuLedger
import GotchuLedgerTesting
import GotchuReceipts
import Testing

@testable import GotchuLedgerSQLite

@Suite("The payment receipts a store keeps", .timeLimit(.minutes(10)))
struct PaymentReceiptCacheTests {
    @Test("A payment that rolled back leaves no receipt behind; the one that commits is the one stored")
    func onlyCommittedReceipts() async throws {
        try await GroupCommitTests.withLockedSession { store, path, sid, payerID in
            let database = try DatabaseQueue(path: path)
            // The payment signs and stores its receipt, then fails before it commits.
            try await OutcomeFailure.impose(on: database)
            await #expect(throws: DatabaseError.self) {
                _ = try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k")
            }
            #expect(try await store.receipt(sessionID: sid) == nil)
            try await OutcomeFailure.lift(on: database)

            let (outcome, _) = try await store.send(sid: sid, payerID: payerID, idempotencyKey: "k")
            #expect(outcome == .paid(newBalanceCents: 500))
            let kept = try #require(try await store.receipt(sessionID: sid))
            // A store on the same file, with nothing kept, reads the row.
            let other = try SQLiteLedgerStore(path: path)
            let stored = try #require(try await other.receipt(sessionID: sid))
            #expect(kept == stored)
            try kept.verify(against: try await store.receiptKeys())
        }
    }
}
