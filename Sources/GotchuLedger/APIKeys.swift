import Crypto
import Foundation

/// What an API key may do. A key acts for one payee only, and only through the scopes it was given: it can never
/// send money, fund, read the wallet, lock or act for anyone else. The raw values are stored and shown; a stored
/// scope this version does not know grants nothing.
public enum APIKeyScope: String, CaseIterable, Codable, Comparable, Sendable {
    /// `POST /sessions/create` for the key's payee.
    case sessionsCreate = "sessions:create"
    /// `POST /sessions/cancel` of the key's payee's sessions.
    case sessionsCancel = "sessions:cancel"
    /// `GET /sessions/{sid}` of the key's payee's sessions.
    case sessionsRead = "sessions:read"
    /// `POST /sessions/{sid}/refunds` of the key's payee's paid sessions.
    case refundsCreate = "refunds:create"
    /// Registering, listing, deleting and rotating the key's payee's webhook endpoints, and reading and retrying
    /// their deliveries.
    case webhooksManage = "webhooks:manage"
    /// Enrolling, listing and revoking the key's payee's terminals (the keys that sign its charges offline).
    case terminalsManage = "terminals:manage"

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The scopes of a stored, space-separated list; unknown names are dropped.
    static func parse(stored: String) -> Set<APIKeyScope> {
        Set(stored.split(separator: " ").compactMap { APIKeyScope(rawValue: String($0)) })
    }

    /// The stored form: the names, sorted, separated by spaces.
    static func stored(_ scopes: Set<APIKeyScope>) -> String {
        scopes.sorted().map(\.rawValue).joined(separator: " ")
    }
}

/// An API key as the store keeps it: everything but its secret, of which only a hash is stored.
public struct APIKey: Sendable, Hashable {
    /// The key's id (a UUID), which `gotchu admin key revoke` takes.
    public var id: String
    /// The payee the key acts for.
    public var userID: String
    /// The payee's e-mail address, for listings.
    public var userEmail: String
    /// The operator's name for the key, such as the terminal it is installed on.
    public var name: String
    /// The first characters of the secret (`gk_` and a few more), enough to tell keys apart in listings and logs.
    public var hint: String
    /// What the key may do.
    public var scopes: Set<APIKeyScope>
    /// When it was created, in milliseconds since 1970 on the store's clock.
    public var createdAt: Int64
    /// When it last authenticated a request, to within ``APIKeySecret/lastUsedResolution``; `nil` if never.
    public var lastUsedAt: Int64?
    /// When it was revoked; `nil` while it works.
    public var revokedAt: Int64?
    /// Whether an operator disabled its user: then the key works no more than the user's tokens.
    public var userDisabled: Bool

    /// A key as read from the database.
    public init(
        id: String,
        userID: String,
        userEmail: String,
        name: String,
        hint: String,
        scopes: Set<APIKeyScope>,
        createdAt: Int64,
        lastUsedAt: Int64?,
        revokedAt: Int64?,
        userDisabled: Bool = false
    ) {
        self.id = id
        self.userID = userID
        self.userEmail = userEmail
        self.name = name
        self.hint = hint
        self.scopes = scopes
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.revokedAt = revokedAt
        self.userDisabled = userDisabled
    }

    /// A key as read from the database, its scopes in their stored form.
    public init(
        id: String,
        userID: String,
        userEmail: String,
        name: String,
        hint: String,
        storedScopes: String,
        createdAt: Int64,
        lastUsedAt: Int64?,
        revokedAt: Int64?,
        userDisabled: Bool = false
    ) {
        self.init(
            id: id,
            userID: userID,
            userEmail: userEmail,
            name: name,
            hint: hint,
            scopes: APIKeyScope.parse(stored: storedScopes),
            createdAt: createdAt,
            lastUsedAt: lastUsedAt,
            revokedAt: revokedAt,
            userDisabled: userDisabled
        )
    }

    /// The scopes in their stored form.
    public var storedScopes: String { APIKeyScope.stored(scopes) }
}

/// The secrets of API keys: how they are made, recognised and hashed.
///
/// A secret is `gk_` followed by 43 base64url characters (256 random bits), so secret scanners can find a leaked
/// one by its prefix. With that much entropy a fast hash is as good as a slow one (nothing can be guessed), so the
/// store keeps its SHA-256 and a request's key is found by one indexed lookup, not a password hash per request.
public enum APIKeySecret {
    /// The prefix of every key.
    public static let prefix = "gk_"
    /// How many characters of a key its hint keeps.
    public static let hintLength = 10
    /// How often a key's last use is written at most: authenticating must not be a write per request.
    public static let lastUsedResolution: Int64 = 60_000

    /// A new random secret.
    public static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return prefix
            + Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Whether `token` is meant as an API key (rather than a JWT); it may still be unknown or malformed.
    public static func isAPIKey(_ token: String) -> Bool { token.hasPrefix(prefix) }

    /// Whether `secret` has the shape of a key this version makes.
    public static func isWellFormed(_ secret: String) -> Bool {
        guard secret.hasPrefix(prefix), secret.utf8.count == prefix.utf8.count + 43 else { return false }
        return secret.utf8.dropFirst(prefix.utf8.count).allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }

    /// The stored hash of `secret`: SHA-256, lowercase hex.
    public static func hash(_ secret: String) -> String {
        // By hand: `String(format:)` per byte would cost more than the hash itself.
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(64)
        for byte in SHA256.hash(data: Data(secret.utf8)) {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: hex, as: UTF8.self)
    }

    /// The hint kept of `secret`.
    static func hint(_ secret: String) -> String { String(secret.prefix(hintLength)) }
}

/// Who a request acts as: a user (a token they logged in for), or an API key acting for its payee within its
/// scopes.
public enum LedgerPrincipal: Sendable, Hashable {
    /// A user, with every right a user has.
    case user(String)
    /// An API key: its id, its payee and its scopes.
    case apiKey(id: String, userID: String, scopes: Set<APIKeyScope>)

    /// The user `action` is done as, if this principal may do it.
    /// - Throws: ``LedgerError/Kind/forbidden`` for a key without the scope the action needs, or for an action no
    ///   key may do.
    public func user(for action: LedgerAction) throws(LedgerError) -> String {
        switch self {
        case .user(let id):
            return id
        case .apiKey(_, let userID, let scopes):
            guard let scope = action.scope else {
                throw LedgerError(.forbidden, detail: "an API key cannot \(action.phrase); use a user's token")
            }
            guard scopes.contains(scope) else {
                throw LedgerError(.forbidden, detail: "this API key lacks the scope \(scope.rawValue)")
            }
            return userID
        }
    }
}

/// What an authenticated request asks to do, for ``LedgerPrincipal/user(for:)``.
public enum LedgerAction: String, CaseIterable, Sendable {
    /// `GET /wallet/me` and `GET /wallet/entries`; a user's token only.
    case readWallet
    /// `POST /dev/fund`, crediting a wallet from the funding account; a user's token only.
    case fund
    /// Creating a payment session as its payee, and rotating its EID; an API key needs
    /// ``APIKeyScope/sessionsCreate``.
    case createSession
    /// Reading a session's status; an API key needs ``APIKeyScope/sessionsRead`` and sees only its
    /// payee's sessions.
    case readSession
    /// Cancelling a session as its payee; an API key needs ``APIKeyScope/sessionsCancel``.
    case cancelSession
    /// Locking a session as its payer; a user's token only.
    case lock
    /// Releasing a payer's lock on a session; a user's token only.
    case unlock
    /// Paying a locked session; a user's token only.
    case send
    /// Giving a session a new EID; an API key needs ``APIKeyScope/sessionsCreate``.
    case rotateEID
    /// Looking up the session an EID names, where the server requires a login for it; a user's token
    /// only.
    case resolve
    /// Requesting a payout of the user's balance; a user's token only.
    case payout
    /// Refunding a paid session as its payee; an API key needs ``APIKeyScope/refundsCreate``.
    case refund
    /// Managing the user's webhook endpoints and their deliveries; an API key needs ``APIKeyScope/webhooksManage``.
    case manageWebhooks
    /// Enrolling, listing and revoking the user's terminals; an API key needs ``APIKeyScope/terminalsManage``.
    case manageTerminals

    /// The scope that lets a key do this; `nil` if only a user may.
    public var scope: APIKeyScope? {
        switch self {
        case .createSession, .rotateEID: .sessionsCreate
        case .readSession: .sessionsRead
        case .cancelSession: .sessionsCancel
        case .refund: .refundsCreate
        case .manageWebhooks: .webhooksManage
        case .manageTerminals: .terminalsManage
        case .readWallet, .fund, .lock, .unlock, .send, .resolve, .payout: nil
        }
    }

    var phrase: String {
        switch self {
        case .readWallet: "read the wallet"
        case .fund: "fund a wallet"
        case .createSession: "create sessions"
        case .readSession: "read sessions"
        case .cancelSession: "cancel sessions"
        case .lock: "lock sessions"
        case .unlock: "unlock sessions"
        case .send: "send money"
        case .rotateEID: "rotate session EIDs"
        case .resolve: "resolve EIDs"
        case .payout: "request payouts"
        case .refund: "refund sessions"
        case .manageWebhooks: "manage webhooks"
        case .manageTerminals: "manage terminals"
        }
    }
}
