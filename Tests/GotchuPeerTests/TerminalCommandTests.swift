import Foundation
import GotchuTesting
import Testing

@Suite("gotchu terminal as processes", .timeLimit(.minutes(10)))
struct TerminalCommandTests {
    @Test(
        "enroll makes a key only its owner reads and enrolls it once; list and revoke show the terminal; a key others may read is refused"
    )
    func enrollListRevoke() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")

        let enrolled = try await processes.run(["terminal", "enroll", "counter 1", "--server", url], user: "bob")
        let line = try #require(enrolled.last)
        #expect(line.hasPrefix("terminal term_") && line.contains(#""counter 1" enrolled, key ed25519-"#))
        let id = try #require(line.split(separator: " ").dropFirst().first.map(String.init))
        let keyFile = processes.directory.url.appendingPathComponent("bob/state/gotchu/terminal.key")
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        // The same key again, under any name: refused, and the key file is kept as it was.
        let before = try Data(contentsOf: keyFile)
        let again = try processes.start(["terminal", "enroll", "counter 2", "--server", url], user: "bob")
        #expect(try await again.waitForExit() == 1)
        #expect(again.standardError.contains("enrolled already"))
        #expect(try Data(contentsOf: keyFile) == before)

        let listed = try await processes.run(["terminal", "list", "--server", url], user: "bob")
        #expect(listed.first == "ID  KEY  ENROLLED  REVOKED  NAME")
        #expect(
            listed.count == 2 && listed[1].hasPrefix(id + "  ed25519-") && listed[1].hasSuffix(#"  -  "counter 1""#)
        )

        let revoked = try await processes.run(["terminal", "revoke", id, "--server", url], user: "bob")
        #expect(revoked.last?.hasPrefix(id) == true && revoked.last?.contains("  -  ") == false)
        // Someone else's terminal is not theirs to revoke.
        try await processes.run(["login", "--email", "mallory@example.com", "--server", url], user: "mallory")
        let stranger = try processes.start(["terminal", "revoke", id, "--server", url], user: "mallory")
        #expect(try await stranger.waitForExit() == 1)

        // A key file others may read is refused before anything is sent.
        let shared = processes.directory.url.appendingPathComponent("shared.key")
        try FileManager.default.copyItem(at: keyFile, to: shared)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: shared.path)
        let loose = try processes.start(
            ["terminal", "enroll", "stall", "--key-file", shared.path, "--server", url],
            user: "bob"
        )
        #expect(try await loose.waitForExit() == 1)
        #expect(loose.standardError.contains("chmod 600"))
    }
}
