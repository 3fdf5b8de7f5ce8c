import Foundation
import GotchuCheckout
import GotchuCore
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import Testing

/// Signing in on the web checkout: the browser session's cookie, what it is and is not accepted as, and how it ends.
@Suite("Web checkout sign-in and browser sessions", .timeLimit(.minutes(10)))
struct CheckoutSignInTests {
    @Test(
        "A sign-in answers 303 to the page with an HttpOnly, SameSite=Strict cookie of 256 random bits",
        arguments: StoreKind.available
    )
    func signInCookie(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let payer = try await ledger.user("payer@example.com")
            let browser = ledger.browser()
            let answer = try await browser.post(
                "/p/a1b2c3d4e5/sign-in",
                ["email": "payer@example.com", "password": CheckoutLedger.password]
            )
            #expect(answer.status == 303)
            #expect(answer.headers["location"] == "../a1b2c3d4e5")
            let cookie = try #require(browser.lastSetCookie)
            // Plain HTTP: no Secure, so no __Host- prefix (browsers refuse Secure cookies from http).
            let parts = cookie.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            let (name, value) = try #require(
                parts.first.map { ($0.prefix { $0 != "=" }, $0.drop { $0 != "=" }.dropFirst()) }
            )
            #expect(name == "gotchu-session")
            #expect(value.count == BrowserSessions.tokenLength)
            #expect(Set(parts.dropFirst()) == ["Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=43200"])
            // Only the digest is stored.
            #expect(try await ledger.store.browserSessionUser(token: String(value))?.id == payer.id)
            #expect(try await ledger.store.browserSessionUser(token: BrowserSessions.digest(String(value))) == nil)
        }
    }

    @Test("Served for HTTPS, the cookie is __Host-gotchu-session and Secure")
    func secureCookie() async throws {
        var settings = CheckoutSettings()
        settings.secureCookies = true
        settings.browserSessionLifetime = .seconds(600)
        try await CheckoutLedger.with(checkout: settings) { ledger in
            _ = try await ledger.user("payer@example.com")
            let browser = ledger.browser()
            let answer = try await browser.post(
                "/p/a1b2c3d4e5/sign-in",
                ["email": "payer@example.com", "password": CheckoutLedger.password]
            )
            #expect(answer.status == 303)
            let parts = try #require(browser.lastSetCookie).split(separator: ";").map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            #expect(parts.first?.hasPrefix("__Host-gotchu-session=") == true)
            #expect(Set(parts.dropFirst()) == ["Path=/", "HttpOnly", "SameSite=Strict", "Secure", "Max-Age=600"])
            // The plain name is not read by a secure server.
            let value = try #require(parts.first?.split(separator: "=").last)
            #expect(try await !browser.isSignedIn(cookie: "gotchu-session=\(value)"))
            #expect(try await browser.isSignedIn())
        }
    }

    @Test(
        "A server serving TLS sets the __Host- cookie, Secure, as curl reads it over HTTPS",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "needs /usr/bin/curl")
    )
    func cookieOverTLS() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        var policy = LedgerPolicy()
        policy.passwordCost = 4
        let store = try SQLiteLedgerStore(path: directory.url.appendingPathComponent("l.sqlite").path, policy: policy)
        try await store.migrate()
        _ = try await store.addUser(
            email: "payer@example.com",
            displayName: nil,
            password: CheckoutLedger.password,
            actor: "t"
        )
        let tls = try LedgerServer.tlsConfiguration(
            certificateFile: certificates.serverCertificate.path,
            keyFile: certificates.serverKey.path
        )
        let tokens = try await TokenAuthority(secret: String(repeating: "s", count: 40))
        try await LedgerServer.withRunning(store: store, .inProcess(tokens: tokens) { $0.made.tls = tls }) { url in
            let curl = try RunningCommand(
                URL(fileURLWithPath: "/usr/bin/curl"),
                [
                    "--silent", "--show-error", "--include", "--cacert", certificates.caFile.path,
                    "--data", "email=payer%40example.com&password=correct+horse+battery",
                    "https://localhost:\(url.port ?? 0)/p/a1b2c3d4e5/sign-in",
                ]
            )
            #expect(try await curl.waitForExit() == 0, "\(curl.standardError)")
            let head = curl.lines.map { $0.trimmingCharacters(in: .newlines) }
            #expect(head.first?.hasPrefix("HTTP/1.1 303") == true, "\(head)")
            let cookie = try #require(head.first { $0.lowercased().hasPrefix("set-cookie:") })
            let parts = cookie.dropFirst("set-cookie:".count).split(separator: ";").map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            #expect(parts.first?.hasPrefix("__Host-gotchu-session=") == true)
            #expect(Set(parts.dropFirst()) == ["Path=/", "HttpOnly", "SameSite=Strict", "Secure", "Max-Age=43200"])
        }
    }

    @Test(
        "The browser-session cookie is no bearer token, and a bearer token is no browser session",
        arguments: StoreKind.available
    )
    func credentialsDoNotCross(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let payer = try await ledger.user("payer@example.com")
            let browser = try await ledger.signedIn("payer@example.com")
            let secret = try #require(browser.cookie?.split(separator: "=").last.map(String.init))
            // The API ignores the cookie, and refuses its secret as a bearer token.
            let withCookie = try await browser.request("GET", "/wallet/me")
            #expect(withCookie.status == 401)
            let asBearer = try await browser.request(
                "GET",
                "/wallet/me",
                headers: ["Authorization": "Bearer \(secret)"]
            )
            #expect(asBearer.status == 401)
            // The checkout ignores the API's credentials, and refuses an access token in its cookie.
            let tokens = try await TokenAuthority(
                secret: String(repeating: "s", count: 40),
                clock: { ledger.clock.now() }
            )
            let token = try await tokens.issue(userID: payer.id)
            let stranger = ledger.browser()
            let bearerPage = try await stranger.get("/p/a1b2c3d4e5", headers: ["Authorization": "Bearer \(token)"])
            #expect(bearerPage.status == 200)
            #expect(bearerPage.element("sign-in-button") == "Sign in")
            let tokenCookie = try await stranger.get("/p/a1b2c3d4e5", headers: ["Cookie": "gotchu-session=\(token)"])
            #expect(tokenCookie.element("sign-in-button") == "Sign in")
            #expect(tokenCookie.headers["set-cookie"]?.contains("Max-Age=0") == true)
            // The API token works where it belongs.
            let api = try await stranger.request("GET", "/wallet/me", headers: ["Authorization": "Bearer \(token)"])
            #expect(api.status == 200)
        }
    }

    @Test(
        "Sign-out, with its form's tag, ends the browser session; without the tag it is refused 403",
        arguments: StoreKind.available
    )
    func signOut(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            _ = try await ledger.user("payer@example.com", name: "Pat")
            let eid = try await ledger.charge()
            let browser = try await ledger.signedIn("payer@example.com")
            let kept = try #require(browser.cookie)
            let page = try await browser.get("/p/\(eid)")
            #expect(page.element("sign-out")?.hasPrefix("Signed in as Pat") == true)
            let forged = try await browser.post(
                "/p/\(eid)/sign-out",
                ["csrf": "A" + String(repeating: "b", count: 42)]
            )
            #expect(forged.status == 403)
            #expect(try await browser.isSignedIn())
            let tag = try #require(page.field("csrf", in: "sign-out"))
            let answer = try await browser.post("/p/\(eid)/sign-out", ["csrf": tag])
            #expect(answer.status == 303)
            #expect(answer.headers["location"] == "../\(eid)")
            #expect(browser.cookie == nil)
            #expect(browser.lastSetCookie?.contains("Max-Age=0") == true)
            // The old cookie, sent again, signs nobody in.
            #expect(try await !browser.isSignedIn(cookie: kept))
            #expect(
                try await browser.get("/p/\(eid)", headers: ["Cookie": kept]).element("sign-in-button") == "Sign in"
            )
        }
    }

    @Test("A second sign-in renews the session: the old cookie stops working", arguments: StoreKind.available)
    func renewedAtSignIn(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            _ = try await ledger.user("payer@example.com")
            let browser = try await ledger.signedIn("payer@example.com")
            let first = try #require(browser.cookie)
            let again = try await browser.post(
                "/p/a1b2c3d4e5/sign-in",
                ["email": "payer@example.com", "password": CheckoutLedger.password]
            )
            #expect(again.status == 303)
            let second = try #require(browser.cookie)
            #expect(first != second)
            #expect(try await !browser.isSignedIn(cookie: first))
            #expect(try await browser.isSignedIn())
        }
    }

    @Test(
        "A browser session ends at its lifetime, when its user is disabled, and when the user's tokens are revoked",
        arguments: StoreKind.available
    )
    func sessionsEnd(store: StoreKind) async throws {
        var settings = CheckoutSettings()
        settings.browserSessionLifetime = .seconds(3600)
        try await CheckoutLedger.with(store: store, checkout: settings) { ledger in
            _ = try await ledger.user("a@example.com")
            _ = try await ledger.user("b@example.com")
            let a = try await ledger.signedIn("a@example.com")
            let b = try await ledger.signedIn("b@example.com")
            #expect(try await a.isSignedIn())
            // A password reset revokes the user's tokens, this session with them (started before it).
            ledger.clock.advance(seconds: 1)
            try await ledger.store.resetPassword(
                email: "a@example.com",
                password: "another long password",
                actor: "test"
            )
            #expect(try await !a.isSignedIn())
            try await ledger.store.disableUser(email: "b@example.com", actor: "test")
            #expect(try await !b.isSignedIn())
            _ = try await ledger.user("c@example.com")
            let c = try await ledger.signedIn("c@example.com")
            ledger.clock.advance(seconds: 3598)
            #expect(try await c.isSignedIn())
            ledger.clock.advance(seconds: 2)
            #expect(try await !c.isSignedIn())
            // Ended sessions are pruned; the live ones stay.
            #expect(try await ledger.store.pruneBrowserSessions() >= 1)
        }
    }

    @Test("Wrong passwords answer 401 with the form again, then the login back-off's 429 with Retry-After")
    func backoff() async throws {
        var limits = LedgerLimits.unlimited
        var backoff = LoginBackoff()
        backoff.freeFailuresPerAccount = 2
        limits.loginBackoff = backoff
        try await CheckoutLedger.with(limits: limits) { ledger in
            _ = try await ledger.user("payer@example.com")
            let browser = ledger.browser()
            for _ in 0..<2 {
                let wrong = try await browser.post(
                    "/p/a1b2c3d4e5/sign-in",
                    ["email": "payer@example.com", "password": "not the password"]
                )
                #expect(wrong.status == 401)
                #expect(wrong.element("problem") == "Wrong e-mail address or password.")
                #expect(wrong.field("email", in: "sign-in") == "payer@example.com")
                #expect(browser.cookie == nil)
            }
            let refused = try await browser.post(
                "/p/a1b2c3d4e5/sign-in",
                ["email": "payer@example.com", "password": CheckoutLedger.password]
            )
            #expect(refused.status == 429)
            #expect(Int(refused.headers["retry-after"] ?? "").map { $0 >= 1 } == true)
            #expect(browser.cookie == nil)
        }
    }

    @Test("A sign-in form posted from another site is refused 403")
    func crossSiteSignIn() async throws {
        try await CheckoutLedger.with { ledger in
            _ = try await ledger.user("payer@example.com")
            let browser = ledger.browser()
            let answer = try await browser.post(
                "/p/a1b2c3d4e5/sign-in",
                ["email": "payer@example.com", "password": CheckoutLedger.password],
                headers: ["Sec-Fetch-Site": "cross-site"]
            )
            #expect(answer.status == 403)
            #expect(browser.cookie == nil)
        }
    }
}
