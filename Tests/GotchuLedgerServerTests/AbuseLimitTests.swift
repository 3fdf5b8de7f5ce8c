import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import Testing

@Suite("Abuse limits: rate limits on resolve and lock, and the cap on locks held", .timeLimit(.minutes(10)))
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
            let bearer = "Bearer " + (try await ledger.client("payer@example.com").token ?? "")
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
                                headers: [
                                    "Content-Type": "application/json", "X-Forwarded-For": "203.0.113.7",
                                    "Authorization": bearer,
                                ]
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
                headers: ["X-Forwarded-For": "203.0.113.7", "Authorization": bearer]
            )
            #expect(flooder.status == 429)
            #expect(TestLedger.problemKind(flooder.body) == .rateLimited)
            let honest = try await ledger.raw(
                "POST",
                "/sessions/resolve",
                body: #"{"eid":"\#(session.eid)"}"#,
                headers: ["X-Forwarded-For": "198.51.100.1, 203.0.113.7, 198.51.100.2", "Authorization": bearer]
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
            let bearer = "Bearer " + (try await ledger.client("payer@example.com").token ?? "")
            let first = try await ledger.raw(
                "POST",
                "/sessions/resolve",
                body: body,
                headers: ["X-Forwarded-For": "192.0.2.1", "Authorization": bearer]
            )
            let second = try await ledger.raw(
                "POST",
                "/sessions/resolve",
                body: body,
                headers: ["X-Forwarded-For": "192.0.2.2", "Authorization": bearer]
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
        "Sends refused before they start store nothing: made-up sids, unknown sessions and bad keys leave no key rows",
        arguments: StoreKind.available
    )
    func refusedSendsStoreNothing(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let auth = ["Authorization": "Bearer \(payer.token!)", "Content-Type": "application/json"]
            // Just under the 16 KiB body limit, so it reaches the sid check rather than the size check.
            let madeUp = String(repeating: "a", count: 16 * 1024 - 16)
            for index in 0..<300 {
                let key = ["Idempotency-Key": "flood-\(index)"]
                let big = try await ledger.raw(
                    "POST",
                    "/wallet/send",
                    body: #"{"sid":"\#(madeUp)"}"#,
                    headers: auth.merging(key) { $1 }
                )
                #expect(big.status == 400 && TestLedger.problemKind(big.body) == .badRequest)
                let unknown = UUID().uuidString.lowercased()
                let missing = try await ledger.raw(
                    "POST",
                    "/wallet/send",
                    body: #"{"sid":"\#(unknown)"}"#,
                    headers: auth.merging(key) { $1 }
                )
                #expect(missing.status == 404 && TestLedger.problemKind(missing.body) == .sessionNotFound)
            }
            let longKey = auth.merging(["Idempotency-Key": String(repeating: "k", count: 256)]) { $1 }
            let session = try await ledger.client("payee@example.com").createSession(amountCents: 100)
            let refused = try await ledger.raw(
                "POST",
                "/wallet/send",
                body: #"{"sid":"\#(session.sid)"}"#,
                headers: longKey
            )
            #expect(refused.status == 400)
            #expect(try await ledger.idempotencyKeyCount() == 0)
            // A sid in capitals names the same session.
            try await payer.lock(sid: session.sid.uppercased())
            let paid = try await payer.send(sid: session.sid.uppercased(), idempotencyKey: "upper")
            #expect(paid == SignedAnswer(newBalanceCents: 900, replayed: false))
            #expect(try await ledger.idempotencyKeyCount() == 1)
        }
    }

    @Test("Sends per user are rate limited with Retry-After, before anything is stored; other users are not held back")
    func sendRate() async throws {
        var limits = LedgerLimits.unlimited
        limits.sendPerUser = RateLimit(perSecond: 0.5, burst: 2)
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let eager = try await ledger.client("eager@example.com", funded: 10_000)
            let other = try await ledger.client("other@example.com", funded: 10_000)
            let session = try await payee.createSession(amountCents: 100)
            try await eager.lock(sid: session.sid)
            let unknown = UUID().uuidString.lowercased()
            for key in ["a", "b"] {
                #expect(
                    await problemKind { try await eager.send(sid: unknown, idempotencyKey: key) } == .sessionNotFound
                )
            }
            let refused = try await ledger.raw(
                "POST",
                "/wallet/send",
                body: #"{"sid":"\#(session.sid)"}"#,
                headers: ["Authorization": "Bearer \(eager.token!)", "Idempotency-Key": "c"]
            )
            #expect(refused.status == 429)
            #expect(TestLedger.problemKind(refused.body) == .rateLimited)
            #expect(refused.headers["retry-after"] == "2")
            #expect(try await ledger.idempotencyKeyCount() == 0)
            #expect(await problemKind { try await other.send(sid: session.sid, idempotencyKey: "c") } == .sessionLocked)

            ledger.clock.advance(seconds: 2)
            #expect(try await eager.send(sid: session.sid, idempotencyKey: "c").newBalanceCents == 9_900)
        }
    }

    @Test(
        "Payout requests per user are rate limited with Retry-After, before anything moves; other users are not held back"
    )
    func payoutRate() async throws {
        var limits = LedgerLimits.unlimited
        limits.payoutPerUser = RateLimit(perSecond: 0.5, burst: 2)
        try await TestLedger.with(limits: limits) { ledger in
            let eager = try await ledger.client("eager@example.com", funded: 10_000)
            let other = try await ledger.client("other@example.com", funded: 10_000)
            for key in ["a", "b"] {
                _ = try await eager.requestPayout(amountCents: 100, idempotencyKey: key)
            }
            let refused = try await ledger.raw(
                "POST",
                "/wallet/payouts",
                body: #"{"amount_cents":100}"#,
                headers: ["Authorization": "Bearer \(eager.token!)", "Idempotency-Key": "c"]
            )
            #expect(refused.status == 429)
            #expect(TestLedger.problemKind(refused.body) == .rateLimited)
            #expect(refused.headers["retry-after"] == "2")
            #expect(try await eager.wallet().availableCents == 9_800)
            let others = try await other.requestPayout(amountCents: 100, idempotencyKey: "c")
            #expect(others.payout.newBalanceCents == 9_900)

            ledger.clock.advance(seconds: 2)
            let (payout, replayed) = try await eager.requestPayout(amountCents: 100, idempotencyKey: "c")
            #expect(!replayed)
            #expect(payout.newBalanceCents == 9_700)
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
