import Foundation
import GRDB
public import GotchuLedger

extension SQLiteLedgerBackend {
    static let apiKeyColumns = """
        k.id, k.user_id, u.email, k.name, k.hint, k.scopes, k.created_at, k.last_used_at, k.revoked_at,
        u.disabled_at IS NOT NULL AS user_disabled FROM api_keys k JOIN users u ON u.id = k.user_id
        """

    public func apiKey(hash: String) async throws -> (key: APIKey, now: Int64)? {
        let key = try await lookup { db in
            try Row.fetchOne(
                cached: db,
                sql: "SELECT \(Self.apiKeyColumns) WHERE k.secret_hash = ?",
                arguments: [hash]
            ).map(APIKey.init)
        }
        return key.map { ($0, LedgerTime.milliseconds(clock())) }
    }

    public func apiKeys(userID: String?) async throws -> [APIKey] {
        try await database.read { db in
            try Row.fetchAll(
                cached: db,
                sql: "SELECT \(Self.apiKeyColumns) WHERE ? IS NULL OR k.user_id = ? ORDER BY k.created_at, k.id",
                arguments: [userID, userID]
            ).map(APIKey.init)
        }
    }

    public func user(issuer: String, subject: String) async throws -> LedgerUser? {
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
    public func insert(apiKey key: APIKey, hash: String) async throws {
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

    public func apiKey(id: String) async throws -> APIKey? {
        try sync { db in
            try Row.fetchOne(
                cached: db,
                sql: "SELECT \(SQLiteLedgerBackend.apiKeyColumns) WHERE k.id = ?",
                arguments: [id]
            ).map(APIKey.init)
        }
    }

    public func update(apiKey id: String, _ change: APIKeyChange) async throws {
        let now = self.now
        let sql =
            switch change {
            case .used: "UPDATE api_keys SET last_used_at = ? WHERE id = ?"
            case .revoked: "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"
            }
        try sync { db in try db.execute(cached: sql, arguments: [now, id]) }
    }

    public func user(issuer: String, subject: String) async throws -> LedgerUser? {
        try sync { db in
            try SQLiteLedgerBackend.user(issuer: issuer, subject: subject, db)
        }
    }

    public func insertIdentity(issuer: String, subject: String, userID: String) async throws -> Bool {
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
