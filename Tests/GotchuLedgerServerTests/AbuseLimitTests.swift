import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import Testing

@Suite("Abuse limits: rate limits on resolve and lock, and the cap on locks held")
struct AbuseLimitTests {
    /// Statuses seen, and whether every 429 carried a usable Retry-After.
    struct Tally: Sendable {
        var statuses: [Int: Int] = [:]
        var retryAfterMissing = 0
    }

    @Test("10,000 resolves of random EIDs from one client find nothing, are throttled, and others still get answers")
    func resolveFlood() async throws {
        var limits = LedgerLimits.unlimited
        limits.resolvePerAddress = RateLimit(perSecond: 10, burst: 20)
        // Tells the flooding client from the honest one on a loopback where every peer is 127.0.0.1.
        limits.trustForwardedFor = true
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 250)
            let requests = 10_000
            let workers = 8
            let result = try await withThrowingTaskGroup(of: Tally.self) { group in
                for worker in 0..<workers {
                    group.addTask {
                        var tally = Tally()
                        for _ in stride(from: worker, to: requests, by: workers) {
                            var eid = EID.random()
                            while eid == session.eid { eid = EID.random() }
                            // 10 ms of the limiter's time per request: 100 s in all, room for 1,000 refills.
                            ledger.clock.advance(seconds: 0.01)
                            let response = try await ledger.raw(
                                "POST",
                                "/sessions/resolve",
                                body: #"{"eid":"\#(eid.rawValue)"}"#,
                                headers: ["Content-Type": "application/json", "X-Forwarded-For": "203.0.113.7"]
                            )
                            tally.statuses[response.status, default: 0] += 1
                            let retryAfter = response.headers["retry-after"].flatMap { Int($0) }
                            if response.status == 429, (retryAfter ?? 0) < 1 { tally.retryAfterMissing += 1 }
                        }
                        return tally
                    }
                }
                var total = Tally()
                for try await tally in group {
                    total.statuses.merge(tally.statuses, uniquingKeysWith: +)
                    total.retryAfterMissing += tally.retryAfterMissing
                }
                return total
            }
            #expect(Set(result.statuses.keys).isSubset(of: [404, 429]), "\(result.statuses)")
            #expect(result.statuses.values.reduce(0, +) == requests)
            // Burst plus what 100 s refill at 10/s, plus one for the partial token at the start.
            #expect((result.statuses[404] ?? 0) <= 20 + 1_000 + 1)
            #expect((result.statuses[429] ?? 0) >= requests - 1_021)
            #expect(result.retryAfterMissing == 0)

            // Still throttled, while another client resolves and the payee's calls are not limited at all.
            let flooder = try await ledger.raw(
                "POST",
                "/sessions/resolve",
                body: #"{"eid":"\#(session.eid)"}"#,
                headers: ["X-Forwarded-For": "203.0.113.7"]
            )
            #expect(flooder.status == 429)
            #expect(TestLedger.problemKind(flooder.body) == .rateLimited)
            let honest = try await ledger.raw(
                "POST",
                "/sessions/resolve",
                body: #"{"eid":"\#(session.eid)"}"#,
                headers: ["X-Forwarded-For": "198.51.100.1, 203.0.113.7, 198.51.100.2"]
            )
            #expect(honest.status == 200)
            #expect(try await payee.session(sid: session.sid).status == .advertising)
        }
    }

    @Test("Without --trust-forwarded-for, X-Forwarded-For is ignored: the peer address is counted")
    func forwardedForIgnored() async throws {
        var limits = LedgerLimits.unlimited
        limits.resolvePerAddress = RateLimit(perSecond: 1, burst: 1)
        try await TestLedger.with(limits: limits) { ledger in
            let body = #"{"eid":"0000000000"}"#
            let first = try await ledger.raw(
                "POST",
                "/sessions/resolve",
                body: body,
                headers: ["X-Forwarded-For": "192.0.2.1"]
            )
            let second = try await ledger.raw(
                "POST",
                "/sessions/resolve",
                body: body,
                headers: ["X-Forwarded-For": "192.0.2.2"]
            )
            #expect(first.status == 404)
            #expect(second.status == 429)
            #expect(second.headers["retry-after"] == "1")
        }
    }

    @Test("Locks per user are rate limited, other users are not held back, and the limit refills with time")
    func lockRate() async throws {
        var limits = LedgerLimits.unlimited
        limits.lockPerUser = RateLimit(perSecond: 0.5, burst: 2)
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let eager = try await ledger.client("eager@example.com", funded: 10_000)
            let other = try await ledger.client("other@example.com", funded: 10_000)
            let session = try await payee.createSession(amountCents: 100)
            try await eager.lock(sid: session.sid)
            try await eager.lock(sid: session.sid)
            let refused = try await ledger.raw(
                "POST",
                "/sessions/lock",
                body: #"{"sid":"\#(session.sid)"}"#,
                headers: ["Authorization": "Bearer \(eager.token!)"]
            )
            #expect(refused.status == 429)
            #expect(TestLedger.problemKind(refused.body) == .rateLimited)
            // One token refills in 2 s at 0.5/s.
            #expect(refused.headers["retry-after"] == "2")
            #expect(await problemKind { try await other.lock(sid: session.sid) } == .sessionLocked)

            ledger.clock.advance(seconds: 1)
            #expect(await problemKind { try await eager.lock(sid: session.sid) } == .rateLimited)
            ledger.clock.advance(seconds: 1)
            try await eager.lock(sid: session.sid)
            #expect(try await eager.session(sid: session.sid).status == .locked)
        }
    }

    @Test(
        "One payer holds at most the policy's number of locks; the payee can cancel a squatted session",
        arguments: StoreKind.available
    )
    func lockSquatting(store: StoreKind) async throws {
        var policy = LedgerPolicy()
        policy.maximumLocksPerPayer = 3
        try await TestLedger.with(store: store, policy: policy) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let squatter = try await ledger.client("squatter@example.com", funded: 100_000)
            let payer = try await ledger.client("payer@example.com", funded: 100_000)
            var sessions: [CreateSessionResponse] = []
            for _ in 0..<5 { sessions.append(try await payee.createSession(amountCents: 100)) }

            for session in sessions.prefix(3) { try await squatter.lock(sid: session.sid) }
            #expect(await problemKind { try await squatter.lock(sid: sessions[3].sid) } == .lockLimitReached)
            // Renewing a lock already held is not a new one.
            try await squatter.lock(sid: sessions[0].sid)
            // Others are not affected.
            try await payer.lock(sid: sessions[3].sid)

            // The payee cancels a session the squatter holds locked: it is gone for the squatter too.
            #expect(try await payee.session(sid: sessions[1].sid).status == .locked)
            try await payee.cancel(sid: sessions[1].sid)
            #expect(try await payee.session(sid: sessions[1].sid).status == .cancelled)
            let paid = await problemKind {
                try await squatter.send(sid: sessions[1].sid, idempotencyKey: UUID().uuidString)
            }
            #expect(paid == .sessionCancelled)
            #expect(await problemKind { try await squatter.lock(sid: sessions[1].sid) } == .sessionCancelled)

            // The cancelled one no longer counts, so there is room for one more.
            try await squatter.lock(sid: sessions[4].sid)
            let another = try await payee.createSession(amountCents: 100)
            #expect(await problemKind { try await squatter.lock(sid: another.sid) } == .lockLimitReached)

            // Paying one frees its place.
            _ = try await squatter.send(sid: sessions[0].sid, idempotencyKey: UUID().uuidString)
            try await squatter.lock(sid: another.sid)

            // Lapsed locks do not count.
            ledger.clock.advance(seconds: 31)
            let late = try await payee.createSession(amountCents: 100)
            try await squatter.lock(sid: late.sid)
            #expect(try await ledger.store.audit().isHealthy)
        }
    }
}
