public import Foundation
public import GotchuCore

/// One entry of a user's wallet: the wallet's side of a transfer, which took money out of it or put money into it.
public struct WalletEntry: Sendable, Hashable {
    /// The entry's id.
    public var id: String
    /// Debit (money out of the wallet) or credit (money in).
    public var direction: EntryDirection
    /// How much moved, in cents; never negative, the direction says which way.
    public var amount: Cents
    /// Why the money moved: a payment's `SEND_P2P` (payer) and `RECEIVE_P2P` (payee), a refund's `REFUND_OUT` (payee)
    /// and `REFUND_IN` (payer), `DEV_FUND`, or one of ``MoneyInOutEntries``.
    public var type: String
    /// What the transfer is part of: `session` (payments and refunds), `deposit`, `payout` or `funding`.
    public var refType: String
    /// The id of the session, deposit, payout or funding it is part of.
    public var refID: String
    /// When the ledger wrote it, on the store's clock.
    public var createdAt: Date
    /// Who was on the other side of the transfer, shown by the rules a payee is shown by (a system account by its
    /// id, verified). `nil` where it was not looked up (the latest entries of a ``Wallet``), or where the transfer
    /// has no other side (a ledger `gotchu ledger verify` refuses).
    public var counterparty: Counterparty?
    /// The order reference of the session a payment or refund is part of; `nil` for other movements, for a session
    /// without one, and where it was not looked up (the latest entries of a ``Wallet``).
    public var reference: String?

    /// The payment session the entry is part of (a payment or a refund); `nil` for other movements.
    public var sessionID: String? { refType == "session" ? refID : nil }

    /// An entry as the ledger holds it, with its counterparty when it was looked up.
    public init(
        id: String,
        direction: EntryDirection,
        amount: Cents,
        type: String,
        refType: String,
        refID: String,
        createdAt: Date,
        counterparty: Counterparty? = nil,
        reference: String? = nil
    ) {
        self.reference = reference
        self.id = id
        self.direction = direction
        self.amount = amount
        self.type = type
        self.refType = refType
        self.refID = refID
        self.createdAt = createdAt
        self.counterparty = counterparty
    }
}
