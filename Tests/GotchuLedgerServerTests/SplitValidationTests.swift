import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuReceipts
import PostgresNIO
import Testing

/// Bad input to the split and tip requests, over HTTP: each refused with its problem type (or 400 bad-request
/// naming the field), and nothing written.
@Suite("Splits and tips: bad input gets a clear 4xx and changes nothing", .serialized, .timeLimit(.minutes(10)))
struct SplitValidationTests {
    /// How many sessions, shares and ledger entries the store holds, counted under it.
    static func rows(_ ledger: TestLedger) async throws -> [Int] {
        let tables = ["payment_sessions", "session_shares", "ledger_entries", "refunds"]
        switch ledger.database {
        case .sqlite(let path):
            let database = try DatabaseQueue(path: path)
            return try await database.read { db in
                try tables.map { try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \($0)") ?? -1 }
            }
        case .postgres(let url):
            return try await TestPostgres.withClient(url) { client in
                var counts: [Int] = []
                for table in tables {
                    var count = -1
                    for try await value in try await client.query("SELECT COUNT(*) FROM \(unescaped: table)").decode(
                        Int64.self
                    ) {
                        count = Int(value)
                    }
                    counts.append(count)
                }
                return counts
            }
        }
    }

    static func problem(_ response: (status: Int, body: Data, headers: [String: String])) -> Problem? {
        try? APIJSON.decoder().decode(Problem.self, from: response.body)
    }

    static func verified(_ ledger: TestLedger) async throws {
        let verification = try await ledger.store.verify()
        #expect(verification.failure == nil, "\(verification)")
    }

    @Test(
        "Create: shares 0, 51, -1, 2.5, \"3\", true, beyond Int64, more shares than cents → 400; nothing written",
        arguments: StoreKind.available
    )
    func create(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let auth = ["Authorization": "Bearer \(payee.token!)"]
            let cases: [(String, ProblemKind, String)] = [
                (#"{"amount_cents":100,"shares":0}"#, .invalidShares, "from 1 to 50"),
                (#"{"amount_cents":100,"shares":51}"#, .invalidShares, "from 1 to 50"),
                (#"{"amount_cents":100,"shares":-1}"#, .invalidShares, "from 1 to 50"),
                (#"{"amount_cents":3,"shares":4}"#, .invalidShares, "cannot be split into 4 shares"),
                (#"{"amount_cents":100,"shares":2.5}"#, .badRequest, "shares"),
                (#"{"amount_cents":100,"shares":"3"}"#, .badRequest, "shares"),
                (#"{"amount_cents":100,"shares":true}"#, .badRequest, "shares"),
                (#"{"amount_cents":100,"shares":[3]}"#, .badRequest, "shares"),
                (#"{"amount_cents":100,"shares":92233720368547758070}"#, .badRequest, "shares"),
            ]
            let before = try await Self.rows(ledger)
            for (body, kind, message) in cases {
                // With and without an idempotency key: a refused create keeps no key either.
                for headers in [auth, auth.merging(["Idempotency-Key": "create-\(body.hashValue)"]) { $1 }] {
                    let response = try await ledger.raw("POST", "/sessions/create", body: body, headers: headers)
                    let problem = Self.problem(response)
                    #expect(response.status == 400, "\(body)")
                    #expect(problem?.kind == kind, "\(body): \(String(describing: problem))")
                    #expect(problem?.detail?.contains(message) == true, "\(body): \(problem?.detail ?? "")")
                    #expect(response.headers["content-type"] == "application/problem+json")
                }
            }
            #expect(try await Self.rows(ledger) == before)
            // The edges are accepted: 50 shares of a cent each, and 1 share (as if none were named).
            let fifty = try await payee.createSession(amountCents: 50, shares: 50)
            #expect(fifty.shares == 50 && fifty.shareCents == Array(repeating: 1, count: 50))
            let one = try await payee.createSession(amountCents: 1_001, shares: 1)
            #expect(one.shares == 1 && one.shareCents == [1_001])
            let four = try await payee.createSession(amountCents: 1_001, shares: 4)
            #expect(four.shareCents == [251, 250, 250, 250])
            #expect(try await payee.wallet().availableCents == 0)
            try await Self.verified(ledger)
        }
    }

    @Test(
        "Lock: more shares than are free → 409 no-free-share; 0, 51, 2.5, \"2\" → 400; nothing locked",
        arguments: StoreKind.available
    )
    func lock(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let ann = try await ledger.client("ann@example.com", funded: 1_000)
            let bob = try await ledger.client("bob@example.com", funded: 1_000)
            let cat = try await ledger.client("cat@example.com", funded: 1_000)
            let split = try await payee.createSession(amountCents: 900, shares: 3)
            let single = try await payee.createSession(amountCents: 900)
            let sid = split.sid
            let cases: [(String, Int, ProblemKind, String)] = [
                (#"{"sid":"\#(sid)","shares":4}"#, 409, .noFreeShare, "only 3 of the 3 shares are free, not 4"),
                (#"{"sid":"\#(sid)","shares":0}"#, 400, .invalidShares, "from 1 to 50"),
                (#"{"sid":"\#(sid)","shares":51}"#, 400, .invalidShares, "from 1 to 50"),
                (#"{"sid":"\#(sid)","shares":2.5}"#, 400, .badRequest, "shares"),
                (#"{"sid":"\#(sid)","shares":"2"}"#, 400, .badRequest, "shares"),
                (#"{"sid":"\#(single.sid)","shares":2}"#, 409, .noFreeShare, "not split"),
            ]
            let auth = ["Authorization": "Bearer \(ann.token!)"]
            for (body, status, kind, message) in cases {
                let response = try await ledger.raw("POST", "/sessions/lock", body: body, headers: auth)
                let problem = Self.problem(response)
                #expect(response.status == status && problem?.kind == kind, "\(body): \(String(describing: problem))")
                #expect(problem?.detail?.contains(message) == true, "\(body): \(problem?.detail ?? "")")
            }
            // Nothing was locked: Bob takes two of the three, then Ann may have only the last one.
            let bobs = try await bob.lock(sid: sid, shares: 2)
            #expect(bobs.ok && bobs.amountCents == 600 && bobs.shareNumbers == [1, 2])
            #expect(await problemKind { try await ann.lock(sid: sid, shares: 2) } == .noFreeShare)
            let anns = try await ann.lock(sid: sid, shares: 1)
            #expect(anns.amountCents == 300 && anns.shareNumbers == [3])
            // Every share is held: the next payer is told no share is free.
            #expect(await problemKind { try await cat.lock(sid: sid, shares: 1) } == .noFreeShare)
            let resolved = try await cat.resolve(eid: split.eid)
            #expect(resolved.shares == 3 && resolved.sharesPaid == 0 && resolved.remainingCents == 900)
            for client in [ann, bob, cat] { #expect(try await client.wallet().availableCents == 1_000) }
            try await Self.verified(ledger)
        }
    }

    @Test(
        "Send: a tip negative, above the amount, \"5\" or 2.5 → 400 and nothing moved; the same key then pays with a good tip",
        arguments: StoreKind.available
    )
    func tips(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 10_000)
            let split = try await payee.createSession(amountCents: 1_001, shares: 4)
            let single = try await payee.createSession(amountCents: 400)
            _ = try await payer.lock(sid: split.sid, shares: 2)
            try await payer.lock(sid: single.sid)
            let auth = ["Authorization": "Bearer \(payer.token!)"]
            var paid: (payer: Cents, payee: Cents) = (10_000, 0)
            for (sid, amount) in [(split.sid, Cents(501)), (single.sid, Cents(400))] {
                let cases: [(String, ProblemKind, String)] = [
                    ("-1", .invalidTip, "cannot be negative"),
                    ("\(amount + 1)", .invalidTip, "at most the \(amount) cents"),
                    (#""5""#, .badRequest, "tip_cents"),
                    ("2.5", .badRequest, "tip_cents"),
                    ("92233720368547758070", .badRequest, "tip_cents"),
                ]
                for (tip, kind, message) in cases {
                    let response = try await ledger.raw(
                        "POST",
                        "/wallet/send",
                        body: #"{"sid":"\#(sid)","tip_cents":\#(tip)}"#,
                        headers: auth.merging(["Idempotency-Key": "pay-\(sid)"]) { $1 }
                    )
                    let problem = Self.problem(response)
                    #expect(response.status == 400 && problem?.kind == kind, "\(tip): \(String(describing: problem))")
                    #expect(problem?.detail?.contains(message) == true, "\(tip): \(problem?.detail ?? "")")
                }
                #expect(try await payer.wallet().availableCents == paid.payer)
                #expect(try await payee.wallet().availableCents == paid.payee)
                // The refusals kept nothing under the key: it pays now, with a tip of all it may be.
                let sent = try await payer.send(sid: sid, idempotencyKey: "pay-\(sid)", tipCents: amount)
                #expect(!sent.replayed)
                #expect(sent.balance.receipt?.tipCents == amount && sent.balance.receipt?.amountCents == amount)
                #expect((sent.balance.paymentID != nil) == (sid == split.sid))
                paid = (paid.payer - 2 * amount, paid.payee + 2 * amount)
                #expect(sent.balance.newBalanceCents == paid.payer)
            }
            #expect(try await payer.wallet().availableCents == 10_000 - 2 * 501 - 2 * 400)
            let view = try await payee.session(sid: split.sid)
            #expect(view.status == .partiallyPaid && view.sharesPaid == 2 && view.paidCents == 501)
            #expect(view.tipCents == 501 && view.payments.count == 1)
            try await Self.verified(ledger)
        }
    }

    @Test(
        "Refund of a split: without payment_id → 400 listing the payments; malformed → 400; unknown → 404; too much → 409",
        arguments: StoreKind.available
    )
    func refunds(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let ann = try await ledger.client("ann@example.com", funded: 1_000)
            let bob = try await ledger.client("bob@example.com", funded: 1_000)
            let split = try await payee.createSession(amountCents: 600, shares: 2)
            var paymentIDs: [String] = []
            for (index, payer) in [ann, bob].enumerated() {
                _ = try await payer.lock(sid: split.sid, shares: 1)
                let sent = try await payer.send(sid: split.sid, idempotencyKey: "k", tipCents: Cents(10 * (index + 1)))
                paymentIDs.append(try #require(sent.balance.paymentID))
            }
            let single = try await payee.createSession(amountCents: 100)
            try await ann.lock(sid: single.sid)
            _ = try await ann.send(sid: single.sid, idempotencyKey: "single")
            #expect(try await payee.session(sid: split.sid).status == .paid)

            let auth = ["Authorization": "Bearer \(payee.token!)", "Idempotency-Key": "refund"]
            let path = "/sessions/\(split.sid)/refunds"
            let missing = try await ledger.raw("POST", path, body: #"{"amount_cents":100}"#, headers: auth)
            let listed = Self.problem(missing)
            #expect(missing.status == 400 && listed?.kind == .badRequest, "\(String(describing: listed))")
            for id in paymentIDs { #expect(listed?.detail?.contains(id) == true, "\(listed?.detail ?? "")") }
            for malformed in [#""x""#, "123", #""\#(paymentIDs[0])x""#, "[]"] {
                let response = try await ledger.raw(
                    "POST",
                    path,
                    body: #"{"amount_cents":100,"payment_id":\#(malformed)}"#,
                    headers: auth
                )
                let problem = Self.problem(response)
                #expect(
                    response.status == 400 && problem?.kind == .badRequest,
                    "\(malformed): \(String(describing: problem))"
                )
                #expect(problem?.detail?.contains("payment_id") == true, "\(malformed): \(problem?.detail ?? "")")
            }
            let unknown = try await ledger.raw(
                "POST",
                path,
                body: #"{"amount_cents":100,"payment_id":"\#(UUID().uuidString.lowercased())"}"#,
                headers: auth
            )
            #expect(unknown.status == 404 && Self.problem(unknown)?.kind == .notFound)
            // A payment of a session that is not split names nothing there.
            let notSplit = try await ledger.raw(
                "POST",
                "/sessions/\(single.sid)/refunds",
                body: #"{"amount_cents":10,"payment_id":"\#(paymentIDs[0])"}"#,
                headers: auth
            )
            #expect(notSplit.status == 400 && Self.problem(notSplit)?.kind == .badRequest)
            // Ann paid 300 and a tip of 10: 311 is too much, 310 is all of it.
            #expect(
                await problemKind {
                    try await payee.refund(
                        sid: split.sid,
                        amountCents: 311,
                        paymentID: paymentIDs[0],
                        idempotencyKey: "r"
                    )
                } == .refundExceedsPayment
            )
            #expect(try await ann.wallet().availableCents == 1_000 - 310 - 100)
            #expect(try await bob.wallet().availableCents == 1_000 - 320)
            let refunded = try await payee.refund(
                sid: split.sid,
                amountCents: 310,
                paymentID: paymentIDs[0],
                idempotencyKey: "r"
            )
            #expect(!refunded.replayed && refunded.refund.refundedCents == 310)
            #expect(try await ann.wallet().availableCents == 1_000 - 100)
            #expect(try await bob.wallet().availableCents == 1_000 - 320)
            let view = try await payee.session(sid: split.sid)
            #expect(view.refundedCents == 310)
            #expect(view.payments.map(\.refundedCents) == [310, 0])
            try await Self.verified(ledger)
        }
    }
}
