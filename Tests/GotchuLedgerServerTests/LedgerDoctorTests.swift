import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import NIOSSL
import Testing

@Suite("gotchu doctor's ledger checks: reachable, TLS, clock, credentials", .timeLimit(.minutes(10)))
struct LedgerDoctorTests {
    private func withLedger<T: Sendable>(
        in directory: URL,
        tls: TLSConfiguration? = nil,
        _ body: @Sendable (URL) async throws -> T
    ) async throws -> T {
        let store = try SQLiteLedgerStore(path: directory.appendingPathComponent("ledger.sqlite").path)
        let tokens = try await TokenAuthority(secret: String(repeating: "s", count: 40))
        return try await LedgerServer.withRunning(store: store, .inProcess(tokens: tokens) { $0.made.tls = tls }, body)
    }

    private func finding(_ findings: [LedgerDoctor.Finding], _ check: String) throws -> LedgerDoctor.Finding {
        try #require(findings.first { $0.check == check }, "\(findings)")
    }

    @Test("Over HTTPS with the CA, a close clock and an accepted token, every check is ok")
    func allGood() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        let tls = try LedgerServer.tlsConfiguration(
            certificateFile: certificates.serverCertificate.path,
            keyFile: certificates.serverKey.path
        )
        try await withLedger(in: directory.url, tls: tls) { url in
            var client = LedgerClient(baseURL: url, trust: try LedgerTrust(caFile: certificates.caFile))
            client.token = try await client.devLogin(email: "doctor@example.com").token
            let findings = await LedgerDoctor.examine(client)
            #expect(findings.map(\.check) == ["reachable", "tls", "clock", "credentials"])
            #expect(findings.allSatisfy { $0.severity == .ok }, "\(findings)")
            #expect(try finding(findings, "tls").text.contains(certificates.caFile.path))

            // The same server without the CA: reachable, but the certificate is the problem, with the fix.
            let untrusted = await LedgerDoctor.examine(LedgerClient(baseURL: url))
            #expect(try finding(untrusted, "tls").severity == .problem)
            #expect(try finding(untrusted, "tls").text.contains("--ca-file"))
        }
    }

    @Test("Plain HTTP, a skewed clock, no token and a refused token are each named with their fix")
    func warnings() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await withLedger(in: directory.url) { url in
            let anonymous = await LedgerDoctor.examine(LedgerClient(baseURL: url)) {
                Date().addingTimeInterval(120)
            }
            #expect(try finding(anonymous, "reachable").severity == .ok)
            #expect(try finding(anonymous, "tls").severity == .warning)
            #expect(try finding(anonymous, "tls").text.contains("--tls-cert"))
            let clock = try finding(anonymous, "clock")
            #expect(clock.severity == .warning)
            #expect(clock.text.contains("ahead of the server's") && clock.text.contains("timedatectl"), "\(clock)")
            #expect(try finding(anonymous, "credentials").text.contains("gotchu login"))

            let behind = await LedgerDoctor.examine(LedgerClient(baseURL: url)) { Date().addingTimeInterval(-120) }
            #expect(try finding(behind, "clock").text.contains("behind the server's"))

            let refused = await LedgerDoctor.examine(LedgerClient(baseURL: url, token: "not-a-token"))
            let credentials = try finding(refused, "credentials")
            #expect(credentials.severity == .problem)
            #expect(credentials.text.contains("refuses the cached token"), "\(credentials)")
        }
    }

    @Test("A server that is not there is one problem line with what to check")
    func unreachable() async throws {
        // A port that was free a moment ago: nothing listens on it.
        let url = try await {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            return try await withLedger(in: directory.url) { $0 }
        }()
        let findings = await LedgerDoctor.examine(LedgerClient(baseURL: url, timeout: 5))
        #expect(findings.count == 1)
        #expect(findings.first?.severity == .problem)
        #expect(findings.first?.text.contains("--server") == true, "\(findings)")
    }

    @Test("gotchu doctor --skip-bluetooth prints one line per ledger check and fails on a problem")
    func command() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let environment = [
            "XDG_DATA_HOME": directory.url.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": directory.url.appendingPathComponent("config").path,
        ]
        let gotchu = try BuiltProducts.gotchu
        let stopped = try await withLedger(in: directory.url) { url in
            let doctor = try RunningCommand(
                gotchu,
                ["doctor", "--skip-bluetooth", "--server", url.absoluteString],
                environment: environment
            )
            #expect(try await doctor.waitForExit() == 0, "\(doctor.lines) \(doctor.standardError)")
            let lines = doctor.lines.filter { $0.contains("ledger ") }
            #expect(lines.count == 4, "\(doctor.lines)")
            #expect(lines.first?.hasPrefix("ok       ledger reachable:") == true, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("warning  ledger credentials: not logged in; fix: gotchu login") })
            return url
        }
        let down = try RunningCommand(
            gotchu,
            ["doctor", "--skip-bluetooth", "--server", stopped.absoluteString],
            environment: environment
        )
        #expect(try await down.waitForExit() == 1)
        #expect(down.lines.contains { $0.hasPrefix("PROBLEM  ledger reachable:") }, "\(down.lines)")
    }
}
