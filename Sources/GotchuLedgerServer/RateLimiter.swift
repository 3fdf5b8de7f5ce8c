import Foundation
import Synchronization

/// A token-bucket rate: `perSecond` tokens refill a bucket of `burst` tokens; each request takes one.
public struct RateLimit: Sendable, Hashable {
    /// Sustained requests per second.
    public var perSecond: Double
    /// Requests allowed at once after a quiet spell.
    public var burst: Int

    /// The rates `gotchu server` accepts: from one request in 1,000 s to a million a second.
    public static let allowedPerSecond: ClosedRange<Double> = 0.001...1_000_000
    /// The bursts `gotchu server` accepts.
    public static let allowedBurst: ClosedRange<Int> = 1...1_000_000

    /// Creates a rate; both must be positive and the rate finite. Any such rate is safe, however extreme: waits are
    /// computed in floating point and capped (``RateLimiter/maximumRetryAfter``).
    public init(perSecond: Double, burst: Int) {
        precondition(perSecond > 0 && perSecond.isFinite && burst > 0, "a rate limit needs a positive rate and burst")
        self.perSecond = perSecond
        self.burst = burst
    }
}

/// Token buckets keyed by client address or user id.
///
/// The state lives in this process's memory: with several replicas behind a load balancer each enforces the limit
/// on its own share of the traffic, so a client may get up to (replicas × rate). Memory stays bounded: a bucket
/// that has refilled is the same as no bucket, so idle ones are swept out; if `capacity` clients are all active at
/// once, a client not yet tracked is refused until some go idle (a flood of new addresses must not reset the
/// buckets of the clients already throttled).
final class RateLimiter: Sendable {
    /// A refusal: wait `retryAfter` seconds before trying again.
    struct Exceeded: Error, Equatable {
        var retryAfter: Int
    }

    /// The longest wait a refusal asks for (a day). A very slow rate could ask for more than `Int` holds; a client
    /// told to come back in a day and refused again is told the same.
    static let maximumRetryAfter = 86_400

    private struct Bucket {
        var tokens: Double
        var updated: Date
    }

    private struct State {
        var buckets: [String: Bucket] = [:]
        var lastSweep: Date = .distantPast
    }

    let limit: RateLimit
    let capacity: Int
    private let clock: @Sendable () -> Date
    private let state = Mutex(State())

    init(limit: RateLimit, capacity: Int = 100_000, clock: @escaping @Sendable () -> Date) {
        self.limit = limit
        self.capacity = capacity
        self.clock = clock
    }

    /// How many buckets are held now.
    var trackedCount: Int { state.withLock { $0.buckets.count } }

    /// Takes a token from `key`'s bucket, or throws how long until one is there.
    func take(_ key: String) throws(Exceeded) {
        let now = clock()
        let limit = self.limit
        let burst = Double(limit.burst)
        let wait: Int? = state.withLock { state in
            var bucket: Bucket
            if let existing = state.buckets[key] {
                bucket = existing
                // A clock stepped backwards refills nothing rather than draining the bucket.
                let elapsed = max(0, now.timeIntervalSince(bucket.updated))
                bucket.tokens = min(burst, bucket.tokens + elapsed * limit.perSecond)
            } else {
                if state.buckets.count >= capacity { sweep(&state, now: now) }
                guard state.buckets.count < capacity else { return 1 }
                bucket = Bucket(tokens: burst, updated: now)
            }
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                state.buckets[key] = bucket
                return Self.retryAfter(seconds: (1 - bucket.tokens) / limit.perSecond)
            }
            bucket.tokens -= 1
            state.buckets[key] = bucket
            return nil
        }
        if let wait { throw Exceeded(retryAfter: wait) }
    }

    /// Whole seconds to wait, at least 1 and at most ``maximumRetryAfter``; in floating point until it is known to fit,
    /// since the wait of a tiny rate is beyond `Int` (or infinite).
    static func retryAfter(seconds: Double) -> Int {
        guard seconds < Double(maximumRetryAfter) else { return maximumRetryAfter }
        return max(1, Int(seconds.rounded(.up)))
    }

    /// Drops the buckets that have refilled; at most once a second, so a full table does not cost a scan a request.
    private func sweep(_ state: inout State, now: Date) {
        guard now.timeIntervalSince(state.lastSweep) >= 1 || now < state.lastSweep else { return }
        state.lastSweep = now
        let refill = Double(limit.burst) / limit.perSecond
        state.buckets = state.buckets.filter { now.timeIntervalSince($0.value.updated) < refill }
    }
}
