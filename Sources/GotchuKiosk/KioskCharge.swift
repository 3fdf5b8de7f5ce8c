public import Foundation
public import GotchuCore

/// Where a charge is. A charge moves forward only: `creating` → `advertising` ⇄ `locked` → one of the final states.
public enum KioskChargeState: String, Codable, Hashable, Sendable, CaseIterable {
    /// Asking the ledger for a payment session.
    case creating
    /// The session's EID is on the air; waiting for a payer.
    case advertising
    /// A payer holds the session and is paying.
    case locked
    /// Paid: the money is in the payee's wallet.
    case paid
    /// The session expired unpaid.
    case expired
    /// Cancelled by the point-of-sale (or on the ledger).
    case cancelled
    /// The ledger refused the charge (for example an amount over its limit); nothing was paid.
    case failed

    /// Whether the charge is over; a final charge never changes again.
    public var isFinal: Bool {
        switch self {
        case .creating, .advertising, .locked: false
        case .paid, .expired, .cancelled, .failed: true
        }
    }
}

/// One amount the point-of-sale asked for, and what became of it.
public struct KioskCharge: Codable, Hashable, Sendable {
    /// The charge id the kiosk chose (a UUID); the point-of-sale refers to the charge by it.
    public var id: String
    /// The amount asked, in cents.
    public var amountCents: Cents
    /// The point-of-sale's own reference (an order number), kept and reported back; may be empty.
    public var reference: String
    /// Where the charge is.
    public var state: KioskChargeState
    /// The ledger session advertised for this charge, once created.
    public var sessionID: String?
    /// The EID of that session.
    public var eid: EID?
    /// When the charge stops waiting for a payer if it is not paid: the end of its lifetime, or its session's expiry
    /// when that comes first and no new session will follow.
    public var expiresAt: Date?
    /// What currently keeps the charge from progressing (ledger unreachable, adapter off), while the kiosk retries;
    /// for a `failed` charge, why it failed. `nil` when all is well.
    public var problem: String?
    /// When the point-of-sale asked.
    public var createdAt: Date
    /// When anything above last changed.
    public var updatedAt: Date

    /// Creates a charge.
    public init(
        id: String,
        amountCents: Cents,
        reference: String,
        state: KioskChargeState = .creating,
        sessionID: String? = nil,
        eid: EID? = nil,
        expiresAt: Date? = nil,
        problem: String? = nil,
        createdAt: Date,
        updatedAt: Date
    ) {
        self.id = id
        self.amountCents = amountCents
        self.reference = reference
        self.state = state
        self.sessionID = sessionID
        self.eid = eid
        self.expiresAt = expiresAt
        self.problem = problem
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case id
        case amountCents = "amount_cents"
        case reference
        case state
        case sessionID = "session_id"
        case eid
        case expiresAt = "expires_at"
        case problem
        case createdAt = "created_at"
        case updatedAt = "updated_at"
    }
}
