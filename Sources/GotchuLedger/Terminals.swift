public import Foundation

/// A `terminals` row: a terminal's enrolled Ed25519 key, under the payee whose charges it signs while offline.
public struct TerminalRow: Sendable, Hashable {
    /// `term_` and 24 random characters.
    public var id: String
    /// The payee whose charges the key signs.
    public var payeeID: String
    /// The name the payee gave it (`counter 2`), printable.
    public var name: String
    /// `ed25519-` and the first 8 bytes of the SHA-256 of the public key, in hex (what charges name).
    public var keyID: String
    /// The raw 32-byte public key.
    public var publicKey: Data
    /// Milliseconds since 1970 on the store's clock.
    public var createdAt: Int64
    /// When the payee revoked it; its charges are refused from then on.
    public var revokedAt: Int64?

    /// A row.
    public init(
        id: String,
        payeeID: String,
        name: String,
        keyID: String,
        publicKey: Data,
        createdAt: Int64,
        revokedAt: Int64?
    ) {
        self.id = id
        self.payeeID = payeeID
        self.name = name
        self.keyID = keyID
        self.publicKey = publicKey
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}
