import Foundation
import GotchuCore
import GotchuLedgerServer
import GotchuTesting
import Testing

/// The web checkout in a real browser: headless Chromium, driven through Selenium and chromedriver by
/// `Tests/browser/checkout_browser.py` as a person with a phone would drive it, against a ledger on a loopback port.
///
/// The script opens each session's checkout address at 360×640, signs in with e-mail and password, checks payee,
/// amount and code, and pays; a double click pays once, with the page's script and without it; a payee named with
/// markup and a bidi override reads as text and runs nothing; a browser with JavaScript off still pays; the page shows
/// a payment made elsewhere and a cancel from its event stream; and the console reports no content security policy
/// violation (checked to catch one).
/// Afterwards the ledger's own records must show each payment exactly once.
///
/// `GOTCHU_CHECKOUT_SCREENSHOT=PATH` keeps the 360×640 screenshot of the page before paying (the README's is
/// `docs/images/checkout.png`).
@Suite("Web checkout in a browser", .serialized)
struct CheckoutBrowserTests {
    /// What `scripts/install-dependencies` installs for these tests.
    static let installHint =
        "run scripts/install-dependencies (chromium, chromium-driver, and selenium from Tests/requirements.txt in .venv)"

    /// The browser script, beside this package's other test helpers.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("browser/checkout_browser.py")

    /// One session made for one scenario, as the script is told it.
    struct Session: Codable {
        var eid: String
        var sid: String
        var cents: Cents
        var code: String
    }

    /// The script's input.
    struct Configuration: Codable {
        var base: String
        var password: String
        var payer: String
        var other: String
        var payee: String
        var sessions: [String: Session]
        var chromium: String
        var chromedriver: String
        var result: String
        var screenshot: String
        var driverLog: String

        enum CodingKeys: String, CodingKey {
            case base, password, payer, other, payee, sessions, chromium, chromedriver, result, screenshot
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

    @Test("A person pays on the checkout page in headless Chromium, and the ledger shows each payment once")
    func paysInABrowser() async throws {
        guard let python = TestPython.executable, TestPython.canImport(["selenium"]),
            let chromium = ChildProcess.which("chromium"), let chromedriver = ChildProcess.which("chromedriver")
        else {
            Issue.record("no Chromium, chromedriver or selenium: \(Self.installHint)")
            return
        }
        let directory = try TemporaryDirectory(prefix: "gotchu-checkout-browser")
        defer { directory.remove() }
        let file = { @Sendable (name: String) in directory.url.appendingPathComponent(name) }
        try await CheckoutLedger.with(store: .sqlite) { ledger in
            let shop = try await ledger.user("shop@example.com", name: "Corner Shop")
            try await ledger.store.verifyMerchant(email: "shop@example.com", name: "Corner Shop", actor: "test")
            // Stored as an operator's older tools could store it: markup, quotes and a right-to-left override.
            let hostile = try await ledger.user(
                "evil@example.com",
                name: "<img src=x onerror=alert(1)>\"'&\u{202E}gpj.exe"
            )
            let payer = try await ledger.user("payer@example.com", name: "Pat", funded: 10_000)
            let other = try await ledger.user("other@example.com", name: "Olive", funded: 10_000)
            var sessions: [String: Session] = [:]
            for (name, payee, cents) in [
                ("pay", shop, 1250), ("double", shop, 700), ("hostile", hostile, 300), ("elsewhere", shop, 999),
                ("cancel", shop, 555), ("nojs", shop, 450),
            ] as [(String, LedgerUser, Cents)] {
                let session = try await ledger.store.createSession(
                    payeeID: payee.id,
                    amountCents: cents,
                    idempotencyKey: nil
                )
                .session
                sessions[name] = Session(
                    eid: session.eid.rawValue,
                    sid: session.sid,
                    cents: cents,
                    code: ConfirmationCode.of(sessionID: session.sid)
                )
            }
            let configuration = Configuration(
                base: ledger.url.absoluteString,
                password: CheckoutLedger.password,
                payer: "payer@example.com",
                other: "other@example.com",
                payee: "shop@example.com",
                sessions: sessions,
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
                ]
            )

            // The ledger's side: each session paid once, by whom the scenario says, the cancelled one by nobody.
            #expect(try await ledger.balance(payer) == 10_000 - 1250 - 700 - 300 - 450)
            #expect(try await ledger.balance(other) == 10_000 - 999)
            #expect(try await ledger.balance(shop) == 1250 + 700 + 999 + 450)
            #expect(try await ledger.balance(hostile) == 300)
            for name in ["pay", "double", "hostile", "elsewhere", "nojs"] {
                let sid = try #require(sessions[name]).sid
                #expect(
                    try await ledger.store.session(sid: sid, viewerID: name == "elsewhere" ? other.id : payer.id)
                        .status == .paid,
                    "\(name)"
                )
            }
            let cancelled = try #require(sessions["cancel"]).sid
            #expect(try await ledger.store.session(sid: cancelled, viewerID: shop.id).status == .cancelled)
            let audit = try await ledger.store.audit()
            #expect(audit.isHealthy && audit.sessionsPaidTwice.isEmpty)

            // The screenshot of the page before paying: a phone's screen, and not blank.
            let png = try Data(contentsOf: file("checkout.png"))
            #expect(png.count > 5_000)
            #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
            #expect(Self.bigEndian(png, 16) == 360 && Self.bigEndian(png, 20) == 640)
            if let keep = ProcessInfo.processInfo.environment["GOTCHU_CHECKOUT_SCREENSHOT"], !keep.isEmpty {
                try png.write(to: URL(fileURLWithPath: keep))
            }
        }
    }

    /// The 32-bit big-endian number at `offset` of `data`.
    static func bigEndian(_ data: Data, _ offset: Int) -> Int {
        data.dropFirst(offset).prefix(4).reduce(0) { $0 << 8 | Int($1) }
    }
}
