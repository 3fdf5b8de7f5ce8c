import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuTesting
import Testing

@testable import GotchuLedgerServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The public URL, the `checkout_url` of new EIDs, and `GET /p/{eid}/qr.svg`.
@Suite("QR codes of the web checkout", .timeLimit(.minutes(10)))
struct QRCodeTests {
    static let publicURL = try! PublicURL("https://Pay.Example.com/shop")

    @Test("A public URL is checked and normalised")
    func publicURLs() throws {
        let accepted: [(String, String)] = [
            ("https://pay.example.com", "https://pay.example.com/"),
            ("HTTPS://Pay.Example.COM/", "https://pay.example.com/"),
            ("https://pay.example.com/Shop/Till-1", "https://pay.example.com/Shop/Till-1/"),
            ("https://pay.example.com:8443/gotchu/", "https://pay.example.com:8443/gotchu/"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
            ("http://[::1]:8080/", "http://[::1]:8080/"),
            ("https://xn--bcher-kva.example/", "https://xn--bcher-kva.example/"),
            ("https://10.0.0.5/", "https://10.0.0.5/"),
        ]
        for (text, normalised) in accepted {
            let url = try PublicURL(text)
            #expect(url.description == normalised, "\(text)")
            #expect(URL(string: url.description) != nil)
        }
        let refused: [(String, String)] = [
            ("pay.example.com", "https://"),
            ("ftp://pay.example.com/", "https://"),
            ("file:///etc/passwd", "https://"),
            ("https://", "host name"),
            ("https:///p", "host name"),
            ("https://user:secret@pay.example.com/", "no user name"),
            ("https://pay@example.com/", "no user name"),
            ("https://pay.example.com/?shop=1", "no query"),
            ("https://pay.example.com/?", "no query"),
            ("https://pay.example.com/#top", "fragment"),
            ("https://pay.example.com/a b", "no spaces"),
            ("https://bücher.example/", "xn--"),
            ("https://pay.example.com:0/", "port from 1 to 65535"),
            ("https://pay.example.com:65536/", "port from 1 to 65535"),
            ("https://pay.example.com:/", "port from 1 to 65535"),
            ("https://pay..example.com/", "host name"),
            ("https://-pay.example.com/", "host name"),
            ("https://pay_shop.example.com/", "host name"),
            ("https://pay.example.com/a/../b", "segments"),
            ("https://pay.example.com//b", "segments"),
            ("https://pay.example.com/a/./", "segments"),
            ("https://pay.example.com/a\"b", "path of letters"),
            ("https://pay.example.com/a<b>", "path of letters"),
            ("https://[::1/", "closing ]"),
            ("https://[zz]/", "IPv6"),
            ("https://pay.example.com/" + String(repeating: "a", count: 200), "at most 189"),
        ]
        for (text, reason) in refused {
            let error = #expect(throws: PublicURL.Invalid.self, "\(text)") { try PublicURL(text) }
            #expect(error?.description.contains(reason) == true, "\(text): \(error?.description ?? "")")
        }
        #expect(try PublicURL("https://pay.example.com/").isHTTPS)
        #expect(try !PublicURL("http://pay.example.com/").isHTTPS)
        for loopback in ["http://localhost:8080/", "http://127.0.0.1/", "http://127.1.2.3/", "http://[::1]/"] {
            #expect(try PublicURL(loopback).isLoopback, "\(loopback)")
        }
        for remote in ["http://pay.example.com/", "http://127.example.com/", "http://10.0.0.5/", "http://[::2]/"] {
            #expect(try !PublicURL(remote).isLoopback, "\(remote)")
        }
        // The longest public URL makes a checkout address that fits a version 10 symbol at level M.
        let longest = try PublicURL("https://pay.example.com/" + String(repeating: "a", count: 164))
        #expect(longest.description.utf8.count == CheckoutURL.maximumPublicURLLength)
        let link = try #require(CheckoutLink(rawValue: "AbCdEfGhIjKlMnOpQrSt_w"))
        #expect(longest.checkoutURL(for: link).utf8.count == CheckoutURL.maximumLength)
        #expect(CheckoutURL.maximumLength <= 213)
    }

    @Test("A client takes a checkout address only when it names the EID beside it")
    func clientsCheckTheAddress() {
        let eid = EID(rawValue: "0123456789")!
        let good = [
            "https://pay.example.com/p/0123456789", "http://127.0.0.1:8080/shop/p/0123456789",
            "https://pay.example.com/p/AbCdEfGhIjKlMnOpQrSt_w", "https://pay.example.com/shop/p/AbCdEfGhIjKlMnOpQrStAQ",
        ]
        for url in good { #expect(CheckoutURL.validated(url, eid: eid) == url, "\(url)") }
        let bad: [String?] = [
            nil, "", "https://pay.example.com/p/9876543210", "https://pay.example.com/p/0123456789/",
            "https://pay.example.com/p/0123456789?x=1", "https://pay.example.com/p/0123456789#x",
            "javascript:alert(1)//p/0123456789", "ftp://pay.example.com/p/0123456789",
            "https://evil@pay.example.com/p/0123456789", "https:///p/0123456789", "https://:80/p/0123456789",
            "https://pay.example.com/p/0123456789\u{1B}[2J", "https://pay.example.com /p/0123456789",
            "HTTPS://pay.example.com/p/0123456789",
            "https://pay.example.com/" + String(repeating: "a", count: 200) + "/p/0123456789",
            // A link is 22 base64url characters whose last one ends 128 bits.
            "https://pay.example.com/p/AbCdEfGhIjKlMnOpQrSt_x", "https://pay.example.com/p/AbCdEfGhIjKlMnOpQrStw",
            "https://pay.example.com/p/AbCdEfGhIjKlMnOpQrSt+w", "https://pay.example.com/pAbCdEfGhIjKlMnOpQrSt_w",
        ]
        for url in bad { #expect(CheckoutURL.validated(url, eid: eid) == nil, "\(url ?? "nil")") }
    }

    @Test(
        "A session's checkout address is its own link, the same through every rotation and unlike its EIDs; QR codes read back as it",
        arguments: StoreKind.available
    )
    func checkoutURLAndQRCode(store: StoreKind) async throws {
        try await TestLedger.with(store: store, publicURL: Self.publicURL) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let created = try await payee.createSession(amountCents: 1_250)
            let base = "https://pay.example.com/shop/p/"
            let url = try #require(created.checkoutURL)
            let link = try #require(CheckoutLink(rawValue: String(url.dropFirst(base.count))))
            #expect(url == base + link.rawValue)
            #expect(CheckoutURL.validated(url, eid: created.eid) == url)
            let rotated = try await payee.rotateEID(sid: created.sid)
            #expect(rotated.checkoutURL == url)
            #expect(rotated.eid != created.eid)
            // Nothing of the session id or an EID shows in the link, and another session has another.
            #expect(!link.rawValue.contains(created.eid.rawValue) && !link.rawValue.contains(rotated.eid.rawValue))
            let other = try await payee.createSession(amountCents: 1_250)
            #expect(other.checkoutURL != url && other.checkoutURL?.hasPrefix(base) == true)

            for (code, address) in [
                (link.rawValue, url), (created.eid.rawValue, base + created.eid.rawValue),
                (rotated.eid.rawValue, base + rotated.eid.rawValue),
            ] {
                let response = try await ledger.raw("GET", "/p/\(code)/qr.svg")
                #expect(response.status == 200)
                #expect(response.headers["content-type"] == "image/svg+xml")
                #expect(response.headers["cache-control"] == "no-store")
                #expect(response.headers["x-content-type-options"] == "nosniff")
                #expect(response.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'")
                let svg = String(decoding: response.body, as: UTF8.self)
                #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
                #expect(!svg.contains("style") && !svg.contains("script") && !svg.contains("href"))
                #expect(try QRCodeReader.texts(inSVG: svg) == [address])
            }
            // HEAD answers as GET, without the body.
            let head = try await ledger.raw("HEAD", "/p/\(created.eid)/qr.svg")
            #expect(head.status == 200 && head.body.isEmpty)
        }
    }

    @Test("The QR code tells nothing of sessions: any well-formed EID gets one, with no token, whatever resolve needs")
    func qrCodeRevealsNothing() async throws {
        var limits = LedgerLimits.unlimited
        limits.resolveAccess = .requiresLogin
        try await TestLedger.with(limits: limits, publicURL: Self.publicURL) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 500)
            let cancelled = try await payee.createSession(amountCents: 500)
            try await payee.cancel(sid: cancelled.sid)
            let unknown = try #require(
                [EID(rawValue: "0000000000")!, EID(rawValue: "ffffffffff")!].first {
                    $0 != session.eid && $0 != cancelled.eid
                }
            )
            var bodies: [String] = []
            for eid in [session.eid, cancelled.eid, unknown] {
                let response = try await ledger.raw("GET", "/p/\(eid)/qr.svg")
                #expect(response.status == 200, "\(eid)")
                // The same document but for the address it encodes.
                bodies.append(
                    try #require(String(data: response.body, encoding: .utf8))
                        .replacingOccurrences(of: eid.rawValue, with: "EID")
                        .replacingOccurrences(of: #"d="[^"]*""#, with: "", options: .regularExpression)
                )
            }
            #expect(Set(bodies).count == 1)
            // Resolving the same EID without a token is refused, as the server says.
            let resolve = try await ledger.raw("POST", "/sessions/resolve", body: #"{"eid":"\#(session.eid)"}"#)
            #expect(resolve.status == 401)
        }
    }

    @Test("A malformed EID is refused 400 before anything, and without a public URL the answer is 404 naming it")
    func refusals() async throws {
        try await TestLedger.with { ledger in
            let payee = try await ledger.client("payee@example.com")
            let created = try await payee.createSession(amountCents: 500)
            #expect(created.checkoutURL == nil)
            #expect(try await payee.rotateEID(sid: created.sid).checkoutURL == nil)
            let missing = try await ledger.raw("GET", "/p/\(created.eid)/qr.svg")
            #expect(missing.status == 404)
            #expect(TestLedger.problemKind(missing.body) == .notFound)
            let detail = try APIJSON.decoder().decode(Problem.self, from: missing.body).detail ?? ""
            #expect(detail.contains("--public-url") && detail.contains("public_url"), "\(detail)")
            for eid in ["ABCDEF0123", "012345678", "01234567890", "012345678g", "zz", "0123%2056789"] {
                let response = try await ledger.raw("GET", "/p/\(eid)/qr.svg")
                #expect(response.status == 400, "\(eid)")
                #expect(TestLedger.problemKind(response.body) == .badRequest, "\(eid)")
            }
        }
        try await TestLedger.with(publicURL: Self.publicURL) { ledger in
            for eid in ["ABCDEF0123", "0123"] {
                let status = try await ledger.raw("GET", "/p/\(eid)/qr.svg").status
                #expect(status == 400, "\(eid)")
            }
        }
    }

    @Test("QR codes are counted per client address at resolve's rate, in a bucket of their own")
    func rateLimited() async throws {
        var limits = LedgerLimits.unlimited
        limits.resolvePerAddress = RateLimit(perSecond: 0.001, burst: 3)
        limits.resolveAccess = .public
        try await TestLedger.with(limits: limits, publicURL: Self.publicURL) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 500)
            // Refused requests cost nothing: a malformed EID is not counted.
            #expect(try await ledger.raw("GET", "/p/nope/qr.svg").status == 400)
            for _ in 0..<3 { #expect(try await ledger.raw("GET", "/p/\(session.eid)/qr.svg").status == 200) }
            let refused = try await ledger.raw("GET", "/p/\(session.eid)/qr.svg")
            #expect(refused.status == 429)
            #expect(TestLedger.problemKind(refused.body) == .rateLimited)
            #expect(Int(refused.headers["retry-after"] ?? "").map { $0 >= 1 } == true)
            // Resolving has its own bucket, still full.
            let resolve = try await ledger.raw("POST", "/sessions/resolve", body: #"{"eid":"\#(session.eid)"}"#)
            #expect(resolve.status == 200)
            // The test's clock moves on: the bucket refills.
            ledger.clock.advance(seconds: 1_000)
            #expect(try await ledger.raw("GET", "/p/\(session.eid)/qr.svg").status == 200)
        }
    }
}

/// `gotchu server --public-url`.
@Suite("gotchu server --public-url", .timeLimit(.minutes(10)))
struct PublicURLCommandTests {
    @Test(
        "A public URL that is not an absolute https URL is refused before the server starts",
        arguments: [
            (["--dev", "--public-url", "pay.example.com"], "--public-url: must be an absolute http(s) URL"),
            (["--dev", "--public-url", "https://pay.example.com/?a=1"], "no query"),
            (
                ["--public-url", "http://pay.example.com/", "--jwt-secret", String(repeating: "s", count: 40)],
                "--public-url must be https (http only on loopback or with --dev)"
            ),
        ]
    )
    func refused(options: [String], message: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--port", "0"] + options,
            environment: ["XDG_DATA_HOME": directory.url.path]
        )
        #expect(try await server.waitForExit() != 0)
        #expect(server.standardError.contains(message), "\(server.standardError)")
        #expect(!server.lines.contains { $0.hasPrefix("listening on") })
    }

    @Test("From the environment, the server states checkout addresses and serves their QR codes")
    func servesQRCodes() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--dev", "--port", "0"],
            environment: [
                "XDG_DATA_HOME": directory.url.path, "GOTCHU_SERVER_PUBLIC_URL": "https://Pay.Example.com/shop",
            ]
        )
        defer { _ = try? server.stopNow() }
        let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        let url = try #require(URL(string: String(line.dropFirst("listening on ".count))))
        var client = LedgerClient(baseURL: url)
        client.token = try await client.devLogin(email: "shop@example.com").token
        let created = try await client.createSession(amountCents: 700)
        let checkout = try #require(created.checkoutURL)
        #expect(CheckoutURL.validated(checkout, eid: created.eid) == checkout)
        #expect(checkout.hasPrefix("https://pay.example.com/shop/p/"))
        let link = checkout.dropFirst("https://pay.example.com/shop/p/".count)
        let (data, _) = try await URLSession.shared.data(from: url.appendingPathComponent("p/\(link)/qr.svg"))
        #expect(try QRCodeReader.texts(inSVG: String(decoding: data, as: UTF8.self)) == [checkout])
        #expect(try await server.stop(signal: SIGTERM) == 0)
    }

    @Test("With --dev, plain http to another machine is allowed, with a warning")
    func httpWithDevWarns() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--dev", "--port", "0", "--public-url", "http://192.168.1.20:8080"],
            environment: ["XDG_DATA_HOME": directory.url.path]
        )
        defer { _ = try? server.stopNow() }
        _ = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        let warned = try await eventually(timeout: .seconds(60)) {
            server.standardError.contains("the public URL is plain http")
        }
        #expect(warned, "\(server.standardError)")
        #expect(try await server.stop(signal: SIGTERM) == 0)
    }
}
