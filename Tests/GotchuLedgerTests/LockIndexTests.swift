import Foundation
import GRDB
import GotchuLedger
import GotchuLedgerSQLite
import GotchuTesting
import Testing

@Suite("The lock cap's count of a payer's locks uses an index", .timeLimit(.minutes(10)))
struct LockIndexTests {
    @Test("SQLite plans the count through payment_sessions_locked_by, not a scan")
    func countUsesIndex() async throws {
        let directory = try TemporaryDirectory(prefix: "lock-index")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        try await SQLiteLedgerStore(path: path, policy: LedgerPolicy()).migrate()
        let plan = try await DatabaseQueue(path: path).read { db in
            try Row.fetchAll(
                db,
                sql: """
                    EXPLAIN QUERY PLAN SELECT COUNT(*) FROM payment_sessions
                    WHERE locked_by = ? AND status = 'LOCKED' AND lock_exp_at > ? AND exp_at > ? AND id <> ?
                    """,
                arguments: ["payer", 0, 0, "sid"]
            ).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("payment_sessions_locked_by") }, "\(plan)")
    }
}
