import Foundation

// Accounts, passwords, refresh tokens and the operator's changes, written once over the backend primitives. No
// bcrypt ever runs inside a transaction: a hash takes a sizeable fraction of a second, and a transaction holds the
// writer (SQLite) or row locks (PostgreSQL) for as long as it is open.
extension LedgerEngine {
    /// Checks the password with bcrypt before any transaction opens; when the policy's
    /// ``LedgerPolicy/passwordCost`` differs from the stored hash's, stores a new hash at that cost (unless the password
    /// was reset meanwhile). An unconfirmed address is refused ``LedgerError/Kind/emailUnconfirmed`` once the password is
    /// right.
    package func login(email: String, password: String) async throws -> LedgerUser {
        // A malformed address is refused like a wrong one, after the same work, so the answer tells nothing.
        var credentials: UserCredentials?
        if let normalized = try? LedgerUser.normalize(email: email).email {
            credentials = try await backend.credentials(email: normalized)
        }
        guard let credentials, let hash = credentials.passwordHash else {
            _ = await Passwords.verify(password, hash: await Passwords.decoyHash(cost: policy.passwordCost))
            throw Self.wrongCredentials
        }
        guard await Passwords.verify(password, hash: hash) else { throw Self.wrongCredentials }
        guard !credentials.user.disabled else { throw Self.accountDisabled }
        // No token for an address nobody proved to own: once confirmed, the account must not hold a login that
        // whoever registered it first obtained.
        guard credentials.confirmed else { throw Self.emailUnconfirmed }
        if Passwords.cost(of: hash) != policy.passwordCost {
            // The operator changed --bcrypt-cost: the hash follows at the next login, the one time the password is
            // known. Only if it is still the hash just checked, so a reset meanwhile is not undone.
            let upgraded = await Passwords.hash(password, cost: policy.passwordCost)
            let userID = credentials.user.id
            try await measuredTransaction { transaction in
                try await transaction.replacePassword(userID: userID, hash: hash, with: upgraded)
            }
        }
        return credentials.user
    }

    /// Hashes the password and makes the code before the transaction, then decides in one transaction; a concurrent
    /// registration of the same new address finds the winner's account and treats it as unconfirmed.
    package func register(email: String, password: String) async throws -> RegistrationOutcome {
        let (normalized, nameFromEmail) = try LedgerUser.normalize(email: email)
        try Self.checkNewAddress(normalized)
        try Passwords.validate(password, minimumLength: policy.minimumPasswordLength)
        // Hashed whatever the address turns out to be, so a taken address is answered after the same work.
        let hash = await Passwords.hash(password, cost: policy.passwordCost)
        let code = ConfirmationCodes.make()
        let lifetime = LedgerTime.milliseconds(policy.confirmationCodeLifetime)
        let attempts = policy.confirmationAttempts
        let skeleton = ConfusableText.skeleton(normalized)
        return try await measuredTransaction { transaction in
            let confirmation = { (userID: String) in
                EmailConfirmationRow(
                    userID: userID,
                    codeDigest: RefreshTokens.digest(code),
                    expiresAt: transaction.now + lifetime,
                    attemptsLeft: attempts
                )
            }
            // Two registrations of one new address race on its unique index: the loser finds the winner's account.
            for _ in 0..<2 {
                if let user = try await transaction.user(email: normalized) {
                    guard !user.disabled, try await transaction.emailConfirmed(userID: user.id) == false else {
                        return .alreadyRegistered
                    }
                    // Whoever registered the address before never confirmed it, so need not own it: the newest
                    // registration's password and code replace theirs, and an address cannot be held by a stranger.
                    let row = confirmation(user.id)
                    try await transaction.setPassword(userID: user.id, hash: hash)
                    try await transaction.revokeRefreshTokens(userID: user.id)
                    try await transaction.replace(emailConfirmation: row)
                    return .confirmationNeeded(code: code, expiresAt: LedgerTime.date(row.expiresAt))
                }
                let user = LedgerUser(id: Self.newID(), displayName: nameFromEmail)
                if try await transaction.insert(user: user, email: normalized, skeleton: skeleton, confirmed: false) {
                    let row = confirmation(user.id)
                    try await transaction.setPassword(userID: user.id, hash: hash)
                    try await transaction.insertWallet(id: Self.newID(), userID: user.id)
                    try await transaction.replace(emailConfirmation: row)
                    return .confirmationNeeded(code: code, expiresAt: LedgerTime.date(row.expiresAt))
                }
                // Not the address itself (the next turn reads that one): another account's address looks the same.
                if try await transaction.user(email: normalized) == nil { return .lookAlike }
            }
            throw LedgerError(.unavailable, detail: "could not register the address; try again")
        }
    }

    /// The password is checked with bcrypt before the transaction; the code's digest is compared inside it, and a
    /// refusal's spent attempt commits before the refusal is thrown. The last attempt, or an expired code, deletes the
    /// code.
    package func confirmRegistration(email: String, code: String, password: String) async throws -> LedgerUser {
        var credentials: UserCredentials?
        if let normalized = try? LedgerUser.normalize(email: email).email {
            credentials = try await backend.credentials(email: normalized)
        }
        // The password is checked in every case (against a decoy without an account), so no refusal is quicker.
        var hash = credentials?.passwordHash
        if hash == nil { hash = await Passwords.decoyHash(cost: policy.passwordCost) }
        let passwordMatches = await Passwords.verify(password, hash: hash ?? "")
        guard let credentials, credentials.passwordHash != nil, !credentials.confirmed, !credentials.user.disabled
        else { throw Self.wrongConfirmation }
        let userID = credentials.user.id
        let digest = RefreshTokens.digest(ConfirmationCodes.normalize(code))
        let confirmed: Bool = try await measuredTransaction { transaction in
            guard let row = try await transaction.emailConfirmation(userID: userID) else { return false }
            guard transaction.now < row.expiresAt, row.attemptsLeft > 0 else {
                try await transaction.deleteEmailConfirmation(userID: userID)
                return false
            }
            // Digests of codes, compared: what the comparison's time could tell is of no use without the code. A
            // registration since the password was read replaced the code too, so its old code fails here.
            guard passwordMatches, row.codeDigest == digest else {
                if row.attemptsLeft > 1 {
                    try await transaction.setConfirmationAttempts(row.attemptsLeft - 1, userID: userID)
                } else {
                    try await transaction.deleteEmailConfirmation(userID: userID)
                }
                return false
            }
            try await transaction.confirmEmail(userID: userID)
            try await transaction.deleteEmailConfirmation(userID: userID)
            return true
        }
        // A refusal's spent attempt committed above, before it is thrown.
        guard confirmed else { throw Self.wrongConfirmation }
        return credentials.user
    }

    /// Valid for ``LedgerPolicy/refreshTokenLifetime`` from the store's time.
    package func issueRefreshToken(userID: String) async throws -> String {
        let token = RefreshTokens.make()
        let lifetime = LedgerTime.milliseconds(policy.refreshTokenLifetime)
        try await measuredTransaction { transaction in
            try await transaction.insert(
                refreshToken: RefreshTokenRow(
                    digest: RefreshTokens.digest(token),
                    familyID: Self.newID(),
                    userID: userID,
                    expiresAt: transaction.now + lifetime
                )
            )
        }
        return token
    }

    /// A reused token also revokes the user's access tokens (``LedgerUser/tokensNotBefore``); the next token is
    /// valid for ``LedgerPolicy/refreshTokenLifetime`` from the store's time.
    package func refresh(token: String) async throws -> (user: LedgerUser, refreshToken: String) {
        let next = RefreshTokens.make()
        let lifetime = LedgerTime.milliseconds(policy.refreshTokenLifetime)
        let decision: RefreshDecision = try await measuredTransaction { transaction in
            guard let row = try await transaction.refreshToken(digest: RefreshTokens.digest(token)) else {
                return .refused("the refresh token is not valid; log in again")
            }
            guard row.revokedAt == nil else { return .refused("the refresh token was revoked; log in again") }
            guard row.usedAt == nil else {
                // A used token again: a copy exists. Whichever of the two holders is honest, the family ends here,
                // and so do the access tokens either of them holds.
                try await transaction.revokeRefreshTokens(familyID: row.familyID)
                try await transaction.revokeAccessTokens(userID: row.userID)
                return .refused("the refresh token was used before; every token of this login is revoked")
            }
            guard transaction.now < row.expiresAt else {
                return .refused("the refresh token has expired; log in again")
            }
            guard let user = try await transaction.user(id: row.userID), !user.disabled else {
                try await transaction.revokeRefreshTokens(familyID: row.familyID)
                return .refused("the account is disabled")
            }
            try await transaction.markUsed(refreshToken: row.digest)
            try await transaction.insert(
                refreshToken: RefreshTokenRow(
                    digest: RefreshTokens.digest(next),
                    familyID: row.familyID,
                    userID: row.userID,
                    expiresAt: transaction.now + lifetime
                )
            )
            return .rotated(user)
        }
        switch decision {
        case .rotated(let user): return (user, next)
        case .refused(let detail): throw LedgerError(.unknownUser, detail: detail)
        }
    }

    /// Deletes those that expired before the store's time, in one transaction.
    package func pruneRefreshTokens() async throws -> Int {
        try await measuredTransaction { transaction in
            try await transaction.deleteRefreshTokens(expiredBefore: transaction.now)
        }
    }

    /// Revokes the user's access tokens too, so the login ends now; the user's other logins refresh theirs.
    package func logout(refreshToken: String) async throws {
        try await measuredTransaction { transaction in
            guard let row = try await transaction.refreshToken(digest: RefreshTokens.digest(refreshToken)) else {
                return
            }
            try await transaction.revokeRefreshTokens(familyID: row.familyID)
            // The access tokens too: a logout must end the login now, not when its last access token expires. The
            // user's other logins refresh theirs.
            try await transaction.revokeAccessTokens(userID: row.userID)
        }
    }

    // MARK: Administration

    /// The address is confirmed from the start; the password is hashed before the transaction.
    /// - Throws: ``LedgerError/Kind/invalidInput`` for a malformed address, one that mixes scripts, looks like another
    ///   account's or holds compatibility forms, or a password the policy refuses; ``LedgerError/Kind/accountExists``
    ///   when an account has the address.
    package func addUser(
        email: String,
        displayName: String?,
        password: String,
        actor: String
    ) async throws
        -> LedgerUser
    {
        try await createUser(
            email: email,
            displayName: displayName,
            password: password,
            audit: (actor, "user.add", displayName.map { "name: \($0)" } ?? "")
        )
    }

    /// Read outside a transaction.
    package func users() async throws -> [UserSummary] { try await backend.users() }

    /// A user disabled already stays so (its refresh tokens revoked again); the audit log records the request either
    /// way.
    /// - Throws: ``LedgerError/Kind/unknownUser`` when no user has the address.
    package func disableUser(email: String, actor: String) async throws {
        let normalized = try LedgerUser.normalize(email: email).email
        try await recordingAudit(actor: actor, action: "user.disable", subject: normalized) { transaction in
            let user = try await Self.existingUser(normalized, transaction)
            if !user.disabled { try await transaction.disable(userID: user.id) }
            try await transaction.revokeRefreshTokens(userID: user.id)
        }
    }

    /// Also revokes the user's access tokens: whoever knew the old password loses any session with it.
    /// - Throws: ``LedgerError/Kind/invalidInput`` for a password the policy refuses; ``LedgerError/Kind/unknownUser``
    ///   when no user has the address.
    package func resetPassword(email: String, password: String, actor: String) async throws {
        let normalized = try LedgerUser.normalize(email: email).email
        try Passwords.validate(password, minimumLength: policy.minimumPasswordLength)
        let hash = await Passwords.hash(password, cost: policy.passwordCost)
        try await recordingAudit(actor: actor, action: "user.reset-password", subject: normalized) { transaction in
            let user = try await Self.existingUser(normalized, transaction)
            try await transaction.setPassword(userID: user.id, hash: hash)
            // Whoever knew the old password may hold a session: it ends with it, access tokens included.
            try await transaction.revokeRefreshTokens(userID: user.id)
            try await transaction.revokeAccessTokens(userID: user.id)
        }
    }

    /// - Throws: ``LedgerError/Kind/unknownUser`` when no user has the address.
    package func verifyMerchant(email: String, name: String, actor: String) async throws {
        let normalized = try LedgerUser.normalize(email: email).email
        try await recordingAudit(actor: actor, action: "merchant.verify", subject: normalized, detail: "name: \(name)")
        {
            transaction in
            let user = try await Self.existingUser(normalized, transaction)
            try await transaction.setVerifiedName(userID: user.id, name: name)
        }
    }

    /// Read outside a transaction.
    package func auditLog(limit: Int) async throws -> [AuditEntry] { try await backend.auditLog(limit: limit) }

    /// Runs `body` in one transaction with an audit entry of `actor` doing `action` to `subject`, so the change and
    /// its record commit together or not at all. Every operator's change goes through here.
    package func recordingAudit<T: Sendable>(
        actor: String,
        action: String,
        subject: String,
        detail: String = "",
        _ body: (Backend.Transaction) async throws -> T
    ) async throws -> T {
        try await measuredTransaction { transaction in
            let result = try await body(transaction)
            try await transaction.insert(
                audit: AuditEntry(actor: actor, action: action, subject: subject, detail: detail, at: transaction.now)
            )
            return result
        }
    }

    // MARK: Internals

    /// Creates a user with a password and a wallet; the hash is made before the transaction opens.
    private func createUser(
        email: String,
        displayName: String?,
        password: String,
        audit: (actor: String, action: String, detail: String)?
    ) async throws -> LedgerUser {
        let (normalized, nameFromEmail) = try LedgerUser.normalize(email: email)
        try Self.checkNewAddress(normalized)
        try Passwords.validate(password, minimumLength: policy.minimumPasswordLength)
        let hash = await Passwords.hash(password, cost: policy.passwordCost)
        let user = LedgerUser(id: Self.newID(), displayName: displayName ?? nameFromEmail)
        let create: (Backend.Transaction) async throws -> LedgerUser = { transaction in
            guard try await transaction.insert(user: user, email: normalized) else {
                guard try await transaction.user(email: normalized) != nil else { throw Self.lookAlike }
                throw LedgerError(.accountExists, detail: "an account with this e-mail address exists")
            }
            try await transaction.setPassword(userID: user.id, hash: hash)
            try await transaction.insertWallet(id: Self.newID(), userID: user.id)
            return user
        }
        guard let audit else { return try await measuredTransaction(create) }
        return try await recordingAudit(
            actor: audit.actor,
            action: audit.action,
            subject: normalized,
            detail: audit.detail,
            create
        )
    }

    private static func existingUser(_ email: String, _ transaction: Backend.Transaction) async throws -> LedgerUser {
        guard let user = try await transaction.user(email: email) else {
            throw LedgerError(.unknownUser, detail: "no user has the address \(email)")
        }
        return user
    }

    /// Fills in the skeletons of the addresses stored before skeletons existed, oldest account first, in batches.
    /// Of two old addresses that look the same, the older keeps the skeleton; the younger gets it followed by a
    /// space and its id, which no address's skeleton can equal (addresses hold no spaces), so it blocks nothing.
    func fillEmailSkeletons() async throws {
        while true {
            let more = try await measuredTransaction { transaction in
                let users = try await transaction.usersWithoutSkeleton(limit: 1_000)
                for user in users {
                    let skeleton = ConfusableText.skeleton(user.email)
                    if try await !transaction.setSkeleton(skeleton, userID: user.id) {
                        _ = try await transaction.setSkeleton("\(skeleton) \(user.id)", userID: user.id)
                    }
                }
                return !users.isEmpty
            }
            if !more { return }
        }
    }

    /// Refuses an address for a new account (whatever made it: registration, an operator, development login) whose
    /// name part or a domain label holds compatibility forms (full-width `ｚ`, mathematical `𝐳`) or mixes scripts
    /// (Latin `z` with Cyrillic `о`): such addresses print like another's in a payer's prompt. Addresses stored
    /// before this check stay usable.
    static func checkNewAddress(_ email: String) throws(LedgerError) {
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        for part in parts.prefix(1) + (parts.dropFirst().first?.split(separator: ".") ?? []) {
            let text = String(part)
            if text.precomposedStringWithCompatibilityMapping != text.precomposedStringWithCanonicalMapping {
                throw LedgerError(
                    .invalidInput,
                    detail: "email must be written in plain characters: \"\(text)\" holds full-width or other "
                        + "compatibility forms (write \"\(text.precomposedStringWithCompatibilityMapping)\")"
                )
            }
            if ConfusableText.mixesScripts(text) {
                let scripts = ConfusableText.scripts(of: text).map(\.rawValue).sorted().joined(separator: ", ")
                throw LedgerError(
                    .invalidInput,
                    detail: "email must keep to one script in each part: \"\(text)\" mixes \(scripts), "
                        + "which can imitate another address"
                )
            }
        }
    }

    static var lookAlike: LedgerError {
        LedgerError(.invalidInput, detail: "this address looks like the address of another account; choose another")
    }

    static var emailUnconfirmed: LedgerError {
        LedgerError(
            .emailUnconfirmed,
            detail: "the account's e-mail address is not confirmed yet: send the code mailed to it to "
                + "POST /auth/register/confirm"
        )
    }

    private static var wrongConfirmation: LedgerError {
        LedgerError(
            .unknownUser,
            detail: "the code or the password is wrong, or the code has expired or was used up; register again "
                + "for a new code"
        )
    }

    private static var wrongCredentials: LedgerError {
        LedgerError(.unknownUser, detail: "wrong e-mail address or password")
    }

    static var accountDisabled: LedgerError {
        LedgerError(.forbidden, detail: "this account is disabled; ask the ledger's operator")
    }
}
