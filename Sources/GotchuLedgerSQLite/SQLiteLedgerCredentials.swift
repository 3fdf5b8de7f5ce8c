import Foundation
import GRDB
package import GotchuLedger

extension SQLiteLedgerBackend {
    static let apiKeyColumns = """
        k.id, k.user_id, u.email, k.name, k.hint, k.scopes, k.created_at, k.last_used_at, k.revoked_at,
        u.disabled_at IS NOT NULL AS user_disabled FROM api_keys k JOIN users u ON u.id = k.user_id
        """

    /// A lookup on a reader connection (`lookup(_:)`), which never waits for the writer; the time is the store's
    /// clock, read after it.
    package func apiKey(hash: String) async throws -> (key: APIKey, now: Int64)? {
        let key = try await lookup { db in
            try Row.fetchOne(
                cached: db,
                sql: "SELECT \(Self.apiKeyColumns) WHERE k.secret_hash = ?",
                arguments: [hash]
            ).map(APIKey.init)
        }
        return key.map { ($0, LedgerTime.milliseconds(clock())) }
    }

    /// One asynchronous read of the pool, in one snapshot.
    package func apiKeys(userID: String?) async throws -> [APIKey] {
        try await database.read { db in
            try Row.fetchAll(
                cached: db,
                sql: "SELECT \(Self.apiKeyColumns) WHERE ? IS NULL OR k.user_id = ? ORDER BY k.created_at, k.id",
                arguments: [userID, userID]
            ).map(APIKey.init)
        }
    }

    /// A lookup on a reader connection (`lookup(_:)`), which never waits for the writer.
    package func user(issuer: String, subject: String) async throws -> LedgerUser? {
        try await lookup { db in try Self.user(issuer: issuer, subject: subject, db) }
    }

    fileprivate static func user(issuer: String, subject: String, _ db: Database) throws -> LedgerUser? {
        try Row.fetchOne(
            cached: db,
            sql: """
                SELECT u.id, u.display_name, u.disabled_at FROM user_identities i JOIN users u ON u.id = i.user_id
                WHERE i.issuer = ? AND i.subject = ?
                """,
            arguments: [issuer, subject]
        ).map { row in
            LedgerUser(
                id: row["id"],
                displayName: row["display_name"],
                disabled: (row["disabled_at"] as Int64?) != nil
            )
        }
    }
}

extension SQLiteLedgerBackend.Transaction {
    /// Runs on the writer connection, in the request's savepoint.
    package func insert(apiKey key: APIKey, hash: String) async throws {
        let now = self.now
        try sync { db in
            try db.execute(
                cached: """
                    INSERT INTO api_keys (id, user_id, name, secret_hash, hint, scopes, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [key.id, key.userID, key.name, hash, key.hint, key.storedScopes, now]
            )
        }
    }

    /// A plain read on the writer connection: the write lock keeps every other writer out until the batch commits, so
    /// the key cannot change meanwhile.
    package func apiKey(id: String) async throws -> APIKey? {
        try sync { db in
            try Row.fetchOne(
                cached: db,
                sql: "SELECT \(SQLiteLedgerBackend.apiKeyColumns) WHERE k.id = ?",
                arguments: [id]
            ).map(APIKey.init)
        }
    }

    /// A revocation of a revoked key keeps its first time (`revoked_at IS NULL`).
    package func update(apiKey id: String, _ change: APIKeyChange) async throws {
        let now = self.now
        let sql =
            switch change {
            case .used: "UPDATE api_keys SET last_used_at = ? WHERE id = ?"
            case .revoked: "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"
            }
        try sync { db in try db.execute(cached: sql, arguments: [now, id]) }
    }

    /// Read on the writer connection, so it sees the identities this transaction linked.
    package func user(issuer: String, subject: String) async throws -> LedgerUser? {
        try sync { db in
            try SQLiteLedgerBackend.user(issuer: issuer, subject: subject, db)
        }
    }

    /// `INSERT … ON CONFLICT (issuer, subject) DO NOTHING`: with one writer, a concurrent first use committed before
    /// this runs.
    package func insertIdentity(issuer: String, subject: String, userID: String) async throws -> Bool {
        let now = self.now
        return try sync { db in
            try db.execute(
                cached: """
                    INSERT INTO user_identities (issuer, subject, user_id, created_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (issuer, subject) DO NOTHING
                    """,
                arguments: [issuer, subject, userID, now]
            )
            return db.changesCount > 0
        }
    }
}

extension APIKey {
    fileprivate init(_ row: Row) {
        self.init(
            id: row["id"],
            userID: row["user_id"],
            userEmail: row["email"],
            name: row["name"],
            hint: row["hint"],
            storedScopes: row["scopes"],
            createdAt: row["created_at"],
            lastUsedAt: row["last_used_at"],
            revokedAt: row["revoked_at"],
            userDisabled: row["user_disabled"]
        )
    }
}

// Open registration: users with unconfirmed addresses, the codes mailed to confirm them, and the skeletons that keep
// look-alike addresses apart.
extension SQLiteLedgerBackend.Transaction {
    /// `INSERT … ON CONFLICT DO NOTHING`: any unique index (the address or its skeleton) refuses the row; with one
    /// writer, a concurrent insert committed before this runs.
    package func insert(user: LedgerUser, email: String, skeleton: String, confirmed: Bool) async throws -> Bool {
        let now = self.now
        return try sync { db in
            // Any unique index refuses it: the address, or its skeleton.
            try db.execute(
                cached: """
                    INSERT INTO users (id, email, email_skeleton, display_name, created_at, email_confirmed_at)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                    """,
                arguments: [user.id, email, skeleton, user.displayName, now, confirmed ? now : nil]
            )
            return db.changesCount > 0
        }
    }

    /// Read on the writer connection, in the request's savepoint.
    package func emailConfirmed(userID: String) async throws -> Bool? {
        try sync { db in
            try Bool.fetchOne(
                db,
                sql: "SELECT email_confirmed_at IS NOT NULL FROM users WHERE id = ?",
                arguments: [userID]
            )
        }
    }

    /// One statement: the confirmation and the names payers are shown, from the user's row.
    package func payee(userID: String) async throws -> (confirmed: Bool, payee: PayeeRow)? {
        try sync { db in
            try Row.fetchOne(
                cached: db,
                sql: """
                    SELECT email_confirmed_at IS NOT NULL AS confirmed, display_name, email, verified_name FROM users
                    WHERE id = ?
                    """,
                arguments: [userID]
            ).map { row in
                (
                    row["confirmed"],
                    PayeeRow(name: row["display_name"], email: row["email"], verifiedName: row["verified_name"])
                )
            }
        }
    }

    /// An address confirmed already keeps its first time (`email_confirmed_at IS NULL`).
    package func confirmEmail(userID: String) async throws {
        let now = self.now
        try sync { db in
            try db.execute(
                cached: "UPDATE users SET email_confirmed_at = ? WHERE id = ? AND email_confirmed_at IS NULL",
                arguments: [now, userID]
            )
        }
    }

    /// A plain read: the write lock keeps every other writer out until the batch commits, so no row lock is needed.
    package func emailConfirmation(userID: String) async throws -> EmailConfirmationRow? {
        try sync { db in
            try Row.fetchOne(
                cached: db,
                sql: "SELECT code_hash, expires_at, attempts_left FROM email_confirmations WHERE user_id = ?",
                arguments: [userID]
            ).map { row in
                EmailConfirmationRow(
                    userID: userID,
                    codeDigest: row["code_hash"],
                    expiresAt: row["expires_at"],
                    attemptsLeft: row["attempts_left"]
                )
            }
        }
    }

    /// An upsert on `user_id`.
    package func replace(emailConfirmation row: EmailConfirmationRow) async throws {
        try sync { db in
            try db.execute(
                cached: """
                    INSERT INTO email_confirmations (user_id, code_hash, expires_at, attempts_left) VALUES (?, ?, ?, ?)
                    ON CONFLICT (user_id) DO UPDATE SET code_hash = excluded.code_hash,
                    expires_at = excluded.expires_at, attempts_left = excluded.attempts_left
                    """,
                arguments: [row.userID, row.codeDigest, row.expiresAt, row.attemptsLeft]
            )
        }
    }

    /// Does nothing when the user has no pending confirmation.
    package func setConfirmationAttempts(_ attemptsLeft: Int, userID: String) async throws {
        try sync { db in
            try db.execute(
                cached: "UPDATE email_confirmations SET attempts_left = ? WHERE user_id = ?",
                arguments: [attemptsLeft, userID]
            )
        }
    }

    /// Does nothing when the user has no pending confirmation.
    package func deleteEmailConfirmation(userID: String) async throws {
        try sync { db in
            try db.execute(cached: "DELETE FROM email_confirmations WHERE user_id = ?", arguments: [userID])
        }
    }

    /// Ordered by `created_at`, then id.
    package func usersWithoutSkeleton(limit: Int) async throws -> [(id: String, email: String)] {
        try sync { db in
            try Row.fetchAll(
                db,
                sql: "SELECT id, email FROM users WHERE email_skeleton IS NULL ORDER BY created_at, id LIMIT ?",
                arguments: [limit]
            ).map { (id: $0["id"], email: $0["email"]) }
        }
    }

    /// One `UPDATE … WHERE NOT EXISTS`, atomic under the write lock.
    package func setSkeleton(_ skeleton: String, userID: String) async throws -> Bool {
        try sync { db in
            try db.execute(
                sql: """
                    UPDATE users SET email_skeleton = ? WHERE id = ?
                    AND NOT EXISTS (SELECT 1 FROM users WHERE email_skeleton = ?)
                    """,
                arguments: [skeleton, userID, skeleton]
            )
            return db.changesCount > 0
        }
    }
}
