public import GotchuCore

/// A live session found by one of its EIDs: what a payer is asked to confirm before it locks and pays.
public struct ResolvedSession: Sendable, Hashable {
    /// The session's id.
    public var sid: String
    /// The amount asked, in cents.
    public var amount: Cents
    /// Who asks for it.
    public var payee: Counterparty
    /// Into how many shares it is split (1: one payer).
    public var shares: Int
    /// How many shares are paid.
    public var sharesPaid: Int
    /// What the next payer pays for one share: the first share free to lock (the whole amount when not split).
    public var shareCents: Cents
    /// What is left to pay, in cents: the amount less the shares paid.
    public var remaining: Cents
    /// The tips its terminal suggests, in percent of what this payer pays; ``TipPrompt/none`` when it asks for none.
    public var tipPrompt: TipPrompt
    /// The payee's order reference, shown to the payer as plain text; `nil` when it gave none.
    public var reference: String?

    /// A session as a resolve found it.
    public init(
        sid: String,
        amount: Cents,
        payee: Counterparty,
        shares: Int,
        sharesPaid: Int,
        shareCents: Cents,
        remaining: Cents,
        tipPrompt: TipPrompt = .none,
        reference: String? = nil
    ) {
        self.reference = reference
        self.tipPrompt = tipPrompt
        self.sid = sid
        self.amount = amount
        self.payee = payee
        self.shares = shares
        self.sharesPaid = sharesPaid
        self.shareCents = shareCents
        self.remaining = remaining
    }
}
