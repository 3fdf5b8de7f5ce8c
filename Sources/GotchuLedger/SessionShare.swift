public import Foundation
public import GotchuCore
public import GotchuReceipts

/// A `session_shares` row: one share of a split session, with its lock and the payment that paid it. A session
/// that is not split has no rows; its own row carries its lock and payment.
public struct ShareRow: Sendable, Hashable {
    /// The session it is a share of.
    public var sessionID: String
    /// Its number: 1 is the first.
    public var number: Int
    /// What it costs, in cents (``SessionSplit/cents(ofShare:)``).
    public var amount: Cents
    /// The payer that holds or last held its lock; `nil` if it was never locked.
    public var lockedBy: String?
    /// When its lock lapses or lapsed, in milliseconds since 1970 on the store's clock (a release sets it to the
    /// time of the release).
    public var lockExpiresAt: Int64?
    /// The payment that paid it; `nil` until paid. The shares one send paid share one payment id.
    public var paymentID: String?
    /// The payer that paid it; `nil` until paid.
    public var paidBy: String?
    /// When it was paid, in milliseconds since 1970 on the store's clock; `nil` until paid.
    public var paidAt: Int64?
    /// The tip paid with it, in cents: a payment's tip sits on the first of its shares, 0 on the others.
    public var tip: Cents

    /// A row as read from the database (or about to be inserted: unlocked, unpaid).
    public init(
        sessionID: String,
        number: Int,
        amount: Cents,
        lockedBy: String? = nil,
        lockExpiresAt: Int64? = nil,
        paymentID: String? = nil,
        paidBy: String? = nil,
        paidAt: Int64? = nil,
        tip: Cents = 0
    ) {
        self.sessionID = sessionID
        self.number = number
        self.amount = amount
        self.lockedBy = lockedBy
        self.lockExpiresAt = lockExpiresAt
        self.paymentID = paymentID
        self.paidBy = paidBy
        self.paidAt = paidAt
        self.tip = tip
    }

    /// Who holds a lock on this unpaid share that has not lapsed at `now`, if anyone.
    func liveLockHolder(now: Int64) -> String? {
        guard paymentID == nil, let lockedBy, let lockExpiresAt, now < lockExpiresAt else { return nil }
        return lockedBy
    }

    /// The shares `payerID` may take at `now`, in order: unpaid, and unlocked or locked by `payerID` itself.
    static func free(_ shares: [ShareRow], for payerID: String, now: Int64) -> [ShareRow] {
        shares.filter { $0.paymentID == nil && ($0.liveLockHolder(now: now) ?? payerID) == payerID }
    }
}

/// A change of some shares of a split session, written by ``LedgerTransaction/update(shares:sessionID:_:)``.
public enum ShareChange: Sendable, Hashable {
    /// Locked by `payerID` until `until`.
    case lock(payerID: String, until: Int64)
    /// The lock released at ``LedgerTransaction/now``; the holder stays in `locked_by`.
    case release
    /// Paid by `payerID` at ``LedgerTransaction/now`` in payment `paymentID`, with `tip` on top (given for the
    /// first share of a payment, 0 for the others).
    case paid(paymentID: String, payerID: String, tip: Cents)
}

/// One payment of a split session: the shares one send paid, read from their rows.
public struct SharePaymentRecord: Sendable, Hashable {
    /// The payment's id (also the id of its receipt, where the ledger signs receipts).
    public var id: String
    /// The payer.
    public var payerID: String
    /// The numbers of the shares it paid.
    public var shareNumbers: [Int]
    /// What it paid for them, without the tip, in cents.
    public var amount: Cents
    /// The tip paid with it, in cents.
    public var tip: Cents
    /// When it was paid, in milliseconds since 1970 on the store's clock.
    public var paidAt: Int64

    /// The payments the paid rows of one session record, oldest first (then by first share).
    static func grouping(_ shares: [ShareRow]) -> [SharePaymentRecord] {
        var payments: [String: SharePaymentRecord] = [:]
        for share in shares.sorted(by: { $0.number < $1.number }) {
            guard let id = share.paymentID, let payerID = share.paidBy else { continue }
            payments[
                id,
                default: SharePaymentRecord(
                    id: id,
                    payerID: payerID,
                    shareNumbers: [],
                    amount: 0,
                    tip: 0,
                    paidAt: share.paidAt ?? 0
                )
            ].add(share)
        }
        return payments.values.sorted {
            ($0.paidAt, $0.shareNumbers.first ?? 0) < ($1.paidAt, $1.shareNumbers.first ?? 0)
        }
    }

    private mutating func add(_ share: ShareRow) {
        shareNumbers.append(share.number)
        amount += share.amount
        tip += share.tip
        paidAt = min(paidAt, share.paidAt ?? paidAt)
    }
}

/// The shares a lock reserved for its payer: what it will pay, and which shares.
public struct LockedShares: Sendable, Hashable {
    /// What the payer pays for them, before any tip, in cents (a session of one share: its amount).
    public var amount: Cents
    /// The share numbers held (1 is the first); `[1]` for a session of one share.
    public var shareNumbers: [Int]

    /// A lock as the engine took it.
    public init(amount: Cents, shareNumbers: [Int]) {
        self.amount = amount
        self.shareNumbers = shareNumbers
    }
}

/// One payment of a split session as its viewers see it: the shares one send paid, its tip, what was refunded of
/// it, and its receipt.
public struct SessionPayment: Sendable, Hashable {
    /// The payment's id: a refund of this payer's share names it.
    public var id: String
    /// The numbers of the shares it paid.
    public var shareNumbers: [Int]
    /// What it paid for them, without the tip, in cents.
    public var amount: Cents
    /// The tip paid with it, in cents.
    public var tip: Cents
    /// When it was paid, on the store's clock.
    public var paidAt: Date
    /// What was refunded of it (shares and tip), in cents.
    public var refunded: Cents
    /// Its signed receipt; `nil` where the ledger signs none.
    public var receipt: Receipt?

    /// A payment as the engine read it.
    public init(
        id: String,
        shareNumbers: [Int],
        amount: Cents,
        tip: Cents,
        paidAt: Date,
        refunded: Cents,
        receipt: Receipt?
    ) {
        self.id = id
        self.shareNumbers = shareNumbers
        self.amount = amount
        self.tip = tip
        self.paidAt = paidAt
        self.refunded = refunded
        self.receipt = receipt
    }
}
