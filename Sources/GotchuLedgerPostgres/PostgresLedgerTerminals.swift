import Foundation
package import GotchuLedger
import PostgresNIO

// Terminals' enrolled keys.
extension PostgresLedgerBackend.Transaction {
    /// `INSERT … ON CONFLICT (key_id) DO NOTHING`: a concurrent enrolment of the same key waits on the unique key
    /// until the other commits, then inserts nothing.
    package func insert(terminal: TerminalRow) async throws -> Bool {
        try await !connection.rows(
            """
            INSERT INTO terminals (id, payee_id, name, key_id, public_key, created_at)
            VALUES (\(terminal.id), \(terminal.payeeID), \(terminal.name), \(terminal.keyID),
                \(terminal.publicKey.base64EncodedString()), \(terminal.createdAt))
            ON CONFLICT (key_id) DO NOTHING RETURNING 1
            """
        ).isEmpty
    }

    /// Locked (`FOR UPDATE`), so two revocations run one after the other.
    package func terminal(id: String) async throws -> TerminalRow? {
        try await connection.rows(
            """
            SELECT id, payee_id, name, key_id, public_key, created_at, revoked_at FROM terminals
            WHERE id = \(id) FOR UPDATE
            """
        ).first.map(TerminalRow.init)
    }

    package func terminal(keyID: String) async throws -> TerminalRow? {
        try await connection.rows(
            """
            SELECT id, payee_id, name, key_id, public_key, created_at, revoked_at FROM terminals
            WHERE key_id = \(keyID)
            """
        ).first.map(TerminalRow.init)
    }

    package func terminals(payeeID: String) async throws -> [TerminalRow] {
        try await connection.rows(
            """
            SELECT id, payee_id, name, key_id, public_key, created_at, revoked_at FROM terminals
            WHERE payee_id = \(payeeID) ORDER BY created_at, id
            """
        ).map(TerminalRow.init)
    }

    package func revoke(terminal id: String) async throws {
        try await connection.execute(
            "UPDATE terminals SET revoked_at = \(now) WHERE id = \(id) AND revoked_at IS NULL"
        )
    }
}

extension TerminalRow {
    /// The public key is kept as base64 text, as the database's other binary values are.
    fileprivate init(_ row: PostgresRow) throws {
        let (id, payeeID, name, keyID, publicKey, createdAt, revokedAt) = try row.decode(
            (String, String, String, String, String, Int64, Int64?).self
        )
        guard let key = Data(base64Encoded: publicKey) else {
            throw LedgerError(.inconsistent, detail: "terminal \(id) holds a public key that is not base64")
        }
        self.init(
            id: id,
            payeeID: payeeID,
            name: name,
            keyID: keyID,
            publicKey: key,
            createdAt: createdAt,
            revokedAt: revokedAt
        )
    }
}
