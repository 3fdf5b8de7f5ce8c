import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuSettings
import GotchuTesting
import Testing

/// The repository's `deploy/` directory.
private let deploy = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("deploy")

/// `gotchu server`'s settings as declared: the example config shows each at its built-in value, and secrets stay out
/// of files.
@Suite(.timeLimit(.minutes(10))) struct ServerSettingsTests {
    @Test func exampleConfigShowsEveryKeyAtItsBuiltInValue() throws {
        let example = deploy.appendingPathComponent("server.toml")
        let text = try String(contentsOf: example, encoding: .utf8)
        // Uncomment every "# key = value" line: each key must be there, and each value must be the built-in one.
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.wholeMatch(of: /# ([a-z_]+ = .*)/).map { String($0.1) } ?? String(line)
        }
        let settings = try LedgerServerSettings.decode(Data(uncommented.joined(separator: "\n").utf8), file: example)
        for declaration in LedgerServerSettings.declarations where !declaration.isSecret {
            #expect(settings[declaration.key] != nil, "deploy/server.toml does not show \(declaration.key)")
            if let builtIn = declaration.defaultValue {
                #expect(settings[declaration.key] == builtIn, "\(declaration.key) is not shown at its built-in value")
            }
        }
        // As shipped, every line is a comment: the file changes nothing.
        #expect(try LedgerServerSettings.decode(Data(text.utf8), file: example) == LedgerServerSettings())
    }

    @Test func theJWTSecretIsNeverReadFromAFile() throws {
        let file = URL(fileURLWithPath: "/etc/gotchu/server.toml")
        let secret = String(repeating: "s", count: 40)
        let error = #expect(throws: SettingsError.self) {
            _ = try LedgerServerSettings.decode(Data("jwt_secret = \"\(secret)\"\n".utf8), file: file)
        }
        let text = error?.description ?? ""
        #expect(text.hasPrefix("jwt_secret in /etc/gotchu/server.toml: is a secret"), "\(text)")
        #expect(!text.contains(secret))
        let environment = try LedgerServerSettings(environment: ["GOTCHU_JWT_SECRET": secret])
        #expect(environment.jwtSecret == secret)
    }

    @Test func everySettingHasAVariableOfItsKey() {
        for declaration in LedgerServerSettings.declarations {
            #expect(declaration.environmentVariable == "GOTCHU_SERVER_" + declaration.key.uppercased())
            #expect(declaration.flag == "--" + declaration.key.replacingOccurrences(of: "_", with: "-"))
        }
    }
}

/// `gotchu server --config FILE`, with the environment and flags over it.
@Suite("gotchu server with a config file", .timeLimit(.minutes(10)))
struct ServerConfigFileTests {
    /// A directory with `server.toml` holding `contents`.
    private func configFile(_ contents: String) throws -> (TemporaryDirectory, URL) {
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("server.toml")
        try Data(contents.utf8).write(to: file)
        return (directory, file)
    }

    @Test("A server started from a file listens on a free port, answers, and keeps a relative database beside it")
    func startsFromAFile() async throws {
        let (directory, file) = try configFile("port = 0\ndev = true\ndatabase = \"ledger.sqlite\"\n")
        defer { directory.remove() }
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--config", file.path],
            environment: ["XDG_DATA_HOME": directory.url.appendingPathComponent("data").path]
        )
        defer { _ = try? server.stopNow() }
        let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        let url = try #require(URL(string: String(line.dropFirst("listening on ".count))))
        #expect(try await LedgerClient(baseURL: url).health().status == "ok")
        #expect(FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("ledger.sqlite").path))
        #expect(try await server.stop(signal: SIGTERM) == 0)
    }

    @Test("A bad value in the file is refused before starting, naming the key and the file")
    func badValueNamesKeyAndFile() async throws {
        let (directory, file) = try configFile("dev = true\nport = 0\nsession_lifetime = 0\n")
        defer { directory.remove() }
        let server = try RunningCommand(try BuiltProducts.gotchu, ["server", "--config", file.path])
        #expect(try await server.waitForExit() != 0)
        #expect(
            server.standardError.contains(
                "session_lifetime in \(file.path): must be a whole number of seconds from 1 to 86400, got 0"
            ),
            "\(server.standardError)"
        )
        #expect(!server.lines.contains { $0.hasPrefix("listening on") })
    }

    @Test("The environment overrides the file (GOTCHU_SERVER_CONFIG names it), and flags override the environment")
    func precedence() async throws {
        let (directory, file) = try configFile("dev = true\nport = 1\nsession_lifetime = 100\n")
        defer { directory.remove() }
        let gotchu = try BuiltProducts.gotchu
        let data = ["XDG_DATA_HOME": directory.url.appendingPathComponent("data").path]
        // The value that wins is the one checked, and the error names where it came from.
        let fromEnvironment = try RunningCommand(
            gotchu,
            ["server", "--config", file.path, "--port", "0"],
            environment: data.merging(["GOTCHU_SERVER_SESSION_LIFETIME": "0"]) { $1 }
        )
        #expect(try await fromEnvironment.waitForExit() != 0)
        #expect(fromEnvironment.standardError.contains("GOTCHU_SERVER_SESSION_LIFETIME: must be"))
        let fromFlags = try RunningCommand(
            gotchu,
            ["server", "--config", file.path, "--port", "0", "--session-lifetime", "0"],
            environment: data.merging(["GOTCHU_SERVER_SESSION_LIFETIME": "200"]) { $1 }
        )
        #expect(try await fromFlags.waitForExit() != 0)
        #expect(fromFlags.standardError.contains("--session-lifetime: must be"), "\(fromFlags.standardError)")
        // The file says port 1, the environment 0: the server listens on a free port.
        let environmentOverFile = try RunningCommand(
            gotchu,
            ["server"],
            environment: data.merging(["GOTCHU_SERVER_CONFIG": file.path, "GOTCHU_SERVER_PORT": "0"]) { $1 }
        )
        defer { _ = try? environmentOverFile.stopNow() }
        let line = try await environmentOverFile.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        #expect(!line.hasSuffix(":1"), "\(line)")
        #expect(try await environmentOverFile.stop(signal: SIGTERM) == 0)
        // The environment says port 1, the flag 0.
        let flagOverEnvironment = try RunningCommand(
            gotchu,
            ["server", "--config", file.path, "--port", "0"],
            environment: data.merging(["GOTCHU_SERVER_PORT": "1"]) { $1 }
        )
        defer { _ = try? flagOverEnvironment.stopNow() }
        let flagLine = try await flagOverEnvironment.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        #expect(!flagLine.hasSuffix(":1"), "\(flagLine)")
        #expect(try await flagOverEnvironment.stop(signal: SIGTERM) == 0)
    }

    @Test("jwt_secret_file: a secret every user may read is refused; one kept private starts a production server")
    func secretFile() async throws {
        let (directory, file) = try configFile("port = 0\ndatabase = \"ledger.sqlite\"\njwt_secret_file = \"secret\"\n")
        defer { directory.remove() }
        let secret = directory.url.appendingPathComponent("secret")
        try Data((String(repeating: "k", count: 40) + "\n").utf8).write(to: secret)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: secret.path)
        let gotchu = try BuiltProducts.gotchu
        let refused = try RunningCommand(gotchu, ["server", "--config", file.path])
        #expect(try await refused.waitForExit() != 0)
        #expect(
            refused.standardError.contains("jwt_secret_file in \(file.path): \(secret.path) is readable by every user"),
            "\(refused.standardError)"
        )
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secret.path)
        let server = try RunningCommand(gotchu, ["server", "--config", file.path])
        defer { _ = try? server.stopNow() }
        _ = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        #expect(try await server.stop(signal: SIGTERM) == 0)
    }

    /// Resolved in the library, as `gotchu server` resolves them: a secret is given as itself or as a file, and the
    /// higher layer decides; both in one layer is refused, naming both.
    @Test func aSecretComesFromItselfOrItsFileWhicheverTheHigherLayerNames() throws {
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("secret")
        let fromFile = String(repeating: "f", count: 40)
        try Data((fromFile + "\n").utf8).write(to: file)
        #expect(chmod(file.path, 0o600) == 0)
        let fromVariable = String(repeating: "v", count: 40)
        func resolve(_ environment: [String: String]) throws(SettingsError) -> LedgerServer.Settings {
            try LedgerServer.Settings.resolve(
                file: nil,
                fileIsExplicit: false,
                environment: environment,
                flags: LedgerServerSettings()
            )
        }
        #expect(try resolve(["GOTCHU_SERVER_JWT_SECRET_FILE": file.path]).server.jwtSecret == fromFile)
        #expect(try resolve(["GOTCHU_SERVER_JWT_SECRET": fromVariable]).server.jwtSecret == fromVariable)
        let both = ["GOTCHU_SERVER_JWT_SECRET": fromVariable, "GOTCHU_SERVER_JWT_SECRET_FILE": file.path]
        #expect {
            try resolve(both)
        } throws: { error in
            "\(error)".contains("GOTCHU_SERVER_JWT_SECRET and GOTCHU_SERVER_JWT_SECRET_FILE are set; set only one")
        }
        let clientBoth = [
            "GOTCHU_SERVER_OIDC_CLIENT_SECRET": "s", "GOTCHU_SERVER_OIDC_CLIENT_SECRET_FILE": file.path,
        ]
        #expect {
            try resolve(clientBoth)
        } throws: { error in
            "\(error)".contains("set only one")
        }
    }
}
