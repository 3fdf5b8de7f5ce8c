import Crypto
import Dispatch
public import Foundation
import HummingbirdBcrypt
import Synchronization

/// Password hashing: bcrypt, run off the cooperative thread pool (a hash takes a sizeable fraction of a second by
/// design, and would otherwise stall every request sharing the pool's threads).
public enum Passwords {
    /// The default cost: 2^12 rounds, a few hundred milliseconds on a small server.
    public static let defaultCost = 12
    /// The costs a server or an operator may choose. Below 10 a stolen hash is guessed too cheaply; above 16 one
    /// login costs seconds. (Tests pass lower costs to the engine directly.)
    public static let allowedCosts: ClosedRange<Int> = 10...16
    /// The costs bcrypt itself takes.
    public static let bcryptCosts: ClosedRange<Int> = 4...31
    /// The fewest characters of a password, by default.
    public static let defaultMinimumLength = 12
    /// The most characters (Unicode scalars, as JSON Schema counts them) of a password.
    public static let maximumLength = 72

    /// Refuses a password shorter than `minimumLength` or longer than ``maximumLength`` characters, or holding NUL.
    /// Characters are Unicode scalars, as JSON Schema's `minLength` counts them.
    public static func validate(_ password: String, minimumLength: Int) throws(LedgerError) {
        let length = password.unicodeScalars.count
        guard length >= minimumLength else {
            throw LedgerError(.invalidInput, detail: "the password must be at least \(minimumLength) characters long")
        }
        guard length <= maximumLength else {
            throw LedgerError(.invalidInput, detail: "the password must be at most \(maximumLength) characters long")
        }
        guard !password.utf8.contains(0) else {
            throw LedgerError(.invalidInput, detail: "the password must not contain NUL characters")
        }
    }

    /// A bcrypt hash of `password` at `cost`.
    public static func hash(_ password: String, cost: Int) async -> String {
        precondition(bcryptCosts.contains(cost), "bcrypt costs are 4 to 31")
        let input = bcryptInput(password)
        return await offPool { Bcrypt.hash(input, cost: UInt8(cost)) }
    }

    /// Whether `password` matches the bcrypt `hash`. (HummingbirdBcrypt compares the two bcrypt outputs with
    /// `memcmp`; what its timing could tell is how far a guess's output matches the stored one, which is of no use
    /// without the stored salt, and whoever has that can test guesses offline anyway.)
    public static func verify(_ password: String, hash: String) async -> Bool {
        let input = bcryptInput(password)
        return await offPool { Bcrypt.verify(input, hash: hash) }
    }

    /// The cost a bcrypt hash was made with (`$2b$12$…` → 12), if it reads as one.
    static func cost(of hash: String) -> Int? {
        let parts = hash.split(separator: "$", omittingEmptySubsequences: true)
        guard parts.count >= 3 else { return nil }
        return Int(parts[1])
    }

    /// What bcrypt is given for `password`. bcrypt reads at most 72 bytes and stops at a NUL: a password that is
    /// longer in UTF-8 (72 characters may take 288 bytes) or holds a NUL is given as the base64 of its SHA-256
    /// digest instead (44 bytes), so every byte of it counts.
    static func bcryptInput(_ password: String) -> String {
        guard password.utf8.count > 72 || password.utf8.contains(0) else { return password }
        return Data(SHA256.hash(data: Data(password.utf8))).base64EncodedString()
    }

    /// A hash of a password nobody knows, at `cost`, made once per cost: checked against when the address is
    /// unknown, so the answer takes as long as for a known one.
    static func decoyHash(cost: Int) async -> String {
        if let known = decoys.withLock({ $0[cost] }) { return known }
        let made = await hash(RefreshTokens.randomToken(prefix: ""), cost: cost)
        return decoys.withLock { decoys in
            if let known = decoys[cost] { return known }
            decoys[cost] = made
            return made
        }
    }

    private static let decoys = Mutex<[Int: String]>([:])

    private static func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
    }
}

/// Refresh tokens: 256 random bits, handed out once and stored only as their SHA-256 digest, so a copy of the
/// database lets nobody refresh.
public enum RefreshTokens {
    /// The prefix of every refresh token, so secret scanners can tell one.
    public static let prefix = "grt_"

    /// `prefix` and 32 random bytes in unpadded base64url.
    static func randomToken(prefix: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let base64 = Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return prefix + base64
    }

    /// A new refresh token.
    static func make() -> String { randomToken(prefix: prefix) }

    /// The stored form of a token: its SHA-256 digest in lowercase hex. Tokens are looked up by digest, so no
    /// comparison of the secret itself ever runs.
    public static func digest(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

/// What a login needs of a user, read by e-mail address.
public struct UserCredentials: Sendable, Hashable {
    /// The user.
    public var user: LedgerUser
    /// The bcrypt hash of its password; `nil` for an account without one (made by development login).
    public var passwordHash: String?
    /// Whether its e-mail address is confirmed (every account but one made by open registration and not yet
    /// confirmed).
    public var confirmed: Bool

    /// A row as read from the database.
    public init(user: LedgerUser, passwordHash: String?, confirmed: Bool = true) {
        self.user = user
        self.passwordHash = passwordHash
        self.confirmed = confirmed
    }
}

/// An `email_confirmations` row: the code open registration mailed to an account's address, kept only as its
/// SHA-256 digest, until it is used, runs out of tries or is replaced.
public struct EmailConfirmationRow: Sendable, Hashable {
    /// The account whose address the code confirms; one pending confirmation per account.
    public var userID: String
    /// ``RefreshTokens/digest(_:)`` of the code.
    public var codeDigest: String
    /// Milliseconds since 1970 on the store's clock.
    public var expiresAt: Int64
    /// How many more wrong tries void it.
    public var attemptsLeft: Int

    /// A row as read from the database (or about to be inserted).
    public init(userID: String, codeDigest: String, expiresAt: Int64, attemptsLeft: Int) {
        self.userID = userID
        self.codeDigest = codeDigest
        self.expiresAt = expiresAt
        self.attemptsLeft = attemptsLeft
    }
}

/// What registering an address came to. The server mails the address accordingly and answers every case alike, so
/// the answer tells nobody whether an account has the address.
public enum RegistrationOutcome: Sendable, Hashable {
    /// A new account, or an unconfirmed one registered again, waits for `code`, valid until `expiresAt`.
    case confirmationNeeded(code: String, expiresAt: Date)
    /// A confirmed account has the address: nothing changed, and its owner is to be told someone tried.
    case alreadyRegistered
    /// The address looks like another account's (the same skeleton): nothing was created.
    case lookAlike
}

/// The one-time codes that confirm an e-mail address: random decimal digits, mailed in the clear and stored as a
/// digest.
public enum ConfirmationCodes {
    /// How many digits a code has: 10^8 codes, of which an attacker without the mailbox gets
    /// ``LedgerPolicy/confirmationAttempts`` guesses per mailed code.
    public static let digits = 8

    /// A new code.
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return String((0..<digits).map { _ in Character(String(Int.random(in: 0...9, using: &generator))) })
    }

    /// `code` as typed, with spaces and hyphens a person may add removed.
    static func normalize(_ code: String) -> String {
        String(code.unicodeScalars.filter { $0 != " " && $0 != "-" }.map(Character.init))
    }
}

/// A user as `gotchu admin user list` shows it.
public struct UserSummary: Sendable, Hashable {
    /// The user's id (a UUID).
    public var id: String
    /// The normalized (lowercase) e-mail address; for a user provisioned from an external identity,
    /// its id at the issuer's host.
    public var email: String
    /// The name the user goes by: chosen at creation, or the part of the address before `@`.
    public var displayName: String
    /// The name an operator verified, if any.
    public var verifiedName: String?
    /// Whether the user can log in with a password; `false` for users provisioned from an external
    /// identity.
    public var hasPassword: Bool
    /// Whether an operator disabled the account: it can neither log in nor refresh a token.
    public var disabled: Bool
    /// Milliseconds since 1970.
    public var createdAt: Int64

    /// A row as read from the database.
    public init(
        id: String,
        email: String,
        displayName: String,
        verifiedName: String?,
        hasPassword: Bool,
        disabled: Bool,
        createdAt: Int64
    ) {
        self.id = id
        self.email = email
        self.displayName = displayName
        self.verifiedName = verifiedName
        self.hasPassword = hasPassword
        self.disabled = disabled
        self.createdAt = createdAt
    }
}

/// An `admin_audit` row: who did what to whom, when.
public struct AuditEntry: Sendable, Hashable {
    /// Who did it: the operating-system user that ran the command.
    public var actor: String
    /// What was done, such as `user.add`.
    public var action: String
    /// To whom or what, such as an e-mail address.
    public var subject: String
    /// Anything more worth keeping (never a secret).
    public var detail: String
    /// Milliseconds since 1970 on the store's clock.
    public var at: Int64

    /// An entry.
    public init(actor: String, action: String, subject: String, detail: String = "", at: Int64) {
        self.actor = actor
        self.action = action
        self.subject = subject
        self.detail = detail
        self.at = at
    }
}

/// A `refresh_tokens` row.
public struct RefreshTokenRow: Sendable, Hashable {
    /// The SHA-256 digest of the token (``RefreshTokens/digest(_:)``).
    public var digest: String
    /// The login the token descends from: every rotation keeps it, and a reuse revokes all of it.
    public var familyID: String
    /// The user the token logs in as.
    public var userID: String
    /// When it stops being accepted: milliseconds since 1970 on the store's clock, issue time plus
    /// ``LedgerPolicy/refreshTokenLifetime``.
    public var expiresAt: Int64
    /// When it was exchanged for its successor; a used token presented again is a replayed copy.
    public var usedAt: Int64?
    /// When it was revoked (logout, a replayed copy, a disabled user or a password reset), in
    /// milliseconds since 1970 on the store's clock; `nil` while not.
    public var revokedAt: Int64?

    /// A row as read from the database (or about to be inserted).
    public init(
        digest: String,
        familyID: String,
        userID: String,
        expiresAt: Int64,
        usedAt: Int64? = nil,
        revokedAt: Int64? = nil
    ) {
        self.digest = digest
        self.familyID = familyID
        self.userID = userID
        self.expiresAt = expiresAt
        self.usedAt = usedAt
        self.revokedAt = revokedAt
    }
}

/// What resolve shows of a payee: its chosen name, its address, and the name an operator verified, if any.
public struct PayeeRow: Sendable, Hashable {
    /// The payee's display name, chosen by the payee.
    public var name: String
    /// The payee's e-mail address, which payers see to tell payees with one name apart.
    public var email: String
    /// The name an operator verified (`gotchu admin merchant verify`); `nil` if none.
    public var verifiedName: String?

    /// A row as read from the database.
    public init(name: String, email: String, verifiedName: String?) {
        self.name = name
        self.email = email
        self.verifiedName = verifiedName
    }
}

/// What a refresh's transaction decided; a refusal that revoked the family must commit before it is thrown.
enum RefreshDecision: Sendable {
    case rotated(LedgerUser)
    case refused(String)
}
