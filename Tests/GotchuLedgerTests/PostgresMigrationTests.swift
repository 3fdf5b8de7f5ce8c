import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerTesting
import Logging
import PostgresNIO
import Testing

@Suite(
    "PostgreSQL migrations",
    .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason),
    .timeLimit(.minutes(10))
)
struct PostgresMigrationTests {
    @Test("Four servers starting at once on an empty database migrate it once; migrating again changes nothing")
    func concurrentMigrations() async throws {
        try await TestPostgres.withDatabase { url in
            let logger = Logger(label: "migrations") { _ in SwiftLogNoOpLogHandler() }
            let stores = (0..<4).map { _ in
                PostgresLedgerStore(
                    url: url,
                    maximumConnections: 2,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
            }
            try await withServices(stores.map(\.client)) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for store in stores { group.addTask { try await store.migrate() } }
                    try await group.waitForAll()
                }
                try await stores[0].migrate()
                var migrations: [String] = []
                for try await name in try await stores[0].client.query("SELECT name FROM gotchu_migrations")
                    .decode(String.self)
                {
                    migrations.append(name)
                }
                #expect(
                    Set(migrations) == [
                        "v1: ledger", "v2: session create keys", "v3: locks by payer", "v4: credentials",
                        "v5: api keys and identities", "v6: EID rotation", "v7: receipts and chain",
                        "v8: deposits and payouts",
                        "v9: refunds",
                        "v10: entry history index",
                        "v11: health checks",
                        "v12: access token revocation",
                        "v13: email confirmation",
                        "v14: splits and tips",
                        "v15: webhooks",
                        "v16: browser sessions",
                        "v17: tip prompts", "v18: order references", "v19: terminals",
                    ] && Set(migrations).count == migrations.count
                )
                // The four made one receipt key between them.
                var keys = 0
                for try await count in try await stores[0].client.query("SELECT COUNT(*) FROM receipt_keys")
                    .decode(Int64.self)
                {
                    keys = Int(count)
                }
                #expect(keys == 1)
                let audit = try await stores[1].audit()
                #expect(audit.isHealthy && audit.entryCount == 0)
                // The system accounts (funding, deposits, payouts clearing, settled payouts) exist once each.
                var accounts = 0
                for try await count in try await stores[2].client.query(
                    "SELECT COUNT(*) FROM wallet_accounts WHERE kind = 'SYSTEM'"
                ).decode(Int64.self) {
                    accounts = Int(count)
                }
                #expect(accounts == 4)
            }
        }
    }
}
