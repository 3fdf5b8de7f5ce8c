import Foundation
import Testing

@testable import GotchuLedgerServer

@Suite("Token buckets", .timeLimit(.minutes(10)))
struct RateLimiterTests {
    @Test("A bucket allows its burst, then one request per refill, and says how long to wait")
    func bucket() throws {
        let clock = ManualClock()
        let limiter = RateLimiter(limit: RateLimit(perSecond: 4, burst: 3), clock: { clock.now() })
        for _ in 0..<3 { try limiter.take("a") }
        #expect(throws: RateLimiter.Exceeded(retryAfter: 1)) { try limiter.take("a") }
        try limiter.take("b")
        clock.advance(seconds: 0.25)
        try limiter.take("a")
        #expect(throws: RateLimiter.Exceeded.self) { try limiter.take("a") }
        // A long quiet spell refills to the burst, no further.
        clock.advance(seconds: 3600)
        for _ in 0..<3 { try limiter.take("a") }
        #expect(throws: RateLimiter.Exceeded.self) { try limiter.take("a") }
    }

    @Test("A slow refill asks for a longer wait, rounded up to whole seconds")
    func retryAfter() throws {
        let clock = ManualClock()
        let limiter = RateLimiter(limit: RateLimit(perSecond: 0.1, burst: 1), clock: { clock.now() })
        try limiter.take("a")
        #expect(throws: RateLimiter.Exceeded(retryAfter: 10)) { try limiter.take("a") }
        clock.advance(seconds: 2.5)
        #expect(throws: RateLimiter.Exceeded(retryAfter: 8)) { try limiter.take("a") }
    }

    @Test("A rate too slow for the wait to fit in Int does not trap: the wait is capped at a day")
    func tinyRate() throws {
        let clock = ManualClock()
        let limiter = RateLimiter(limit: RateLimit(perSecond: 1e-20, burst: 1), capacity: 2, clock: { clock.now() })
        try limiter.take("a")
        #expect(throws: RateLimiter.Exceeded(retryAfter: RateLimiter.maximumRetryAfter)) { try limiter.take("a") }
        // Sweeping a full table divides by the rate as well.
        try limiter.take("b")
        clock.advance(seconds: 10)
        #expect(throws: RateLimiter.Exceeded(retryAfter: 1)) { try limiter.take("c") }
        #expect(RateLimiter.retryAfter(seconds: .infinity) == RateLimiter.maximumRetryAfter)
        #expect(RateLimiter.retryAfter(seconds: .nan) == RateLimiter.maximumRetryAfter)
        #expect(RateLimiter.retryAfter(seconds: 0.2) == 1)
        #expect(RateLimiter.retryAfter(seconds: 86_399.5) == 86_400)
    }

    @Test("Memory is bounded: idle buckets are swept out, and while all are busy a new client waits")
    func bounded() throws {
        let clock = ManualClock()
        let limiter = RateLimiter(limit: RateLimit(perSecond: 1, burst: 2), capacity: 100, clock: { clock.now() })
        for client in 0..<100 { try limiter.take("10.0.0.\(client)") }
        #expect(limiter.trackedCount == 100)
        // All 100 are mid-refill: a newcomer cannot push one out and reset its bucket.
        #expect(throws: RateLimiter.Exceeded(retryAfter: 1)) { try limiter.take("10.0.1.1") }
        try limiter.take("10.0.0.7")
        // Two seconds refill every bucket: a full bucket is the same as none, so they are dropped.
        clock.advance(seconds: 2)
        for client in 0..<10_000 {
            try limiter.take("192.168.\(client / 256).\(client % 256)")
            #expect(limiter.trackedCount <= 100)
            clock.advance(seconds: 0.05)
        }
    }
}
