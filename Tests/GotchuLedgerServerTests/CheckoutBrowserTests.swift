import Foundation
import GotchuCore
import GotchuLedgerServer
import GotchuOIDC
import GotchuTesting
import Logging
import ServiceLifecycle
import Testing

/// The web checkout in a real browser: headless Chromium, driven through Selenium and chromedriver by
/// `Tests/browser/checkout_browser.py` as a person with a phone would drive it, against a ledger on a loopback port
/// whose public URL is that port's own address, over either store.
///
/// Each session's address is read from its QR code as a phone reads it (`GET /p/{eid}/qr.svg`, rendered by
/// `rsvg-convert`, decoded by `zbarimg`), and the browser opens exactly what was decoded. The script signs in with
/// e-mail and password at 360×640, checks payee, amount and code, and pays; a double click pays once, with the page's
/// script and without it; a payee named with markup and a bidi override reads as text and runs nothing; a browser with
/// JavaScript off still pays; the page shows a payment made elsewhere and a cancel from its event stream; the console
/// reports no content security policy violation (checked to catch one); and a fresh browser signs in through the
/// OpenID Connect issuer (a ``CodeFlowIssuer`` on another loopback port) and pays as the issuer's user. axe-core finds
/// no WCAG 2.1 A/AA or best-practice violation on the sign-in, pay, receipt, cancelled and unknown-code pages, and Tab
/// reaches the sign-in form's fields in reading order.
/// Afterwards the ledger's own records must show each payment exactly once.
///
/// `GOTCHU_CHECKOUT_SCREENSHOT=PATH` keeps the 360×640 screenshot of the page before paying (the README's is
/// `docs/images/checkout.png`).
@Suite("Web checkout in a browser", .serialized, .timeLimit(.minutes(10)))
struct CheckoutBrowserTests {
    /// What `scripts/install-dependencies` installs for these tests.
    static let installHint =
        "run scripts/install-dependencies (chromium, chromium-driver, zbar-tools, librsvg2-bin, and selenium and"
        + " axe-core-python from Tests/requirements.txt in .venv)"

    /// The browser script, beside this package's other test helpers.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("browser/checkout_browser.py")

    /// One session made for one scenario, as the script is told it.
    struct Session: Codable {
        var eid: String
        var sid: String
        var cents: Cents
        var code: String
        /// The address its QR code holds, as `zbarimg` read it: what the browser opens.
        var url: String
    }

    /// The script's input.
    struct Configuration: Codable {
        var base: String
        var password: String
        var payer: String
        var other: String
        var payee: String
        var sessions: [String: Session]
        var issuer: String
        var issuerUser: String
        var issuerFunds: Cents
        var chromium: String
        var chromedriver: String
        var result: String
        var screenshot: String
        var driverLog: String

        enum CodingKeys: String, CodingKey {
            case base, password, payer, other, payee, sessions, issuer, chromium, chromedriver, result, screenshot
            case issuerUser = "issuer_user"
            case issuerFunds = "issuer_funds"
            case driverLog = "driver_log"
        }
    }

    /// The script's output.
    struct Outcome: Codable {
        struct Failed: Codable {
            var scenario: String
            var message: String
        }
        var passed: [String]
        var failed: [Failed]
    }

    /// Who the issuer signs in, and what the ledger holds for them beforehand.
    static let walkIn = (subject: "walk-in-7", name: "Wren Walker", funds: Cents(5_000))

    @Test(
        "A person opens the QR code's address in headless Chromium, signs in (password or issuer) and pays; the ledger shows each payment once",
        arguments: StoreKind.available
    )
    func paysInABrowser(store kind: StoreKind) async throws {
        guard let python = TestPython.executable, TestPython.canImport(["selenium", "axe_core_python"]),
            let chromium = ChildProcess.which("chromium"), let chromedriver = ChildProcess.which("chromedriver"),
            ChildProcess.which("rsvg-convert") != nil, ChildProcess.which("zbarimg") != nil
        else {
            Issue.record("no Chromium, chromedriver, selenium, rsvg-convert or zbarimg: \(Self.installHint)")
            return
        }
        let directory = try TemporaryDirectory(prefix: "gotchu-checkout-browser")
        defer { directory.remove() }
        let file = { @Sendable (name: String) in directory.url.appendingPathComponent(name) }
        let issuer = CodeFlowIssuer(key: try await IssuerKey.ec(kid: "e1"))
        issuer.signIn(subject: Self.walkIn.subject, name: Self.walkIn.name)
        try await Self.withLedger(store: kind, issuer: issuer) { ledger, issuerURL in
            let shop = try await ledger.user("shop@example.com", name: "Corner Shop")
            try await ledger.store.verifyMerchant(email: "shop@example.com", name: "Corner Shop", actor: "test")
            // Stored as an operator's older tools could store it: markup, quotes and a right-to-left override.
            let hostile = try await ledger.user(
                "evil@example.com",
                name: "<img src=x onerror=alert(1)>\"'&\u{202E}gpj.exe"
            )
            let payer = try await ledger.user("payer@example.com", name: "Pat", funded: 10_000)
            let other = try await ledger.user("other@example.com", name: "Olive", funded: 10_000)
            // The issuer's user, known to the ledger from an earlier visit and funded since.
            let walkIn = try await ledger.store.user(
                issuer: issuerURL,
                subject: Self.walkIn.subject,
                displayName: Self.walkIn.name
            )
            _ = try await ledger.store.fund(userID: walkIn.id, amountCents: Self.walkIn.funds)
            var sessions: [String: Session] = [:]
            for (name, payee, cents) in [
                ("pay", shop, 1250), ("double", shop, 700), ("hostile", hostile, 300), ("elsewhere", shop, 999),
                ("cancel", shop, 555), ("nojs", shop, 450), ("issuer", shop, 820), ("a11y", shop, 610),
            ] as [(String, LedgerUser, Cents)] {
                let session = try await ledger.store.createSession(
                    payeeID: payee.id,
                    amountCents: cents,
                    idempotencyKey: nil
                )
                .session
                let eid = session.eid.rawValue
                // The QR code as a phone's camera reads it: the page's absolute address at the public URL.
                let qr = try await ledger.browser().get("/p/\(eid)/qr.svg", headers: ["Accept": "image/svg+xml"])
                try #require(qr.status == 200, "GET /p/\(eid)/qr.svg answered \(qr.status): \(qr.body)")
                let texts = try QRCodeReader.texts(inSVG: qr.body)
                #expect(texts == ["\(ledger.url.absoluteString)/p/\(eid)"], "\(name)")
                sessions[name] = Session(
                    eid: eid,
                    sid: session.sid,
                    cents: cents,
                    code: ConfirmationCode.of(sessionID: session.sid),
                    url: try #require(texts.first, "no QR code read for \(name)")
                )
            }
            let configuration = Configuration(
                base: ledger.url.absoluteString,
                password: CheckoutLedger.password,
                payer: "payer@example.com",
                other: "other@example.com",
                payee: "shop@example.com",
                sessions: sessions,
                issuer: issuerURL,
                issuerUser: Self.walkIn.name,
                issuerFunds: Self.walkIn.funds,
                chromium: chromium,
                chromedriver: chromedriver,
                result: file("result.json").path,
                screenshot: file("checkout.png").path,
                driverLog: file("chromedriver.log").path
            )
            try JSONEncoder().encode(configuration).write(to: file("configuration.json"))
            let log = file("script.log")
            let process = try SpawnedProcess(
                executable: python,
                arguments: [Self.script.path, file("configuration.json").path],
                output: .file(log),
                error: .file(log)
            )
            // Bounds a hang only: the script's own waits give up long before.
            let status = try await process.exit(timeout: .seconds(900))
            let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            guard let data = try? Data(contentsOf: file("result.json")) else {
                Issue.record("the browser script exited with \(status) and no result:\n\(output)")
                return
            }
            let outcome = try JSONDecoder().decode(Outcome.self, from: data)
            for failure in outcome.failed {
                Issue.record("\(failure.scenario): \(failure.message)")
            }
            #expect(status == 0, "\(output)")
            #expect(
                Set(outcome.passed + outcome.failed.map(\.scenario)) == [
                    "pays", "double_click_pays_once", "hostile_name_is_text", "live_status_paid_elsewhere",
                    "live_status_cancelled", "pays_without_javascript", "the_console_sees_csp",
                    "signs_in_through_the_issuer", "pages_are_accessible",
                ]
            )

            // The ledger's side: each session paid once, by whom the scenario says, the cancelled one by nobody.
            #expect(try await ledger.balance(payer) == 10_000 - 1250 - 700 - 300 - 450)
            #expect(try await ledger.balance(other) == 10_000 - 999)
            #expect(try await ledger.balance(walkIn) == Self.walkIn.funds - 820)
            #expect(try await ledger.balance(shop) == 1250 + 700 + 999 + 450 + 820)
            #expect(try await ledger.balance(hostile) == 300)
            let payers = ["elsewhere": other.id, "issuer": walkIn.id]
            for name in ["pay", "double", "hostile", "elsewhere", "nojs", "issuer"] {
                let sid = try #require(sessions[name]).sid
                #expect(
                    try await ledger.store.session(sid: sid, viewerID: payers[name] ?? payer.id).status == .paid,
                    "\(name)"
                )
            }
            let cancelled = try #require(sessions["cancel"]).sid
            #expect(try await ledger.store.session(sid: cancelled, viewerID: shop.id).status == .cancelled)
            let audit = try await ledger.store.audit()
            #expect(audit.isHealthy && audit.sessionsPaidTwice.isEmpty)

            // The browser went to the issuer once, sent there to come back to the public URL's callback, and the
            // code it brought back was redeemed once.
            let authorizations = issuer.authorizationQueries
            #expect(authorizations.count == 1)
            #expect(authorizations.first?["redirect_uri"] == ledger.url.absoluteString + "/p/oidc/callback")
            #expect(issuer.tokenForms.count == 1)

            // The screenshot of the page before paying: a phone's screen, and not blank.
            let png = try Data(contentsOf: file("checkout.png"))
            #expect(png.count > 5_000)
            #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
            #expect(Self.bigEndian(png, 16) == 360 && Self.bigEndian(png, 20) == 640)
            if kind == .sqlite, let keep = ProcessInfo.processInfo.environment["GOTCHU_CHECKOUT_SCREENSHOT"],
                !keep.isEmpty
            {
                try png.write(to: URL(fileURLWithPath: keep))
            }
        }
    }

    /// The 32-bit big-endian number at `offset` of `data`.
    static func bigEndian(_ data: Data, _ offset: Int) -> Int {
        data.dropFirst(offset).prefix(4).reduce(0) { $0 << 8 | Int($1) }
    }

    /// Runs `body` against a ledger over a fresh store of `kind` that trusts `issuer` (served meanwhile) for browser
    /// sign-in, with its public URL (`--public-url`) the very loopback address it listens on, so that its QR codes
    /// and the issuer's redirects lead a browser back to it; `body` also gets the issuer's URL.
    static func withLedger(
        store kind: StoreKind,
        issuer: CodeFlowIssuer,
        _ body: @Sendable (CheckoutLedger, String) async throws -> Void
    ) async throws {
        let clock = ManualClock()
        issuer.useClock { clock.now() }
        let limits = {
            var limits = LedgerLimits.unlimited
            limits.clock = { clock.now() }
            limits.resolveAccess = .requiresLogin
            return limits
        }()
        let policy = {
            var policy = LedgerPolicy()
            policy.passwordCost = 4
            return policy
        }()
        let quiet = Logger(label: "gotchu.ledger") { _ in SwiftLogNoOpLogHandler() }
        try await issuer.serve { issuerURL in
            try await TestStore.with(kind, policy: policy, clock: clock) { store, _, services in
                let tokens = try await TokenAuthority(secret: String(repeating: "s", count: 40), clock: { clock.now() })
                var configuration = OIDCVerifier.Configuration(issuer: issuerURL, audience: "gotchu")
                configuration.clientID = issuer.clientID
                configuration.clientSecret = issuer.clientSecret
                let identities = OIDCVerifier(configuration, clock: { clock.now() })
                try await running(services, logger: quiet) {
                    try await servingAtItsOwnAddress(logger: quiet) { port, publicURL, onListening in
                        try await LedgerServer.application(
                            store: store,
                            .inProcess(tokens: tokens) {
                                $0.developmentMode = false
                                $0.made.identities = identities
                                $0.port = port
                                $0.limits = limits
                                $0.publicURL = publicURL
                            },
                            logger: quiet,
                            onListening: onListening
                        )
                    } _: { url in
                        try await body(CheckoutLedger(url: url, store: store, clock: clock), issuerURL)
                    }
                }
            }
        }
    }

    /// Runs `services` (a store's connection pool) while `body` runs, and stops them afterwards.
    static func running<T: Sendable>(
        _ services: [any Service],
        logger: Logger,
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        guard !services.isEmpty else { return try await body() }
        let group = ServiceGroup(services: services, gracefulShutdownSignals: [], logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let result: T
            do {
                result = try await body()
            } catch {
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return result
        }
    }

    /// Runs the server `make` builds for a free loopback port, with `http://127.0.0.1:PORT` as its public URL, while
    /// `body` runs with that address; stops it afterwards. The port is chosen before the server binds it, so should
    /// another process take it meanwhile, the server stops before it listens and another port is tried.
    static func servingAtItsOwnAddress<T: Sendable>(
        logger: Logger,
        _ make: (Int, PublicURL, @escaping @Sendable (Int) async -> Void) async throws -> any Service,
        _ body: @Sendable (URL) async throws -> T
    ) async throws -> T {
        var attempt = 1
        while true {
            let port = try freeLoopbackPort()
            let address = "http://127.0.0.1:\(port)"
            let (listening, continuation) = AsyncStream.makeStream(of: Int.self)
            let server = try await make(port, try PublicURL(address)) { continuation.yield($0) }
            let group = ServiceGroup(services: [server], gracefulShutdownSignals: [], logger: logger)
            let lastAttempt = attempt == 3
            let served: T? = try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    defer { continuation.finish() }
                    try await group.run()
                }
                var ports = listening.makeAsyncIterator()
                guard await ports.next() != nil else {
                    // Stopped before it listened (its port taken meanwhile): another port, unless this was the
                    // last try.
                    do {
                        try await tasks.waitForAll()
                    } catch {
                        if lastAttempt { throw error }
                    }
                    if lastAttempt { throw CancellationError() }
                    return nil
                }
                let result: T
                do {
                    result = try await body(URL(string: address)!)
                } catch {
                    await group.triggerGracefulShutdown()
                    try? await tasks.waitForAll()
                    throw error
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            }
            if let served { return served }
            attempt += 1
        }
    }
}
