import Crypto
public import Foundation
public import GotchuCore
import GotchuReceipts

/// Browser sessions: what a person signed in on the web checkout holds, apart from the API's tokens. The browser
/// keeps a secret of 256 random bits in a cookie; the store keeps only its SHA-256 digest, so a copy of the database
/// signs nobody in. A session lives until its fixed end (no renewal by use), until it is ended (sign-out), or until
/// its user's access tokens are revoked (a logout, a reset password, a reused refresh token) or the user is disabled:
/// it is refused like an access token issued before that.
public enum BrowserSessions {
    /// How many characters a browser session's secret has: 32 bytes in unpadded base64url.
    public static let tokenLength = 43

    /// A new secret: 32 random bytes in unpadded base64url.
    static func make() -> String { RefreshTokens.randomToken(prefix: "") }

    /// The stored form of a secret: its SHA-256 digest in lowercase hex.
    public static func digest(_ token: String) -> String { RefreshTokens.digest(token) }

    /// A tag that binds `fields` (a purpose first, such as `pay`) to the browser session whose secret is `token`:
    /// HMAC-SHA256 keyed by the secret, over each field's length and bytes, in unpadded base64url. Only whoever holds
    /// the cookie can make one, and every server can check one without storing it: what a form carries against
    /// cross-site request forgery.
    public static func tag(token: String, _ fields: [String]) -> String {
        Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: tagged(fields), using: key(token))))
    }

    /// Whether `tag` is ``tag(token:_:)`` of `fields` for `token`, compared in constant time.
    public static func isTag(_ tag: String, token: String, _ fields: [String]) -> Bool {
        guard tag.utf8.count == 43, let code = Base64URL.decode(tag), code.count == 32 else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: tagged(fields), using: key(token))
    }

    /// A fresh id for one view of a page: 16 random bytes in unpadded base64url (22 characters).
    public static func viewID() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    private static func key(_ token: String) -> SymmetricKey { SymmetricKey(data: Data(token.utf8)) }

    private static func tagged(_ fields: [String]) -> Data {
        var bytes = Data()
        for field in fields {
            bytes.append(contentsOf: "\(field.utf8.count):".utf8)
            bytes.append(contentsOf: field.utf8)
        }
        return bytes
    }

    /// Whether `token` could be a secret this store made: ``tokenLength`` base64url characters. Anything else is not
    /// looked up.
    public static func isWellFormed(_ token: some StringProtocol) -> Bool {
        token.utf8.count == tokenLength
            && token.utf8.allSatisfy { byte in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: "_")
            }
    }
}

/// A browser session just started: the secret for the browser's cookie, once, and until when it holds.
public struct BrowserSession: Sendable, Hashable {
    /// The secret the cookie carries; the store keeps only its digest.
    public var token: String
    /// Who it signs in.
    public var userID: String
    /// When it ends, on the store's clock.
    public var expiresAt: Date

    /// A session as the engine started it.
    public init(token: String, userID: String, expiresAt: Date) {
        self.token = token
        self.userID = userID
        self.expiresAt = expiresAt
    }
}

/// A `browser_sessions` row.
public struct BrowserSessionRow: Sendable, Hashable {
    /// ``BrowserSessions/digest(_:)`` of the secret.
    public var digest: String
    /// Who it signs in.
    public var userID: String
    /// When it was started: milliseconds since 1970 on the store's clock.
    public var createdAt: Int64
    /// When it ends: milliseconds since 1970 on the store's clock.
    public var expiresAt: Int64

    /// A row as read from the database (or about to be inserted).
    public init(digest: String, userID: String, createdAt: Int64, expiresAt: Int64) {
        self.digest = digest
        self.userID = userID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A session as the web checkout's page follows it: what a payer may know of it (what resolve and a refused lock
/// would tell), judged at the store's time.
public struct CheckoutStatus: Sendable, Hashable {
    /// The session's id.
    public var sid: String
    /// Its status, with expiry and lock lapses judged at ``now``.
    public var status: SessionStatus
    /// Into how many shares it is split (1: one payer).
    public var shares: Int
    /// How many shares are paid.
    public var sharesPaid: Int
    /// When it expires.
    public var expiresAt: Date
    /// Whether the EID it was found by was rotated away (the payee advertises a newer one).
    public var eidRetired: Bool
    /// The store's time of the read.
    public var now: Date

    /// A status as the engine read it.
    public init(
        sid: String,
        status: SessionStatus,
        shares: Int,
        sharesPaid: Int,
        expiresAt: Date,
        eidRetired: Bool,
        now: Date
    ) {
        self.sid = sid
        self.status = status
        self.shares = shares
        self.sharesPaid = sharesPaid
        self.expiresAt = expiresAt
        self.eidRetired = eidRetired
        self.now = now
    }

    /// When the status changes without anything written (the session expires); `nil` once final.
    public var nextLapse: Date? { status.isLive ? expiresAt : nil }
}

/// The part of a ``LedgerStore`` the web checkout needs beyond the API's: browser sessions, and a session followed
/// by the EID a payer's page was opened with.
public protocol CheckoutStore: Sendable {
    /// Starts a browser session for `userID`, ending `lifetime` from now on the store's clock. The way every sign-in
    /// of the web checkout ends, whatever proved who the user is (a password, an external issuer).
    /// - Throws: ``LedgerError/Kind/unknownUser`` for a user that does not exist, ``LedgerError/Kind/forbidden`` for a
    ///   disabled one.
    func startBrowserSession(userID: String, lifetime: Duration) async throws -> BrowserSession

    /// The user a browser session's secret signs in, if the session exists, has not ended, and its user is enabled
    /// and had no tokens revoked since it started; `nil` otherwise (a malformed secret is not looked up).
    func browserSessionUser(token: String) async throws -> LedgerUser?

    /// Ends the browser session with this secret (sign-out); an unknown one is ignored.
    func endBrowserSession(token: String) async throws

    /// Deletes browser sessions that have ended; returns how many.
    func pruneBrowserSessions() async throws -> Int

    /// The session that was given `eid`, current or rotated away (however long ago), as a payer's page follows it.
    /// - Throws: ``LedgerError/Kind/sessionNotFound`` when no session was given it.
    func checkoutStatus(eid: EID) async throws -> CheckoutStatus

    /// The EID session `sid` advertises now (the newest it was given), as a payer's page that follows the session by
    /// its checkout link reads it.
    /// - Throws: ``LedgerError/Kind/sessionNotFound`` when there is no such session.
    func currentEID(sid: String) async throws -> EID
}

/// The browser-session reads a ``LedgerBackend`` serves outside transactions.
package protocol BrowserSessionBackend: Sendable {
    /// The browser session with this digest with its user, and the store's time of the read; `nil` when there is
    /// none (its user always exists: sessions reference users).
    func browserSession(digest: String) async throws -> (session: BrowserSessionRow, user: LedgerUser, now: Int64)?
}

/// The browser-session writes of a ``LedgerTransaction``.
package protocol BrowserSessionTransaction {
    /// Inserts a browser session.
    func insert(browserSession: BrowserSessionRow) async throws

    /// Deletes the browser session with this digest, if there is one.
    func deleteBrowserSession(digest: String) async throws

    /// Deletes the browser sessions that ended by `time` (their end at or before it); returns how many.
    func deleteBrowserSessions(endedBy time: Int64) async throws -> Int
}
