public import Foundation
public import GotchuCore
public import GotchuReceipts

/// A session as its payee, its lock holder or its payer sees it: where it is in its life, judged at the time of
/// asking, and once paid the payment's receipt and what was refunded of it.
public struct SessionView: Sendable, Hashable {
    /// The session's id.
    public var sid: String
    /// Its status, with expiry and lock lapses judged at the store's time of the read.
    public var status: SessionStatus
    /// The amount asked, in cents.
    public var amount: Cents
    /// When it expires (or expired).
    public var expiresAt: Date
    /// When it was paid; `nil` until it is.
    public var paidAt: Date?
    /// The ledger's signed receipt of the payment; `nil` until paid, or where the ledger signs none.
    public var receipt: Receipt?
    /// The total refunded to the payer so far, in cents (0 for a session not paid); of a split, to every payer,
    /// tips included.
    public var refunded: Cents
    /// Into how many shares it is split (1: one payer).
    public var shares: Int = 1
    /// How many shares are paid.
    public var sharesPaid: Int = 0
    /// What the paid shares add up to, without tips, in cents.
    public var paid: Cents = 0
    /// The tips paid on top, in cents.
    public var tip: Cents = 0
    /// The payments of a split, oldest first, as the viewer may see them (the payee all, a payer its own); empty
    /// for a session of one share.
    public var payments: [SessionPayment] = []
    /// The tips its terminal suggests to payers; ``TipPrompt/none`` when it asks for none.
    public var tipPrompt: TipPrompt = .none
    /// Its payee's order reference; `nil` when it gave none.
    public var reference: String?

    /// Whether the ledger still owes this session's payers money it returns by itself: a split cancelled or expired
    /// with shares paid, until every payment and its tip is refunded.
    public var awaitsReturns: Bool {
        (status == .cancelled || status == .expired) && refunded < paid + tip
    }

    /// A view of a session as the engine read it.
    public init(
        sid: String,
        status: SessionStatus,
        amount: Cents,
        expiresAt: Date,
        paidAt: Date?,
        receipt: Receipt? = nil,
        refunded: Cents = 0
    ) {
        self.sid = sid
        self.status = status
        self.amount = amount
        self.expiresAt = expiresAt
        self.paidAt = paidAt
        self.receipt = receipt
        self.refunded = refunded
    }
}
