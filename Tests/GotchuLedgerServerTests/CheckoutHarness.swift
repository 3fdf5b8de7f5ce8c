import Foundation
import GotchuCheckout
import GotchuCore
import GotchuLedgerServer
import GotchuTesting
import Testing

/// A ledger server with its web checkout on a free loopback port, over a fresh store of either kind, with a clock the
/// test moves; and browsers that talk to it over raw HTTP/1.1, so every header (cookies, redirects) is the test's to
/// see and send.
struct CheckoutLedger: Sendable {
    let url: URL
    let store: any LedgerStore
    let clock: ManualClock

    /// Every test account's password.
    static let password = "correct horse battery"

    /// The port the server listens on.
    var port: Int { url.port ?? 0 }

    /// Runs `body` against a started server and stops it afterwards; rate limits, if any, run on the test's clock.
    static func with<T: Sendable>(
        store kind: StoreKind = .sqlite,
        resolve: ResolveAccess = .requiresLogin,
        checkout: CheckoutSettings = CheckoutSettings(),
        limits: LedgerLimits = .unlimited,
        publicURL: PublicURL? = nil,
        _ body: @Sendable (CheckoutLedger) async throws -> T
    ) async throws -> T {
        let clock = ManualClock()
        let limits = {
            var limits = limits
            limits.clock = { clock.now() }
            limits.resolveAccess = resolve
            return limits
        }()
        var policy = LedgerPolicy()
        policy.passwordCost = 4
        return try await TestStore.with(kind, policy: policy, clock: clock) { store, _, services in
            let tokens = try await TokenAuthority(secret: String(repeating: "s", count: 40), clock: { clock.now() })
            return try await LedgerServer.withRunning(
                store: store,
                services: services,
                .inProcess(tokens: tokens) {
                    $0.limits = limits
                    $0.publicURL = publicURL
                    $0.checkout = checkout
                }
            ) { url in
                try await body(CheckoutLedger(url: url, store: store, clock: clock))
            }
        }
    }

    /// A user with the test password, named `name` (else the part of the address before `@`), funded with `cents`.
    func user(_ email: String, name: String? = nil, funded cents: Cents = 0) async throws -> LedgerUser {
        let user = try await store.addUser(email: email, displayName: name, password: Self.password, actor: "test")
        if cents > 0 { _ = try await store.fund(userID: user.id, amountCents: cents) }
        return user
    }

    /// A live session of `cents` for a payee of its own; its EID.
    func charge(_ cents: Cents = 100) async throws -> String {
        let email = "shop-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let payee = try await store.addUser(email: email, displayName: nil, password: Self.password, actor: "test")
        return try await store.createSession(payeeID: payee.id, amountCents: cents, idempotencyKey: nil).session.eid
            .rawValue
    }

    /// A browser with no cookie.
    func browser() -> CheckoutBrowser { CheckoutBrowser(port: port) }

    /// A browser signed in as `email` (with the test password).
    func signedIn(_ email: String, eid: String = "0000000000") async throws -> CheckoutBrowser {
        let browser = browser()
        let answer = try await browser.post("/p/\(eid)/sign-in", ["email": email, "password": Self.password])
        try #require(answer.status == 303, "sign-in answered \(answer.status): \(answer.body)")
        try #require(browser.cookie != nil)
        return browser
    }

    /// The balance of `user`'s wallet.
    func balance(_ user: LedgerUser) async throws -> Cents {
        try await store.wallet(userID: user.id, recentLimit: 0).balance
    }
}

/// One answer as a browser sees it.
struct CheckoutAnswer: Sendable {
    var status: Int
    /// Header names in lower case.
    var headers: [String: String]
    var body: String

    /// The value of the input named `name` (in the form with id `form`, when given), HTML entities decoded.
    func field(_ name: String, in form: String? = nil) -> String? {
        var scope = Substring(body)
        if let form {
            guard let start = body.range(of: "<form id=\"\(form)\"") else { return nil }
            scope = body[start.lowerBound...]
            if let end = scope.range(of: "</form>") { scope = scope[..<end.upperBound] }
        }
        guard let input = scope.range(of: "name=\"\(name)\"") else { return nil }
        let tag = scope[input.upperBound...].prefix { $0 != ">" }
        guard let value = tag.range(of: "value=\"") else { return nil }
        return Self.unescape(String(tag[value.upperBound...].prefix { $0 != "\"" }))
    }

    /// The text of the element with `id`: up to its closing tag, inner tags removed, HTML entities decoded.
    func element(_ id: String) -> String? {
        guard let start = body.range(of: " id=\"\(id)\"") else { return nil }
        let open = body[..<start.lowerBound]
        guard let lessThan = open.lastIndex(of: "<"), let close = body[start.upperBound...].firstIndex(of: ">") else {
            return nil
        }
        let name = body[body.index(after: lessThan)...].prefix { $0.isLetter || $0.isNumber }
        let rest = body[body.index(after: close)...]
        guard let end = rest.range(of: "</\(name)>") else { return nil }
        let inner = String(rest[..<end.lowerBound]).replacingOccurrences(
            of: "<[^>]*>",
            with: "",
            options: .regularExpression
        )
        return Self.unescape(inner)
    }

    /// HTML's five escapes undone.
    static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}

/// A browser reduced to what the checkout's tests need: one cookie jar for the checkout's cookie, and requests sent as
/// they are (a redirect is an answer, not followed). Used by one task at a time.
final class CheckoutBrowser: @unchecked Sendable {
    let port: Int
    /// `name=value` of the cookie the server last set, `nil` once it cleared it.
    var cookie: String?
    /// The `Set-Cookie` of the last answer that had one.
    var lastSetCookie: String?

    init(port: Int) { self.port = port }

    /// `GET path`, as a browser's navigation (`Accept: text/html`).
    func get(_ path: String, headers: [String: String] = [:]) async throws -> CheckoutAnswer {
        try await request("GET", path, headers: headers)
    }

    /// `POST path` of a form.
    func post(_ path: String, _ form: [String: String], headers: [String: String] = [:]) async throws -> CheckoutAnswer
    {
        try await request("POST", path, body: Self.encode(form), headers: headers)
    }

    /// Posts the form with id `form` of `page` back to `action`, with its hidden fields and `extra` ones.
    func submit(_ page: CheckoutAnswer, to action: String, extra: [String: String] = [:]) async throws -> CheckoutAnswer
    {
        var form: [String: String] = [:]
        for name in ["view", "sid", "amount", "csrf", "tips", "another"] { form[name] = page.field(name, in: "pay") }
        form.merge(extra) { $1 }
        return try await post(action, form)
    }

    /// Any request; the cookie goes along unless `headers` has a `Cookie` of its own.
    func request(
        _ method: String,
        _ path: String,
        body: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> CheckoutAnswer {
        let connection = try LoopbackConnection(port: port)
        defer { connection.disconnect() }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        var headers = headers
        if headers["Accept"] == nil { headers["Accept"] = "text/html" }
        if headers["Cookie"] == nil, let cookie { headers["Cookie"] = cookie }
        if let body {
            headers["Content-Type"] = headers["Content-Type"] ?? "application/x-www-form-urlencoded"
            headers["Content-Length"] = String(body.utf8.count)
        }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        try connection.send(head + "\r\n" + (body ?? ""))
        let response = try await connection.readResponse(head: method == "HEAD", timeout: .seconds(60))
        // A request that sent a cookie of its own leaves the jar as it was.
        if headers["Cookie"] == cookie || cookie == nil, let setCookie = response.headers["set-cookie"] {
            lastSetCookie = setCookie
            let pair = String(setCookie.prefix { $0 != ";" })
            cookie = setCookie.contains("Max-Age=0") ? nil : pair
        }
        return CheckoutAnswer(
            status: response.status,
            headers: response.headers,
            body: String(decoding: response.body, as: UTF8.self)
        )
    }

    /// Whether the browser (or `cookie` in its place) is signed in: a receipt asked for is then looked for (404), not
    /// refused for want of a sign-in (401).
    func isSignedIn(cookie: String? = nil) async throws -> Bool {
        let path = "/p/0123456789/receipt?sid=00000000-0000-4000-8000-000000000000"
        let answer = try await get(path, headers: cookie.map { ["Cookie": $0] } ?? [:])
        return answer.status == 404
    }

    /// `form` as `application/x-www-form-urlencoded`.
    static func encode(_ form: [String: String]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return form.sorted { $0.key < $1.key }.map { name, value in
            name.addingPercentEncoding(withAllowedCharacters: allowed)! + "="
                + value.addingPercentEncoding(withAllowedCharacters: allowed)!
        }.joined(separator: "&")
    }
}
