public import NIOSSL

/// How a ledger server registers and delivers webhooks.
public struct WebhookOptions: Sendable {
    /// The delay before the first retry of a failed delivery; each later one waits twice as long as the one before
    /// (``WebhookRetrySchedule``).
    public var retryBase: Duration = .seconds(30)
    /// How long a delivery is retried, from the event, before it is marked failed; an endpoint whose deliveries fail
    /// this long without one success is disabled.
    public var retryWindow: Duration = .seconds(3 * 86_400)
    /// Hosts that may be sent to over `http`, and at any address (a deployment's own receivers; loopback in tests).
    public var allowedHosts: [String] = []
    /// The most deliveries in flight to one endpoint at once, on this server.
    public var concurrencyPerEndpoint = 4
    /// The most deliveries in flight at once on this server, all endpoints together.
    public var concurrency = 64
    /// How long one delivery may take, from resolving the host to the end of the answer.
    public var timeout: Duration = .seconds(10)
    /// How often the delivery worker looks for due deliveries besides being woken by this server's commits (events
    /// other servers on the same database wrote, retries coming due).
    public var pollInterval: Duration = .seconds(1)
    /// The most endpoints one user may register.
    public var maximumEndpointsPerUser = 16
    /// How long a rotated-away secret keeps signing deliveries beside the new one.
    public var previousSecretLifetime: Duration = .seconds(86_400)
    /// Certificate authorities trusted for receivers' certificates besides the system's.
    public var trustRoots: [NIOSSLCertificate] = []
    /// How receivers' hosts are resolved.
    public var resolver: any WebhookResolver = SystemWebhookResolver()
    /// Whether this server runs the delivery worker (the routes are served either way).
    public var delivers = true

    /// The defaults: retries from 30 s for 3 days, `https` only, 4 deliveries at once per endpoint.
    public init() {}

    /// The address policy of these options.
    public var policy: WebhookAddressPolicy { WebhookAddressPolicy(allowedHosts: allowedHosts) }

    /// The retry schedule of these options.
    public var schedule: WebhookRetrySchedule { WebhookRetrySchedule(base: retryBase, window: retryWindow) }

    /// The client deliveries are sent with.
    package func client() -> WebhookHTTPClient {
        WebhookHTTPClient(policy: policy, resolver: resolver, timeout: timeout, trustRoots: trustRoots)
    }
}

/// When a failed delivery is tried again: after ``base``, then twice as long each time (at most ``maximumDelay``),
/// each delay lengthened by up to a quarter at random so that the retries of many deliveries that failed together
/// (an endpoint's outage) spread out; never later than ``window`` after the event, after which the delivery has
/// failed for good.
public struct WebhookRetrySchedule: Sendable, Hashable {
    /// The delay after the first failed attempt.
    public var base: Duration
    /// How long after the event a delivery is still tried.
    public var window: Duration
    /// The longest delay between two attempts.
    public var maximumDelay: Duration
    /// The most a delay is lengthened at random, as a fraction of it.
    public var jitter: Double

    /// A schedule starting at `base`, doubling up to `maximumDelay`, for `window`.
    public init(
        base: Duration,
        window: Duration = .seconds(3 * 86_400),
        maximumDelay: Duration = .seconds(6 * 3_600),
        jitter: Double = 0.25
    ) {
        self.base = base
        self.window = window
        self.maximumDelay = maximumDelay
        self.jitter = jitter
    }

    /// The nominal delay after failed attempt number `attempt` (1 for the first attempt), before jitter.
    public func nominalDelay(afterAttempt attempt: Int) -> Duration {
        var delay = base
        for _ in 1..<max(1, min(attempt, 64)) {
            delay *= 2
            if delay >= maximumDelay { return maximumDelay }
        }
        return min(delay, maximumDelay)
    }

    /// The delay before the next attempt after failed attempt number `attempt`, `age` after the event; `nil` when
    /// the next attempt would fall outside the window (the delivery has failed).
    public func delay(
        afterAttempt attempt: Int,
        age: Duration,
        using generator: inout some RandomNumberGenerator
    ) -> Duration? {
        let nominal = nominalDelay(afterAttempt: attempt)
        let delay = nominal + nominal * Double.random(in: 0...jitter, using: &generator)
        guard age + delay <= window else { return nil }
        return delay
    }

    /// ``delay(afterAttempt:age:using:)`` with the system's random numbers.
    public func delay(afterAttempt attempt: Int, age: Duration) -> Duration? {
        var generator = SystemRandomNumberGenerator()
        return delay(afterAttempt: attempt, age: age, using: &generator)
    }
}
