public import GotchuCore

/// A live session found by one of its EIDs: what a payer is asked to confirm before it locks and pays.
public struct ResolvedSession: Sendable, Hashable {
    /// The session's id.
    public var sid: String
    /// The amount asked, in cents.
    public var amount: Cents
    /// Who asks for it.
    public var payee: Counterparty

    /// A session as a resolve found it.
    public init(sid: String, amount: Cents, payee: Counterparty) {
        self.sid = sid
        self.amount = amount
        self.payee = payee
    }
}
