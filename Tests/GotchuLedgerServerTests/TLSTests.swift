import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import NIOSSL
import Testing

@Suite("The ledger over HTTPS with a private CA", .timeLimit(.minutes(10)))
struct TLSTests {
    /// A SQLite ledger serving HTTPS with `certificate` on a free loopback port while `body` runs.
    private func withHTTPSLedger<T: Sendable>(
        _ certificates: TestCertificates,
        certificate: URL? = nil,
        limits: LedgerLimits = .unlimited,
        _ body: @Sendable (URL) async throws -> T
    ) async throws -> T {
        let store = try SQLiteLedgerStore(path: certificates.directory.appendingPathComponent("ledger.sqlite").path)
        let tokens = try await TokenAuthority(secret: String(repeating: "s", count: 40))
        let tls = try LedgerServer.tlsConfiguration(
            certificateFile: (certificate ?? certificates.serverCertificate).path,
            keyFile: certificates.serverKey.path
        )
        return try await LedgerServer.withRunning(
            store: store,
            .inProcess(tokens: tokens) {
                $0.limits = limits
                $0.made.tls = tls
            },
            body
        )
    }

    private func transportFailure(_ call: () async throws -> Void) async -> String? {
        do {
            try await call()
            return nil
        } catch {
            guard case .transport(let reason) = error as? LedgerClientError else {
                return "not a transport error: \(error)"
            }
            return reason
        }
    }

    @Test("A client trusting the private CA logs in and pays over HTTPS")
    func trustedClient() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        try await withHTTPSLedger(certificates) { url in
            #expect(url.scheme == "https")
            let trust = try LedgerTrust(caFile: certificates.caFile)
            var client = LedgerClient(baseURL: url, trust: trust)
            #expect(try await client.health().status == "ok")
            client.token = try await client.devLogin(email: "tls@example.com").token
            _ = try await client.fund(amountCents: 500)
            #expect(try await client.wallet().availableCents == 500)
            // The server's problems arrive as problems through this transport too.
            await #expect(throws: LedgerClientError.self) { try await client.session(sid: "missing") }
        }
    }

    @Test("Without the CA, with another CA, or with an expired certificate, the client refuses and says why")
    func refusedCertificates() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        try await withHTTPSLedger(certificates) { url in
            // The system's CAs (URLSession) do not know the private CA.
            let system = await transportFailure { _ = try await LedgerClient(baseURL: url).health() }
            #expect(system?.contains("TLS certificate was refused") == true, "\(system ?? "succeeded")")
            #expect(system?.contains("--ca-file") == true, "\(system ?? "succeeded")")
            let other = try LedgerTrust(caFile: certificates.otherCAFile)
            let wrong = await transportFailure { _ = try await LedgerClient(baseURL: url, trust: other).health() }
            #expect(wrong?.contains("TLS certificate was refused") == true, "\(wrong ?? "succeeded")")
            #expect(wrong?.contains(certificates.otherCAFile.path) == true, "\(wrong ?? "succeeded")")
        }
        try await withHTTPSLedger(certificates, certificate: certificates.expiredCertificate) { url in
            let trust = try LedgerTrust(caFile: certificates.caFile)
            let expired = await transportFailure { _ = try await LedgerClient(baseURL: url, trust: trust).health() }
            #expect(expired?.contains("TLS certificate was refused") == true, "\(expired ?? "succeeded")")
            #expect(expired?.contains("it expired on") == true, "\(expired ?? "succeeded")")
        }
    }

    @Test("The connection cap holds under TLS: past it, a client gets the 503 problem over TLS")
    func connectionCap() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        var limits = LedgerLimits.unlimited
        limits.maximumOpenConnections = 1
        limits.idleTimeout = .seconds(600)
        try await withHTTPSLedger(certificates, limits: limits) { url in
            // The first client keeps its connection alive, holding the only slot.
            let first = LedgerClient(baseURL: url, trust: try LedgerTrust(caFile: certificates.caFile))
            #expect(try await first.health().status == "ok")
            // A second CA file is a second HTTP client, so a second connection.
            let copy = directory.url.appendingPathComponent("ca-copy.pem")
            try FileManager.default.copyItem(at: certificates.caFile, to: copy)
            let second = LedgerClient(baseURL: url, trust: try LedgerTrust(caFile: copy))
            do {
                _ = try await second.health()
                Issue.record("a second connection was served past the cap of one")
            } catch {
                #expect((error as? LedgerClientError)?.problemKind == .unavailable, "\(error)")
            }
        }
    }

    @Test("The read timeout holds under TLS: a head that stops half-way is dropped (the idle timeout is far longer)")
    func readTimeout() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        var limits = LedgerLimits.unlimited
        limits.readTimeout = .seconds(1)
        limits.idleTimeout = .seconds(600)
        try await withHTTPSLedger(certificates, limits: limits) { url in
            // openssl's client completes the handshake, sends half a head, and waits with its input left open.
            let process = try SpawnedProcess(
                executable: "/usr/bin/openssl",
                arguments: [
                    "s_client", "-quiet", "-connect", "127.0.0.1:\(url.port ?? 0)", "-CAfile",
                    certificates.caFile.path,
                ],
                input: .pipe
            )
            defer { process.signal(SIGKILL) }
            try process.input?.write(Data("GET /healthz HTTP/1.1\r\nHost: ".utf8))
            // The server closing the connection ends the client; the timeout only bounds a hang.
            let status = try? await process.exit(timeout: .seconds(60))
            let closed = status != nil
            #expect(closed, "the half-sent request was not dropped")
            // 0: the handshake succeeded and the server closed the connection (a failed handshake exits 1).
            if closed { #expect(status == 0) }
        }
    }

    @Test("A client that never starts its TLS handshake is closed after the idle timeout")
    func silentBeforeHandshake() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        var limits = LedgerLimits.unlimited
        limits.idleTimeout = .milliseconds(300)
        limits.readTimeout = .seconds(600)
        try await withHTTPSLedger(certificates, limits: limits) { url in
            let silent = try LoopbackConnection(port: url.port!)
            // Closed without a byte: no handshake, so nothing to answer.
            #expect(try await silent.waitForClose(timeout: .seconds(60)).isEmpty)
        }
    }

    @Test("A key that does not fit the certificate, or a missing file, stops the server before it listens")
    func badServerFiles() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        #expect {
            _ = try LedgerServer.tlsConfiguration(
                certificateFile: certificates.serverCertificate.path,
                keyFile: certificates.otherKey.path
            )
        } throws: { "\($0)".contains("does not fit the certificate") }
        #expect {
            _ = try LedgerServer.tlsConfiguration(
                certificateFile: directory.url.appendingPathComponent("missing.pem").path,
                keyFile: certificates.serverKey.path
            )
        } throws: { "\($0)".contains("cannot read the certificate file") }
        #expect {
            _ = try LedgerTrust(caFile: directory.url.appendingPathComponent("missing.pem"))
        } throws: { "\($0)".contains("cannot read the CA file") }
    }

    @Test("gotchu server --tls-cert/--tls-key serves HTTPS; gotchu login trusts it with --ca-file and not without")
    func commandLine() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory.url)
        let environment = [
            "XDG_DATA_HOME": directory.url.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": directory.url.appendingPathComponent("config").path,
        ]
        let gotchu = try BuiltProducts.gotchu
        let server = try RunningCommand(
            gotchu,
            [
                "server", "--dev", "--port", "0", "--tls-cert", certificates.serverCertificate.path, "--tls-key",
                certificates.serverKey.path,
            ],
            environment: environment
        )
        defer { _ = try? server.stopNow() }
        let line = try await server.waitForLine { $0.hasPrefix("listening on ") }
        #expect(line.hasPrefix("listening on https://127.0.0.1:"), "\(line)")
        let url = String(line.dropFirst("listening on ".count))

        let untrusted = try RunningCommand(
            gotchu,
            ["login", "--email", "tls@example.com", "--server", url],
            environment: environment
        )
        #expect(try await untrusted.waitForExit() != 0)
        #expect(untrusted.standardError.contains("TLS certificate was refused"), "\(untrusted.standardError)")
        let trusted = try RunningCommand(
            gotchu,
            ["login", "--email", "tls@example.com", "--server", url, "--ca-file", certificates.caFile.path],
            environment: environment
        )
        #expect(try await trusted.waitForExit() == 0, "\(trusted.standardError)")
        let wallet = try RunningCommand(
            gotchu,
            ["wallet", "--server", url],
            environment: environment.merging(["GOTCHU_CA_FILE": certificates.caFile.path]) { _, new in new }
        )
        #expect(try await wallet.waitForExit() == 0, "\(wallet.standardError)")
        #expect(try await server.stop(signal: SIGTERM) == 0)

        // Half of the pair is refused before anything starts.
        let half = try RunningCommand(
            gotchu,
            ["server", "--dev", "--port", "0", "--tls-cert", certificates.serverCertificate.path],
            environment: environment
        )
        #expect(try await half.waitForExit() != 0)
        #expect(half.standardError.contains("--tls-cert and --tls-key go together"), "\(half.standardError)")
    }
}
