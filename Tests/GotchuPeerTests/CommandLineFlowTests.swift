import Foundation
import GotchuAPI
import GotchuReceipts
import GotchuTesting
import Testing

@Suite("gotchu receive and gotchu pay as processes on the shared simulated air", .timeLimit(.minutes(10)))
struct CommandLineFlowTests {
    /// A server, Bob logged in, Alice logged in with $50.00, and Bob's terminal advertising $12.50.
    private func counter(_ processes: GotchuProcesses) async throws -> (RunningCommand, RunningCommand, String) {
        let (server, url) = try await processes.startServer()
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        try await processes.run(["fund", "--amount", "50.00", "--server", url], user: "alice")
        let receiver = try processes.start(
            ["receive", "--amount", "12.50", "--radio", "sim", "--server", url],
            user: "bob"
        )
        _ = try await receiver.waitForLine { $0.hasPrefix("advertising ") }
        return (server, receiver, url)
    }

    private func balance(_ processes: GotchuProcesses, _ user: String, _ url: String) async throws -> String? {
        try await processes.run(["wallet", "--server", url], user: user).first
    }

    @Test("Two processes: the payer pays the terminal it stands at, the terminal reports it and stops")
    func pays() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, receiver, url) = try await counter(processes)
        defer { _ = try? server.stopNow() }
        let lines = try await processes.run(
            ["pay", "--radio", "sim", "--yes", "--timeout", "60", "--server", url],
            user: "alice"
        )
        #expect(lines.contains { $0.hasPrefix("sighted ") && $0.hasSuffix(" dBm") })
        #expect(lines.contains(#"resolved $12.50 → "bob" (example.com)"#))
        #expect(lines.contains("locked"))
        #expect(lines.last == #"paid $12.50 to "bob" (example.com); new balance $37.50"#)
        #expect(try await receiver.waitForExit() == 0)
        #expect(receiver.lines.last?.hasPrefix("paid: $12.50 received") == true)
        #expect(try await balance(processes, "bob", url)?.hasPrefix("balance $12.50") == true)
    }

    @Test("A receipt that does not verify against the trusted keys is not reported paid (exit 1)")
    func untrustedReceipt() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, receiver, url) = try await counter(processes)
        defer { _ = try? server.stopNow() }
        defer { _ = try? receiver.stopNow() }
        let keys = processes.directory.url.appendingPathComponent("stranger-keys.json")
        let stranger = ReceiptSigner.generate().signer
        try APIJSON.encoder().encode(ReceiptKeySet(keys: [stranger.publicKey])).write(to: keys)
        let payer = try processes.start(
            ["pay", "--radio", "sim", "--yes", "--timeout", "60", "--server", url, "--receipt-keys", keys.path],
            user: "alice"
        )
        #expect(try await payer.waitForExit() == 1)
        #expect(!payer.lines.contains { $0.hasPrefix("paid") }, "\(payer.lines)")
        #expect(payer.standardError.contains("receipt does not verify"), "\(payer.standardError)")
    }

    @Test(
        "SIGKILL mid-payment, then a restart: exactly one payment",
        arguments: [("after-lock", "(sent now)"), ("after-send", "(it had gone through)")]
    )
    func crashAndResume(fault: String, resumedAs: String) async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, receiver, url) = try await counter(processes)
        defer { _ = try? server.stopNow() }

        let crashing = try processes.start(
            ["pay", "--radio", "sim", "--yes", "--timeout", "60", "--server", url],
            user: "alice",
            extra: ["GOTCHU_FAULT": fault]
        )
        #expect(try await crashing.waitForExit() == SIGKILL)
        #expect(crashing.lines.contains("locked"))
        #expect(!crashing.lines.contains { $0.hasPrefix("paid") })

        let resumed = try await processes.run(
            ["pay", "--radio", "sim", "--yes", "--timeout", "60", "--server", url],
            user: "alice"
        )
        #expect(resumed.count == 1)
        #expect(resumed.first?.hasPrefix(#"finished an interrupted payment: $12.50 to "bob" \#(resumedAs)"#) == true)
        #expect(resumed.first?.hasSuffix("new balance $37.50") == true)
        #expect(try await receiver.waitForExit() == 0)
        #expect(try await balance(processes, "alice", url)?.hasPrefix("balance $37.50") == true)
        #expect(try await balance(processes, "bob", url)?.hasPrefix("balance $12.50") == true)
    }
}

@Suite("gotchu receive when nobody pays", .timeLimit(.minutes(10)))
struct UnpaidReceiverTests {
    @Test("A session that expires unpaid ends the receiver with exit status 2")
    func expires() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer(["--session-lifetime", "1"])
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        let receiver = try processes.start(
            ["receive", "--amount", "1.00", "--radio", "sim", "--server", url],
            user: "bob"
        )
        #expect(try await receiver.waitForExit() == 2)
        #expect(receiver.lines.last == "expired unpaid")
    }

    @Test("--recreate starts a new session with a new EID on expiry; SIGINT cancels the live one")
    func recreatesThenCancels() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        // 5 s sessions: the receiver gives up after 12, so SIGINT has about a minute after the second to find one
        // live, even on a starved machine.
        let (server, url) = try await processes.startServer(["--session-lifetime", "5"])
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        let receiver = try processes.start(
            ["receive", "--amount", "1.00", "--radio", "sim", "--recreate", "--server", url],
            user: "bob"
        )
        let first = try await receiver.waitForLine { $0.hasPrefix("advertising ") }
        let second = try await receiver.waitForLine {
            $0.hasPrefix("advertising ") && $0 != first
        }
        #expect(first != second)
        #expect(try await receiver.stop(signal: SIGINT) == 130)
        #expect(receiver.lines.last == "cancelled")
    }
}

@Suite("Paying when the radio cannot range, and EIDs that rotate", .timeLimit(.minutes(10)))
struct TypedEIDAndRotationTests {
    /// The EID and the code of `gotchu receive`'s "session …: $1.00, EID a1b2 c3d4 e5, code 47" line.
    static func advertised(_ line: String) throws -> (eid: String, code: String) {
        let parts = line.components(separatedBy: ", EID ")
        let fields = try #require(parts.last?.components(separatedBy: ", code "))
        #expect(fields.count == 2)
        return (fields[0], fields[1])
    }

    @Test("--eid pays the EID typed from the terminal's screen, with no scan; its code is in the question")
    func typedEID() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        try await processes.run(["fund", "--amount", "50.00", "--server", url], user: "alice")
        let receiver = try processes.start(
            ["receive", "--amount", "12.50", "--radio", "sim", "--rotate-every", "off", "--server", url],
            user: "bob"
        )
        let created = try await receiver.waitForLine { $0.hasPrefix("session ") }
        let (eid, code) = try Self.advertised(created)
        #expect(eid.count == 12 && code.count == 2)

        // Refused before anything is asked of the ledger.
        let typo = try processes.start(["pay", "--eid", "a1b2 c3d4 zz", "--server", url], user: "alice")
        #expect(try await typo.waitForExit() != 0)
        #expect(typo.standardError.contains("--eid must be the 10 hex digits"))

        // Standard input is empty: the question is asked, then declined; it ends with the terminal's code.
        let declined = try processes.start(["pay", "--eid", eid.uppercased(), "--server", url], user: "alice")
        #expect(try await declined.waitForExit() == 1)
        let question = try #require(declined.lines.first { $0.hasPrefix("Pay ") })
        #expect(question.hasSuffix(", code \(code)? [y/N] "))
        #expect(!declined.lines.contains("scanning…"))

        let lines = try await processes.run(["pay", "--eid", eid, "--yes", "--server", url], user: "alice")
        #expect(!lines.contains("scanning…"))
        #expect(lines.last == #"paid $12.50 to "bob" (example.com); new balance $37.50"#)
        #expect(try await receiver.waitForExit() == 0)
    }

    @Test("--rotate-every puts a new EID on the air; the old one stops resolving after the grace; payers pay the new")
    func rotation() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        // A grace shorter than the rotation: once the second rotation is announced, the first EID is past its grace,
        // and a payer that heard an EID just before a rotation still resolves it.
        let (server, url) = try await processes.startServer(["--eid-grace", "4"])
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        try await processes.run(["fund", "--amount", "50.00", "--server", url], user: "alice")
        let receiver = try processes.start(
            ["receive", "--amount", "12.50", "--radio", "sim", "--rotate-every", "5", "--server", url],
            user: "bob"
        )
        let (first, _) = try Self.advertised(try await receiver.waitForLine { $0.hasPrefix("session ") })
        let rotatedLine = try await receiver.waitForLine { $0.hasPrefix("new EID ") }
        let second = String(rotatedLine.dropFirst("new EID ".count).prefix(12))
        #expect(second != first)
        _ = try await receiver.waitForLine { $0.hasPrefix("new EID ") && !$0.hasPrefix("new EID \(second)") }

        let stale = try processes.start(["pay", "--eid", first, "--yes", "--server", url], user: "alice")
        #expect(try await stale.waitForExit() == 1)
        #expect(stale.standardError.contains("replaced by a newer one"), "\(stale.standardError)")

        // The payer hears only what is on the air now, and pays it.
        let lines = try await processes.run(
            ["pay", "--radio", "sim", "--yes", "--timeout", "60", "--server", url],
            user: "alice"
        )
        #expect(lines.last == #"paid $12.50 to "bob" (example.com); new balance $37.50"#)
        #expect(!lines.contains { $0.hasPrefix("sighted \(first.replacingOccurrences(of: " ", with: ""))") })
        #expect(try await receiver.waitForExit() == 0)
    }
}
