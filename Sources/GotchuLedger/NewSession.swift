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
    /// Each share's amount in cents, the first share's first: one, the whole amount, for a session not split.
    public var shareCents: [Cents]
    /// The tips it suggests to payers; ``TipPrompt/none`` when its payee asks for none.
    public var tipPrompt: TipPrompt
    /// Its order reference; `nil` when it has none.
    public var reference: String?
    /// Its payee as payers are shown it (a resolve's), for the terminal to show the same; `nil` where not read.
    public var payee: Counterparty?

    /// A session as the engine made it.
    public init(
        sid: String,
        eid: EID,
        expiresAt: Date,
        shareCents: [Cents],
        tipPrompt: TipPrompt = .none,
        reference: String? = nil,
        payee: Counterparty? = nil
    ) {
        self.payee = payee
        self.reference = reference
        self.tipPrompt = tipPrompt
        self.sid = sid
        self.eid = eid
        self.expiresAt = expiresAt
        self.shareCents = shareCents
    }
}
