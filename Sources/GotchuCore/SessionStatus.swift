/// Where a payment session is in its life.
public enum SessionStatus: String, Codable, Hashable, Sendable, CaseIterable {
    /// Made, not yet advertised (no current ledger reports it; older ones did).
    case created = "CREATED"
    /// Open and unlocked: waiting for a payer to lock it.
    case advertising = "ADVERTISING"
    /// A payer holds a lock that has not lapsed; only that payer may pay it.
    case locked = "LOCKED"
    /// Some shares of a split session are paid, not all; the rest can still be locked and paid.
    case partiallyPaid = "PARTIALLY_PAID"
    /// Paid: the money moved (every share of a split). Final (a refund leaves it paid).
    case paid = "PAID"
    /// Its lifetime ended unpaid (a split: not every share paid; the shares paid are refunded). Final.
    case expired = "EXPIRED"
    /// Cancelled by its payee before it was paid (a split: the shares paid are refunded). Final.
    case cancelled = "CANCELLED"

    /// Whether the session can still change hands: neither paid, expired nor cancelled.
    public var isLive: Bool { self == .created || self == .advertising || self == .locked || self == .partiallyPaid }
}
