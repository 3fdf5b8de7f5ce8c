import Foundation

extension LedgerEngine {
    /// The longest API key name, in characters.
    package static var maximumKeyNameLength: Int { 100 }

    /// Creates an API key for the user with the address `email`, named `name` (trimmed; 1 to
    /// ``maximumKeyNameLength`` characters, no control characters), with `scopes`, as `actor`, and records it in the
    /// audit log. Returns the key and its secret, which is shown this once: only its hash is stored.
    /// - Throws: ``LedgerError/Kind/invalidInput`` for a malformed address, no scopes or a bad name;
    ///   ``LedgerError/Kind/unknownUser`` when no user has the address.
    package func createAPIKey(
        email: String,
        name: String,
        scopes: Set<APIKeyScope>,
        actor: String
    ) async throws -> (key: APIKey, secret: String) {
        let (normalized, _) = try LedgerUser.normalize(email: email)
        guard !scopes.isEmpty else {
            throw LedgerError(.invalidInput, detail: "an API key needs at least one scope")
        }
        let name = name.trimmingCharacters(in: .whitespaces)
        guard (1...Self.maximumKeyNameLength).contains(name.count),
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == "\u{7F}" })
        else {
            throw LedgerError(
                .invalidInput,
                detail:
                    "a key's name must be 1 to \(Self.maximumKeyNameLength) characters, none of them control characters"
            )
        }
        let secret = APIKeySecret.generate()
        let key = try await measuredTransaction { transaction in
            guard let user = try await transaction.user(email: normalized) else {
                throw LedgerError(.unknownUser, detail: "no user has the e-mail address \(normalized)")
            }
            let key = APIKey(
                id: Self.newID(),
                userID: user.id,
                userEmail: normalized,
                name: name,
                hint: APIKeySecret.hint(secret),
                scopes: scopes,
                createdAt: transaction.now,
                lastUsedAt: nil,
                revokedAt: nil
            )
            try await transaction.insert(apiKey: key, hash: APIKeySecret.hash(secret))
            try await transaction.insert(audit: key.audit(actor: actor, action: "key.create", at: transaction.now))
            return key
        }
        return (key, secret)
    }

    /// The API keys of the user with the address `email`, or every key when `nil`, oldest first, revoked ones
    /// included.
    /// - Throws: ``LedgerError/Kind/invalidInput`` for a malformed address; ``LedgerError/Kind/unknownUser`` when no
    ///   user has it.
    package func apiKeys(email: String?) async throws -> [APIKey] {
        guard let email else { return try await backend.apiKeys(userID: nil) }
        let (normalized, _) = try LedgerUser.normalize(email: email)
        let user = try await measuredTransaction { transaction in try await transaction.user(email: normalized) }
        guard let user else { throw LedgerError(.unknownUser, detail: "no user has the e-mail address \(normalized)") }
        return try await backend.apiKeys(userID: user.id)
    }

    /// Revokes the API key with this id at the store's time, as `actor`, and records it in the audit log; revoking a
    /// revoked key keeps its first revocation time. Returns the key as it is now.
    /// - Throws: ``LedgerError/Kind/invalidInput`` when no key has the id.
    package func revokeAPIKey(id: String, actor: String) async throws -> APIKey {
        try await measuredTransaction { transaction in
            guard var key = try await transaction.apiKey(id: id) else {
                throw LedgerError(.invalidInput, detail: "no API key has the id \(id)")
            }
            if key.revokedAt == nil {
                try await transaction.update(apiKey: id, .revoked)
                key.revokedAt = transaction.now
            }
            try await transaction.insert(audit: key.audit(actor: actor, action: "key.revoke", at: transaction.now))
            return key
        }
    }

    /// The principal an API key's secret authenticates: `nil` for a malformed secret (never looked up), an unknown
    /// or revoked key, or a disabled user. Records the key's use at most once per ``APIKeySecret/lastUsedResolution``,
    /// best effort: a failure to record does not refuse the request.
    package func principal(apiKey secret: String) async throws -> LedgerPrincipal? {
        // Malformed secrets never reach the database.
        guard APIKeySecret.isWellFormed(secret),
            let (key, now) = try await backend.apiKey(hash: APIKeySecret.hash(secret)),
            key.revokedAt == nil, !key.userDisabled
        else { return nil }
        if key.lastUsedAt.map({ now - $0 >= APIKeySecret.lastUsedResolution }) ?? true {
            // Best effort: a busy database delays the record of use, never the request.
            try? await measuredTransaction { transaction in try await transaction.update(apiKey: key.id, .used) }
        }
        return .apiKey(id: key.id, userID: key.userID, scopes: key.scopes)
    }

    /// The user provisioned for the external identity `subject` at `issuer` (an OpenID Connect login), created on
    /// its first use with `displayName`, a wallet and no password; two first uses at once end with one user.
    /// - Throws: ``LedgerError/Kind/unavailable`` if the identity could not be linked in three tries.
    package func user(issuer: String, subject: String, displayName: String) async throws -> LedgerUser {
        // Two first requests with one identity race on its primary key: the loser rolls back its user and reads the
        // winner's.
        for _ in 0..<3 {
            if let user = try await backend.user(issuer: issuer, subject: subject) { return user }
            do {
                return try await measuredTransaction { transaction in
                    if let user = try await transaction.user(issuer: issuer, subject: subject) { return user }
                    let user = LedgerUser(id: Self.newID(), displayName: displayName)
                    // The user's id at the issuer's host: unique, never an address anyone can register first (the id
                    // is new), with no password to log in with, and what an operator names to disable the account.
                    guard try await transaction.insert(user: user, email: Self.externalEmail(user.id, issuer)) else {
                        throw IdentityTaken()
                    }
                    try await transaction.insertWallet(id: Self.newID(), userID: user.id)
                    guard try await transaction.insertIdentity(issuer: issuer, subject: subject, userID: user.id)
                    else { throw IdentityTaken() }
                    return user
                }
            } catch is IdentityTaken {
                continue
            }
        }
        throw LedgerError(.unavailable, detail: "could not create the user; try again")
    }

    /// The stored address of an external identity's user: its id at the issuer's host, which payers see as its
    /// domain.
    static func externalEmail(_ userID: String, _ issuer: String) -> String {
        let host = URLComponents(string: issuer)?.host?.lowercased() ?? ""
        return "\(userID)@\(host.contains(".") ? host : "external.invalid")"
    }

    /// The session's status as `principal` may see it: a user sees it as ``session(sid:viewerID:)`` shows it; an API
    /// key (with ``APIKeyScope/sessionsRead``) sees only its payee's sessions.
    /// - Throws: ``LedgerError/Kind/forbidden`` for a key without the scope; ``LedgerError/Kind/sessionNotFound`` for
    ///   a session that does not exist or is another payee's.
    package func session(sid: String, principal: LedgerPrincipal) async throws -> SessionView {
        let viewerID = try principal.user(for: .readSession)
        guard case .apiKey = principal else { return try await session(sid: sid, viewerID: viewerID) }
        let now = try await backend.now()
        guard let session = try await backend.session(id: sid), session.payeeID == viewerID else {
            throw LedgerError(.sessionNotFound, detail: "no session \(sid) is visible to this key")
        }
        return try await view(of: session, viewerID: viewerID, now: now)
    }
}

extension APIKey {
    /// The audit log's entry for `action` on this key: its id, hint, name and scopes, never its secret.
    fileprivate func audit(actor: String, action: String, at time: Int64) -> AuditEntry {
        AuditEntry(
            actor: actor,
            action: action,
            subject: userEmail,
            detail: "key \(id) (\(hint)…) \"\(name)\", scopes: \(storedScopes)",
            at: time
        )
    }
}

/// A concurrent first use of an external identity linked it first.
private struct IdentityTaken: Error {}
