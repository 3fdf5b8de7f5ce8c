import Foundation
import GotchuTesting
import Testing

@Suite("gotchu's cached tokens go only to the origin they came from", .timeLimit(.minutes(10)))
struct TokenCacheTests {
    /// Runs `gotchu ARGUMENTS` as `user`; returns its exit status, standard output and standard error.
    private func attempt(
        _ processes: GotchuProcesses,
        _ arguments: [String],
        user: String
    ) async throws -> (status: Int32, lines: [String], error: String) {
        let command = try processes.start(arguments, user: user)
        let status = try await command.waitForExit(timeout: .seconds(60))
        return (status, command.lines, command.standardError)
    }

    @Test("Logged in at http://127.0.0.1:PORT: other origins that looked alike are not logged in; the same one is")
    func originKeyed() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let port = try #require(URL(string: url)?.port)
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        try await processes.run(
            ["login", "--email", "bob@example.com", "--server", "http://localhost:\(port)"],
            user: "bob"
        )

        // Each of these once mapped to alice's token file (punctuation replaced by "_"); none is her origin.
        for other in ["http://127.0.0.1/\(port)", "http://127-0-0-1:\(port)", "http://127.0.0.1.\(port)"] {
            let (status, _, error) = try await attempt(processes, ["wallet", "--server", other], user: "alice")
            #expect(status != 0, "\(other)")
            #expect(error.contains("not logged in to \(other)"), "\(other): \(error)")
        }
        // The same origin however written: a trailing slash, a path, the host in capitals.
        for same in ["\(url)/", "\(url)/any/path"] {
            let (status, lines, error) = try await attempt(processes, ["wallet", "--server", same], user: "alice")
            #expect(status == 0, "\(same): \(error)")
            #expect(lines.first?.hasPrefix("balance $0.00") == true, "\(same)")
        }
        let (status, _, error) = try await attempt(
            processes,
            ["wallet", "--server", "http://LOCALHOST:\(port)"],
            user: "bob"
        )
        #expect(status == 0, "\(error)")

        // One file per origin, named readably after it.
        let files = try FileManager.default.contentsOfDirectory(
            atPath: processes.directory.url.appendingPathComponent("alice/config/gotchu").path
        )
        #expect(files == ["token-http-127.0.0.1-\(port).json"])
    }

    @Test("Default ports are filled in and hosts lowercased; another scheme or punctuation is another origin")
    func defaultPort() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        let config = processes.directory.url.appendingPathComponent("alice/config/gotchu")
        let cached = try Data(
            contentsOf: config.appendingPathComponent(
                "token-http-127.0.0.1-\(try #require(URL(string: url)?.port)).json"
            )
        )
        // Tokens planted for http://example.invalid (port 80) and https://pay.example.invalid (port 443). Found for
        // the same origins however written; not for another scheme, nor for a host differing in punctuation.
        try cached.write(to: config.appendingPathComponent("token-http-example.invalid-80.json"))
        try cached.write(to: config.appendingPathComponent("token-https-pay.example.invalid-443.json"))
        for same in ["http://example.invalid", "http://example.invalid:80/", "https://PAY.example.invalid:443"] {
            let (_, _, error) = try await attempt(processes, ["wallet", "--server", same], user: "alice")
            #expect(!error.contains("not logged in"), "\(same): \(error)")
        }
        for other in ["https://example.invalid:80", "https://pay-example.invalid", "http://pay.example.invalid:443"] {
            let (status, _, error) = try await attempt(processes, ["wallet", "--server", other], user: "alice")
            #expect(status != 0)
            #expect(error.contains("not logged in"), "\(other): \(error)")
        }
    }
}

@Suite("--air creates at most its last directory", .timeLimit(.minutes(10)))
struct AirDirectoryTests {
    @Test("A missing parent is an error and nothing is created; a missing last part is created with mode 0700")
    func air() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        let root = processes.directory.url
        func pay(air: String) async throws -> (Int32, String) {
            let command = try processes.start(
                ["pay", "--radio", "sim", "--air", air, "--timeout", "1", "--server", url],
                user: "alice"
            )
            return (try await command.waitForExit(), command.standardError)
        }

        let (deepStatus, deepError) = try await pay(air: root.appendingPathComponent("no/such/tree/air").path)
        #expect(deepStatus != 0)
        #expect(deepError.contains("does not exist; create it first"), "\(deepError)")
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("no").path))

        let file = root.appendingPathComponent("plain-file")
        try Data("x".utf8).write(to: file)
        let (fileStatus, fileError) = try await pay(air: file.path)
        #expect(fileStatus != 0)
        #expect(fileError.contains("exists but is not a directory"), "\(fileError)")

        // Created, then scanned: nobody advertises, so the payer gives up after its timeout.
        let fresh = root.appendingPathComponent("air").path
        let (_, freshError) = try await pay(air: fresh)
        #expect(freshError.contains("no terminal nearby"), "\(freshError)")
        let attributes = try FileManager.default.attributesOfItem(atPath: fresh)
        #expect(attributes[.type] as? FileAttributeType == .typeDirectory)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }
}
