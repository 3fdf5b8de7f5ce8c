import GRDB
import GotchuLedgerPostgres
import GotchuLedgerServer
import PostgresNIO
import Testing

@Suite(
    "The SQLite and PostgreSQL schemas declare the same tables, columns and indexes",
    .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
)
struct SchemaParityTests {
    /// A column as both databases can describe it: its name and whether it takes NULL.
    struct Column: Hashable, Comparable, CustomStringConvertible {
        var table: String
        var name: String
        var nullable: Bool

        static func < (a: Column, b: Column) -> Bool { (a.table, a.name) < (b.table, b.name) }
        var description: String { "\(table).\(name)\(nullable ? "" : " NOT NULL")" }
    }

    /// Where the schemas differ on purpose: PostgreSQL has no `rowid`, so `payment_sessions` carries its own
    /// insertion order for resolve's tie-break; SQLite orders by the implicit `rowid` instead.
    static let postgresOnly: Set<Column> = [Column(table: "payment_sessions", name: "seq", nullable: false)]

    /// Indexes only PostgreSQL has, as the migrations stand: one on `ledger_entries (transfer_id)`.
    static let postgresOnlyIndexes: Set<String> = ["ledger_entries.ledger_entries_transfer"]

    @Test("Both migrated schemas have the same named indexes, on the same tables")
    func sameIndexes() async throws {
        let sqlite = try await TestLedger.withStore(.sqlite, clock: ManualClock()) { store, database, _ in
            try await store.migrate()
            guard case .sqlite(let path) = database else { throw SchemaParityError("not an SQLite database") }
            // Named indexes only: SQLite names those behind PRIMARY KEY and UNIQUE `sqlite_autoindex_…`.
            return try await DatabaseQueue(path: path).read { db in
                Set(
                    try Row.fetchAll(
                        db,
                        sql: """
                            SELECT tbl_name, name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL
                            """
                    ).map { "\($0["tbl_name"] as String).\($0["name"] as String)" }
                )
            }
        }
        let postgres = try await TestLedger.withStore(.postgres, clock: ManualClock()) { store, database, services in
            try await withServices(services) {
                try await store.migrate()
                guard case .postgres(let url) = database else { throw SchemaParityError("not a PostgreSQL database") }
                // Named indexes only: those behind PRIMARY KEY and UNIQUE constraints are left out.
                return try await TestPostgres.withClient(url) { client in
                    var names: Set<String> = []
                    let rows = try await client.query(
                        """
                        SELECT i.tablename::TEXT, i.indexname::TEXT FROM pg_indexes i
                        WHERE i.schemaname = current_schema() AND i.tablename <> 'gotchu_migrations'
                        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
                        """
                    )
                    for try await (table, name) in rows.decode((String, String).self) {
                        names.insert("\(table).\(name)")
                    }
                    return names
                }
            }
        }
        #expect(sqlite.contains("payment_sessions.payment_sessions_create_key"))
        #expect(sqlite.subtracting(postgres).sorted() == [], "only in SQLite")
        #expect(postgres.subtracting(sqlite).subtracting(Self.postgresOnlyIndexes).sorted() == [], "only in PostgreSQL")
    }

    @Test("Every table and column of one migrated schema is in the other, with the same nullability")
    func sameColumns() async throws {
        let sqlite = try await TestLedger.withStore(.sqlite, clock: ManualClock()) { store, database, _ in
            try await store.migrate()
            guard case .sqlite(let path) = database else { throw SchemaParityError("not an SQLite database") }
            return try await Self.sqliteColumns(path)
        }
        let postgres = try await TestLedger.withStore(.postgres, clock: ManualClock()) { store, database, services in
            try await withServices(services) {
                try await store.migrate()
                guard case .postgres(let url) = database else { throw SchemaParityError("not a PostgreSQL database") }
                return try await Self.postgresColumns(url)
            }
        }
        #expect(
            Set(sqlite.map(\.table)) == [
                "idempotency_keys", "ledger_chain", "ledger_entries", "payment_sessions", "receipt_keys", "receipts",
                "session_eids", "users", "wallet_accounts",
            ]
        )
        #expect(sqlite.subtracting(postgres).sorted() == [], "only in SQLite")
        #expect(postgres.subtracting(sqlite).subtracting(Self.postgresOnly).sorted() == [], "only in PostgreSQL")
    }

    /// The ledger's tables (not SQLite's nor the migrator's own) and their columns. A primary key column counts as
    /// NOT NULL: every store writes it, though SQLite would let a non-integer one hold NULL.
    static func sqliteColumns(_ path: String) async throws -> Set<Column> {
        try await DatabaseQueue(path: path).read { db in
            let tables = try String.fetchAll(
                db,
                sql: """
                    SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
                    AND name NOT LIKE 'grdb_%'
                    """
            )
            var columns: Set<Column> = []
            for table in tables {
                for row in try Row.fetchAll(
                    db,
                    sql: "SELECT name, \"notnull\", pk FROM pragma_table_info(?)",
                    arguments: [table]
                ) {
                    let notNull: Bool = row["notnull"]
                    let primaryKey: Int = row["pk"]
                    columns.insert(Column(table: table, name: row["name"], nullable: !notNull && primaryKey == 0))
                }
            }
            return columns
        }
    }

    /// The ledger's tables (not the migration record) and their columns.
    static func postgresColumns(_ url: PostgresURL) async throws -> Set<Column> {
        try await TestPostgres.withClient(url) { client in
            var columns: Set<Column> = []
            let rows = try await client.query(
                """
                SELECT table_name::TEXT, column_name::TEXT, is_nullable::TEXT FROM information_schema.columns
                WHERE table_schema = current_schema() AND table_name <> 'gotchu_migrations'
                """
            )
            for try await (table, name, nullable) in rows.decode((String, String, String).self) {
                columns.insert(Column(table: table, name: name, nullable: nullable == "YES"))
            }
            return columns
        }
    }
}

struct SchemaParityError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
