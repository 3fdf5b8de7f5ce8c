import Foundation
import GRDB
import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerTesting
import PostgresNIO
import Testing

@Suite(
    "The SQLite and PostgreSQL schemas declare the same tables, columns, indexes and constraints",
    .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason),
    .timeLimit(.minutes(10))
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

    /// Indexes only PostgreSQL has, as the migrations stand: none (SQLite gained `ledger_entries_transfer` in v10).
    static let postgresOnlyIndexes: Set<String> = []

    @Test("Both migrated schemas have the same named indexes, on the same tables")
    func sameIndexes() async throws {
        let sqlite = try await TestStore.with(.sqlite, clock: ManualClock()) { store, database, _ in
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
        let postgres = try await TestStore.with(.postgres, clock: ManualClock()) { store, database, services in
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
        let sqlite = try await TestStore.with(.sqlite, clock: ManualClock()) { store, database, _ in
            try await store.migrate()
            guard case .sqlite(let path) = database else { throw SchemaParityError("not an SQLite database") }
            return try await Self.sqliteColumns(path)
        }
        let postgres = try await TestStore.with(.postgres, clock: ManualClock()) { store, database, services in
            try await withServices(services) {
                try await store.migrate()
                guard case .postgres(let url) = database else { throw SchemaParityError("not a PostgreSQL database") }
                return try await Self.postgresColumns(url)
            }
        }
        #expect(
            Set(sqlite.map(\.table)) == [
                "admin_audit", "api_keys", "idempotency_keys", "ledger_chain", "ledger_entries", "payment_sessions",
                "receipt_keys", "receipts", "refresh_tokens", "session_eids", "user_identities", "users",
                "wallet_accounts", "deposits", "payouts", "refunds", "session_shares",
                "email_confirmations", "health_checks", "browser_sessions",
                "webhook_endpoints", "webhook_subscriptions", "webhook_events", "webhook_deliveries", "webhook_outbox",
                "terminals",
            ]
        )
        #expect(sqlite.subtracting(postgres).sorted() == [], "only in SQLite")
        #expect(postgres.subtracting(sqlite).subtracting(Self.postgresOnly).sorted() == [], "only in PostgreSQL")
    }

    @Test("Both migrated schemas have the same foreign keys and CHECK constraints")
    func sameConstraints() async throws {
        let sqlite = try await TestStore.with(.sqlite, clock: ManualClock()) { store, database, _ in
            try await store.migrate()
            guard case .sqlite(let path) = database else { throw SchemaParityError("not an SQLite database") }
            return try await Self.sqliteConstraints(path)
        }
        let postgres = try await TestStore.with(.postgres, clock: ManualClock()) { store, database, services in
            try await withServices(services) {
                try await store.migrate()
                guard case .postgres(let url) = database else { throw SchemaParityError("not a PostgreSQL database") }
                return try await Self.postgresConstraints(url)
            }
        }
        #expect(sqlite.contains("ledger_entries.wallet_id → wallet_accounts.id"))
        #expect(sqlite.contains("payment_sessions CHECK 'ADVERTISING' 'CANCELLED' 'CREATED' 'LOCKED' 'PAID' status"))
        #expect(sqlite.subtracting(postgres).sorted() == [], "only in SQLite")
        #expect(postgres.subtracting(sqlite).sorted() == [], "only in PostgreSQL")
    }

    /// A CHECK constraint as both dialects can be compared: the names, string literals and numbers it mentions,
    /// sorted, without SQL's keywords and PostgreSQL's added casts (`'USER'::text`, `ANY (ARRAY[…])`). A constraint
    /// missing on one side, or one that allows another set of values, differs.
    static func checkSignature(table: String, _ expression: some StringProtocol) -> String {
        let ignored: Set<String> = ["check", "in", "or", "and", "not", "is", "null", "any", "array", "text", "bigint"]
        var tokens: [String] = []
        var index = expression.startIndex
        while index < expression.endIndex {
            let character = expression[index]
            if character == "'" {
                let end = expression[expression.index(after: index)...].firstIndex(of: "'") ?? expression.endIndex
                tokens.append(String(expression[index...min(end, expression.index(before: expression.endIndex))]))
                index = end < expression.endIndex ? expression.index(after: end) : end
            } else if character.isLetter || character.isNumber || character == "_" {
                let end =
                    expression[index...].firstIndex { !($0.isLetter || $0.isNumber || $0 == "_") }
                    ?? expression.endIndex
                let word = expression[index..<end].lowercased()
                if !ignored.contains(word) { tokens.append(word) }
                index = end
            } else {
                index = expression.index(after: index)
            }
        }
        return "\(table) CHECK \(tokens.sorted().joined(separator: " "))"
    }

    /// Foreign keys as `table.column → table.column`, and CHECK constraints by ``checkSignature(table:_:)``, read
    /// from the CREATE TABLE text SQLite keeps.
    static func sqliteConstraints(_ path: String) async throws -> Set<String> {
        try await DatabaseQueue(path: path).read { db in
            var constraints: Set<String> = []
            let tables = try Row.fetchAll(
                db,
                sql: """
                    SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
                    AND name NOT LIKE 'grdb_%'
                    """
            )
            for row in tables {
                let table: String = row["name"]
                for key in try Row.fetchAll(db, sql: "SELECT * FROM pragma_foreign_key_list(?)", arguments: [table]) {
                    constraints.insert(
                        "\(table).\(key["from"] as String) → \(key["table"] as String).\(key["to"] as String)"
                    )
                }
                // Each CHECK ( … ) with its balanced parentheses.
                var sql = Substring(row["sql"] as String)
                while let check = sql.range(of: "CHECK (") {
                    var depth = 0
                    var end = check.upperBound
                    for index in sql[sql.index(before: check.upperBound)...].indices {
                        if sql[index] == "(" { depth += 1 }
                        if sql[index] == ")" { depth -= 1 }
                        if depth == 0 {
                            end = index
                            break
                        }
                    }
                    constraints.insert(checkSignature(table: table, sql[check.upperBound..<end]))
                    sql = sql[end...]
                }
            }
            return constraints
        }
    }

    /// The same as ``sqliteConstraints(_:)`` from PostgreSQL's catalog.
    static func postgresConstraints(_ url: PostgresURL) async throws -> Set<String> {
        try await TestPostgres.withClient(url) { client in
            var constraints: Set<String> = []
            let keys = try await client.query(
                """
                SELECT cl.relname::TEXT, a.attname::TEXT, rcl.relname::TEXT, ra.attname::TEXT
                FROM pg_constraint c
                JOIN pg_class cl ON cl.oid = c.conrelid
                JOIN pg_class rcl ON rcl.oid = c.confrelid
                JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = c.confkey[1]
                WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
                """
            )
            for try await (table, column, target, targetColumn) in keys.decode((String, String, String, String).self) {
                constraints.insert("\(table).\(column) → \(target).\(targetColumn)")
            }
            let checks = try await client.query(
                """
                SELECT cl.relname::TEXT, pg_get_constraintdef(c.oid) FROM pg_constraint c
                JOIN pg_class cl ON cl.oid = c.conrelid
                WHERE c.contype = 'c' AND c.connamespace = current_schema()::regnamespace
                """
            )
            for try await (table, definition) in checks.decode((String, String).self) {
                constraints.insert(checkSignature(table: table, definition))
            }
            return constraints
        }
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
