public import Foundation
public import GotchuCore

/// A session just created, or, for a create retried under the same idempotency key, the one that key created first:
/// what its payee advertises, and until when.
public struct NewSession: Sendable, Hashable {
    /// The session's id.
    public var sid: String
    /// The EID the payee advertises (the session's current one, for a retry after a rotation).
    public var eid: EID
    /// When the session expires, on the store's clock.
    public var expiresAt: Date

    /// A session as the engine made it.
    public init(sid: String, eid: EID, expiresAt: Date) {
        self.sid = sid
        self.eid = eid
        self.expiresAt = expiresAt
    }
}
