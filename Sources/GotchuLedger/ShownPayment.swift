public import GotchuCore

/// A payment of exactly what a page showed its payer: the whole session, or one share of a split, of the amount the
/// page stated, taken and paid in one transaction (``LedgerStore/pay(shown:)``). Nothing is held between the page and
/// the payment, so no other payer ever finds a share "taken" by a payment that then does not happen.
public struct ShownPayment: Sendable, Hashable {
    /// The session.
    public var sid: String
    /// The payer.
    public var payerID: String
    /// The key the outcome is kept under, scoped to the payer: taps on one page view share it.
    public var idempotencyKey: String
    /// What the page said the payer would pay, before a tip: the session's amount, or one share's.
    public var amountCents: Cents
    /// The tip on top, for the payee.
    public var tipCents: Cents
    /// Whether the payer confirmed paying one more share of a split it has paid a share of already.
    public var another: Bool

    /// A payment of `amountCents` (and `tipCents` on top) of session `sid` by `payerID` under `idempotencyKey`.
    public init(
        sid: String,
        payerID: String,
        idempotencyKey: String,
        amountCents: Cents,
        tipCents: Cents,
        another: Bool = false
    ) {
        self.sid = sid
        self.payerID = payerID
        self.idempotencyKey = idempotencyKey
        self.amountCents = amountCents
        self.tipCents = tipCents
        self.another = another
    }
}

/// How a ``ShownPayment`` ended.
public enum ShownPaymentOutcome: Sendable, Hashable {
    /// Paid, now or by an earlier request under the same key (`replayed`): the payer's balance afterwards, and the
    /// payment's id when it paid a share of a split.
    case paid(newBalanceCents: Cents, paymentID: String?, replayed: Bool)
    /// The ledger refused it; nothing moved.
    case refused(LedgerError)
    /// What the payer would pay now differs from what the page showed (another payer took the share shown, and the
    /// shares left cost another amount): nothing moved and no outcome is kept, so the page can show the new amount.
    case amountChanged(Cents)
    /// The payer paid a share of this split already (`paymentID`) and did not confirm another; nothing moved and no
    /// outcome is kept.
    case paidBefore(paymentID: String)
}

/// What a payment pays of its session.
enum PaymentTarget: Sendable {
    /// The session, or the shares of a split, that the payer holds locked (`POST /wallet/send`).
    case locked
    /// What a page showed (``ShownPayment``): the session, or one free share of a split of that amount.
    case shown(amount: Cents, another: Bool)
}

/// A shown payment that must not go ahead and must leave nothing behind, not even its idempotency key: thrown out
/// of the payment's transaction, which then rolls back whole.
struct ShownPaymentStop: Error {
    var outcome: ShownPaymentOutcome
}

extension LedgerEngine {
    /// The one share of split `session` (locked in this transaction) that a shown payment of `amount` pays: of the
    /// shares free for `payerID`, one of that amount, its own live lock first, then the first. Refused as a lock of
    /// one share would be; a payer that paid a share before must have confirmed `another`.
    static func shownShare(
        _ session: SessionRow,
        amount: Cents,
        another: Bool,
        payerID: String,
        _ transaction: Backend.Transaction
    ) async throws -> ShareRow {
        guard payerID != session.payeeID else {
            throw LedgerError(.ownSession, detail: "you cannot pay your own session")
        }
        if session.storedStatus == .paid {
            throw LedgerError(.sessionAlreadyPaid, detail: "every share of this session has been paid")
        }
        try session.requireLive(now: transaction.now)
        let shares = try await transaction.shares(sessionID: session.id)
        if !another, let paid = shares.first(where: { $0.paidBy == payerID }), let paymentID = paid.paymentID {
            throw ShownPaymentStop(outcome: .paidBefore(paymentID: paymentID))
        }
        let free = ShareRow.free(shares, for: payerID, now: transaction.now)
        guard let first = free.first else {
            throw LedgerError(
                .noFreeShare,
                detail: "every unpaid share of this session is locked by other payers; try again shortly"
            )
        }
        let matching = free.filter { $0.amount == amount }
        guard
            let share = matching.first(where: { $0.liveLockHolder(now: transaction.now) == payerID })
                ?? matching.first
        else { throw ShownPaymentStop(outcome: .amountChanged(first.amount)) }
        return share
    }
}
