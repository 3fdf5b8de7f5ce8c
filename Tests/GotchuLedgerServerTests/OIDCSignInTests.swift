import AsyncHTTPClient
import Crypto
import Foundation
import GotchuReceipts
import HTTPTypes
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

@testable import GotchuLedgerServer
@testable import GotchuOIDC

/// A browser as far as sign-in needs one: follows no redirect by itself, keeps the cookies it is given (by name;
/// every server of a test is on 127.0.0.1) and sends them back.
final class TestBrowser: Sendable {
    /// An answer.
    struct Page: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: String
        /// The `Location` header.
        var location: String? { headers.first(name: "Location") }
    }

    private let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(redirectConfiguration: .disallow)
    )
    private let jar = Mutex<[String: String]>([:])
    /// Every `Set-Cookie` header received, in order.
    private let received = Mutex<[String]>([])

    /// The cookies held.
    var cookies: [String: String] { jar.withLock { $0 } }
    /// Every `Set-Cookie` header received.
    var setCookies: [String] { received.withLock { $0 } }

    /// Replaces or removes (with `nil`) a cookie, as an attacker's browser could.
    func setCookie(_ name: String, _ value: String?) { jar.withLock { $0[name] = value } }

    func get(_ url: String) async throws -> Page { try await send(HTTPClientRequest(url: url)) }

    func post(_ url: String, form: [(String, String)]) async throws -> Page {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        let body = form.map { OIDCSignIn.formEncode($0.0) + "=" + OIDCSignIn.formEncode($0.1) }
        request.body = .bytes(ByteBuffer(string: body.joined(separator: "&")))
        return try await send(request)
    }

    private func send(_ request: HTTPClientRequest) async throws -> Page {
        var request = request
        let cookies = jar.withLock { $0 }.map { "\($0.key)=\($0.value)" }.sorted()
        if !cookies.isEmpty { request.headers.add(name: "Cookie", value: cookies.joined(separator: "; ")) }
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        for header in response.headers["Set-Cookie"] {
            received.withLock { $0.append(header) }
            let pair = header.prefix { $0 != ";" }
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<equals])
            let value = String(pair[pair.index(after: equals)...])
            let removed = header.range(of: "Max-Age=0", options: .caseInsensitive) != nil || value.isEmpty
            jar.withLock { $0[name] = removed ? nil : value }
        }
        return Page(status: Int(response.status.code), headers: response.headers, body: String(buffer: body))
    }

    func shutdown() async throws { try await client.shutdown() }

    /// Runs `body` with a browser, shut down after.
    static func with<T: Sendable>(_ body: (TestBrowser) async throws -> T) async throws -> T {
        let browser = TestBrowser()
        do {
            let result = try await body(browser)
            try await browser.shutdown()
            return result
        } catch {
            try? await browser.shutdown()
            throw error
        }
    }
}

/// The query items of a URL, by name.
func queryItems(_ url: String?) -> [String: String] {
    var items: [String: String] = [:]
    for item in URLComponents(string: url ?? "")?.queryItems ?? [] { items[item.name] = item.value }
    return items
}

@Suite(
    "OpenID Connect browser sign-in: PKCE, the pending sign-in's cookie, code exchange and ID tokens",
    .timeLimit(.minutes(10))
)
struct OIDCSignInTests {
    @Test("S256 is RFC 7636's example")
    func pkceChallenge() {
        #expect(
            PKCE.challenge(for: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
                == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        )
        let verifier = OIDCSignIn.randomToken()
        #expect(verifier.utf8.count == 43 && verifier != OIDCSignIn.randomToken())
    }

    @Test("Only a checkout path of this server is returned to")
    func returnPaths() {
        for path in ["/p/0123456789", "/p/0123456789/pay", "/p/a_b-C"] {
            #expect(OIDCSignIn.isReturnPath(path), "\(path)")
        }
        for path in [
            "https://evil.example/p/x", "//evil.example/p/x", "/p//evil.example", "/p/../admin", "/p/%2e%2e/x",
            "/wallet/me", "/p\\evil", "/p/x?next=//evil", "/p/x#frag", "p/x", "", "/P/x", "/p/\u{2028}x",
            "/p/" + String(repeating: "a", count: 300),
        ] {
            #expect(!OIDCSignIn.isReturnPath(path), "\(path)")
        }
    }

    @Test("The pending sign-in is sealed: altered, or sealed with another key, it is refused")
    func sealing() throws {
        let key = SymmetricKey(size: .bits256)
        let pending = PendingSignIn(
            state: "s",
            nonce: "n",
            verifier: "v",
            redirectURI: "https://pay.example/p/oidc/callback",
            returnPath: "/p/0123456789",
            expires: 1_800_000_600
        )
        let sealed = try pending.sealed(with: key)
        #expect(PendingSignIn(sealed: sealed, key: key) == pending)
        #expect(!sealed.contains("0123456789"), "the cookie shows nothing of what it holds")
        #expect(PendingSignIn(sealed: sealed, key: SymmetricKey(size: .bits256)) == nil)
        var bytes = try #require(Base64URL.decode(sealed))
        bytes[bytes.count / 2] ^= 1
        #expect(PendingSignIn(sealed: Base64URL.encode(bytes), key: key) == nil)
        #expect(PendingSignIn(sealed: sealed + "A", key: key) == nil)
        #expect(PendingSignIn(sealed: "", key: key) == nil)
    }

    @Test("Two servers with one JWT secret derive one key; another secret or purpose, another key")
    func derivedKeys() async throws {
        let one = try await TokenAuthority(secret: String(repeating: "a", count: 40))
        let two = try await TokenAuthority(secret: String(repeating: "a", count: 40))
        let other = try await TokenAuthority(secret: String(repeating: "b", count: 40))
        #expect(one.derivedKey(for: OIDCSignIn.keyPurpose) == two.derivedKey(for: OIDCSignIn.keyPurpose))
        #expect(one.derivedKey(for: OIDCSignIn.keyPurpose) != other.derivedKey(for: OIDCSignIn.keyPurpose))
        #expect(one.derivedKey(for: OIDCSignIn.keyPurpose) != one.derivedKey(for: "another purpose"))
    }

    /// A sign-in for the issuer at `issuerURL`, on `clock`.
    private static func signIn(
        _ issuerURL: String,
        clientSecret: String? = nil,
        clock: ManualClock
    ) -> OIDCSignIn {
        var configuration = OIDCVerifier.Configuration(issuer: issuerURL, audience: "gotchu")
        configuration.clientID = "gotchu-web"
        configuration.clientSecret = clientSecret
        return OIDCSignIn(
            verifier: OIDCVerifier(configuration, clock: { clock.now() }),
            key: SymmetricKey(size: .bits256)
        )
    }

    private static let redirectURI = "http://127.0.0.1:9/p/oidc/callback"

    /// Begins a sign-in and lets the issuer answer it: the code, the state and the cookie's value.
    private static func authorize(
        _ signIn: OIDCSignIn,
        _ browser: TestBrowser
    ) async throws -> (code: String, state: String, cookie: String) {
        let start = try await signIn.start(returnPath: "/p/0123456789", redirectURI: redirectURI)
        let cookie = try #require(start.cookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last)
        let back = try await browser.get(start.location)
        #expect(back.status == 303)
        let location = try #require(back.location)
        #expect(location.hasPrefix(redirectURI + "?"))
        let query = queryItems(location)
        return (try #require(query["code"]), try #require(query["state"]), String(cookie))
    }

    @Test("The code flow with PKCE: a public client, then the refusals")
    func codeFlow() async throws {
        let key = try await IssuerKey.ec(kid: "e1")
        let issuer = CodeFlowIssuer(key: key)
        let clock = ManualClock()
        issuer.useClock { clock.now() }
        try await issuer.serve { issuerURL in
            try await TestBrowser.with { browser in
                let signIn = Self.signIn(issuerURL, clock: clock)
                let start = try await signIn.start(returnPath: "/p/0123456789", redirectURI: Self.redirectURI)
                // The request names the client, the redirect, the scopes and S256, after the endpoint's own query.
                let query = queryItems(start.location)
                #expect(start.location.hasPrefix(issuerURL + "/auth?tenant=shop&response_type=code&"))
                #expect(query["client_id"] == "gotchu-web" && query["redirect_uri"] == Self.redirectURI)
                #expect(query["scope"] == "openid email profile" && query["code_challenge_method"] == "S256")
                #expect(query["state"] != query["nonce"] && query["code_challenge"]?.utf8.count == 43)
                #expect(start.cookie.hasPrefix("gotchu-signin="))
                #expect(start.cookie.hasSuffix("; Path=/; Max-Age=600; HttpOnly; SameSite=Lax"))
                let secure = try await signIn.start(returnPath: "/p/0123456789", redirectURI: "https://pay.example/cb")
                #expect(secure.cookie.hasPrefix("__Host-gotchu-signin=") && secure.cookie.hasSuffix("; Secure"))

                // The issuer's user, with the page to return to.
                issuer.signIn(subject: "alice-123", name: "Alice")
                let first = try await Self.authorize(signIn, browser)
                let finished = try await signIn.finish(code: first.code, state: first.state, cookie: first.cookie)
                #expect(finished.identity.subject == "alice-123" && finished.identity.displayName == "Alice")
                #expect(finished.identity.issuer == issuerURL && finished.returnPath == "/p/0123456789")
                let form = try #require(issuer.tokenForms.last)
                #expect(form["code_verifier"]?.utf8.count == 43 && form["client_secret"] == nil)

                // The same code again: the issuer redeems a code once.
                await #expect(throws: OIDCSignInError.self) {
                    try await signIn.finish(code: first.code, state: first.state, cookie: first.cookie)
                }
                // Another sign-in's state, or another browser's cookie, or none, or an altered one.
                let second = try await Self.authorize(signIn, browser)
                let third = try await Self.authorize(signIn, browser)
                for (state, cookie) in [
                    (third.state, second.cookie), (second.state, third.cookie), (second.state, nil),
                    (second.state, "A" + second.cookie.dropFirst()),
                ] {
                    let error = await #expect(throws: OIDCSignInError.self) {
                        try await signIn.finish(code: second.code, state: state, cookie: cookie)
                    }
                    #expect(error?.status == .badRequest)
                }
                // Refused without the code being spent: the right pair still signs in.
                #expect(
                    try await signIn.finish(code: second.code, state: second.state, cookie: second.cookie)
                        .identity.subject == "alice-123"
                )
                // A cookie from longer ago than the sign-in's lifetime.
                clock.advance(seconds: 601)
                await #expect(throws: OIDCSignInError.self) {
                    try await signIn.finish(code: third.code, state: third.state, cookie: third.cookie)
                }
            }
        }
    }

    @Test(
        "ID tokens refused: signed with another key, altered, with another nonce, for another client",
        arguments: [
            CodeFlowIssuer.Fault.foreignKey, .tampered, .wrongNonce, .wrongAudience,
        ]
    )
    func refusedIDTokens(fault: CodeFlowIssuer.Fault) async throws {
        let issuer = CodeFlowIssuer(key: try await IssuerKey.rsa(kid: "r1"))
        let clock = ManualClock()
        issuer.useClock { clock.now() }
        try await issuer.serve { issuerURL in
            try await TestBrowser.with { browser in
                let signIn = Self.signIn(issuerURL, clock: clock)
                issuer.misbehave(fault)
                let pending = try await Self.authorize(signIn, browser)
                let error = await #expect(throws: OIDCSignInError.self) {
                    try await signIn.finish(code: pending.code, state: pending.state, cookie: pending.cookie)
                }
                #expect(error?.status == .badRequest)
                #expect(error?.message.hasPrefix("The sign-in service's answer could not be verified") == true)
                // The issuer behaving, the same sign-in works: the refusal was the token's.
                issuer.misbehave(nil)
                let good = try await Self.authorize(signIn, browser)
                #expect(
                    try await signIn.finish(code: good.code, state: good.state, cookie: good.cookie).identity.subject
                        == "alice-123"
                )
            }
        }
    }

    @Test(
        "A confidential client proves itself with its secret, as Basic credentials or in the form",
        arguments: [nil, ["client_secret_post"]]
    )
    func confidentialClient(methods: [String]?) async throws {
        let issuer = CodeFlowIssuer(
            key: try await IssuerKey.ec(kid: "e1"),
            clientSecret: "s3cr&t",
            authMethods: methods
        )
        let clock = ManualClock()
        issuer.useClock { clock.now() }
        try await issuer.serve { issuerURL in
            try await TestBrowser.with { browser in
                let real = Self.signIn(issuerURL, clientSecret: "s3cr&t", clock: clock)
                let run = try await Self.authorize(real, browser)
                let finished = try await real.finish(code: run.code, state: run.state, cookie: run.cookie)
                #expect(finished.identity.subject == "alice-123")
                #expect((issuer.tokenForms.last?["client_secret"] == "s3cr&t") == (methods != nil))
                // A wrong secret is refused by the issuer.
                let wrong = Self.signIn(issuerURL, clientSecret: "wrong", clock: clock)
                let attempt = try await Self.authorize(wrong, browser)
                await #expect(throws: OIDCSignInError.self) {
                    try await wrong.finish(code: attempt.code, state: attempt.state, cookie: attempt.cookie)
                }
            }
        }
    }

    @Test("An issuer whose discovery fails is asked again only after the minimum interval")
    func discoveryFailureIsNotHammered() async throws {
        let fetches = Mutex(0)
        let clock = ManualClock()
        let verifier = OIDCVerifier(
            .init(issuer: "https://id.example.com/realm", audience: "gotchu"),
            clock: { clock.now() },
            fetch: { _ in
                fetches.withLock { $0 += 1 }
                throw URLError(.cannotConnectToHost)
            }
        )
        let signIn = OIDCSignIn(verifier: verifier, key: SymmetricKey(size: .bits256))
        for _ in 0..<5 {
            let error = await #expect(throws: OIDCSignInError.self) {
                try await signIn.start(returnPath: "/p/0123456789", redirectURI: Self.redirectURI)
            }
            #expect(error?.status == .badGateway)
        }
        #expect(fetches.withLock { $0 } == 1)
        clock.advance(seconds: 61)
        _ = try? await signIn.start(returnPath: "/p/0123456789", redirectURI: Self.redirectURI)
        #expect(fetches.withLock { $0 } == 2)
    }
}
