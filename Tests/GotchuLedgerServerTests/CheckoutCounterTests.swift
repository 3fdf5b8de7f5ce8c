import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuReceipts
import GotchuTesting
import Testing

/// What a shop and its customers do at the counter: the page's Pay pays exactly what the page showed, in one step,
/// whatever locks the payer holds or other payers take meanwhile; a payer is told of the shares it paid before; a
/// lock ends on time however often it is taken again; and forms from other sites are refused without
/// `Sec-Fetch-Site`.
@Suite("Web checkout at the counter", .timeLimit(.minutes(3)))
struct CheckoutCounterTests {
    @Test(
        "A payer holding locks on three shares pays exactly the one share the page showed, with its tip",
        arguments: StoreKind.available
    )
    func paysWhatThePageShowed(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await CheckoutPaymentTests.scene(
                ledger,
                cents: 1000,
                shares: 4,
                tips: try TipPrompt(percents: [10])
            )
            // Locked through the API (or gotchu pay) first.
            let locked = try await ledger.store.lock(sid: scene.session.sid, payerID: scene.payer.id, shares: 3)
            #expect(locked.shareNumbers == [1, 2, 3])
            let page = try await scene.browser.get(scene.page)
            #expect(page.element("amount") == "$2.50")
            #expect(page.element("tip-10") == "Pay $2.75 with a 10% tip")
            let paid = try await scene.browser.submit(page, to: "\(scene.page)/pay", extra: ["tip": "10"])
            #expect(paid.status == 303)
            #expect(try await ledger.balance(scene.payer) == 5000 - 275)
            #expect(try await ledger.balance(scene.payee) == 275)
            let view = try await ledger.store.session(sid: scene.session.sid, viewerID: scene.payee.id)
            #expect(view.sharesPaid == 1)
            #expect(view.payments.map(\.shareNumbers) == [[1]])
            #expect(view.payments.first?.receipt?.amountCents == 250)
            #expect(view.payments.first?.receipt?.tipCents == 25)
            #expect(try await ledger.store.audit().isHealthy)
        }
    }

    @Test(
        "Ten phones tap Pay at once on an uneven split: no one is told the shares are taken, and every share is paid",
        arguments: StoreKind.available
    )
    func unevenSplitAtOnce(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let payee = try await ledger.user("shop@example.com", name: "Corner Shop")
            let (session, _) = try await ledger.store.createSession(
                payeeID: payee.id,
                amountCents: 1003,
                shares: 4,
                idempotencyKey: nil
            )
            let path = "/p/\(session.eid.rawValue)"
            var phones: [CheckoutBrowser] = []
            var payers: [LedgerUser] = []
            for index in 0..<10 {
                payers.append(try await ledger.user("phone\(index)@example.com", funded: 2000))
                phones.append(try await ledger.signedIn("phone\(index)@example.com"))
            }
            var pages: [CheckoutAnswer] = []
            for phone in phones { pages.append(try await phone.get(path)) }
            #expect(pages.allSatisfy { $0.element("amount") == "$2.51" })
            // Every phone taps at once.
            let answers = try await Self.tapAll(phones, pages, path)
            #expect(answers.filter { $0.status == 303 }.count == 3)
            // The others are shown the share that is left, at its own amount, and nothing was held for them.
            let retries = answers.filter { $0.status != 303 }
            #expect(retries.count == 7)
            for answer in retries {
                #expect(answer.status == 409)
                #expect(answer.element("problem")?.contains("The share left costs $2.50") == true)
                #expect(answer.element("pay-button") == "Pay $2.50")
                #expect(!answer.body.contains("Every share is taken"))
            }
            // They tap again on what they were shown: one of them pays the last share.
            let waiting = answers.indices.filter { answers[$0].status != 303 }
            let again = try await Self.tapAll(waiting.map { phones[$0] }, waiting.map { answers[$0] }, path)
            #expect(again.filter { $0.status == 303 }.count == 1)
            #expect(again.filter { $0.status != 303 }.allSatisfy { $0.element("outcome") == "Already paid" })
            let view = try await ledger.store.session(sid: session.sid, viewerID: payee.id)
            #expect(view.status == .paid)
            #expect(view.payments.map(\.amount).sorted() == [250, 251, 251, 251])
            var spent: Cents = 0
            for payer in payers { spent += 2000 - (try await ledger.balance(payer)) }
            #expect(spent == 1003)
            #expect(try await ledger.balance(payee) == 1003)
            #expect(try await ledger.store.audit().isHealthy)
        }
    }

    /// Each phone posts its page's pay form, all at once; their answers in the phones' order.
    static func tapAll(
        _ phones: [CheckoutBrowser],
        _ pages: [CheckoutAnswer],
        _ path: String
    ) async throws
        -> [CheckoutAnswer]
    {
        try await withThrowingTaskGroup(of: (Int, CheckoutAnswer).self) { group in
            for (index, phone) in phones.enumerated() {
                let page = pages[index]
                group.addTask { (index, try await phone.submit(page, to: "\(path)/pay")) }
            }
            var answers = [CheckoutAnswer?](repeating: nil, count: phones.count)
            for try await (index, answer) in group { answers[index] = answer }
            return answers.compactMap { $0 }
        }
    }

    @Test(
        "A payer who paid a share is shown it with its receipt, and pays another only when it confirms",
        arguments: StoreKind.available
    )
    func paidBefore(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await CheckoutPaymentTests.scene(ledger, cents: 4000, shares: 4)
            // Two tabs open on the payment; the first pays.
            let first = try await scene.browser.get(scene.page)
            let second = try await scene.browser.get(scene.page)
            let paid = try await scene.browser.submit(first, to: "\(scene.page)/pay")
            #expect(paid.status == 303)
            let receipt = try #require(paid.headers["location"])
            #expect(try await ledger.balance(scene.payer) == 4000)
            // The other tab's Pay pays nothing: it asked for a first share, and the payer has one.
            let stale = try await scene.browser.submit(second, to: "\(scene.page)/pay")
            #expect(stale.status == 409)
            #expect(stale.element("problem") == "You paid a share of this charge already. Nothing more was paid.")
            #expect(try await ledger.balance(scene.payer) == 4000)
            // A reload shows what was paid, linked to its receipt, and asks for one more share.
            let reload = try await scene.browser.get(scene.page)
            #expect(reload.status == 200)
            #expect(reload.element("paid-before")?.contains("You paid $10.00 for this charge already") == true)
            #expect(
                reload.body.contains("href=\"\(scene.eid)/\(receipt.replacingOccurrences(of: "&", with: "&amp;"))\"")
            )
            #expect(reload.element("pay-button") == "Pay one more share: $10.00")
            // The confirmation is under the form's tag: dropping it is a forged form.
            var form: [String: String] = [:]
            for name in ["view", "sid", "amount", "csrf"] { form[name] = reload.field(name, in: "pay") }
            #expect(try await scene.browser.post("\(scene.page)/pay", form).status == 403)
            let more = try await scene.browser.submit(reload, to: "\(scene.page)/pay")
            #expect(more.status == 303)
            #expect(more.headers["location"] != receipt)
            #expect(try await ledger.balance(scene.payer) == 3000)
            let view = try await ledger.store.session(sid: scene.session.sid, viewerID: scene.payer.id)
            #expect(view.payments.count == 2)
        }
    }

    @Test(
        "Locking again does not renew a lock: it ends on time, for a session and for shares",
        arguments: StoreKind.available
    )
    func locksEndOnTime(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let payee = try await ledger.user("shop@example.com")
            let squatter = try await ledger.user("squatter@example.com", funded: 10_000)
            let other = try await ledger.user("other@example.com", funded: 10_000)
            let whole = try await ledger.store.createSession(payeeID: payee.id, amountCents: 500, idempotencyKey: nil)
            let split = try await ledger.store.createSession(
                payeeID: payee.id,
                amountCents: 500,
                shares: 2,
                idempotencyKey: nil
            )
            let lifetime = ledger.store.policy.lockLifetime.components.seconds
            try await ledger.store.lock(sid: whole.session.sid, payerID: squatter.id)
            _ = try await ledger.store.lock(sid: split.session.sid, payerID: squatter.id, shares: 2)
            // The squatter locks again and again, just before each lock would end.
            for _ in 0..<3 {
                ledger.clock.advance(seconds: Double(lifetime) / 4)
                try await ledger.store.lock(sid: whole.session.sid, payerID: squatter.id)
                _ = try await ledger.store.lock(sid: split.session.sid, payerID: squatter.id, shares: 2)
                await #expect(throws: LedgerError.self) {
                    try await ledger.store.lock(sid: whole.session.sid, payerID: other.id)
                }
            }
            // Its first lock's lifetime is over: the sessions are free for others.
            ledger.clock.advance(seconds: Double(lifetime) / 4 + 0.001)
            try await ledger.store.lock(sid: whole.session.sid, payerID: other.id)
            let shares = try await ledger.store.lock(sid: split.session.sid, payerID: other.id, shares: 2)
            #expect(shares.shareNumbers == [1, 2])
        }
    }

    @Test("Without Sec-Fetch-Site, a sign-in or payment form is refused when Origin or Referer names another site")
    func originWithoutFetchMetadata() async throws {
        try await CheckoutLedger.with { ledger in
            let scene = try await CheckoutPaymentTests.scene(ledger)
            let signIn = "/p/\(scene.eid)/sign-in"
            let form = ["email": "payer@example.com", "password": CheckoutLedger.password]
            let own = "http://127.0.0.1:\(ledger.port)"
            for headers in [
                ["Origin": "https://evil.example"], ["Origin": "null"], ["Referer": "https://evil.example/login"],
                ["Origin": "http://127.0.0.1:\(ledger.port + 1)"],
            ] {
                let answer = try await ledger.browser().post(signIn, form, headers: headers)
                #expect(answer.status == 403, "\(headers)")
                #expect(answer.headers["set-cookie"] == nil)
            }
            #expect(try await ledger.browser().post(signIn, form, headers: ["Origin": own]).status == 303)
            #expect(try await ledger.browser().post(signIn, form, headers: ["Referer": own + "/p/x"]).status == 303)
            // The pay form as well.
            let page = try await scene.browser.get(scene.page)
            var pay: [String: String] = [:]
            for name in ["view", "sid", "amount", "csrf"] { pay[name] = page.field(name, in: "pay") }
            let forged = try await scene.browser.post(
                "\(scene.page)/pay",
                pay,
                headers: ["Origin": "https://evil.example"]
            )
            #expect(forged.status == 403)
            #expect(try await ledger.balance(scene.payer) == 5000)
            #expect(try await scene.browser.post("\(scene.page)/pay", pay, headers: ["Origin": own]).status == 303)
        }
    }

    @Test(
        "A session's checkout link lasts the charge: opened, then signed in and paid after two EID rotations",
        arguments: StoreKind.available
    )
    func linkLastsTheCharge(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store, publicURL: try PublicURL("https://pay.example.com/")) { ledger in
            var terminal = LedgerClient(baseURL: ledger.url)
            terminal.token = try await terminal.devLogin(email: "shop@example.com").token
            let created = try await terminal.createSession(amountCents: 1250)
            let url = try #require(created.checkoutURL)
            let link = String(url.dropFirst("https://pay.example.com/".count))
            #expect(CheckoutLink(rawValue: String(link.dropFirst(2))) != nil, "\(link)")
            _ = try await ledger.user("payer@example.com", funded: 5000)
            let phone = ledger.browser()
            #expect(try await phone.get("/\(link)").status == 200)
            // The terminal rotates its EID twice while the shopper signs in, each old EID long retired.
            for _ in 0..<2 {
                _ = try await terminal.rotateEID(sid: created.sid)
                ledger.clock.advance(seconds: 60)
            }
            let signIn = try await phone.post(
                "/\(link)/sign-in",
                ["email": "payer@example.com", "password": CheckoutLedger.password]
            )
            #expect(signIn.status == 303)
            #expect(signIn.headers["location"] == "../" + link.dropFirst(2))
            let page = try await phone.get("/\(link)")
            #expect(page.status == 200)
            #expect(page.element("amount") == "$12.50")
            #expect(page.body.contains("action=\"\(link.dropFirst(2))/pay\""))
            let paid = try await phone.submit(page, to: "/\(link)/pay")
            #expect(paid.status == 303)
            let receipt = try await phone.get("/\(link)/" + (paid.headers["location"] ?? ""))
            #expect(receipt.element("outcome") == "Paid")
            // The first EID's address, by contrast, was replaced long ago.
            let old = try await phone.get("/p/\(created.eid.rawValue)")
            #expect(old.status == 303 || old.element("outcome") == "This QR code was replaced", "\(old.status)")
            // A link no session has is an unknown payment code.
            #expect(try await phone.get("/p/AAAAAAAAAAAAAAAAAAAAAA").status == 404)
        }
    }

    @Test("The receipt page shows refunds as the ledger records them, the time paid, and folds the signed receipt away")
    func receiptShowsRefunds() async throws {
        try await CheckoutLedger.with { ledger in
            let scene = try await CheckoutPaymentTests.scene(ledger)
            let page = try await scene.browser.get(scene.page)
            let paid = try await scene.browser.submit(page, to: "\(scene.page)/pay")
            let location = "\(scene.page)/" + (paid.headers["location"] ?? "")
            let before = try await scene.browser.get(location)
            #expect(before.element("outcome") == "Paid" && before.element("refunded") == nil)
            #expect(before.body.contains("<time datetime=\""))
            #expect(before.body.contains("<details id=\"receipt-details\"><summary>Signed receipt</summary>"))
            // Its download is the signed receipt as the ledger wrote it, which verifies.
            let link = try #require(before.body.range(of: "<a id=\"download\" href=\"")).upperBound
            let href = CheckoutAnswer.unescape(String(before.body[link...].prefix { $0 != "\"" }))
            let file = try await scene.browser.get("\(scene.page)/" + href)
            #expect(file.status == 200 && file.headers["content-type"] == "application/json")
            #expect(file.headers["content-disposition"]?.hasPrefix("attachment; filename=\"gotchu-receipt-") == true)
            let saved = try Receipt(savedJSON: Array(file.body.utf8))
            try saved.verify(against: try await ledger.store.receiptKeys())
            #expect(saved.sessionID == scene.session.sid && saved.amountCents == 1250)
            // Nobody else's browser gets it.
            _ = try await ledger.user("other@example.com")
            let other = try await ledger.signedIn("other@example.com")
            #expect(try await other.get("\(scene.page)/" + href).status == 404)
            _ = try await ledger.store.refund(
                sid: scene.session.sid,
                payeeID: scene.payee.id,
                amountCents: 500,
                idempotencyKey: "r1"
            )
            let partly = try await scene.browser.get(location)
            #expect(partly.element("outcome") == "Paid")
            #expect(partly.element("refunded") == "$5.00 of it was refunded to your wallet.")
            _ = try await ledger.store.refund(
                sid: scene.session.sid,
                payeeID: scene.payee.id,
                amountCents: 750,
                idempotencyKey: "r2"
            )
            let whole = try await scene.browser.get(location)
            #expect(whole.element("outcome") == "Refunded")
            #expect(whole.element("refunded") == "You paid $12.50; all of it was refunded to your wallet.")
            #expect(whole.element("balance") == "Your balance: $50.00")
        }
    }

    @Test("Behind an https public URL: HSTS, no framing, and the receipt's verify line names the public URL")
    func publicURLPages() async throws {
        let publicURL = try PublicURL("https://pay.example.com/ledger/")
        try await CheckoutLedger.with(publicURL: publicURL) { ledger in
            let scene = try await CheckoutPaymentTests.scene(ledger)
            let page = try await scene.browser.get(scene.page)
            #expect(page.headers["strict-transport-security"] == "max-age=31536000")
            #expect(page.headers["x-frame-options"] == "DENY")
            let paid = try await scene.browser.submit(page, to: "\(scene.page)/pay")
            let receipt = try await scene.browser.get("\(scene.page)/" + (paid.headers["location"] ?? ""))
            #expect(
                receipt.element("verify")?.contains("--server https://pay.example.com/ledger, or check") == true,
                "\(receipt.element("verify") ?? "no verify line")"
            )
            // The public URL's origin is the page's own, for a browser that sends only Origin.
            let signIn = try await ledger.browser().post(
                "/p/\(scene.eid)/sign-in",
                ["email": "payer@example.com", "password": CheckoutLedger.password],
                headers: ["Origin": "https://pay.example.com"]
            )
            #expect(signIn.status == 303)
        }
        try await CheckoutLedger.with { ledger in
            let page = try await ledger.browser().get("/p/0000000000")
            #expect(page.headers["strict-transport-security"] == nil)
            #expect(page.headers["x-frame-options"] == "DENY")
        }
    }
}
