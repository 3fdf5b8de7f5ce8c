package import Foundation
package import GotchuCore

/// Where a charge is. A charge moves forward only: `creating` → `advertising` ⇄ `locked` → one of the final states.
package enum KioskChargeState: String, Codable, Hashable, Sendable, CaseIterable {
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
    package var isFinal: Bool {
        switch self {
        case .creating, .advertising, .locked: false
        case .paid, .expired, .cancelled, .failed: true
        }
    }
}

/// One amount the point-of-sale asked for, and what became of it.
package struct KioskCharge: Codable, Hashable, Sendable {
    /// The charge id the kiosk chose (a UUID); the point-of-sale refers to the charge by it.
    package var id: String
    /// The amount asked, in cents: the whole amount, however many share it.
    package var amountCents: Cents
    /// Into how many shares the amount is split, each paid by a payer of its own (1: one payer pays it whole).
    package var shares: Int
    /// How many shares are paid (for a charge that is not split, 1 once it is paid). Of a charge that ended
    /// cancelled or expired, the shares that were paid before the ledger refunded them.
    package var sharesPaid: Int
    /// What the shares paid add up to, in cents, without tips.
    package var paidCents: Cents
    /// The tips payers gave on top of their shares, in cents.
    package var tipCents: Cents
    /// What the ledger returned to payers, shares and tips, in cents: as stored, what a charge that ended unpaid
    /// with shares paid (cancelled or expired) returned; ``Kiosk/charge(id:)`` adds the refunds the kiosk made.
    package var refundedCents: Cents
    /// The payments of a split charge as the ledger last reported them, oldest first (empty for a charge that is
    /// not split): what a refund of one payer's share names.
    package var payments: [KioskPayment]
    /// The point-of-sale's own reference (an order number), kept and reported back; may be empty.
    package var reference: String
    /// Where the charge is.
    package var state: KioskChargeState
    /// The ledger session advertised for this charge, once created.
    package var sessionID: String?
    /// The EID of that session.
    package var eid: EID?
    /// The web checkout of that EID, `PUBLIC_URL/p/EID`, as the ledger stated it: what the display's QR code
    /// encodes. `nil` when the ledger has no public URL.
    package var checkoutURL: String?
    /// When the charge stops waiting for a payer if it is not paid: the end of its lifetime, or its session's expiry
    /// when that comes first and no new session will follow.
    package var expiresAt: Date?
    /// What currently keeps the charge from progressing (ledger unreachable, adapter off), while the kiosk retries;
    /// for a `failed` charge, why it failed. `nil` when all is well.
    package var problem: String?
    /// When the point-of-sale asked.
    package var createdAt: Date
    /// When anything above last changed.
    package var updatedAt: Date
    /// The tips its sessions suggest to payers, in whole percent of what each pays (``TipPrompt``); empty for none.
    /// Kept in the kiosk's store, not in the charge's JSON.
    package var tipPercents: [Int] = []

    /// Creates a charge.
    package init(
        id: String,
        amountCents: Cents,
        shares: Int = 1,
        reference: String,
        state: KioskChargeState = .creating,
        sessionID: String? = nil,
        eid: EID? = nil,
        checkoutURL: String? = nil,
        expiresAt: Date? = nil,
        problem: String? = nil,
        createdAt: Date,
        updatedAt: Date
    ) {
        self.id = id
        self.amountCents = amountCents
        self.shares = shares
        self.sharesPaid = 0
        self.paidCents = 0
        self.tipCents = 0
        self.refundedCents = 0
        self.payments = []
        self.reference = reference
        self.state = state
        self.sessionID = sessionID
        self.eid = eid
        self.checkoutURL = checkoutURL
        self.expiresAt = expiresAt
        self.problem = problem
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case id
        case amountCents = "amount_cents"
        case shares
        case sharesPaid = "shares_paid"
        case paidCents = "paid_cents"
        case tipCents = "tip_cents"
        case refundedCents = "refunded_cents"
        case payments
        case reference
        case state
        case sessionID = "session_id"
        case eid
        case checkoutURL = "checkout_url"
        case expiresAt = "expires_at"
        case problem
        case createdAt = "created_at"
        case updatedAt = "updated_at"
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        amountCents = try container.decode(Cents.self, forKey: .amountCents)
        // Charges from kiosks that predate splits: one share, paid whole or not at all.
        shares = try container.decodeIfPresent(Int.self, forKey: .shares) ?? 1
        sharesPaid = try container.decodeIfPresent(Int.self, forKey: .sharesPaid) ?? 0
        paidCents = try container.decodeIfPresent(Cents.self, forKey: .paidCents) ?? 0
        tipCents = try container.decodeIfPresent(Cents.self, forKey: .tipCents) ?? 0
        refundedCents = try container.decodeIfPresent(Cents.self, forKey: .refundedCents) ?? 0
        payments = try container.decodeIfPresent([KioskPayment].self, forKey: .payments) ?? []
        reference = try container.decode(String.self, forKey: .reference)
        state = try container.decode(KioskChargeState.self, forKey: .state)
        sessionID = try container.decodeIfPresent(String.self, forKey: .sessionID)
        eid = try container.decodeIfPresent(EID.self, forKey: .eid)
        checkoutURL = try container.decodeIfPresent(String.self, forKey: .checkoutURL)
        expiresAt = try container.decodeIfPresent(Date.self, forKey: .expiresAt)
        problem = try container.decodeIfPresent(String.self, forKey: .problem)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        updatedAt = try container.decode(Date.self, forKey: .updatedAt)
    }

    /// Whether the amount is split among several payers.
    package var isSplit: Bool { shares > 1 }

    /// The amount of share `number` (1 is the first), in cents, as the ledger splits it: equal shares, the cents
    /// that do not divide evenly going one each to the first shares (10.01 in 4: 2.51, 2.50, 2.50, 2.50).
    package func cents(ofShare number: Int) -> Cents {
        let count = Cents(max(shares, 1))
        let (base, remainder) = amountCents.quotientAndRemainder(dividingBy: count)
        return base + (Cents(number) <= remainder ? 1 : 0)
    }

    /// What the next payer pays for one share: the first unpaid share's amount (the whole amount when not split).
    package var nextShareCents: Cents { cents(ofShare: min(sharesPaid + 1, max(shares, 1))) }
}

/// One payment of a split charge: the shares one payer paid with one send, and its tip, as the ledger reported it.
package struct KioskPayment: Codable, Hashable, Sendable {
    /// The ledger's id of the payment: what a refund of this payer's money names.
    package var paymentID: String
    /// The numbers of the shares it paid (1 is the first).
    package var shareNumbers: [Int]
    /// What it paid for those shares, without the tip, in cents.
    package var amountCents: Cents
    /// The tip paid with it, in cents.
    package var tipCents: Cents
    /// How much of it (shares and tip) was refunded, in cents.
    package var refundedCents: Cents
    /// When it was paid.
    package var paidAt: Date

    /// Creates a payment.
    package init(
        paymentID: String,
        shareNumbers: [Int],
        amountCents: Cents,
        tipCents: Cents = 0,
        refundedCents: Cents = 0,
        paidAt: Date
    ) {
        self.paymentID = paymentID
        self.shareNumbers = shareNumbers
        self.amountCents = amountCents
        self.tipCents = tipCents
        self.refundedCents = refundedCents
        self.paidAt = paidAt
    }

    /// What is left to refund of it: its amount and tip less what was refunded.
    package var refundableCents: Cents { max(0, amountCents + tipCents - refundedCents) }

    enum CodingKeys: String, CodingKey {
        case paymentID = "payment_id"
        case shareNumbers = "share_numbers"
        case amountCents = "amount_cents"
        case tipCents = "tip_cents"
        case refundedCents = "refunded_cents"
        case paidAt = "paid_at"
    }
}
