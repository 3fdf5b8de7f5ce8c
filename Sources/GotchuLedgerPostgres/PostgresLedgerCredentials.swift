import Foundation
package import GotchuLedger
import PostgresNIO

extension PostgresLedgerBackend {
    /// One statement reads the key and the database's `clock_timestamp()`; an injected clock replaces the latter.
    package func apiKey(hash: String) async throws -> (key: APIKey, now: Int64)? {
        // The database's clock in the same statement, so a key costs one round trip.
        let row = try await read { connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.clockMilliseconds), \(unescaped: Connection.apiKeyColumns) WHERE k.secret_hash = \(hash)
                """
            ).first
        }
        guard let row else { return nil }
        let (now, id, userID, email, name, hint, scopes, createdAt, lastUsedAt, revokedAt, disabled) = try row.decode(
            (Int64, String, String, String, String, String, String, Int64, Int64?, Int64?, Bool).self
        )
        let key = APIKey(
            id: id,
            userID: userID,
            userEmail: email,
            name: name,
            hint: hint,
            storedScopes: scopes,
            createdAt: createdAt,
            lastUsedAt: lastUsedAt,
            revokedAt: revokedAt,
            userDisabled: disabled
        )
        return (key, clock.map { LedgerTime.milliseconds($0()) } ?? now)
    }

    /// One statement on a pooled connection, outside a transaction.
    package func apiKeys(userID: String?) async throws -> [APIKey] {
        try await read { connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Connection.apiKeyColumns)
                WHERE \(userID)::TEXT IS NULL OR k.user_id = \(userID) ORDER BY k.created_at, k.id
                """
            ).map(APIKey.init)
        }
    }

    /// One statement on a pooled connection, outside a transaction.
    package func user(issuer: String, subject: String) async throws -> LedgerUser? {
        try await read { connection in try await connection.user(issuer: issuer, subject: subject) }
    }
}

extension PostgresLedgerBackend.Connection {
    static let apiKeyColumns = """
        k.id, k.user_id, u.email, k.name, k.hint, k.scopes, k.created_at, k.last_used_at, k.revoked_at,
        u.disabled_at IS NOT NULL FROM api_keys k JOIN users u ON u.id = k.user_id
        """

    func user(issuer: String, subject: String) async throws -> LedgerUser? {
        try await first(
            """
            SELECT u.id, u.display_name, u.disabled_at IS NOT NULL FROM user_identities i
            JOIN users u ON u.id = i.user_id WHERE i.issuer = \(issuer) AND i.subject = \(subject)
            """,
            as: (String, String, Bool).self
        ).map { LedgerUser(id: $0.0, displayName: $0.1, disabled: $0.2) }
    }
}

extension PostgresLedgerBackend.Transaction {
    /// One `INSERT` on the transaction's connection.
    package func insert(apiKey key: APIKey, hash: String) async throws {
        try await connection.execute(
            """
            INSERT INTO api_keys (id, user_id, name, secret_hash, hint, scopes, created_at)
            VALUES (\(key.id), \(key.userID), \(key.name), \(hash), \(key.hint), \(key.storedScopes), \(now))
            """
        )
    }

    /// The key's row is locked until the transaction ends (`FOR UPDATE OF k`), so two revocations run one after the
    /// other.
    package func apiKey(id: String) async throws -> APIKey? {
        try await connection.rows(
            "SELECT \(unescaped: PostgresLedgerBackend.Connection.apiKeyColumns) WHERE k.id = \(id) FOR UPDATE OF k"
        ).first.map(APIKey.init)
    }

    /// A revocation of a revoked key keeps its first time (`revoked_at IS NULL`).
    package func update(apiKey id: String, _ change: APIKeyChange) async throws {
        switch change {
        case .used:
            try await connection.execute("UPDATE api_keys SET last_used_at = \(now) WHERE id = \(id)")
        case .revoked:
            try await connection.execute(
                "UPDATE api_keys SET revoked_at = \(now) WHERE id = \(id) AND revoked_at IS NULL"
            )
        }
    }

    /// Read on the transaction's connection, so it sees the identities this transaction linked.
    package func user(issuer: String, subject: String) async throws -> LedgerUser? {
        try await connection.user(issuer: issuer, subject: subject)
    }

    /// `INSERT … ON CONFLICT (issuer, subject) DO NOTHING`: a concurrent first use waits on the primary key until the
    /// other transaction ends, then inserts nothing if it committed.
    package func insertIdentity(issuer: String, subject: String, userID: String) async throws -> Bool {
        try await !connection.rows(
            """
            INSERT INTO user_identities (issuer, subject, user_id, created_at)
            VALUES (\(issuer), \(subject), \(userID), \(now)) ON CONFLICT (issuer, subject) DO NOTHING RETURNING 1
            """
        ).isEmpty
    }
}

extension APIKey {
    fileprivate init(_ row: PostgresRow) throws {
        let (id, userID, email, name, hint, scopes, createdAt, lastUsedAt, revokedAt, disabled) = try row.decode(
            (String, String, String, String, String, String, Int64, Int64?, Int64?, Bool).self
        )
        self.init(
            id: id,
            userID: userID,
            userEmail: email,
            name: name,
            hint: hint,
            storedScopes: scopes,
            createdAt: createdAt,
            lastUsedAt: lastUsedAt,
            revokedAt: revokedAt,
            userDisabled: disabled
        )
    }
}

// Open registration: users with unconfirmed addresses, the codes mailed to confirm them, and the skeletons that keep
// look-alike addresses apart.
extension PostgresLedgerBackend.Transaction {
    /// `INSERT … ON CONFLICT DO NOTHING`: any unique index (the address or its skeleton) refuses the row; a concurrent
    /// insert of either waits for the other transaction, then inserts nothing if it committed.
    package func insert(user: LedgerUser, email: String, skeleton: String, confirmed: Bool) async throws -> Bool {
        let confirmedAt: Int64? = confirmed ? now : nil
        // Any unique index refuses it: the address, or its skeleton (a concurrent insert of either waits for the
        // other transaction, then inserts nothing if that one committed).
        return try await !connection.rows(
            """
            INSERT INTO users (id, email, email_skeleton, display_name, created_at, email_confirmed_at)
            VALUES (\(user.id), \(email), \(skeleton), \(user.displayName), \(now), \(confirmedAt))
            ON CONFLICT DO NOTHING RETURNING id
            """
        ).isEmpty
    }

    /// An unlocked read on the transaction's connection.
    package func emailConfirmed(userID: String) async throws -> Bool? {
        try await connection.first(
            "SELECT email_confirmed_at IS NOT NULL FROM users WHERE id = \(userID)",
            as: Bool.self
        )
    }

    /// One statement: the confirmation and the names payers are shown, from the user's row.
    package func payee(userID: String) async throws -> (confirmed: Bool, payee: PayeeRow)? {
        try await connection.first(
            """
            SELECT email_confirmed_at IS NOT NULL, display_name, email, verified_name FROM users WHERE id = \(userID)
            """,
            as: (Bool, String, String, String?).self
        ).map { ($0.0, PayeeRow(name: $0.1, email: $0.2, verifiedName: $0.3)) }
    }

    /// An address confirmed already keeps its first time (`email_confirmed_at IS NULL`).
    package func confirmEmail(userID: String) async throws {
        try await connection.execute(
            "UPDATE users SET email_confirmed_at = \(now) WHERE id = \(userID) AND email_confirmed_at IS NULL"
        )
    }

    /// The row is locked (`FOR UPDATE`): two confirmations of one account run one after the other, so each spends its
    /// own attempt.
    package func emailConfirmation(userID: String) async throws -> EmailConfirmationRow? {
        try await connection.first(
            """
            SELECT code_hash, expires_at, attempts_left FROM email_confirmations WHERE user_id = \(userID) FOR UPDATE
            """,
            as: (String, Int64, Int32).self
        ).map { EmailConfirmationRow(userID: userID, codeDigest: $0.0, expiresAt: $0.1, attemptsLeft: Int($0.2)) }
    }

    /// An upsert on `user_id`.
    package func replace(emailConfirmation row: EmailConfirmationRow) async throws {
        try await connection.execute(
            """
            INSERT INTO email_confirmations (user_id, code_hash, expires_at, attempts_left)
            VALUES (\(row.userID), \(row.codeDigest), \(row.expiresAt), \(Int32(clamping: row.attemptsLeft)))
            ON CONFLICT (user_id) DO UPDATE SET code_hash = EXCLUDED.code_hash, expires_at = EXCLUDED.expires_at,
            attempts_left = EXCLUDED.attempts_left
            """
        )
    }

    /// Does nothing when the user has no pending confirmation.
    package func setConfirmationAttempts(_ attemptsLeft: Int, userID: String) async throws {
        try await connection.execute(
            """
            UPDATE email_confirmations SET attempts_left = \(Int32(clamping: attemptsLeft)) WHERE user_id = \(userID)
            """
        )
    }

    /// Does nothing when the user has no pending confirmation.
    package func deleteEmailConfirmation(userID: String) async throws {
        try await connection.execute("DELETE FROM email_confirmations WHERE user_id = \(userID)")
    }

    /// Ordered by `created_at`, then id.
    package func usersWithoutSkeleton(limit: Int) async throws -> [(id: String, email: String)] {
        try await connection.rows(
            """
            SELECT id, email FROM users WHERE email_skeleton IS NULL ORDER BY created_at, id LIMIT \(Int64(limit))
            """
        ).map { row in
            let (id, email) = try row.decode((String, String).self)
            return (id: id, email: email)
        }
    }

    /// One `UPDATE … WHERE NOT EXISTS`; the unique index on the skeleton refuses a concurrent equal one.
    package func setSkeleton(_ skeleton: String, userID: String) async throws -> Bool {
        try await !connection.rows(
            """
            UPDATE users SET email_skeleton = \(skeleton) WHERE id = \(userID)
            AND NOT EXISTS (SELECT 1 FROM users WHERE email_skeleton = \(skeleton)) RETURNING id
            """
        ).isEmpty
    }
}
