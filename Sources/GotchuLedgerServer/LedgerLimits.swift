package import Foundation

/// The abuse limits of the ledger API: rates on the calls that probe for sessions (`POST /sessions/resolve`), block
/// them (`POST /sessions/lock`) or write a key for every new one (`POST /wallet/send`, `POST /wallet/payouts`), and the limits on
/// connections. A refused request gets 429 `rate-limited` with `Retry-After` in seconds. The cap on locks one payer
/// holds at once is part of the store's rules: ``LedgerPolicy/maximumLocksPerPayer``.
public struct LedgerLimits: Sendable {
    /// Resolves per client address. EIDs are short, so this is what makes guessing live ones slow.
    public var resolvePerAddress: RateLimit? = RateLimit(perSecond: 10, burst: 20)
    /// Locks per client address.
    public var lockPerAddress: RateLimit? = RateLimit(perSecond: 10, burst: 20)
    /// Locks per user, whatever address they come from.
    public var lockPerUser: RateLimit? = RateLimit(perSecond: 2, burst: 5)
    /// Payments per user. Each needs a lock, so honest payers stay far below it even with retries; it bounds how
    /// fast one account can make the store write idempotency keys.
    public var sendPerUser: RateLimit? = RateLimit(perSecond: 5, burst: 10)
    /// Payout requests per user (`POST /wallet/payouts`): each writes an idempotency key, a payout row and two
    /// entries, so like sends this bounds how fast one account can make the store write.
    public var payoutPerUser: RateLimit? = RateLimit(perSecond: 5, burst: 10)
    /// Webhook tests per user (`POST /webhooks/endpoints/{id}/test`): each sends a request to a receiver at once,
    /// so this bounds how hard one account can make the server knock on a URL it registered.
    public var webhookTestPerUser: RateLimit? = RateLimit(perSecond: 0.1, burst: 5)
    /// The back-off of `POST /auth/login` per client address and per account.
    public var loginBackoff: LoginBackoff? = LoginBackoff()
    /// `POST /auth/register` per client address (when registration is open): each costs a password hash.
    public var registerPerAddress: RateLimit? = RateLimit(perSecond: 0.1, burst: 5)
    /// Registrations per e-mail address registered (when registration is open): each sends that address a mail, so
    /// this bounds how often anyone can make the server write to a stranger, and how many codes of one address an
    /// attacker gets to guess at. A refusal says nothing of whether the address has an account.
    public var registerPerRecipient: RateLimit? = RateLimit(perSecond: 1.0 / 600, burst: 3)
    /// Takes the client address from the last `X-Forwarded-For` entry (the one the proxy in front added) instead of
    /// the peer address. Only behind a proxy that sets it: anyone else can write any address there.
    public var trustForwardedFor = false
    /// Who may resolve an EID. By default only a logged-in user: an EID heard on the air then tells a stranger
    /// without an account nothing, and every resolve is tied to an account. The per-address rate applies either way.
    public var resolveAccess: ResolveAccess = .requiresLogin
    /// Most clients (addresses or users) tracked per limit; bounds memory.
    public var trackedClients = 100_000
    /// The clock buckets refill by.
    package var clock: @Sendable () -> Date = Date.init

    /// The most connections served at once (each holds a file descriptor). A connection past it is answered
    /// 503 `unavailable` with `Retry-After` and closed, so a client learns at once that the server is busy instead of
    /// waiting in the listen backlog; see ``LedgerServer``. Must be in ``allowedOpenConnections``.
    public var maximumOpenConnections = 512
    /// How long a kept-alive connection may wait for its next request (or a new one for its first) before it is
    /// closed. Must be positive.
    public var idleTimeout: Duration = .seconds(30)
    /// How long a request's head and body may take to arrive, counted from its first byte. A request still
    /// incomplete then is dropped and its connection closed, so a client trickling bytes cannot hold a connection.
    /// Must be positive.
    public var readTimeout: Duration = .seconds(10)

    /// How many event streams (`GET /sessions/{sid}/events`) one user may hold open at once on one server; the next
    /// is refused 429 `rate-limited`. Each holds a connection, so this keeps one account from taking them all.
    public var eventStreamsPerUser = 4
    /// How long an event stream may go without writing before it sends a comment line: proxies keep the connection,
    /// a client notices a dead one, and a write finds a client that went away (its slot is freed then).
    public var eventHeartbeat: Duration = .seconds(15)
    /// How often an event stream reads its session even without a change notice, so a lost notice delays an event
    /// by at most this.
    public var eventSafetyPoll: Duration = .seconds(30)

    /// The connection caps a server accepts.
    public static let allowedOpenConnections = 1...100_000

    /// The default limits.
    public init() {}

    /// No rate limits: for in-process servers whose clients all share one loopback address. The connection limits
    /// stay at their defaults.
    public static var unlimited: LedgerLimits {
        var limits = LedgerLimits()
        limits.resolvePerAddress = nil
        limits.lockPerAddress = nil
        limits.lockPerUser = nil
        limits.sendPerUser = nil
        limits.payoutPerUser = nil
        limits.webhookTestPerUser = nil
        limits.loginBackoff = nil
        limits.registerPerAddress = nil
        limits.registerPerRecipient = nil
        return limits
    }
}

/// Who may call `POST /sessions/resolve`.
public enum ResolveAccess: String, Sendable, Hashable, CaseIterable {
    /// A valid bearer token is needed (401 without one).
    case requiresLogin = "requires-login"
    /// Anyone, as the protocol's first version had it.
    case `public`
}

/// The limiters of one server process, built from ``LedgerLimits``.
struct AbuseLimiters: Sendable {
    let resolvePerAddress: RateLimiter?
    /// `GET /p/{eid}/qr.svg`, at resolve's rate in a bucket of its own.
    let qrCodePerAddress: RateLimiter?
    let lockPerAddress: RateLimiter?
    let lockPerUser: RateLimiter?
    let sendPerUser: RateLimiter?
    let payoutPerUser: RateLimiter?
    let webhookTestPerUser: RateLimiter?
    let registerPerAddress: RateLimiter?
    let registerPerRecipient: RateLimiter?
    let login: LoginThrottle?
    let trustForwardedFor: Bool
    let resolveAccess: ResolveAccess

    init(_ limits: LedgerLimits) {
        func limiter(_ limit: RateLimit?) -> RateLimiter? {
            limit.map { RateLimiter(limit: $0, capacity: limits.trackedClients, clock: limits.clock) }
        }
        resolvePerAddress = limiter(limits.resolvePerAddress)
        qrCodePerAddress = limiter(limits.resolvePerAddress)
        lockPerAddress = limiter(limits.lockPerAddress)
        lockPerUser = limiter(limits.lockPerUser)
        sendPerUser = limiter(limits.sendPerUser)
        payoutPerUser = limiter(limits.payoutPerUser)
        webhookTestPerUser = limiter(limits.webhookTestPerUser)
        registerPerAddress = limiter(limits.registerPerAddress)
        registerPerRecipient = limiter(limits.registerPerRecipient)
        login = limits.loginBackoff.map {
            LoginThrottle(backoff: $0, capacity: limits.trackedClients, clock: limits.clock)
        }
        trustForwardedFor = limits.trustForwardedFor
        resolveAccess = limits.resolveAccess
    }
}
