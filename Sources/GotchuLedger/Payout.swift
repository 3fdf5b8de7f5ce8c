public import GotchuCore

/// A payout request, taken: its amount left the user's wallet at once and waits, pending, in the payouts clearing
/// account until an operator settles it (paid out) or fails it (the money goes back). A replay of the request under
/// the same idempotency key is answered the same, whatever became of the payout since.
public struct Payout: Sendable, Hashable {
    /// The payout's id, which the operator settles or fails.
    public var id: String
    /// The amount, in cents.
    public var amount: Cents
    /// Where the payout stood when it was requested: ``PayoutStatus/pending``.
    public var status: PayoutStatus
    /// The user's balance right after the request, in cents.
    public var balanceAfter: Cents

    /// A payout as its request is answered.
    public init(id: String, amount: Cents, status: PayoutStatus, balanceAfter: Cents) {
        self.id = id
        self.amount = amount
        self.status = status
        self.balanceAfter = balanceAfter
    }

    /// The answer to the request that made `row`, and to each replay of it: pending, as it was then.
    init(requested row: PayoutRow) {
        self.init(id: row.id, amount: row.amount, status: .pending, balanceAfter: row.balanceAfter)
    }
}
