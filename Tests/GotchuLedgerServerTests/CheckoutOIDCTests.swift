import AsyncHTTPClient
import Crypto
import Foundation
import GotchuCore
import GotchuReceipts
import NIOCore
import NIOHTTP1
import Testing

@testable import GotchuLedgerServer
@testable import GotchuOIDC

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A ledger with its web checkout that trusts a ``CodeFlowIssuer`` for browser sign-in (client `gotchu-web`), on a
/// free loopback port, over a fresh store of either kind, with a clock the test moves and the issuer follows.
private struct OIDCLedger: Sendable {
    let url: String
    let store: any LedgerStore
    let clock: ManualClock
    let tokens: TokenAuthority
    let issuerURL: String

    static func with(
        store kind: StoreKind = .sqlite,
        issuer: CodeFlowIssuer,
        developmentMode: Bool = false,
        publicURL: PublicURL? = nil,
        _ body: @Sendable (OIDCLedger) async throws -> Void
    ) async throws {
        let clock = ManualClock()
        issuer.useClock { clock.now() }
        let limits = {
            var limits = LedgerLimits.unlimited
            limits.clock = { clock.now() }
            return limits
        }()
        let policy = {
            var policy = LedgerPolicy()
            policy.passwordCost = 4
            return policy
        }()
        try await issuer.serve { issuerURL in
            try await TestStore.with(kind, policy: policy, clock: clock) { store, _, services in
                let tokens = try await TokenAuthority(secret: String(repeating: "s", count: 40), clock: { clock.now() })
                var configuration = OIDCVerifier.Configuration(issuer: issuerURL, audience: "gotchu")
                configuration.clientID = issuer.clientID
                configuration.clientSecret = issuer.clientSecret
                try await LedgerServer.withRunning(
                    store: store,
                    services: services,
                    .inProcess(tokens: tokens) {
                        $0.made.identities = OIDCVerifier(configuration, clock: { clock.now() })
                        $0.developmentMode = developmentMode
                        $0.limits = limits
                        $0.publicURL = publicURL
                    }
                ) { url in
                    try await body(
                        OIDCLedger(
                            url: url.absoluteString,
                            store: store,
                            clock: clock,
                            tokens: tokens,
                            issuerURL: issuerURL
                        )
                    )
                }
            }
        }
    }

    /// A live session of a payee's, and its EID.
    func charge(_ cents: Cents = 450) async throws -> String {
        let payee = try await store.addUser(
            email: "bakery-\(UUID().uuidString.prefix(8).lowercased())@example.com",
            displayName: "Bakery",
            password: "correct horse battery",
            actor: "test"
        )
        let (session, _) = try await store.createSession(
            payeeID: payee.id,
            amountCents: cents,
            shares: 1,
            idempotencyKey: nil
        )
        return session.eid.rawValue
    }

    /// Sends `browser` through the sign-in from the checkout page of `eid` until the issuer sends it back: the
    /// callback's address (not yet opened).
    func toIssuerAndBack(_ browser: TestBrowser, eid: String) async throws -> String {
        let start = try await browser.get(url + "/p/\(eid)/sign-in/oidc")
        try #require(start.status == 303, "sign-in began with \(start.status): \(start.body)")
        let authorization = try #require(start.location)
        #expect(authorization.hasPrefix(issuerURL + "/auth?"))
        let back = try await browser.get(authorization)
        try #require(back.status == 303)
        return try #require(back.location)
    }

    /// Expects each status to be one the served OpenAPI document lists for the operation (`GET path`).
    func expectDocumented(_ answers: [(path: String, status: Int)]) async throws {
        try await TestBrowser.with { browser in
            let document = try await browser.get(url + "/openapi.yaml")
            let contract = try ContractTests.Contract(yaml: document.body)
            for (path, status) in answers {
                let documented = contract.responses[ContractTests.Operation(method: "GET", path: path)] ?? [:]
                #expect(documented[status] != nil, "GET \(path) answered \(status), which the document does not list")
            }
        }
    }

    /// The browser session cookie `browser` holds, if any.
    static func session(_ browser: TestBrowser) -> String? { browser.cookies["gotchu-session"] }
}

extension TestBrowser.Page {
    /// Whether the page holds an element with `id`.
    func has(_ id: String) -> Bool { body.contains(" id=\"\(id)\"") }
}

@Suite("Web checkout sign-in through the OpenID Connect issuer", .timeLimit(.minutes(5)))
struct CheckoutOIDCTests {
    @Test(
        "From the checkout page to the issuer and back, signed in, to the same page; the same user as the issuer's access tokens",
        arguments: StoreKind.available
    )
    func wholeFlow(store kind: StoreKind) async throws {
        let issuer = CodeFlowIssuer(key: try await IssuerKey.ec(kid: "e1"))
        try await OIDCLedger.with(store: kind, issuer: issuer) { ledger in
            let eid = try await ledger.charge()
            try await TestBrowser.with { browser in
                // Signed out, the page offers the issuer beside the password form.
                let page = try await browser.get(ledger.url + "/p/\(eid)")
                #expect(page.status == 200 && page.has("sign-in") && page.has("oidc-signin"))
                #expect(page.body.contains("href=\"\(eid)/sign-in/oidc\""))
                #expect(page.body.contains("Sign in with 127.0.0.1"))

                let start = try await browser.get(ledger.url + "/p/\(eid)/sign-in/oidc")
                #expect(start.status == 303)
                #expect(start.headers.first(name: "Referrer-Policy") == "no-referrer")
                let pending = try #require(browser.setCookies.last)
                #expect(pending.hasPrefix("gotchu-signin=") && pending.contains("HttpOnly"))
                #expect(pending.contains("SameSite=Lax") && pending.contains("Max-Age=600"))
                let request = queryItems(start.location)
                #expect(request["redirect_uri"] == ledger.url + "/p/oidc/callback")
                #expect(request["client_id"] == "gotchu-web" && request["code_challenge_method"] == "S256")

                issuer.signIn(subject: "alice-123", name: "Alice <b>Liddell</b>")
                let back = try await browser.get(try #require(start.location))
                let callback = try #require(back.location)
                #expect(callback.hasPrefix(ledger.url + "/p/oidc/callback?"))
                let signedIn = try await browser.get(callback)
                #expect(signedIn.status == 200, "\(signedIn.body)")
                // On to the page by a navigation of the ledger's own, which sends the SameSite=Strict cookie.
                #expect(signedIn.headers.first(name: "Refresh") == "0; url=../\(eid)")
                #expect(signedIn.body.contains("href=\"../\(eid)\""))
                #expect(signedIn.body.contains("Alice &lt;b&gt;Liddell&lt;/b&gt;"))
                #expect(browser.cookies["gotchu-signin"] == nil, "the pending sign-in is used up")
                let token = try #require(OIDCLedger.session(browser))

                // The page sees the browser session: the pay form, the issuer's name in the header.
                let paying = try await browser.get(ledger.url + "/p/\(eid)")
                #expect(paying.status == 200 && paying.has("pay") && paying.has("sign-out"))
                #expect(!paying.has("oidc-signin"))

                // The user is the issuer's, the one its access tokens act as.
                let user = try #require(try await ledger.store.browserSessionUser(token: token))
                let accessToken = try await issuer.key.sign(
                    AccessClaims(issuer: ledger.issuerURL, subject: "alice-123", now: ledger.clock.now())
                )
                let bearer = try await URLSession.shared.data(
                    for: {
                        var request = URLRequest(url: URL(string: ledger.url + "/wallet/me")!)
                        request.setValue("Bearer \(accessToken)", forHTTPHeaderField: "Authorization")
                        return request
                    }()
                )
                #expect((bearer.1 as? HTTPURLResponse)?.statusCode == 200)
                let again = try await ledger.store.user(
                    issuer: ledger.issuerURL,
                    subject: "alice-123",
                    displayName: "x"
                )
                #expect(again.id == user.id)

                // A second sign-in through the issuer: the same user, a new browser session.
                let second = try await browser.get(try await ledger.toIssuerAndBack(browser, eid: eid))
                #expect(second.status == 200)
                let renewed = try #require(OIDCLedger.session(browser))
                #expect(renewed != token)
                #expect(try await ledger.store.browserSessionUser(token: renewed)?.id == user.id)
                try await ledger.expectDocumented([
                    ("/p/{eid}/sign-in/oidc", start.status), ("/p/oidc/callback", signedIn.status),
                ])
            }
        }
    }

    @Test(
        "Refused, with no browser session: another state, a replayed code, altered or foreign ID tokens, another nonce, the issuer's error"
    )
    func refusals() async throws {
        let issuer = CodeFlowIssuer(key: try await IssuerKey.rsa(kid: "r1"))
        try await OIDCLedger.with(issuer: issuer) { ledger in
            let eid = try await ledger.charge()
            try await TestBrowser.with { browser in
                // The state of another sign-in than the one this browser began.
                let first = try await ledger.toIssuerAndBack(browser, eid: eid)
                let second = try await ledger.toIssuerAndBack(browser, eid: eid)
                let crossed = try await browser.get(
                    ledger.url
                        + "/p/oidc/callback?code=\(queryItems(second)["code"]!)&state=\(queryItems(first)["state"]!)"
                )
                #expect(crossed.status == 400 && crossed.has("outcome"))
                #expect(crossed.body.contains("does not belong to the sign-in this browser began"))
                #expect(OIDCLedger.session(browser) == nil)

                // A code used once, sent again with the pending sign-in's cookie (the cookie is cleared by then, so
                // the attacker's copy is put back): the issuer redeems a code once.
                let third = try await ledger.toIssuerAndBack(browser, eid: eid)
                let pending = try #require(browser.cookies["gotchu-signin"])
                #expect(try await browser.get(third).status == 200)
                let session = try #require(OIDCLedger.session(browser))
                browser.setCookie("gotchu-session", nil)
                browser.setCookie("gotchu-signin", pending)
                let replayed = try await browser.get(third)
                #expect(replayed.status == 400 && replayed.body.contains("refused to complete the sign-in"))
                #expect(OIDCLedger.session(browser) == nil)
                #expect(try await ledger.store.browserSessionUser(token: session) != nil)

                // No pending sign-in at all (another browser, or cookies off).
                let fourth = try await ledger.toIssuerAndBack(browser, eid: eid)
                browser.setCookie("gotchu-signin", nil)
                let cookieless = try await browser.get(fourth)
                #expect(cookieless.status == 400 && cookieless.body.contains("No sign-in is pending"))

                for fault in [CodeFlowIssuer.Fault.tampered, .foreignKey, .wrongNonce, .wrongAudience] {
                    issuer.misbehave(fault)
                    let answer = try await browser.get(try await ledger.toIssuerAndBack(browser, eid: eid))
                    #expect(answer.status == 400, "\(fault)")
                    #expect(answer.body.contains("could not be verified"), "\(fault)")
                    #expect(OIDCLedger.session(browser) == nil, "\(fault)")
                }

                // The person declined at the issuer: its error, escaped, and nothing else.
                issuer.misbehave(.accessDenied)
                let declined = try await browser.get(try await ledger.toIssuerAndBack(browser, eid: eid))
                #expect(declined.status == 403 && declined.body.contains("did not sign you in (access_denied)"))
                #expect(!declined.body.contains("<b>declined"))
                let hostile = try await browser.get(ledger.url + "/p/oidc/callback?error=%3Cscript%3Ex")
                #expect(hostile.status == 400 && !hostile.body.contains("<script>"))
                #expect(OIDCLedger.session(browser) == nil)

                try await ledger.expectDocumented(
                    [crossed, replayed, cookieless, declined, hostile].map { ("/p/oidc/callback", $0.status) }
                )

                // The issuer behaving again, the same browser signs in.
                issuer.misbehave(nil)
                #expect(try await browser.get(try await ledger.toIssuerAndBack(browser, eid: eid)).status == 200)
                #expect(OIDCLedger.session(browser) != nil)
            }
        }
    }

    @Test("Never a redirect elsewhere: only a checkout page of this server is returned to")
    func noOpenRedirect() async throws {
        let issuer = CodeFlowIssuer(key: try await IssuerKey.ec(kid: "e1"))
        try await OIDCLedger.with(issuer: issuer) { ledger in
            try await TestBrowser.with { browser in
                // A path that is no EID is no sign-in.
                for path in ["%2F%2Fevil.example", "..%2F..%2Fevil", "EVIL000000", "0123"] {
                    let answer = try await browser.get(ledger.url + "/p/\(path)/sign-in/oidc")
                    #expect(answer.status == 404, "\(path)")
                    #expect(answer.location == nil && browser.cookies["gotchu-signin"] == nil, "\(path)")
                }
                // A pending sign-in sealed with the server's own key (as only a server could) that names another
                // site: refused before the code is exchanged.
                let key = ledger.tokens.derivedKey(for: OIDCSignIn.keyPurpose)
                for target in ["//evil.example/p/x", "https://evil.example/", "/p/../../evil", "/wallet/me"] {
                    let pending = PendingSignIn(
                        state: "s",
                        nonce: "n",
                        verifier: "v",
                        redirectURI: ledger.url + "/p/oidc/callback",
                        returnPath: target,
                        expires: Int64(ledger.clock.now().timeIntervalSince1970) + 600
                    )
                    browser.setCookie("gotchu-signin", try pending.sealed(with: key))
                    let tokenRequests = issuer.tokenForms.count
                    let answer = try await browser.get(ledger.url + "/p/oidc/callback?code=c&state=s")
                    #expect(answer.status == 400, "\(target)")
                    #expect(answer.location == nil && answer.headers.first(name: "Refresh") == nil, "\(target)")
                    #expect(!answer.body.contains("evil"), "\(target)")
                    #expect(issuer.tokenForms.count == tokenRequests, "\(target)")
                }
            }
        }
    }

    @Test("The redirect URI is the public URL's; without one, the request's host only on loopback or a dev server")
    func redirectURI() async throws {
        let issuer = CodeFlowIssuer(key: try await IssuerKey.ec(kid: "e1"))
        // Served under a path, over HTTPS at the proxy: the callback there, the cookie __Host- and Secure.
        let publicURL = try PublicURL("https://pay.example.com/shop")
        try await OIDCLedger.with(issuer: issuer, publicURL: publicURL) { ledger in
            let eid = try await ledger.charge()
            try await TestBrowser.with { browser in
                let start = try await browser.get(ledger.url + "/p/\(eid)/sign-in/oidc")
                #expect(queryItems(start.location)["redirect_uri"] == "https://pay.example.com/shop/p/oidc/callback")
                let pending = try #require(browser.setCookies.last)
                #expect(pending.hasPrefix("__Host-gotchu-signin=") && pending.contains("; Secure"))
                // The proxy passes the issuer's answer on to the server.
                let back = try await browser.get(try #require(start.location))
                let backLocation = try #require(back.location)
                let query = try #require(URLComponents(string: backLocation)?.percentEncodedQuery)
                let signedIn = try await browser.get(ledger.url + "/p/oidc/callback?" + query)
                #expect(signedIn.status == 200)
                #expect(signedIn.headers.first(name: "Refresh") == "0; url=../\(eid)")
                #expect(signedIn.headers["Set-Cookie"].contains { $0.hasPrefix("__Host-gotchu-signin=;") })
            }
        }
        // No public URL: a request to this machine's address works, another host does not (any Host can be sent).
        try await OIDCLedger.with(issuer: issuer) { ledger in
            let eid = try await ledger.charge()
            let answer = try await Self.get(ledger.url + "/p/\(eid)/sign-in/oidc", host: "pay.example.com")
            #expect(answer.status == 404 && answer.body.contains("--public-url"))
            // Nor is the link offered there; to this machine it is.
            let page = try await Self.get(ledger.url + "/p/\(eid)", host: "pay.example.com")
            #expect(page.status == 200 && page.body.contains("id=\"sign-in\"") && !page.body.contains("oidc-signin"))
            let local = try await Self.get(
                ledger.url + "/p/\(eid)",
                host: "localhost:\(URL(string: ledger.url)!.port!)"
            )
            #expect(local.body.contains("id=\"oidc-signin\""))
            try await ledger.expectDocumented([("/p/{eid}/sign-in/oidc", answer.status)])
            try await TestBrowser.with { browser in
                let started = try await browser.get(ledger.url + "/p/\(eid)/sign-in/oidc")
                #expect(started.status == 303)
            }
        }
        // A development server takes the request's host as it is.
        try await OIDCLedger.with(issuer: issuer, developmentMode: true) { ledger in
            let eid = try await ledger.charge()
            let answer = try await Self.get(ledger.url + "/p/\(eid)/sign-in/oidc", host: "kiosk.local:8080")
            #expect(answer.status == 303)
            #expect(queryItems(answer.location)["redirect_uri"] == "http://kiosk.local:8080/p/oidc/callback")
        }
    }

    /// `GET url` with `Host: host`, as anyone may send it.
    private static func get(_ url: String, host: String) async throws -> (status: Int, location: String?, body: String)
    {
        let client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: HTTPClient.Configuration(redirectConfiguration: .disallow)
        )
        do {
            var request = HTTPClientRequest(url: url)
            request.headers.replaceOrAdd(name: "Host", value: host)
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
            try await client.shutdown()
            return (Int(response.status.code), response.headers.first(name: "Location"), body)
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    @Test("Without an issuer there is no such sign-in, and no link to it")
    func withoutIssuer() async throws {
        try await CheckoutLedger.with { ledger in
            let browser = ledger.browser()
            let page = try await browser.get("/p/0123456789")
            #expect(page.status == 200 && !page.body.contains("oidc-signin"))
            #expect(try await browser.get("/p/0123456789/sign-in/oidc").status == 404)
            #expect(try await browser.get("/p/oidc/callback?code=c&state=s").status == 404)
        }
    }
}
