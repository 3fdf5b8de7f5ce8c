/// A refusal by the ledger's rules: what went wrong, in the ledger's own terms. It knows nothing of HTTP; the server
/// maps each kind to an RFC 9457 problem at its edge (`Problem.init(_:)`).
public struct LedgerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of refusal this is.
    ///
    /// The raw values are stored: a refused payment's kind is kept with its idempotency key and read back to replay
    /// the refusal, so they never change. They are the names the problem types had when rows were first written, so
    /// rows stored before this type existed replay as the same kind.
    public enum Kind: String, CaseIterable, Hashable, Sendable {
        /// Input the rules cannot take (a malformed e-mail address).
        case invalidInput = "bad-request"
        /// An amount out of range, or one whose transfer would overflow a balance.
        case invalidAmount = "invalid-amount"
        /// The user (or its wallet) does not exist.
        case unknownUser = "unauthorized"
        /// The user may not do this to this session, or its account is disabled.
        case forbidden
        /// An account with this e-mail address exists already.
        case accountExists = "account-exists"
        /// The account's e-mail address is not confirmed yet: it cannot log in, be a session's payee or be credited.
        case emailUnconfirmed = "email-unconfirmed"
        /// The payee tried to lock or pay its own session.
        case ownSession = "own-session"
        /// No such session, or none the user may see.
        case sessionNotFound = "session-not-found"
        /// The session's lifetime is over.
        case sessionExpired = "session-expired"
        /// The payee cancelled the session.
        case sessionCancelled = "session-cancelled"
        /// The EID was rotated away and its grace is over: the terminal advertises a newer one.
        case eidRetired = "eid-retired"
        /// The session was given as many EIDs as the policy allows.
        case eidLimitReached = "eid-limit-reached"
        /// Another payer holds a live lock on the session.
        case sessionLocked = "session-locked"
        /// The payer already holds as many locks as the policy allows.
        case lockLimitReached = "lock-limit-reached"
        /// The session has been paid.
        case sessionAlreadyPaid = "session-already-paid"
        /// The payer holds no live lock on the session it tries to pay.
        case lockRequired = "lock-required"
        /// The payer's balance does not cover the amount.
        case insufficientFunds = "insufficient-funds"
        /// An idempotency key was used before for another request.
        case idempotencyKeyReused = "idempotency-key-reused"
        /// The first request with an idempotency key is still running.
        case idempotencyInFlight = "idempotency-in-flight"
        /// No such deposit or payout.
        case notFound = "not-found"
        /// The payout was settled or failed already: only a pending one can be either.
        case payoutNotPending = "payout-not-pending"
        /// A refund of a session that is not paid.
        case sessionNotPaid = "session-not-paid"
        /// A refund that would take the session's refunded total above what was paid.
        case refundExceedsPayment = "refund-exceeds-payment"
        /// A share count out of range (1 to ``SessionSplit/maximumShares``), or more shares than cents.
        case invalidShares = "invalid-shares"
        /// A tip that is negative or larger than the amount it is paid with.
        case invalidTip = "invalid-tip"
        /// No share of a split session is free to lock: every unpaid one is locked by other payers or paid, or
        /// fewer are free than were asked for.
        case noFreeShare = "no-free-share"
        /// The store could not finish the operation this time (a retry may succeed).
        case unavailable
        /// The database cannot be reached in time (down, restarting, or every connection busy): nothing was written,
        /// and a retry once it is back may succeed.
        case databaseUnavailable = "database-unavailable"
        /// The disk holding the database is full: nothing was written, and writes resume once space is freed.
        case storageFull = "storage-full"
        /// The stored data breaks an invariant the rules rely on.
        case inconsistent = "internal-error"
    }

    /// What kind of refusal this is.
    public var kind: Kind
    /// What went wrong in this case, for a person to read.
    public var detail: String

    /// A refusal of `kind`, explained by `detail`.
    public init(_ kind: Kind, detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { "\(kind.rawValue): \(detail)" }
}
