import Foundation
import GRDB
package import GotchuLedger

// Terminals' enrolled keys: the one writer's connection keeps every other writer out, so a plain read is locked.
extension SQLiteLedgerBackend.Transaction {
    private static let columns = "id, payee_id, name, key_id, public_key, created_at, revoked_at FROM terminals"

    /// `INSERT … ON CONFLICT (key_id) DO NOTHING`: a key enrolled already inserts nothing.
    package func insert(terminal: TerminalRow) async throws -> Bool {
        try sync { db in
            try db.execute(
                cached: """
                    INSERT INTO terminals (id, payee_id, name, key_id, public_key, created_at)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key_id) DO NOTHING
                    """,
                arguments: [
                    terminal.id, terminal.payeeID, terminal.name, terminal.keyID,
                    terminal.publicKey.base64EncodedString(),
                    terminal.createdAt,
                ]
            )
            return db.changesCount == 1
        }
    }

    package func terminal(id: String) async throws -> TerminalRow? {
        try sync { db in
            try Row.fetchOne(cached: db, sql: "SELECT \(Self.columns) WHERE id = ?", arguments: [id])
                .map(TerminalRow.init)
        }
    }

    package func terminal(keyID: String) async throws -> TerminalRow? {
        try sync { db in
            try Row.fetchOne(cached: db, sql: "SELECT \(Self.columns) WHERE key_id = ?", arguments: [keyID])
                .map(TerminalRow.init)
        }
    }

    package func terminals(payeeID: String) async throws -> [TerminalRow] {
        try sync { db in
            try Row.fetchAll(
                cached: db,
                sql: "SELECT \(Self.columns) WHERE payee_id = ? ORDER BY created_at, id",
                arguments: [payeeID]
            ).map(TerminalRow.init)
        }
    }

    package func revoke(terminal id: String) async throws {
        let now = self.now
        try sync { db in
            try db.execute(
                cached: "UPDATE terminals SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                arguments: [now, id]
            )
        }
    }
}

extension TerminalRow {
    /// The public key is kept as base64 text, as in PostgreSQL.
    fileprivate init(_ row: Row) throws {
        let id: String = row["id"]
        guard let key = Data(base64Encoded: row["public_key"] as String) else {
            throw LedgerError(.inconsistent, detail: "terminal \(id) holds a public key that is not base64")
        }
        self.init(
            id: id,
            payeeID: row["payee_id"],
            name: row["name"],
            keyID: row["key_id"],
            publicKey: key,
            createdAt: row["created_at"],
            revokedAt: row["revoked_at"]
        )
    }
}
