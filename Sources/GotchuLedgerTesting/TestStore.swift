import Foundation
package import GotchuLedger
package import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuTesting
import Logging
package import ServiceLifecycle
import Testing

/// The ledger stores the ledger suites run against.
package enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    /// SQLite always; PostgreSQL when `GOTCHU_TEST_POSTGRES_URL` names a server (scripts/with-postgres sets it, and
    /// CI always runs the tests under it). Without it the PostgreSQL cases are left out, and the test
    /// "PostgreSQL is configured" says so as a skipped test.
    package static var available: [StoreKind] { TestPostgres.server == nil ? [.sqlite] : [.sqlite, .postgres] }

    package var testDescription: String { rawValue }
}

/// Where a test ledger keeps its data.
package enum TestDatabase: Sendable {
    case sqlite(path: String)
    case postgres(PostgresURL)
}

/// A ledger store for one test, with no server in front of it.
package enum TestStore {
    /// A fresh store of `kind` on `clock`, migrated when SQLite, unmigrated when PostgreSQL (its pool is not yet
    /// running), deleted afterwards; `services` must run while it is used (the PostgreSQL pool).
    package static func with<T: Sendable>(
        _ kind: StoreKind,
        policy: LedgerPolicy = LedgerPolicy(),
        clock: ManualClock,
        _ body: @Sendable (any LedgerStore, TestDatabase, [any Service]) async throws -> T
    ) async throws -> T {
        switch kind {
        case .sqlite:
            let directory = try TemporaryDirectory(prefix: "gotchu-ledger")
            defer { directory.remove() }
            let path = directory.url.appendingPathComponent("ledger.sqlite").path
            let store = try SQLiteLedgerStore(path: path, policy: policy, clock: { clock.now() })
            try await store.migrate()
            return try await body(store, .sqlite(path: path), [])
        case .postgres:
            return try await TestPostgres.withDatabase { url in
                let logger = Logger(label: "test-ledger") { _ in SwiftLogNoOpLogHandler() }
                let store = PostgresLedgerStore(
                    url: url,
                    policy: policy,
                    clock: { clock.now() },
                    maximumConnections: 8,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
                return try await body(store, .postgres(url), [store.client])
            }
        }
    }
}
