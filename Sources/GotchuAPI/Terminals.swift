public import Foundation

/// `POST /terminals`: a terminal's Ed25519 public key to enrol under the caller, and its name.
public struct TerminalRequest: Codable, Hashable, Sendable {
    /// The name the payee knows it by (`counter 2`), printable, 1 to 64 characters.
    public var name: String
    /// The raw 32-byte public key, base64url without padding.
    public var publicKey: String

    /// An enrolment of `publicKey` (base64url) as `name`.
    public init(name: String, publicKey: String) {
        self.name = name
        self.publicKey = publicKey
    }

    enum CodingKeys: String, CodingKey {
        case name
        case publicKey = "public_key"
    }
}

/// An enrolled terminal as the API shows it.
public struct TerminalResponse: Codable, Hashable, Sendable {
    /// The terminal's id (`term_…`).
    public var id: String
    /// Its name.
    public var name: String
    /// The key's id, `ed25519-` and 16 hex digits, which its charges name.
    public var keyID: String
    /// The raw public key, base64url without padding.
    public var publicKey: String
    /// When it was enrolled.
    public var createdAt: Date
    /// When it was revoked; absent while it is not. Its charges are refused from then on.
    public var revokedAt: Date?

    /// A terminal as shown.
    public init(
        id: String,
        name: String,
        keyID: String,
        publicKey: String,
        createdAt: Date,
        revokedAt: Date? = nil
    ) {
        self.id = id
        self.name = name
        self.keyID = keyID
        self.publicKey = publicKey
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }

    enum CodingKeys: String, CodingKey {
        case id, name
        case keyID = "key_id"
        case publicKey = "public_key"
        case createdAt = "created_at"
        case revokedAt = "revoked_at"
    }
}

/// `GET /terminals`: the caller's terminals, oldest first, revoked ones included.
public struct TerminalListResponse: Codable, Hashable, Sendable {
    /// The terminals.
    public var terminals: [TerminalResponse]

    /// A list.
    public init(terminals: [TerminalResponse]) { self.terminals = terminals }
}
