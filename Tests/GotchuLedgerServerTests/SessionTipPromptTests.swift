import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuReceipts
import Testing

/// The tips a terminal asks for: kept with the session on create, answered by create, resolve and status, refused
/// with nothing written when malformed, and shown as buttons on the web checkout only for a session that asks.
@Suite("Tip prompts: the terminal asks for tips per session", .timeLimit(.minutes(10)))
struct SessionTipPromptTests {
    /// The keys of a JSON object answer.
    static func keys(_ data: Data) throws -> Set<String> {
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return Set(object.keys)
    }

    @Test(
        "Create keeps the tips; create, resolve and status answer them, and say nothing of a session without",
        arguments: StoreKind.available
    )
    func roundTrip(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 10_000)
            let asking = try await payee.createSession(amountCents: 4001, shares: 4, tipPercents: [20, 10, 15])
            #expect(asking.tipPercents == [20, 10, 15])
            let resolved = try await payer.resolve(eid: asking.eid)
            #expect(resolved.tipPercents == [20, 10, 15])
            #expect(resolved.shareCents == 1001)
            #expect(try await payee.session(sid: asking.sid).tipPercents == [20, 10, 15])

            let plain = try await payee.createSession(amountCents: 500)
            #expect(plain.tipPercents == nil)
            #expect(try await payer.resolve(eid: plain.eid).tipPercents == nil)
            #expect(try await payee.session(sid: plain.sid).tipPercents == nil)
            let empty = try await payee.createSession(amountCents: 500, tipPercents: [])
            #expect(empty.tipPercents == nil)

            // On the wire: present when asked, absent (not null, not []) otherwise.
            let auth = ["Authorization": "Bearer \(payee.token!)"]
            for (body, expected) in [
                (#"{"amount_cents":700,"tip_percents":[100,1]}"#, true),
                (#"{"amount_cents":700,"tip_percents":null}"#, false),
                (#"{"amount_cents":700}"#, false),
            ] {
                let created = try await ledger.raw("POST", "/sessions/create", body: body, headers: auth)
                #expect(created.status == 200, "\(body)")
                #expect(try Self.keys(created.body).contains("tip_percents") == expected, "\(body)")
                let sid = try APIJSON.decoder().decode(CreateSessionResponse.self, from: created.body).sid
                let status = try await ledger.raw("GET", "/sessions/\(sid)", headers: auth)
                #expect(try Self.keys(status.body).contains("tip_percents") == expected, "\(body)")
            }

            // A suggestion, not a rule: the payer tips what it likes, within the ledger's bounds.
            _ = try await payer.lock(sid: asking.sid, shares: 1)
            let paid = try await payer.send(sid: asking.sid, idempotencyKey: "tip-7", tipCents: 7)
            #expect(paid.receipt?.tipCents == 7)
        }
    }

    @Test(
        "A create retried under its key answers the first session's tips; other tips under that key are refused",
        arguments: StoreKind.available
    )
    func replay(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let first = try await payee.createSession(amountCents: 900, tipPercents: [15], idempotencyKey: "order-1")
            let again = try await payee.createSession(amountCents: 900, tipPercents: [15], idempotencyKey: "order-1")
            #expect(again.sid == first.sid && again.tipPercents == [15])
            let before = try await SplitValidationTests.rows(ledger)
            for tips in [[], [15, 20], [10]] as [[Int]] {
                let refusal = await #expect(throws: LedgerClientError.self) {
                    try await payee.createSession(amountCents: 900, tipPercents: tips, idempotencyKey: "order-1")
                }
                #expect(refusal?.problemKind == .idempotencyKeyReused, "\(tips)")
            }
            #expect(try await SplitValidationTests.rows(ledger) == before)
        }
    }

    @Test(
        "Malformed tip_percents are refused 400 bad-request naming the field; nothing is written",
        arguments: StoreKind.available
    )
    func badInput(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let auth = ["Authorization": "Bearer \(payee.token!)"]
            let cases: [(String, String)] = [
                (#"[""]"#, "list of whole numbers"), (#"["10"]"#, "list of whole numbers"),
                (#""10,15,20""#, "list of whole numbers"), (#""""#, "list of whole numbers"),
                ("[10.5]", "list of whole numbers"), ("[15, 2.25]", "list of whole numbers"),
                ("10", "list of whole numbers"), ("true", "list of whole numbers"),
                (#"{"a":10}"#, "list of whole numbers"), ("[null]", "list of whole numbers"),
                ("[[10]]", "list of whole numbers"), ("[10, 10]", "10% is listed twice"),
                ("[1, 2, 3, 4, 5, 6]", "at most 5"), ("[0]", "from 1 to 100, got 0"),
                ("[101]", "got 101"), ("[-5]", "got -5"), ("[92233720368547758070]", "out of range"),
            ]
            let before = try await SplitValidationTests.rows(ledger)
            for (value, message) in cases {
                let body = #"{"amount_cents":1000,"tip_percents":"# + value + "}"
                for headers in [auth, auth.merging(["Idempotency-Key": "tips-\(value.hashValue)"]) { $1 }] {
                    let response = try await ledger.raw("POST", "/sessions/create", body: body, headers: headers)
                    let problem = SplitValidationTests.problem(response)
                    #expect(response.status == 400, "\(body)")
                    #expect(problem?.kind == .badRequest, "\(body): \(String(describing: problem))")
                    #expect(problem?.detail?.contains("tip_percents") == true, "\(body): \(problem?.detail ?? "")")
                    #expect(problem?.detail?.contains(message) == true, "\(body): \(problem?.detail ?? "")")
                }
            }
            #expect(try await SplitValidationTests.rows(ledger) == before)
            try await SplitValidationTests.verified(ledger)
        }
    }

    @Test(
        "The checkout shows a button per tip only for a session that asks, on the payer's share, and pays only those",
        arguments: StoreKind.available
    )
    func checkout(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await CheckoutPaymentTests.scene(
                ledger,
                cents: 4001,
                shares: 4,
                tips: try TipPrompt(percents: [20, 10])
            )
            let page = try await scene.browser.get(scene.page)
            #expect(page.element("tip-20") == "Pay $12.01 with a 20% tip")
            #expect(page.element("tip-10") == "Pay $11.01 with a 10% tip")
            #expect(page.element("tip-15") == nil)
            #expect(page.field("tips", in: "pay") == "20,10")
            // Only the tips the page offered: another percent, or another list of tips than the page's, pays nothing.
            let unknown = try await scene.browser.submit(page, to: "\(scene.page)/pay", extra: ["tip": "15"])
            #expect(unknown.status == 400 && unknown.body.contains("Unknown tip"))
            let forged = try await scene.browser.submit(
                page,
                to: "\(scene.page)/pay",
                extra: ["tip": "15", "tips": "20,10,15"]
            )
            #expect(forged.status == 403)
            #expect(try await ledger.balance(scene.payer) == 5000)
            let paid = try await scene.browser.submit(page, to: "\(scene.page)/pay", extra: ["tip": "20"])
            #expect(paid.status == 303)
            #expect(try await ledger.balance(scene.payer) == 5000 - 1201)

            // A session that asks for no tip: one Pay button, and a tip posted to it is refused.
            let plainPayee = try await ledger.user("plain@example.com")
            let plain = try await ledger.store.createSession(
                payeeID: plainPayee.id,
                amountCents: 800,
                idempotencyKey: nil
            ).session
            let plainPage = try await scene.browser.get("/p/\(plain.eid.rawValue)")
            #expect(plainPage.element("pay-button") == "Pay $8.00")
            #expect(!plainPage.body.contains("id=\"tip-") && !plainPage.body.contains("name=\"tips\""))
            let tipped = try await scene.browser.submit(
                plainPage,
                to: "/p/\(plain.eid.rawValue)/pay",
                extra: ["tip": "10"]
            )
            #expect(tipped.status == 400)
            let smuggled = try await scene.browser.submit(
                plainPage,
                to: "/p/\(plain.eid.rawValue)/pay",
                extra: ["tip": "10", "tips": "10"]
            )
            #expect(smuggled.status == 403)
            #expect(try await ledger.balance(scene.payer) == 5000 - 1201)
        }
    }
}
