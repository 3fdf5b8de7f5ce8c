import Foundation
import GotchuTesting
import Testing

@Suite(
    "gotchu receive --ask-tip and the suggestion gotchu pay prints, as processes on the simulated air",
    .timeLimit(.minutes(5))
)
struct TipPromptCommandLineTests {
    /// Starts a ledger, Bob's `gotchu receive --amount AMOUNT OPTIONS` and a funded payer, Alice; runs `body` with the
    /// ledger's URL and the EID the receiver printed.
    private func withCounter(
        amount: String,
        _ options: [String],
        _ body: (GotchuProcesses, String, String) async throws -> Void
    ) async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        try await processes.run(["fund", "--amount", "50.00", "--server", url], user: "alice")
        let receiver = try processes.start(
            ["receive", "--amount", amount, "--radio", "sim", "--rotate-every", "off", "--server", url] + options,
            user: "bob"
        )
        defer { _ = try? receiver.stopNow() }
        let created = try await receiver.waitForLine { $0.hasPrefix("session ") }
        let eid = try #require(created.components(separatedBy: ", EID ").last?.components(separatedBy: ", code ").first)
        try await body(processes, url, eid)
    }

    @Test("The payer is shown the terminal's tips on its share; none is added unless it asks with --tip")
    func suggestion() async throws {
        try await withCounter(amount: "40", ["--split", "4", "--ask-tip", "10,15,20"]) { processes, url, eid in
            let lines = try await processes.run(["pay", "--eid", eid, "--yes", "--server", url], user: "alice")
            #expect(
                lines.contains(
                    "the payee suggests a tip: 10% ($1.00), 15% ($1.50), 20% ($2.00) (pay one with --tip 10%)"
                ),
                "\(lines)"
            )
            #expect(lines.last?.hasSuffix("; new balance $40.00") == true, "\(lines)")
            let tipped = try await processes.run(
                ["pay", "--eid", eid, "--yes", "--tip", "15%", "--server", url],
                user: "alice"
            )
            #expect(tipped.last?.contains("+ tip $1.50") == true, "\(tipped)")
        }
    }

    @Test("Without --ask-tip the payer is shown no suggestion")
    func noSuggestion() async throws {
        try await withCounter(amount: "12.50", []) { processes, url, eid in
            let lines = try await processes.run(["pay", "--eid", eid, "--yes", "--server", url], user: "alice")
            #expect(!lines.contains { $0.contains("suggests a tip") }, "\(lines)")
            #expect(lines.last?.hasSuffix("; new balance $37.50") == true, "\(lines)")
        }
    }

    @Test("--reference is shown to the payer, quoted, and comes back in both wallets' histories")
    func reference() async throws {
        try await withCounter(amount: "12.50", ["--reference", "order \"1017\""]) { processes, url, eid in
            let lines = try await processes.run(["pay", "--eid", eid, "--yes", "--server", url], user: "alice")
            #expect(lines.contains { $0.hasPrefix("resolved $12.50 → ") && $0.hasSuffix(#" for "order \"1017\"""#) })
            for user in ["alice", "bob"] {
                // Records end in CRLF.
                let csv = try await processes.run(["wallet", "--all", "--csv", "--server", url], user: user).map {
                    String($0.dropLast())
                }
                #expect(csv.first?.hasSuffix(",reference") == true, "\(csv)")
                #expect(csv.contains { $0.hasSuffix(#","order ""1017""""#) }, "\(csv)")
            }
        }
    }

    @Test(
        "A bad --ask-tip or --reference is refused, naming it, before anything is asked of the ledger",
        arguments: [
            ("--ask-tip", "0"), ("--ask-tip", "101"), ("--ask-tip", "10,10"), ("--ask-tip", "1,2,3,4,5,6"),
            ("--ask-tip", "ten"), ("--ask-tip", "12.5"), ("--reference", ""), ("--reference", " order"),
            ("--reference", "a\u{202E}b"), ("--reference", "line\nbreak"),
            ("--reference", String(repeating: "x", count: 129)),
        ]
    )
    func refused(_ option: String, _ text: String) async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let receiver = try processes.start(
            ["receive", "--amount", "5", "--radio", "sim", option, text, "--server", "http://127.0.0.1:9"],
            user: "bob"
        )
        let status = try await receiver.waitForExit()
        #expect(status != 0)
        #expect(receiver.standardError.contains(option), "\(receiver.standardError)")
    }
}
