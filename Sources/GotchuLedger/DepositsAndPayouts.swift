import Foundation
public import GotchuCore

// Money entering the ledger from outside (an operator's deposit) and leaving it (a user's payout), as rows and
// the rules read from them.
//
// The accounts, all system accounts (they alone may go below zero, so the sum over all accounts stays zero):
// - ``LedgerAccounts/depositsWalletID``: every deposit is a transfer from it to the user's wallet; it is minus the
//   sum of every deposit.
// - ``LedgerAccounts/payoutsWalletID``: a payout request moves the amount from the user's wallet into it at once;
//   it holds exactly the sum of the pending payouts.
// - ``LedgerAccounts/payoutsSettledWalletID``: settling a payout moves its amount on into it, off the books of
//   every wallet: the money has left the ledger (the operator paid it out, named by the external reference). It
//   holds the sum of every settled payout. Failing a payout moves the amount back to the user instead.

extension LedgerAccounts {
    /// The system account deposits come from (`gotchu admin deposit`).
    public static let depositsWalletID = "system:deposits"
    /// The clearing account pending payouts wait in.
    public static let payoutsWalletID = "system:payouts"
    /// Where settled payouts end: money that has left the ledger.
    public static let payoutsSettledWalletID = "system:payouts-settled"
}

/// The entry types and reference type of deposits and payouts, as the wallet's entries show them.
public enum MoneyInOutEntries {
    /// A deposit: the deposits account's side, the user's side.
    public static let deposit = (debit: "DEPOSIT_OUT", credit: "DEPOSIT")
    /// A payout request: the user's side, the payouts clearing account's side.
    public static let payout = (debit: "PAYOUT", credit: "PAYOUT_PENDING")
    /// A settled payout leaving the clearing account.
    public static let settle = (debit: "PAYOUT_SETTLE", credit: "PAYOUT_SETTLED")
    /// A failed payout's money back to the user.
    public static let payoutReturn = (debit: "PAYOUT_RETURN_OUT", credit: "PAYOUT_RETURN")
    /// The `ref_type` of a deposit's entries (`ref_id` is the deposit's id).
    public static let depositRefType = "deposit"
    /// The `ref_type` of a payout's entries (`ref_id` is the payout's id).
    public static let payoutRefType = "payout"
}

/// Text an operator types that is stored and shown again (an external reference, a reason): checked where it
/// enters, so nothing stored can rewrite a terminal or hide what it says.
public enum OperatorText {
    /// The longest external reference, in Unicode scalars.
    public static let maximumReferenceLength = 128
    /// The longest reason for a failed payout, in Unicode scalars.
    public static let maximumReasonLength = 200

    /// `text` if it is 1 to `maximumLength` printable characters with no white space at either end
    /// (``PrintableText/problem(in:maximumLength:)``); `invalidInput` naming `field` otherwise.
    public static func validate(
        _ text: String,
        field: String,
        maximumLength: Int
    ) throws(LedgerError) -> String {
        if let problem = PrintableText.problem(in: text, maximumLength: maximumLength) {
            throw LedgerError(.invalidInput, detail: "\(field) \(problem)")
        }
        return text
    }

    /// An external reference (a bank transfer's id, a payout batch's id).
    public static func reference(_ text: String) throws(LedgerError) -> String {
        try validate(text, field: "the reference", maximumLength: maximumReferenceLength)
    }

    /// A charge's order reference (``OrderReference``).
    public static func orderReference(_ text: String) throws(LedgerError) -> String {
        try validate(text, field: "the reference", maximumLength: OrderReference.maximumLength)
    }

    /// Why a payout failed.
    public static func reason(_ text: String) throws(LedgerError) -> String {
        try validate(text, field: "the reason", maximumLength: maximumReasonLength)
    }
}

/// A `deposits` row: money an operator credited to a user, named by its external reference (unique).
public struct DepositRow: Sendable, Hashable {
    /// The deposit's id (a UUID), which its ledger entries reference.
    public var id: String
    /// The external reference, unique: the same reference is the same deposit.
    public var reference: String
    /// The user credited.
    public var userID: String
    /// The amount credited, in cents, positive.
    public var amount: Cents
    /// Who made it (the operating-system user).
    public var actor: String
    /// Milliseconds since 1970 on the store's clock.
    public var createdAt: Int64

    /// A row as read from the database, or about to be inserted.
    public init(id: String, reference: String, userID: String, amount: Cents, actor: String, createdAt: Int64) {
        self.id = id
        self.reference = reference
        self.userID = userID
        self.amount = amount
        self.actor = actor
        self.createdAt = createdAt
    }
}

/// What `gotchu admin deposit` did.
public struct DepositResult: Sendable, Hashable {
    /// The deposit (the earlier one, for a replay).
    public var deposit: DepositRow
    /// The user's balance now.
    public var balance: Cents
    /// Whether the reference named an earlier deposit of the same amount to the same user, so nothing was written.
    public var replayed: Bool

    /// A result as the engine reports it.
    public init(deposit: DepositRow, balance: Cents, replayed: Bool) {
        self.deposit = deposit
        self.balance = balance
        self.replayed = replayed
    }
}

/// Where a payout stands (`payouts.status`).
public enum PayoutStatus: String, CaseIterable, Sendable, Hashable {
    /// Requested: the amount waits in the payouts clearing account.
    case pending = "PENDING"
    /// Paid out by the operator: the amount has left the ledger.
    case settled = "SETTLED"
    /// Not paid out: the amount went back to the user.
    case failed = "FAILED"

    /// A status read from the database; a value no version writes is refused rather than guessed at.
    public init(stored: String) throws(LedgerError) {
        guard let status = Self(rawValue: stored) else {
            throw LedgerError(.inconsistent, detail: "a payout has the unknown status \(stored)")
        }
        self = status
    }
}

/// A `payouts` row.
public struct PayoutRow: Sendable, Hashable {
    /// The payout's id (a UUID), which its ledger entries reference.
    public var id: String
    /// The user paid out.
    public var userID: String
    /// The `Idempotency-Key` of the request, unique per user.
    public var idempotencyKey: String
    /// The amount paid out, in cents, positive.
    public var amount: Cents
    /// The user's balance right after the request, for a replay of its answer.
    public var balanceAfter: Cents
    /// Pending until an operator settles or fails it.
    public var status: PayoutStatus
    /// When it was requested: milliseconds since 1970 on the store's clock.
    public var createdAt: Int64
    /// When it was settled or failed.
    public var resolvedAt: Int64?
    /// The settlement's external reference.
    public var reference: String?
    /// Why it failed.
    public var reason: String?
    /// Who settled or failed it.
    public var resolvedBy: String?

    /// A row as read from the database, or about to be inserted.
    public init(
        id: String,
        userID: String,
        idempotencyKey: String,
        amount: Cents,
        balanceAfter: Cents,
        status: PayoutStatus,
        createdAt: Int64,
        resolvedAt: Int64? = nil,
        reference: String? = nil,
        reason: String? = nil,
        resolvedBy: String? = nil
    ) {
        self.id = id
        self.userID = userID
        self.idempotencyKey = idempotencyKey
        self.amount = amount
        self.balanceAfter = balanceAfter
        self.status = status
        self.createdAt = createdAt
        self.resolvedAt = resolvedAt
        self.reference = reference
        self.reason = reason
        self.resolvedBy = resolvedBy
    }

    /// Refuses to `verb` a payout that is no longer pending, saying how it ended.
    func requirePending(to verb: String) throws(LedgerError) {
        switch status {
        case .pending: return
        case .settled:
            throw LedgerError(
                .payoutNotPending,
                detail: "cannot \(verb) payout \(id): it was settled already"
                    + (reference.map { " (reference \(DisplayText.quoted($0)))" } ?? "")
            )
        case .failed:
            throw LedgerError(
                .payoutNotPending,
                detail: "cannot \(verb) payout \(id): it failed already and its money went back to the user"
            )
        }
    }
}

/// A payout as `gotchu admin payout list` shows it: the row and its user's address.
public struct PayoutListing: Sendable, Hashable {
    /// The payout.
    public var payout: PayoutRow
    /// The address of the payout's user, for the operator to know whom to pay.
    public var email: String

    /// A listing as read from the database.
    public init(payout: PayoutRow, email: String) {
        self.payout = payout
        self.email = email
    }
}
