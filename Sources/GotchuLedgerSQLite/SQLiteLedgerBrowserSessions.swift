import Foundation
import GRDB
package import GotchuLedger

extension SQLiteLedgerBackend {
    /// A lookup on a reader connection (`lookup(_:)`), which never waits for the writer; the time is the store's
    /// clock, read after it.
    package func browserSession(
        digest: String
    ) async throws -> (session: BrowserSessionRow, user: LedgerUser, now: Int64)? {
        let found = try await lookup { db in
            try Row.fetchOne(
                cached: db,
                sql: """
                    SELECT b.user_id, b.created_at, b.expires_at, u.display_name, u.disabled_at, u.tokens_not_before
                    FROM browser_sessions b JOIN users u ON u.id = b.user_id WHERE b.token_hash = ?
                    """,
                arguments: [digest]
            ).map { row in
                (
                    BrowserSessionRow(
                        digest: digest,
                        userID: row["user_id"],
                        createdAt: row["created_at"],
                        expiresAt: row["expires_at"]
                    ),
                    LedgerUser(
                        id: row["user_id"],
                        displayName: row["display_name"],
                        disabled: (row["disabled_at"] as Int64?) != nil,
                        tokensNotBefore: row["tokens_not_before"]
                    )
                )
            }
        }
        return found.map { ($0.0, $0.1, LedgerTime.milliseconds(clock())) }
    }
}

extension SQLiteLedgerBackend.Transaction {
    /// Runs on the writer connection, in the request's savepoint.
    package func insert(browserSession row: BrowserSessionRow) async throws {
        try sync { db in
            try db.execute(
                cached:
                    "INSERT INTO browser_sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [row.digest, row.userID, row.createdAt, row.expiresAt]
            )
        }
    }

    /// Does nothing when there is no such session.
    package func deleteBrowserSession(digest: String) async throws {
        try sync { db in
            try db.execute(cached: "DELETE FROM browser_sessions WHERE token_hash = ?", arguments: [digest])
        }
    }

    /// Served by the index on `expires_at`.
    package func deleteBrowserSessions(endedBy time: Int64) async throws -> Int {
        try sync { db in
            try db.execute(cached: "DELETE FROM browser_sessions WHERE expires_at <= ?", arguments: [time])
            return db.changesCount
        }
    }
}
