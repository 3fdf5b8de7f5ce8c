import Foundation
import GotchuCore
import GotchuLedgerServer
import GotchuReceipts
import GotchuTesting
import Testing

/// Paying on the web checkout: the page, the pay form, its one payment per page view, the receipt, and every way it
/// can end, each against the ledger's own records.
@Suite("Web checkout payments", .timeLimit(.minutes(10)))
struct CheckoutPaymentTests {
    /// A payee, a funded payer signed in, and a session of `cents` (in `shares`).
    struct Scene: Sendable {
        var payee: LedgerUser
        var payer: LedgerUser
        var session: NewSession
        var browser: CheckoutBrowser
        var eid: String { session.eid.rawValue }
        var page: String { "/p/\(session.eid.rawValue)" }
    }

    static func scene(
        _ ledger: CheckoutLedger,
        cents: Cents = 1250,
        shares: Int = 1,
        funded: Cents = 5000,
        payeeName: String = "Corner Shop",
        tips: TipPrompt = .none,
        reference: String? = nil
    ) async throws -> Scene {
        let payee = try await ledger.user("shop@example.com", name: payeeName)
        let payer = try await ledger.user("payer@example.com", funded: funded)
        let (session, _) = try await ledger.store.createSession(
            payeeID: payee.id,
            amountCents: cents,
            shares: shares,
            tipPrompt: tips,
            reference: reference,
            idempotencyKey: nil
        )
        return Scene(
            payee: payee,
            payer: payer,
            session: session,
            browser: try await ledger.signedIn("payer@example.com")
        )
    }

    @Test(
        "The page shows payee, amount, code and time left; Pay moves the money once and shows a receipt that verifies",
        arguments: StoreKind.available
    )
    func pays(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await Self.scene(ledger)
            try await ledger.store.verifyMerchant(email: "shop@example.com", name: "Corner Shop", actor: "test")
            let page = try await scene.browser.get(scene.page)
            #expect(page.status == 200)
            #expect(page.headers["content-type"] == "text/html; charset=utf-8")
            #expect(page.element("payee") == "Pay \"Corner Shop\"")
            #expect(page.element("verification")?.contains("Verified merchant · example.com") == true)
            #expect(page.element("amount") == "$12.50")
            #expect(page.element("code") == ConfirmationCode.of(sessionID: scene.session.sid))
            #expect(page.element("time-left") == "5:00")
            #expect(page.element("pay-button") == "Pay $12.50")
            #expect(page.body.contains("<form id=\"pay\" method=\"post\" action=\"\(scene.eid)/pay\">"))
            #expect(page.body.contains("<html lang=\"en\">"))
            let paid = try await scene.browser.submit(page, to: "\(scene.page)/pay")
            #expect(paid.status == 303)
            let location = try #require(paid.headers["location"])
            #expect(location == "receipt?sid=\(scene.session.sid)")
            let receiptPage = try await scene.browser.get("\(scene.page)/\(location)")
            #expect(receiptPage.status == 200)
            #expect(receiptPage.element("outcome") == "Paid")
            #expect(receiptPage.element("amount") == "$12.50")
            #expect(receiptPage.element("balance") == "Your balance: $37.50")
            #expect(receiptPage.body.contains("to &quot;Corner Shop&quot;"))
            #expect(
                receiptPage.element("verify")?.contains("gotchu receipt verify receipt.json --server http://127.0.0.1:")
                    == true
            )
            // The receipt's text is the ledger's own, and verifies against its published keys.
            let text = try #require(receiptPage.element("receipt-json"))
            let receipt = try Receipt(strictJSON: Array(text.utf8))
            try receipt.verify(against: try await ledger.store.receiptKeys())
            #expect(receipt.sessionID == scene.session.sid)
            #expect(receipt.amountCents == 1250)
            #expect(receipt.payerReference == Receipt.payerReference(receiptID: receipt.id, payerID: scene.payer.id))
            #expect(try await ledger.balance(scene.payer) == 3750)
            #expect(try await ledger.balance(scene.payee) == 1250)
            #expect(try await ledger.store.audit().isHealthy)
            // Opening the page again leads to the payer's own receipt, not to "already paid".
            let again = try await scene.browser.get(scene.page)
            #expect(again.status == 303)
            #expect(again.headers["location"] == "\(scene.eid)/receipt?sid=\(scene.session.sid)")
        }
    }

    @Test("Taps on one page view, at once and again later, pay once", arguments: StoreKind.available)
    func onePaymentPerPageView(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await Self.scene(ledger)
            let page = try await scene.browser.get(scene.page)
            let twin = ledger.browser()
            twin.cookie = scene.browser.cookie
            async let first = scene.browser.submit(page, to: "\(scene.page)/pay")
            async let second = twin.submit(page, to: "\(scene.page)/pay")
            let answers = try await [first, second]
            // A reload of the POST, after both.
            let third = try await scene.browser.submit(page, to: "\(scene.page)/pay")
            for answer in answers + [third] {
                #expect(answer.status == 303)
                #expect(answer.headers["location"] == "receipt?sid=\(scene.session.sid)")
            }
            #expect(try await ledger.balance(scene.payer) == 3750)
            #expect(try await ledger.balance(scene.payee) == 1250)
            let audit = try await ledger.store.audit()
            #expect(audit.isHealthy && audit.sessionsPaidTwice.isEmpty)
        }
    }

    @Test("Taps on one page view of a split pay one share once", arguments: StoreKind.available)
    func oneSharePerPageView(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await Self.scene(ledger, cents: 4000, shares: 4)
            let page = try await scene.browser.get(scene.page)
            let twin = ledger.browser()
            twin.cookie = scene.browser.cookie
            async let first = scene.browser.submit(page, to: "\(scene.page)/pay")
            async let second = twin.submit(page, to: "\(scene.page)/pay")
            let answers = try await [first, second]
            let third = try await scene.browser.submit(page, to: "\(scene.page)/pay")
            let location = try #require(answers[0].headers["location"])
            #expect(location.hasPrefix("receipt?sid=\(scene.session.sid)&payment="))
            for answer in answers + [third] {
                #expect(answer.status == 303)
                #expect(answer.headers["location"] == location)
            }
            #expect(try await ledger.balance(scene.payer) == 4000)
            let view = try await ledger.store.session(sid: scene.session.sid, viewerID: scene.payee.id)
            #expect(view.sharesPaid == 1)
            // No lock of the payer's is left behind: another payer takes the next share at once.
            let other = try await ledger.user("other@example.com", funded: 5000)
            let locked = try await ledger.store.lock(sid: scene.session.sid, payerID: other.id, shares: 3)
            #expect(locked.shareNumbers == [2, 3, 4])
        }
    }

    @Test(
        "A split shows the payer's share and the progress; tips are offered as the session suggests and paid on top",
        arguments: StoreKind.available
    )
    func splitWithTips(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await Self.scene(
                ledger,
                cents: 4001,
                shares: 4,
                tips: try TipPrompt(percents: [10, 15, 20])
            )
            let page = try await scene.browser.get(scene.page)
            #expect(page.element("amount") == "$10.01")
            #expect(page.element("share") == "Your share of $40.01")
            #expect(page.element("progress") == "0 of 4 paid")
            #expect(page.element("pay-button") == "Pay $10.01")
            #expect(page.element("tip-10") == "Pay $11.01 with a 10% tip")
            #expect(page.element("tip-15") == "Pay $11.51 with a 15% tip")
            #expect(page.element("tip-20") == "Pay $12.01 with a 20% tip")
            let unknownTip = try await scene.browser.submit(page, to: "\(scene.page)/pay", extra: ["tip": "7"])
            #expect(unknownTip.status == 400)
            let paid = try await scene.browser.submit(page, to: "\(scene.page)/pay", extra: ["tip": "15"])
            #expect(paid.status == 303)
            let receiptPage = try await scene.browser.get("\(scene.page)/" + (paid.headers["location"] ?? ""))
            #expect(receiptPage.element("amount") == "$11.51")
            #expect(receiptPage.element("tip") == "$10.01 and a $1.50 tip")
            #expect(receiptPage.element("another") == "Pay another share")
            let receipt = try Receipt(strictJSON: Array(try #require(receiptPage.element("receipt-json")).utf8))
            #expect(receipt.tipCents == 150 && receipt.shareNumbers == [1] && receipt.shares == 4)
            #expect(try await ledger.balance(scene.payer) == 5000 - 1151)
            #expect(try await ledger.balance(scene.payee) == 1151)
            // The next payer sees one share paid and pays the next share's amount.
            _ = try await ledger.user("friend@example.com", funded: 5000)
            let friend = try await ledger.signedIn("friend@example.com")
            let next = try await friend.get(scene.page)
            #expect(next.element("progress") == "1 of 4 paid")
            #expect(next.element("amount") == "$10.00")
        }
    }

    @Test(
        "A form without its tag, with another's, or from another site is refused 403 and pays nothing",
        arguments: StoreKind.available
    )
    func forgedForms(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await Self.scene(ledger)
            let page = try await scene.browser.get(scene.page)
            let action = "\(scene.page)/pay"
            var forms: [[String: String]] = []
            var form: [String: String] = [:]
            for name in ["view", "sid", "amount", "csrf"] { form[name] = page.field(name, in: "pay") }
            forms.append(form.filter { $0.key != "csrf" })
            forms.append(form.merging(["csrf": "x"]) { $1 })
            // The tag binds the amount and the page view: neither can be changed.
            forms.append(form.merging(["amount": "1"]) { $1 })
            forms.append(form.merging(["view": "AAAAAAAAAAAAAAAAAAAAAA"]) { $1 })
            for forged in forms {
                let answer = try await scene.browser.post(action, forged)
                #expect(answer.status == 403)
                #expect(answer.element("outcome") == "This form has expired")
            }
            // Another browser of the same payer cannot use this page's tag.
            let other = try await ledger.signedIn("payer@example.com")
            #expect(try await other.post(action, form).status == 403)
            // A browser that says another site sent the form.
            let crossSite = try await scene.browser.post(action, form, headers: ["Sec-Fetch-Site": "cross-site"])
            #expect(crossSite.status == 403)
            #expect(try await ledger.balance(scene.payer) == 5000)
            // Nothing was locked either: another payer locks at once.
            let stranger = try await ledger.user("stranger@example.com", funded: 5000)
            try await ledger.store.lock(sid: scene.session.sid, payerID: stranger.id)
            // And the real form still pays... once the stranger's lock is gone.
            try await ledger.store.unlock(sid: scene.session.sid, payerID: stranger.id)
            #expect(try await scene.browser.post(action, form).status == 303)
        }
    }

    @Test("Every way a payment can end is its own page with its own status", arguments: StoreKind.available)
    func outcomes(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await Self.scene(ledger)
            let store = ledger.store
            func create(_ cents: Cents = 1250) async throws -> NewSession {
                try await store.createSession(payeeID: scene.payee.id, amountCents: cents, idempotencyKey: nil).session
            }
            func expectPage(
                _ answer: CheckoutAnswer,
                _ status: Int,
                _ title: String,
                sourceLocation: SourceLocation = #_sourceLocation
            ) {
                #expect(answer.status == status, "\(answer.body)", sourceLocation: sourceLocation)
                #expect(answer.element("outcome") == title, sourceLocation: sourceLocation)
                #expect(answer.headers["content-type"] == "text/html; charset=utf-8", sourceLocation: sourceLocation)
            }
            let browser = scene.browser
            // Paid by someone else, between the page and the tap.
            let someone = try await ledger.user("someone@example.com", funded: 5000)
            let page = try await browser.get(scene.page)
            try await store.lock(sid: scene.session.sid, payerID: someone.id)
            _ = try await store.send(sid: scene.session.sid, payerID: someone.id, idempotencyKey: "k")
            expectPage(try await browser.submit(page, to: "\(scene.page)/pay"), 409, "Already paid")
            expectPage(try await browser.get(scene.page), 409, "Already paid")
            // Locked by another payer.
            let locked = try await create()
            let lockedPage = try await browser.get("/p/\(locked.eid)")
            try await store.lock(sid: locked.sid, payerID: someone.id)
            expectPage(try await browser.submit(lockedPage, to: "/p/\(locked.eid)/pay"), 409, "Someone else is paying")
            // Not enough funds.
            let dear = try await create(900_000)
            expectPage(
                try await browser.submit(try await browser.get("/p/\(dear.eid)"), to: "/p/\(dear.eid)/pay"),
                422,
                "Not enough funds"
            )
            // Cancelled: the page, and a form shown before.
            let cancelled = try await create()
            let cancelledPage = try await browser.get("/p/\(cancelled.eid)")
            try await store.cancel(sid: cancelled.sid, payeeID: scene.payee.id)
            expectPage(try await browser.submit(cancelledPage, to: "/p/\(cancelled.eid)/pay"), 410, "Cancelled")
            expectPage(try await browser.get("/p/\(cancelled.eid)"), 410, "Cancelled")
            // The payee's own charge.
            let own = try await ledger.signedIn("shop@example.com")
            let ownSession = try await create()
            expectPage(
                try await own.submit(try await own.get("/p/\(ownSession.eid)"), to: "/p/\(ownSession.eid)/pay"),
                403,
                "This is your own charge"
            )
            // A retired EID: within the grace it still resolves, then it asks for a new code.
            let rotated = try await create()
            _ = try await store.rotateEID(sid: rotated.sid, payeeID: scene.payee.id)
            #expect(try await browser.get("/p/\(rotated.eid)").status == 200)
            ledger.clock.advance(seconds: 11)
            let retired = try await browser.get("/p/\(rotated.eid)")
            expectPage(retired, 410, "This QR code was replaced")
            #expect(retired.element("message")?.contains("Scan the terminal's new QR code") == true)
            // Unknown and malformed EIDs.
            expectPage(try await browser.get("/p/0123456789"), 404, "Unknown QR code")
            expectPage(try await browser.get("/p/NOT-AN-EID"), 404, "Unknown QR code")
            // Expired, after the page was shown.
            let expiring = try await create()
            let expiringPage = try await browser.get("/p/\(expiring.eid)")
            ledger.clock.advance(seconds: 301)
            expectPage(try await browser.submit(expiringPage, to: "/p/\(expiring.eid)/pay"), 410, "Expired")
            expectPage(try await browser.get("/p/\(expiring.eid)"), 410, "Expired")
            // Nothing moved but the one payment by someone else.
            #expect(try await ledger.balance(scene.payer) == 5000)
            #expect(try await store.audit().isHealthy)
        }
    }

    @Test("Pages are rate-limited per client address like resolve: 429 with Retry-After, as a page")
    func rateLimited() async throws {
        var limits = LedgerLimits.unlimited
        limits.resolvePerAddress = RateLimit(perSecond: 0.001, burst: 3)
        try await CheckoutLedger.with(limits: limits) { ledger in
            let browser = ledger.browser()
            for _ in 0..<3 { #expect(try await browser.get("/p/a1b2c3d4e5").status == 200) }
            let refused = try await browser.get("/p/a1b2c3d4e5")
            #expect(refused.status == 429)
            #expect(refused.element("outcome") == "Too many requests")
            #expect(Int(refused.headers["retry-after"] ?? "").map { $0 >= 1 } == true)
            #expect(try await browser.post("/p/a1b2c3d4e5/sign-in", ["email": "a@b.c", "password": "x"]).status == 429)
            // The page's style and script are not counted: they tell nothing of any session.
            #expect(try await browser.get("/p/assets/checkout.css").status == 200)
        }
    }

    @Test(
        "A hostile payee name is shown as text: markup escaped, bidi and invisible characters made visible",
        arguments: StoreKind.available
    )
    func hostileNames(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let name = "<img src=x onerror=alert(1)>\"'&\u{202E}gpj.exe"
            let scene = try await Self.scene(ledger, payeeName: name)
            let page = try await scene.browser.get(scene.page)
            #expect(page.status == 200)
            #expect(!page.body.contains("<img"))
            #expect(!page.body.contains("\u{202E}"))
            #expect(page.body.contains("&lt;img src=x onerror=alert(1)&gt;"))
            // Quoted as the terminal quotes it: the quotes inside escaped, the bidi override replaced.
            #expect(page.element("payee") == "Pay \"<img src=x onerror=alert(1)>\\\"'&\u{FFFD}gpj.exe\"")
            #expect(page.element("verification")?.hasPrefix("Name chosen by the payee, not verified") == true)
            let title = try #require(
                page.body.range(of: "<title>").map { page.body[$0.upperBound...].prefix { $0 != "<" } }
            )
            #expect(!title.contains("\""))
        }
    }

    @Test(
        "With --resolve requires-login nothing of the session shows before sign-in, not even whether it exists",
        arguments: StoreKind.available
    )
    func requiresLoginHidesTheSession(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let payee = try await ledger.user("shop@example.com", name: "Corner Shop")
            let session = try await ledger.store.createSession(
                payeeID: payee.id,
                amountCents: 1250,
                idempotencyKey: nil
            )
            .session
            let browser = ledger.browser()
            let page = try await browser.get("/p/\(session.eid)")
            #expect(page.status == 200)
            #expect(page.element("sign-in-button") == "Sign in")
            #expect(page.body.contains("<label for=\"email\">E-mail address</label>"))
            #expect(page.body.contains("<label for=\"password\">Password</label>"))
            for secret in ["Corner Shop", "12.50", "1250", session.sid, "id=\"code\"", "id=\"pay\"", "id=\"amount\""] {
                #expect(!page.body.contains(secret), "\(secret)")
            }
            // An EID nobody was given gets the very same page.
            let unknown = try await browser.get("/p/0123456789")
            #expect(unknown.status == 200)
            #expect(unknown.body == page.body.replacingOccurrences(of: session.eid.rawValue, with: "0123456789"))
            #expect(try await browser.get("/p/\(session.eid)/events").status == 401)
            #expect(try await browser.get("/p/\(session.eid)/receipt?sid=\(session.sid)").status == 401)
        }
    }

    @Test("With --resolve public the page shows the session above the sign-in form, and no pay form")
    func publicResolve() async throws {
        try await CheckoutLedger.with(resolve: .public) { ledger in
            let payee = try await ledger.user("shop@example.com", name: "Corner Shop")
            let session = try await ledger.store.createSession(
                payeeID: payee.id,
                amountCents: 1250,
                idempotencyKey: nil
            )
            .session
            let page = try await ledger.browser().get("/p/\(session.eid)")
            #expect(page.status == 200)
            #expect(page.element("payee") == "Pay \"Corner Shop\"")
            #expect(page.element("amount") == "$12.50")
            #expect(page.element("sign-in-button") == "Sign in")
            #expect(!page.body.contains("id=\"pay\""))
            #expect(try await ledger.browser().get("/p/0123456789").status == 404)
        }
    }

    @Test(
        "Every answer under /p/ carries the security headers; router errors are pages for browsers, problems for API clients"
    )
    func securityHeaders() async throws {
        try await CheckoutLedger.with { ledger in
            let scene = try await Self.scene(ledger)
            let browser = scene.browser
            let page = try await browser.get(scene.page)
            var answers: [(String, CheckoutAnswer)] = [
                ("page", page),
                ("anonymous page", try await ledger.browser().get(scene.page)),
                (
                    "sign-in",
                    try await ledger.browser().post(
                        "\(scene.page)/sign-in",
                        ["email": "payer@example.com", "password": CheckoutLedger.password]
                    )
                ),
                ("forged pay", try await browser.post("\(scene.page)/pay", [:])),
                ("pay", try await browser.submit(page, to: "\(scene.page)/pay")),
                ("receipt", try await browser.get("\(scene.page)/receipt?sid=\(scene.session.sid)")),
                ("style", try await browser.get("/p/assets/checkout.css")),
                ("script", try await browser.get("/p/assets/checkout.js")),
                ("icon", try await browser.get("/p/assets/icon.svg")),
                ("no asset", try await browser.get("/p/assets/nope.js")),
                ("no route", try await browser.get("/p/a/b/c")),
                ("wrong method", try await browser.get("\(scene.page)/pay")),
                ("events", try await ledger.browser().get("\(scene.page)/events")),
            ]
            let api = try await browser.request("GET", "\(scene.page)/pay", headers: ["Accept": "application/json"])
            answers.append(("API client", api))
            for (what, answer) in answers {
                #expect(
                    answer.headers["content-security-policy"]
                        == "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
                    "\(what)"
                )
                #expect(answer.headers["referrer-policy"] == "no-referrer", "\(what)")
                let cached = ["style", "script", "icon"].contains(what)
                #expect(answer.headers["cache-control"] == (cached ? "max-age=3600" : "no-store"), "\(what)")
                #expect(answer.headers["x-content-type-options"] == "nosniff", "\(what)")
            }
            let wrongMethod = try #require(answers.first { $0.0 == "wrong method" }?.1)
            #expect(wrongMethod.status == 405 && wrongMethod.headers["allow"] == "POST")
            #expect(wrongMethod.headers["content-type"] == "text/html; charset=utf-8")
            #expect(api.status == 405 && api.headers["content-type"] == "application/problem+json")
            let noRoute = try #require(answers.first { $0.0 == "no route" }?.1)
            #expect(noRoute.status == 404 && noRoute.headers["content-type"] == "text/html; charset=utf-8")
            #expect(answers.first { $0.0 == "style" }?.1.headers["content-type"] == "text/css; charset=utf-8")
            #expect(answers.first { $0.0 == "script" }?.1.headers["content-type"] == "text/javascript; charset=utf-8")
            // No page holds inline script or style, which the policy would block.
            for (what, answer) in answers where answer.headers["content-type"]?.hasPrefix("text/html") == true {
                #expect(!answer.body.contains("<script>") && !answer.body.contains("<style"), "\(what)")
                #expect(answer.body.range(of: #"\s(on[a-z]+|style)="#, options: .regularExpression) == nil, "\(what)")
            }
        }
    }

    @Test("A page with its style and script weighs at most 30 KB, the largest one measured")
    func pageWeight() async throws {
        try await CheckoutLedger.with { ledger in
            let longName = String(repeating: "W", count: 64)
            let scene = try await Self.scene(
                ledger,
                cents: 99_999_999,
                shares: 50,
                funded: 100_000_000,
                payeeName: longName,
                tips: try TipPrompt(percents: [5, 10, 15, 20, 25])
            )
            let browser = scene.browser
            let page = try await browser.get(scene.page)
            let paid = try await browser.submit(page, to: "\(scene.page)/pay", extra: ["tip": "25"])
            let receipt = try await browser.get("\(scene.page)/" + (paid.headers["location"] ?? ""))
            #expect(receipt.status == 200)
            var assets = 0
            for name in ["checkout.css", "checkout.js", "icon.svg"] {
                assets += try await browser.get("/p/assets/\(name)").body.utf8.count
            }
            for (what, html) in [("page", page.body), ("receipt", receipt.body)] {
                let weight = html.utf8.count + assets
                #expect(weight <= 30 * 1024, "\(what): \(html.utf8.count) bytes of HTML + \(assets) of assets")
            }
        }
    }
}
