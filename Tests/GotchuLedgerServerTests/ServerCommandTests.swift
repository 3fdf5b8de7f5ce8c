import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer
import GotchuLogging
import GotchuSettings
import GotchuTesting
import Logging
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("gotchu server, login and wallet as processes", .timeLimit(.minutes(10)))
struct ServerCommandTests {
    @Test("Starts on a free port, serves, keeps its files private and stops cleanly on SIGTERM")
    func lifecycle() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let environment = [
            "XDG_DATA_HOME": directory.url.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": directory.url.appendingPathComponent("config").path,
        ]
        let gotchu = try BuiltProducts.gotchu
        let server = try RunningCommand(
            gotchu,
            ["server", "--dev", "--port", "0", "--log-level", "trace"],
            environment: environment
        )
        let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        let url = String(line.dropFirst("listening on ".count))
        #expect(try await LedgerClient(baseURL: URL(string: url)!).health().status == "ok")

        let login = try RunningCommand(
            gotchu,
            ["login", "--email", "bob@example.com", "--server", url],
            environment: environment
        )
        #expect(try await login.waitForExit() == 0)
        #expect(login.lines.first?.hasPrefix("logged in as bob@example.com") == true)
        let wallet = try RunningCommand(gotchu, ["wallet", "--server", url], environment: environment)
        #expect(try await wallet.waitForExit() == 0)
        #expect(wallet.lines.first?.hasPrefix("balance $0.00") == true)
        // The command serves its metrics.
        let (scrape, _) = try await URLSession.shared.data(from: URL(string: url + "/metrics")!)
        let metrics = String(decoding: scrape, as: UTF8.self)
        #expect(metrics.contains("gotchu_ledger_requests_total{"), "\(metrics)")

        let files = try FileManager.default.subpathsOfDirectory(atPath: directory.url.path).filter {
            $0.hasSuffix(".json") || $0.hasSuffix(".sqlite") || $0.hasSuffix("jwt-secret")
        }
        #expect(files.count == 3, "\(files)")
        for file in files {
            let attributes = try FileManager.default.attributesOfItem(
                atPath: directory.url.appendingPathComponent(file).path
            )
            #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(file)")
        }
        #expect(try await server.stop(signal: SIGTERM) == 0)
        // Even at trace level, neither the token nor the signing secret reaches the log.
        let cached = try #require(files.first { $0.hasSuffix(".json") })
        let token = try JSONDecoder().decode(
            [String: String].self,
            from: Data(contentsOf: directory.url.appendingPathComponent(cached))
        )["token"]
        let secret = try String(
            contentsOf: directory.url.appendingPathComponent(try #require(files.first { $0.hasSuffix("jwt-secret") })),
            encoding: .utf8
        )
        let log = server.standardError
        #expect(log.contains("route=/wallet/me"))
        #expect(!log.contains(try #require(token)))
        #expect(!log.contains(secret))
        #expect(!log.contains("Bearer"))
    }

    @Test("--log-format json: one JSON object per line, at trace level still without the token or the secret")
    func jsonLog() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let secret = "json-log-secret-" + String(repeating: "x", count: 32)
        let environment = [
            "XDG_DATA_HOME": directory.url.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": directory.url.appendingPathComponent("config").path,
        ]
        let gotchu = try BuiltProducts.gotchu
        let server = try RunningCommand(
            gotchu,
            [
                "server", "--dev", "--port", "0", "--log-level", "trace", "--log-format", "json", "--jwt-secret",
                secret,
            ],
            environment: environment
        )
        defer { _ = try? server.stopNow() }
        let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        let url = String(line.dropFirst("listening on ".count))
        let login = try RunningCommand(
            gotchu,
            ["login", "--email", "json@example.com", "--server", url],
            environment: environment
        )
        #expect(try await login.waitForExit() == 0)
        let wallet = try RunningCommand(gotchu, ["wallet", "--server", url], environment: environment)
        #expect(try await wallet.waitForExit() == 0)
        #expect(try await server.stop(signal: SIGTERM) == 0)

        let log = server.standardError
        let lines = log.split(separator: "\n", omittingEmptySubsequences: true)
        var routes: [String] = []
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["message"] is String && object?["level"] is String && object?["time"] is String, "\(line)")
            if let route = object?["route"] as? String { routes.append(route) }
        }
        #expect(routes.contains("/wallet/me"), "\(log)")
        let tokenFile = try #require(
            try FileManager.default.subpathsOfDirectory(atPath: directory.url.path).first { $0.hasSuffix(".json") }
        )
        let token = try JSONDecoder().decode(
            [String: String].self,
            from: Data(contentsOf: directory.url.appendingPathComponent(tokenFile))
        )["token"]
        #expect(!log.contains(try #require(token)))
        #expect(!log.contains(secret))
        #expect(!log.contains("Bearer"))
    }

    @Test("The JSON log handler redacts metadata named like a credential and keeps a message on one line")
    func jsonHandlerRedacts() throws {
        let lines = Mutex<[String]>([])
        var handler = JSONLogHandler(label: "test") { line in lines.withLock { $0.append(line) } }
        handler.logLevel = .trace
        handler[metadataKey: "request"] = "r1"
        let logger = Logger(label: "test") { _ in handler }
        logger.info(
            "two\nlines",
            metadata: [
                "token": "t0ps3cret", "authorization": "Bearer abc", "db_password": "pw", "signing_key": "k",
                "idempotency_key": "key-1", "route": "/wallet/send",
            ]
        )
        let written = try #require(lines.withLock { $0 }.first)
        #expect(written.hasSuffix("\n") && written.dropLast().contains("\n") == false, "\(written)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(written.utf8)) as? [String: Any])
        for key in ["token", "authorization", "db_password", "signing_key"] {
            #expect(object[key] as? String == "[redacted]", "\(key)")
        }
        #expect(object["idempotency_key"] as? String == "key-1")
        #expect(object["route"] as? String == "/wallet/send")
        #expect(object["request"] as? String == "r1")
        #expect(object["message"] as? String == "two\nlines")
        #expect(object["level"] as? String == "info")
        for secret in ["t0ps3cret", "Bearer abc", "\"pw\""] { #expect(!written.contains(secret)) }
    }

    @Test("Refuses to start without a JWT secret outside development mode, saying how to fix it")
    func needsSecret() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var environment = ["XDG_DATA_HOME": directory.url.path]
        environment["GOTCHU_JWT_SECRET"] = nil
        let server = try RunningCommand(try BuiltProducts.gotchu, ["server", "--port", "0"], environment: environment)
        #expect(try await server.waitForExit() != 0)
        #expect(server.standardError.contains("GOTCHU_JWT_SECRET"))
    }

    @Test("wallet without a login says how to log in")
    func notLoggedIn() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let wallet = try RunningCommand(
            try BuiltProducts.gotchu,
            ["wallet", "--server", "http://127.0.0.1:9"],
            environment: ["XDG_CONFIG_HOME": directory.url.path]
        )
        #expect(try await wallet.waitForExit() != 0)
        #expect(wallet.standardError.contains("gotchu login --email"))
    }

    @Test(
        "Refuses an out-of-range option before starting, naming the option and its range",
        arguments: [
            (
                ["--session-lifetime", "10000000000000000"],
                "--session-lifetime: must be a whole number of seconds from 1 to 86400"
            ),
            (["--session-lifetime", "0"], "--session-lifetime: must be a whole number of seconds from 1 to 86400"),
            (
                ["--lock-lifetime", "9223372036854775807"],
                "--lock-lifetime: must be a whole number of seconds from 1 to 3600"
            ),
            (
                ["--in-flight-timeout", "9223372036854775807"],
                "--in-flight-timeout: must be a whole number of seconds from 1 to 3600"
            ),
            (
                ["--resolve-rate", "1e-20", "--resolve-burst", "1"],
                "--resolve-rate: must be 0 (no limit) or a number from 0.001 to 1000000"
            ),
            (["--lock-rate", "nan"], "--lock-rate: must be 0 (no limit)"),
            (["--user-lock-rate", "inf"], "--user-lock-rate: must be 0 (no limit)"),
            (["--user-lock-rate=-1"], "--user-lock-rate: must be 0 (no limit)"),
            (["--lock-burst", "0"], "--lock-burst: must be a whole number from 1 to 1000000"),
            (["--resolve-burst", "9223372036854775807"], "--resolve-burst: must be a whole number from 1 to 1000000"),
            (["--max-locks-per-payer", "0"], "--max-locks-per-payer: must be a whole number from 1 to 1000"),
            (["--max-connections", "0"], "--max-connections: must be a whole number from 1 to 10000"),
            (["--max-amount=-5"], "--max-amount: must be a whole number of cents, 1 or more"),
            (["--max-open-connections", "0"], "--max-open-connections: must be a whole number from 1 to 100000"),
            (
                ["--max-open-connections", "9223372036854775807"],
                "--max-open-connections: must be a whole number from 1 to 100000"
            ),
            (["--idle-timeout", "0"], "--idle-timeout: must be a whole number of seconds from 1 to 3600"),
            (
                ["--read-timeout", "9223372036854775807"],
                "--read-timeout: must be a whole number of seconds from 1 to 3600"
            ),
            (["--max-event-streams", "0"], "--max-event-streams: must be a whole number from 1 to 1000"),
            (["--session-lifetime", "1e16"], "--session-lifetime"),
            (["--eid-grace", "3601"], "--eid-grace: must be a whole number of seconds from 0 to 3600"),
            (["--eid-grace=-1"], "--eid-grace: must be a whole number of seconds from 0 to 3600"),
            (["--resolve", "open"], "--resolve"),
            (["--oidc-issuer", "https://id.example.com"], "--oidc-issuer needs --oidc-audience"),
            (["--oidc-audience", "gotchu"], "--oidc-audience and --oidc-jwks-url need --oidc-issuer"),
            (
                ["--oidc-issuer", "http://id.example.com", "--oidc-audience", "gotchu"],
                "--oidc-issuer: must be an https URL"
            ),
            (
                [
                    "--oidc-issuer", "https://id.example.com", "--oidc-audience", "gotchu", "--oidc-jwks-url",
                    "file:///etc/passwd",
                ],
                "--oidc-jwks-url: must be an https URL"
            ),
            (["--bcrypt-cost", "9"], "--bcrypt-cost: must be a whole number from 10 to 16"),
            (["--bcrypt-cost", "31"], "--bcrypt-cost: must be a whole number from 10 to 16"),
            (["--min-password-length", "7"], "--min-password-length: must be a whole number from 8 to 72"),
            (
                ["--access-token-lifetime", "0"],
                "--access-token-lifetime: must be a whole number of seconds from 60 to 86400"
            ),
            (
                ["--refresh-token-lifetime", "60"],
                "--refresh-token-lifetime: must be a whole number of seconds from 3600 to 31536000"
            ),
            (["--registration", "sometimes"], "--registration"),
            (["--mail-command", "/bin/sh"], "--mail-command is used only with --registration open"),
            (["--registration", "open", "--mail-command", "/nonexistent"], "is not an executable file"),
        ]
    )
    func outOfRange(options: [String], message: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--dev", "--port", "0"] + options,
            environment: ["XDG_DATA_HOME": directory.url.path]
        )
        #expect(try await server.waitForExit() != 0)
        #expect(server.standardError.contains(message), "\(server.standardError)")
        #expect(!server.lines.contains { $0.hasPrefix("listening on") })
    }

    @Test("Warns at start when the open-file limit is below what the connection cap needs, and still serves")
    func descriptorWarning() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let gotchu = try BuiltProducts.gotchu
        let server = try RunningCommand(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", #"ulimit -n 256 && exec "$0" server --dev --port 0 --max-open-connections 512"#, gotchu.path],
            environment: ["XDG_DATA_HOME": directory.url.path]
        )
        let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        let url = URL(string: String(line.dropFirst("listening on ".count)))!
        #expect(try await LedgerClient(baseURL: url).health().status == "ok")
        #expect(try await server.stop(signal: SIGTERM) == 0)
        #expect(server.standardError.contains("open-file limit"), "\(server.standardError)")
        #expect(server.standardError.contains("open_file_limit=256"), "\(server.standardError)")
    }

    @Test(
        "On a machine without a certificate bundle the server starts, serves and stays up, warning that https webhook deliveries will fail",
        .enabled(if: geteuid() == 0, "hides /etc/ssl in a mount namespace of its own, which needs root")
    )
    func noCertificateBundle() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // /etc/ssl (where Debian's ca-certificates puts the bundle) is an empty file system in the server's own mount
        // namespace, as on a Debian system without that package.
        let server = try RunningCommand(
            URL(fileURLWithPath: "/usr/bin/unshare"),
            [
                "--mount", "/bin/sh", "-c",
                #"mount -t tmpfs none /etc/ssl && exec "$0" server --dev --port 0"#, try BuiltProducts.gotchu.path,
            ],
            environment: ["XDG_DATA_HOME": directory.url.path]
        )
        defer { _ = try? server.stopNow() }
        let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        let url = URL(string: String(line.dropFirst("listening on ".count)))!
        let client = LedgerClient(baseURL: url)
        _ = try await client.devLogin(email: "shop@example.com")
        #expect(try await client.health().status == "ok")
        #expect(server.isRunning)
        #expect(try await server.stop(signal: SIGTERM) == 0)
        #expect(
            server.standardError.contains("webhook deliveries to https receivers will fail"),
            "\(server.standardError)"
        )
        #expect(server.standardError.contains("install the ca-certificates package"), "\(server.standardError)")
    }

    @Test("The connection options are in --help with their ranges")
    func connectionOptionsInHelp() async throws {
        let help = try RunningCommand(try BuiltProducts.gotchu, ["server", "--help"])
        #expect(try await help.waitForExit() == 0)
        let text = help.lines.joined(separator: "\n")
        for option in ["--max-open-connections", "--idle-timeout", "--read-timeout"] {
            #expect(text.contains(option), "\(option)")
        }
        #expect(text.contains("1 to 100000"))
        #expect(text.contains("1 to 3600"))
    }

    @Test("Every setting of the server is a flag of gotchu server, named after its key, in --help")
    func everySettingIsAFlag() async throws {
        let help = try RunningCommand(try BuiltProducts.gotchu, ["server", "--help"])
        #expect(try await help.waitForExit() == 0)
        let text = help.lines.joined(separator: "\n")
        for declaration in LedgerServerSettings.declarations {
            #expect(
                text.contains(declaration.flag + " ") || text.contains(declaration.flag + "/"),
                "\(declaration.flag)"
            )
        }
    }

    @Test("Refuses a malformed postgres:// URL, saying what the URL must look like")
    func badPostgresURL() async throws {
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--dev", "--port", "0", "--database", "postgres://127.0.0.1:5432/gotchu"]
        )
        #expect(try await server.waitForExit() != 0)
        #expect(server.standardError.contains("names no user"), "\(server.standardError)")
    }
}
