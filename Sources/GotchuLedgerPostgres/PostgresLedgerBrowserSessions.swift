import Foundation
package import GotchuLedger
import PostgresNIO

extension PostgresLedgerBackend {
    /// One statement reads the session, its user and the database's `clock_timestamp()`; an injected clock replaces
    /// the latter.
    package func browserSession(
        digest: String
    ) async throws -> (session: BrowserSessionRow, user: LedgerUser, now: Int64)? {
        let row = try await read { connection in
            try await connection.first(
                """
                SELECT \(unescaped: Self.clockMilliseconds), b.user_id, b.created_at, b.expires_at, u.display_name,
                u.disabled_at IS NOT NULL, u.tokens_not_before
                FROM browser_sessions b JOIN users u ON u.id = b.user_id WHERE b.token_hash = \(digest)
                """,
                as: (Int64, String, Int64, Int64, String, Bool, Int64?).self
            )
        }
        guard let (now, userID, createdAt, expiresAt, name, disabled, notBefore) = row else { return nil }
        return (
            BrowserSessionRow(digest: digest, userID: userID, createdAt: createdAt, expiresAt: expiresAt),
            LedgerUser(id: userID, displayName: name, disabled: disabled, tokensNotBefore: notBefore),
            clock.map { LedgerTime.milliseconds($0()) } ?? now
        )
    }
}

extension PostgresLedgerBackend.Transaction {
    /// One `INSERT` on the transaction's connection.
    package func insert(browserSession row: BrowserSessionRow) async throws {
        try await connection.execute(
            """
            INSERT INTO browser_sessions (token_hash, user_id, created_at, expires_at)
            VALUES (\(row.digest), \(row.userID), \(row.createdAt), \(row.expiresAt))
            """
        )
    }

    /// Does nothing when there is no such session.
    package func deleteBrowserSession(digest: String) async throws {
        try await connection.execute("DELETE FROM browser_sessions WHERE token_hash = \(digest)")
    }

    /// Served by the index on `expires_at`.
    package func deleteBrowserSessions(endedBy time: Int64) async throws -> Int {
        let count = try await connection.value(
            """
            WITH pruned AS (DELETE FROM browser_sessions WHERE expires_at <= \(time) RETURNING 1)
            SELECT COUNT(*) FROM pruned
            """,
            as: Int64.self
        )
        return Int(count ?? 0)
    }
}
