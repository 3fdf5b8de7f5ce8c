/// An RFC 9457 problem details object, the body of every error response (`application/problem+json`).
public struct Problem: Error, Codable, Hashable, Sendable, CustomStringConvertible {
    /// A stable URI naming the kind of problem; see ``ProblemKind``.
    public var type: String
    /// A short summary of the kind of problem.
    public var title: String
    /// The HTTP status code.
    public var status: Int
    /// What went wrong in this case, for a person to read.
    public var detail: String?

    /// Creates a problem of a known kind.
    public init(_ kind: ProblemKind, detail: String? = nil) {
        self.type = kind.typeURI
        self.title = kind.title
        self.status = kind.status
        self.detail = detail
    }

    /// Creates a problem from its raw members, as received from a server.
    public init(type: String, title: String, status: Int, detail: String?) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
    }

    /// The known kind, if the type URI is one of ours.
    public var kind: ProblemKind? { ProblemKind(typeURI: type) }

    /// The media type of a problem body.
    public static let mediaType = "application/problem+json"

    public var description: String { detail.map { "\(title): \($0)" } ?? title }
}

/// Every problem type the ledger API returns. Clients switch on these, never on the status alone: two 409s
/// (a session locked by someone else, an idempotency key still in flight) mean different things.
public enum ProblemKind: String, CaseIterable, Codable, Hashable, Sendable {
    /// 400: the request is malformed (unreadable JSON, a missing or invalid field, a malformed e-mail address);
    /// `detail` says which.
    case badRequest = "bad-request"
    /// 400: an amount out of range, or one whose transfer would overflow a balance.
    case invalidAmount = "invalid-amount"
    /// 401: no bearer token, or one that is invalid, expired or revoked, or whose user no longer exists or is
    /// disabled; log in again.
    case unauthorized
    /// 403: the caller is authenticated but may not do this to this resource, or its account is disabled.
    case forbidden
    /// 409: registration with an e-mail address that already has an account.
    case accountExists = "account-exists"
    /// 403: a payee tried to lock or pay its own session.
    case ownSession = "own-session"
    /// 403: the account must confirm its e-mail address (the link sent at registration) first.
    case emailUnconfirmed = "email-unconfirmed"
    /// 404: no such route, deposit or payout.
    case notFound = "not-found"
    /// 404: no such session, or none the caller may see.
    case sessionNotFound = "session-not-found"
    /// 410: the session's lifetime is over, unpaid.
    case sessionExpired = "session-expired"
    /// 410: the payee cancelled the session.
    case sessionCancelled = "session-cancelled"
    /// 410: the EID was rotated away and its grace is over: the terminal advertises a newer one.
    case eidRetired = "eid-retired"
    /// 409: the session was given as many EIDs as the ledger's policy allows.
    case eidLimitReached = "eid-limit-reached"
    /// 409: another payer holds a live lock on the session.
    case sessionLocked = "session-locked"
    /// 409: the payer already holds as many locks as the ledger's policy allows.
    case lockLimitReached = "lock-limit-reached"
    /// 409: the session has been paid.
    case sessionAlreadyPaid = "session-already-paid"
    /// 409: the payer holds no live lock on the session it tries to pay; lock it first.
    case lockRequired = "lock-required"
    /// 422: the payer's balance does not cover the amount.
    case insufficientFunds = "insufficient-funds"
    /// 400: a money-moving request without its `Idempotency-Key` header.
    case idempotencyKeyMissing = "idempotency-key-missing"
    /// 409: a refund of a session that was never paid.
    case sessionNotPaid = "session-not-paid"
    /// 409: the refund, with the refunds before it, would return more than was paid.
    case refundExceedsPayment = "refund-exceeds-payment"
    /// 400: a share count out of range (1 to 50), or more shares than the amount has cents.
    case invalidShares = "invalid-shares"
    /// 400: a tip that is negative or more than the amount paid with it.
    case invalidTip = "invalid-tip"
    /// 409: no share of the split session is free for this payer (every unpaid share is locked by others or paid),
    /// or fewer than asked for.
    case noFreeShare = "no-free-share"
    /// 422: the `Idempotency-Key` was used before for a different request; make a new key.
    case idempotencyKeyReused = "idempotency-key-reused"
    /// 409: the first request with this `Idempotency-Key` is still running; retry the same request later.
    case idempotencyInFlight = "idempotency-in-flight"
    /// 409: the payout was settled or failed already and cannot change again.
    case payoutNotPending = "payout-not-pending"
    /// 405: the route exists but not with this HTTP method.
    case methodNotAllowed = "method-not-allowed"
    /// 413: the request body exceeds the server's limit.
    case bodyTooLarge = "body-too-large"
    /// 429: too many requests from this client; wait as `Retry-After` says.
    case rateLimited = "rate-limited"
    /// 500: an unexpected server failure, such as stored data that breaks an invariant of the ledger's rules.
    case internalError = "internal-error"
    /// 503: the server could not finish the request this time (at its connection limit, mail not sent, a write
    /// that lost a race); a retry may succeed.
    case unavailable
    /// 503: the ledger's database cannot be reached in time; nothing was written. Retry after
    /// ``retryAfterSeconds``.
    case databaseUnavailable = "database-unavailable"
    /// 507: the ledger's disk is full; nothing was written. Retry after ``retryAfterSeconds``.
    case storageFull = "storage-full"

    /// The URI prefix of every Gotchu problem type.
    public static let typePrefix = "urn:gotchu:problem:"

    /// The stable type URI, such as `urn:gotchu:problem:session-locked`.
    public var typeURI: String { Self.typePrefix + rawValue }

    /// Looks a kind up by its type URI.
    public init?(typeURI: String) {
        guard typeURI.hasPrefix(Self.typePrefix) else { return nil }
        self.init(rawValue: String(typeURI.dropFirst(Self.typePrefix.count)))
    }

    /// How many seconds a client should wait before retrying a request refused with this kind (`Retry-After`), for
    /// the kinds that are the server's condition rather than the request's.
    public var retryAfterSeconds: Int? {
        switch self {
        case .databaseUnavailable: return 5
        case .storageFull: return 30
        default: return nil
        }
    }

    /// The HTTP status this kind is always sent with.
    public var status: Int {
        switch self {
        case .badRequest, .invalidAmount, .idempotencyKeyMissing, .invalidShares, .invalidTip: return 400
        case .unauthorized: return 401
        case .forbidden, .ownSession, .emailUnconfirmed: return 403
        case .notFound, .sessionNotFound: return 404
        case .methodNotAllowed: return 405
        case .sessionLocked, .lockLimitReached, .sessionAlreadyPaid, .lockRequired, .idempotencyInFlight,
            .eidLimitReached, .accountExists, .payoutNotPending, .sessionNotPaid,
            .refundExceedsPayment, .noFreeShare:
            return 409
        case .sessionExpired, .sessionCancelled, .eidRetired: return 410
        case .bodyTooLarge: return 413
        case .rateLimited: return 429
        case .insufficientFunds, .idempotencyKeyReused: return 422
        case .internalError: return 500
        case .unavailable, .databaseUnavailable: return 503
        case .storageFull: return 507
        }
    }

    /// A short, fixed summary.
    public var title: String {
        switch self {
        case .badRequest: return "Bad request"
        case .invalidAmount: return "Invalid amount"
        case .unauthorized: return "Unauthorized"
        case .forbidden: return "Forbidden"
        case .accountExists: return "An account with this e-mail address exists"
        case .ownSession: return "A payee cannot pay its own session"
        case .emailUnconfirmed: return "The account's e-mail address is not confirmed yet"
        case .notFound: return "Not found"
        case .sessionNotFound: return "Session not found"
        case .sessionExpired: return "Session expired"
        case .sessionCancelled: return "Session cancelled"
        case .eidRetired: return "EID replaced by a newer one"
        case .eidLimitReached: return "Too many EIDs for one session"
        case .sessionLocked: return "Session locked by another payer"
        case .lockLimitReached: return "Too many sessions locked at once"
        case .sessionAlreadyPaid: return "Session already paid"
        case .lockRequired: return "Lock the session before paying"
        case .insufficientFunds: return "Insufficient funds"
        case .idempotencyKeyMissing: return "Idempotency-Key header required"
        case .sessionNotPaid: return "Only a paid session can be refunded"
        case .refundExceedsPayment: return "Refunds would exceed the amount paid"
        case .invalidShares: return "Invalid number of shares"
        case .invalidTip: return "Invalid tip"
        case .noFreeShare: return "No share of this session is free"
        case .idempotencyKeyReused: return "Idempotency-Key reused with a different request"
        case .idempotencyInFlight: return "A request with this Idempotency-Key is still in flight"
        case .payoutNotPending: return "The payout was settled or failed already"
        case .methodNotAllowed: return "Method not allowed"
        case .bodyTooLarge: return "Request body too large"
        case .rateLimited: return "Too many requests"
        case .internalError: return "Internal server error"
        case .unavailable: return "Service unavailable"
        case .databaseUnavailable: return "The ledger's database is unavailable"
        case .storageFull: return "The ledger's disk is full"
        }
    }
}
