import Crypto
import Foundation
import GotchuSettings
import GotchuTesting
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
import Testing

@testable import GotchuLedgerServer
@testable import GotchuWebhooks

#if canImport(Glibc)
    import Glibc
#endif

/// A receiver written in Swift verifies a delivery like this, with swift-crypto alone: the snippet the documentation
/// shows (kept here, where a test runs it against the server's signatures).
///
/// `header` is the `Gotchu-Signature` header, `body` the raw body as it arrived, `secret` the endpoint's `whsec_…`.
func verifyGotchuWebhook(body: Data, header: String, secret: String, now: Date = Date()) -> Bool {
    var timestamp: String?
    var signatures: [String] = []
    for part in header.split(separator: ",") {
        let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
        guard pair.count == 2 else { continue }
        if pair[0] == "t" { timestamp = pair[1] }
        if pair[0] == "v1" { signatures.append(pair[1]) }
    }
    // Refuse old (replayed) deliveries: 5 minutes either way.
    guard let timestamp, let seconds = Double(timestamp), abs(now.timeIntervalSince1970 - seconds) <= 300 else {
        return false
    }
    let key = SymmetricKey(data: Data(secret.utf8))
    let signed = Data((timestamp + ".").utf8) + body
    return signatures.contains { signature in
        // Compared in constant time by isValidAuthenticationCode.
        guard let code = Data(hexadecimal: signature) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: signed, using: key)
    }
}

extension Data {
    /// The bytes of an even number of hexadecimal digits; `nil` for anything else.
    init?(hexadecimal text: String) {
        guard text.utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}

/// What a refusal of a local or private address adds: the setting that lets an operator allow it.
let allowHostsHint = "; a receiver of the ledger's own may be allowed with the server's --webhook-allow-hosts"

@Suite("Webhook signatures", .timeLimit(.minutes(10)))
struct WebhookSignatureTests {
    static let secret = "whsec_" + String(repeating: "k", count: 43)
    static let body = Data(#"{"id":"evt_1","type":"payment.succeeded","created":1700000000,"data":{}}"#.utf8)

    @Test("The signature is HMAC-SHA256 of \"t.body\" under the secret, as an independent computation says")
    func knownAnswer() throws {
        let header = WebhookSignature.header(body: Self.body, timestamp: 1_700_000_000, secrets: [Self.secret])
        let expected = HMAC<SHA256>.authenticationCode(
            for: Data("1700000000.".utf8) + Self.body,
            using: SymmetricKey(data: Data(Self.secret.utf8))
        ).map { String(format: "%02x", $0) }.joined()
        #expect(header == "t=1700000000,v1=\(expected)")
    }

    @Test("The documented Swift check accepts a fresh signature and refuses another body, secret or an old one")
    func documentedSwiftCheck() {
        let now = Date()
        let t = Int64(now.timeIntervalSince1970)
        let header = WebhookSignature.header(body: Self.body, timestamp: t, secrets: [Self.secret])
        #expect(verifyGotchuWebhook(body: Self.body, header: header, secret: Self.secret, now: now))
        #expect(WebhookSignature.isValid(header: header, body: Self.body, secret: Self.secret, now: now))
        var tampered = Self.body
        tampered[tampered.count - 2] = UInt8(ascii: " ")
        #expect(!verifyGotchuWebhook(body: tampered, header: header, secret: Self.secret, now: now))
        #expect(!verifyGotchuWebhook(body: Self.body, header: header, secret: Self.secret + "x", now: now))
        let old = now.addingTimeInterval(301)
        #expect(!verifyGotchuWebhook(body: Self.body, header: header, secret: Self.secret, now: old))
        #expect(!WebhookSignature.isValid(header: header, body: Self.body, secret: Self.secret, now: old))
        #expect(!verifyGotchuWebhook(body: Self.body, header: "v1=00", secret: Self.secret, now: now))
    }

    @Test("During a rotation both secrets sign, the current one first; either verifies")
    func rotation() {
        let now = Date()
        let old = "whsec_" + String(repeating: "o", count: 43)
        let header = WebhookSignature.header(
            body: Self.body,
            timestamp: Int64(now.timeIntervalSince1970),
            secrets: [Self.secret, old]
        )
        #expect(header.split(separator: ",").filter { $0.hasPrefix("v1=") }.count == 2)
        #expect(verifyGotchuWebhook(body: Self.body, header: header, secret: Self.secret, now: now))
        #expect(verifyGotchuWebhook(body: Self.body, header: header, secret: old, now: now))
        #expect(!verifyGotchuWebhook(body: Self.body, header: header, secret: "whsec_other", now: now))
    }

    @Test("The documented Python check agrees with the server's signatures")
    func documentedPythonCheck() async throws {
        let python = try #require(TestPython.executable, "no Python: \(TestPython.installHint)")
        let now = Int64(Date().timeIntervalSince1970)
        let header = WebhookSignature.header(body: Self.body, timestamp: now, secrets: ["whsec_new", Self.secret])
        let snippets = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/snippets").path
        let script = """
            import sys
            sys.path.insert(0, sys.argv[1])
            from verify_webhook import SeenEvents, verify
            body = sys.stdin.buffer.read()
            seen = SeenEvents()
            print(verify(body, sys.argv[2], sys.argv[3]), verify(body + b" ", sys.argv[2], sys.argv[3]),
                  verify(body, sys.argv[2], "whsec_wrong"), verify(body, sys.argv[2], sys.argv[3], now=0),
                  seen.first_time("evt_1"), seen.first_time("evt_1"))
            """
        let run = try RunningCommand(
            URL(fileURLWithPath: python),
            ["-c", script, snippets, header, Self.secret],
            input: Self.body
        )
        #expect(try await run.waitForExit() == 0, "\(run.standardError)")
        #expect(run.lines == ["True False False False True False"])
    }
}

@Suite("Webhook address policy", .timeLimit(.minutes(10)))
struct WebhookAddressPolicyTests {
    let policy = WebhookAddressPolicy(allowedHosts: ["127.0.0.1", "[::1]", "Hooks.Internal"])

    @Test("Refused addresses, spelled every way, with their reasons")
    func refusedAddresses() throws {
        let refused: [(String, String)] = [
            ("127.0.0.1", "loopback"), ("127.0.0.2", "loopback"), ("::1", "loopback"),
            ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"),
            ("192.168.1.1", "private"), ("fc00::1", "private"), ("fd12:3456::1", "private"),
            ("169.254.1.1", "link-local"), ("fe80::1", "link-local"), ("febf::1", "link-local"),
            ("169.254.169.254", "cloud metadata"), ("fd00:ec2::254", "cloud metadata"),
            ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
            ("100.64.0.1", "shared address space"), ("100.127.255.255", "shared address space"),
            ("::ffff:127.0.0.1", "IPv4-mapped, loopback"), ("::ffff:169.254.169.254", "IPv4-mapped, cloud metadata"),
            ("::ffff:10.0.0.1", "IPv4-mapped, private"), ("64:ff9b::a00:1", "NAT64, private"),
            ("2002:7f00:1::", "6to4, loopback"), ("255.255.255.255", "reserved"),
        ]
        for (text, reason) in refused {
            let address = try #require(IPAddressBytes(literal: text), "\(text)")
            #expect(address.refusal == reason, "\(text): \(address.refusal ?? "allowed")")
        }
        for text in ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            let address = try #require(IPAddressBytes(literal: text), "\(text)")
            #expect(address.refusal == nil, "\(text): \(address.refusal ?? "")")
        }
    }

    @Test("Registration's checks without the network: scheme, host, length, user info, literal addresses")
    func urlForms() throws {
        let refusals: [String: String] = [
            "": "url is required",
            "ftp://example.com/": "url must be an https URL",
            "http://example.com/hook":
                "url must be https (http only for the hosts of the server's --webhook-allow-hosts)",
            "https://user:pw@example.com/": "url must not hold a user name or password",
            "https://example.com/#part": "url must not hold a fragment",
            "https:///path": "url must name a host",
            "https://exa mple.com/": "url must be ASCII without spaces or control characters (percent-encode the rest)",
            "https://127.0.0.2:8443/": "url's address 127.0.0.2 is refused (loopback)" + allowHostsHint,
            "https://[::ffff:169.254.169.254]/":
                "url's address ::ffff:169.254.169.254 is refused (IPv4-mapped, cloud metadata)" + allowHostsHint,
            "https://10.0.0.1/": "url's address 10.0.0.1 is refused (private)" + allowHostsHint,
            "https://" + String(repeating: "a", count: 2048) + ".com/": "url must be at most 2048 bytes",
        ]
        for (url, message) in refusals {
            #expect(throws: WebhookURLError(message), "\(url.prefix(40))") { try policy.target(url) }
        }
        let target = try policy.target("https://Example.COM/hooks/gotchu?x=1")
        #expect(target.host == "example.com" && target.port == 443 && target.isHTTPS)
        #expect(target.pathAndQuery == "/hooks/gotchu?x=1" && target.hostHeader == "Example.COM")
        let local = try policy.target("http://127.0.0.1:8080")
        #expect(
            local.isAllowListed && !local.isHTTPS && local.pathAndQuery == "/" && local.hostHeader == "127.0.0.1:8080"
        )
        #expect(try policy.target("http://[::1]:9/x").isAllowListed)
        #expect(try policy.target("http://hooks.internal./x").isAllowListed)
        // https to an allow-listed address is allowed too; to a loopback address that is not listed it is refused.
        #expect(try policy.target("https://127.0.0.1:8443/").isAllowListed)
    }

    @Test("A host name is refused for what it resolves to, at registration and at every delivery")
    func resolvedAddresses() async throws {
        let resolver = TestWebhookResolver(names: [
            "hooks.example": ["192.0.2.10"], "rebinding.example": ["192.0.2.11", "127.0.0.1"],
            "xn--bcher-kva.example": ["192.0.2.12"],
        ])
        #expect(try await policy.check(url: "https://hooks.example/x", resolver: resolver).host == "hooks.example")
        // An internationalised name in its xn-- form is that name, resolved and sent as written.
        let idn = try await policy.check(url: "https://XN--BCHER-KVA.example:8443/x", resolver: resolver)
        #expect(idn.host == "xn--bcher-kva.example" && idn.port == 8443)
        #expect(idn.hostHeader == "XN--BCHER-KVA.example:8443")
        await #expect(
            throws: WebhookURLError(
                "url is refused: rebinding.example resolves to 127.0.0.1, which is refused (loopback)" + allowHostsHint
            )
        ) {
            try await policy.check(url: "https://rebinding.example/x", resolver: resolver)
        }
        await #expect(throws: WebhookURLError.self) {
            try await policy.check(url: "https://unknown.example/x", resolver: resolver)
        }
        // An allow-listed name is not resolved at registration.
        #expect(try await policy.check(url: "http://hooks.internal/x", resolver: resolver).isAllowListed)
        // The system resolver: decimal and short forms of loopback are still loopback.
        for url in ["https://2130706433/", "https://127.1/", "https://0x7f.0.0.1/", "https://localhost/"] {
            await #expect(throws: WebhookURLError.self, "\(url)") { try await policy.check(url: url) }
        }
    }

    @Test("Allow-list entries: names and literal addresses only")
    func allowListEntries() {
        for host in ["hooks.internal", "127.0.0.1", "::1", "[::1]", "receiver_1.local"] {
            #expect(WebhookAddressPolicy.isValidHost(host), "\(host)")
        }
        for host in ["", "http://x", "a b", "host:80", "x/y"] {
            #expect(!WebhookAddressPolicy.isValidHost(host), "\(host)")
        }
    }
}

@Suite("Webhook retry schedule", .timeLimit(.minutes(10)))
struct WebhookRetryScheduleTests {
    @Test("From the base, doubling to the cap, each delay lengthened by at most a quarter, within the window")
    func schedule() {
        let schedule = WebhookRetrySchedule(base: .seconds(30))
        #expect(schedule.nominalDelay(afterAttempt: 1) == .seconds(30))
        #expect(schedule.nominalDelay(afterAttempt: 2) == .seconds(60))
        #expect(schedule.nominalDelay(afterAttempt: 5) == .seconds(480))
        #expect(schedule.nominalDelay(afterAttempt: 20) == .seconds(6 * 3600))
        #expect(schedule.nominalDelay(afterAttempt: 10_000) == .seconds(6 * 3600))
        var generator = SystemRandomNumberGenerator()
        var age = Duration.zero
        var attempts = 1
        while let delay = schedule.delay(afterAttempt: attempts, age: age, using: &generator) {
            let nominal = schedule.nominalDelay(afterAttempt: attempts)
            #expect(delay >= nominal && delay <= nominal * 1.25)
            age += delay
            attempts += 1
        }
        // Given up within three days, after a couple of dozen attempts, not hundreds.
        #expect(age <= .seconds(3 * 86_400))
        #expect((10...30).contains(attempts), "\(attempts) attempts")
        #expect(schedule.delay(afterAttempt: 1, age: .seconds(3 * 86_400)) == nil)
    }
}

@Suite("Webhook HTTP client", .timeLimit(.minutes(10)))
struct WebhookHTTPClientTests {
    static let policy = WebhookAddressPolicy(allowedHosts: ["127.0.0.1"])

    @Test("POSTs the body with its headers and reads the status; a redirect is an answer, not followed")
    func postsAndNeverFollows() async throws {
        let router = Router()
        let seen = Seen()
        router.post("/hook") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            seen.record(
                "\(request.headers[.contentType] ?? "") \(request.headers[HTTPField.Name("X-Test")!] ?? "") "
                    + String(buffer: body)
            )
            return Response(status: .accepted)
        }
        router.post("/moved") { _, _ -> Response in
            seen.record("moved")
            return Response(status: .temporaryRedirect, headers: [.location: "/hook"])
        }
        router.post("/broken") { _, _ -> Response in
            Response(status: .internalServerError, body: .init(byteBuffer: ByteBuffer(string: "no\u{1b}[31m")))
        }
        try await withLoopbackApplication(router) { base in
            let client = WebhookHTTPClient(policy: Self.policy)
            let answer = try await client.post(
                url: base + "/hook",
                headers: [("X-Test", "yes")],
                body: Array("{}".utf8)
            )
            #expect(answer.status == 202)
            let moved = try await client.post(url: base + "/moved", headers: [], body: [])
            #expect(moved.status == 307)
            let broken = try await client.post(url: base + "/broken", headers: [], body: [])
            #expect(broken.status == 500 && broken.body.hasPrefix("no"))
            #expect(seen.all == ["application/json yes {}", "moved"])
        }
    }

    @Test("Refused before connecting: loopback not on the allow list, over http and https, by name too")
    func refusedBeforeConnecting() async throws {
        let client = WebhookHTTPClient(
            policy: Self.policy,
            resolver: TestWebhookResolver(names: ["rebound.example": ["127.0.0.1"]])
        )
        let cases: [(String, String)] = [
            (
                "http://127.0.0.2:9/",
                "url must be https (http only for the hosts of the server's --webhook-allow-hosts)"
            ),
            ("https://127.0.0.2:9/", "url's address 127.0.0.2 is refused (loopback)" + allowHostsHint),
            ("https://[::1]:9/", "url's address ::1 is refused (loopback)" + allowHostsHint),
            (
                "https://rebound.example:9/",
                "rebound.example resolves to 127.0.0.1, which is refused (loopback)" + allowHostsHint
            ),
        ]
        for (url, message) in cases {
            await #expect(throws: WebhookDeliveryError(message)) {
                try await client.post(url: url, headers: [], body: [])
            }
        }
    }

    @Test("A receiver that never answers times out; a closed port is a failed connection")
    func timeoutsAndRefusals() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let client = WebhookHTTPClient(policy: Self.policy, timeout: .seconds(1))
        await #expect(throws: WebhookDeliveryError("timed out after 1 s")) {
            try await client.post(url: "http://127.0.0.1:\(listener.port)/", headers: [], body: [])
        }
        let closed = try freeLoopbackPort()
        let error = await #expect(throws: WebhookDeliveryError.self) {
            try await client.post(url: "http://127.0.0.1:\(closed)/", headers: [], body: [])
        }
        #expect(error?.description.hasPrefix("could not connect to 127.0.0.1") == true, "\(String(describing: error))")
    }
}

/// A loopback socket that listens and never accepts: connections complete in the kernel's backlog, and nothing ever
/// answers them.
final class SilentListener: Sendable {
    let port: Int
    private let socket: Int32

    init() throws {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        socket = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard listening else { throw TestingError("cannot listen on loopback") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(socket) }
}

/// What a stand-in receiver saw, in order.
final class Seen: Sendable {
    private let entries = Mutex<[String]>([])
    func record(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

@Suite("gotchu server's webhook settings", .timeLimit(.minutes(10)))
struct WebhookSettingsTests {
    @Test("A bad allow-list entry or retry base stops the server before it starts, naming the flag")
    func badValues() async throws {
        let cases: [([String], String)] = [
            (["--webhook-allow-hosts", "127.0.0.1, a b"], "--webhook-allow-hosts: must be host names or addresses"),
            (["--webhook-retry-base", "0"], "--webhook-retry-base: must be a whole number of seconds from 1 to 86400"),
            (["--webhook-concurrency", "65"], "--webhook-concurrency: must be a whole number from 1 to 64"),
        ]
        for (arguments, message) in cases {
            let server = try RunningCommand(try BuiltProducts.gotchu, ["server", "--dev", "--port", "0"] + arguments)
            #expect(try await server.waitForExit() != 0)
            #expect(server.standardError.contains(message), "\(server.standardError)")
        }
    }

    @Test("The settings reach the server's webhook options")
    func parsed() throws {
        let settings = try LedgerServerSettings(
            environment: [
                "GOTCHU_SERVER_WEBHOOK_ALLOW_HOSTS": "127.0.0.1, hooks.internal,[::1]",
                "GOTCHU_SERVER_WEBHOOK_RETRY_BASE": "2",
            ]
        )
        #expect(settings.webhookAllowHosts == "127.0.0.1, hooks.internal,[::1]")
        #expect(settings.webhookRetryBase == 2)
        #expect(LedgerServerSettings.declarations.contains { $0.key == "webhook_concurrency" })
        let policy = WebhookAddressPolicy(allowedHosts: ["127.0.0.1", "hooks.internal", "[::1]"])
        #expect(policy.isAllowListed("[::1]") && policy.isAllowListed("HOOKS.internal"))
    }
}
