import Foundation
import GotchuTesting
import Testing

@Suite("gotchu demo and gotchu simulate", .timeLimit(.minutes(10)))
struct DemoAndSimulateTests {
    @Test("The demo pays Bob $12.50 from Alice over the simulated radio and shows both ledgers")
    func demo() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let lines = try await processes.run(["demo"], user: "demo")
        #expect(
            lines.contains {
                $0.contains("alice") && $0.hasSuffix(#"paid $12.50 to "bob" (example.com); balance $87.50"#)
            }
        )
        #expect(lines.contains { $0.contains("bob") && $0.contains("terminal saw the payment") })
        #expect(lines.contains("alice: balance $87.50"))
        #expect(lines.contains("bob: balance $12.50"))
        #expect(lines.contains { $0.contains("DEBIT") && $0.contains("-$12.50") && $0.contains("SEND_P2P") })
        #expect(lines.contains { $0.contains("CREDIT") && $0.contains("+$12.50") && $0.contains("RECEIVE_P2P") })
    }

    @Test("simulate --json: the selector beats the naive rule, and every trial's payment balances the ledger")
    func simulate() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let lines = try await processes.run(["simulate", "counter", "--trials", "60", "--json"], user: "sim")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(lines.joined(separator: "\n").utf8)) as? [String: Any]
        )
        #expect(report["ledgerInvariantsHold"] as? Bool == true)
        let payments = try #require(report["ledgerPayments"] as? Int)
        #expect(payments >= 55)
        let ours = try #require(report["selector"] as? [String: Any])
        let naive = try #require(report["naive"] as? [String: Any])
        let oursWrong = try #require(ours["wrongPayeeRate"] as? Double)
        let naiveWrong = try #require(naive["wrongPayeeRate"] as? Double)
        #expect(oursWrong < naiveWrong)
        #expect((ours["latencyP50"] as? Double ?? 0) > 0)
        // Durations are seconds, as numbers: 100 ms advertising, a 3 s timeout, a 2 s window and correlation time.
        let scenario = try #require(report["scenario"] as? [String: Any])
        #expect(scenario["advertisingInterval"] as? Double == 0.1)
        #expect(scenario["timeout"] as? Double == 3)
        #expect((scenario["selector"] as? [String: Any])?["window"] as? Double == 2)
        #expect((scenario["model"] as? [String: Any])?["shadowingCorrelationTime"] as? Double == 2)
    }

    @Test("simulate --trace replays a recording through the payer's selection, one decision per trace")
    func replayTrace() async throws {
        let traces = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/traces")
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let lines = try await processes.run(
            ["simulate", "--trace", traces.appendingPathComponent("counter-easy.jsonl").path],
            user: "sim"
        )
        let expected = try String(
            contentsOf: traces.appendingPathComponent("counter-easy.decisions.jsonl"),
            encoding: .utf8
        )
        #expect(lines.map { $0 + "\n" }.joined() == expected)
    }

    @Test("simulate --table compares every rule per room and distance")
    func table() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let lines = try await processes.run(["simulate", "--table", "--trials", "20"], user: "sim")
        let rows = lines.filter { $0.hasPrefix("| ") && !$0.hasPrefix("| model") }
        #expect(rows.count == 3 * 4 * 3)
        for model in ["easy", "hard", "hard, mixed makes"] {
            for rule in ["naive", "today", "new"] {
                #expect(rows.count { $0.hasPrefix("| \(model) |") && $0.contains("| \(rule) |") } == 4)
            }
        }
        #expect(rows.allSatisfy { $0.hasSuffix(" s |") || $0.hasSuffix("- |") })
    }

    @Test("simulate --trace refuses a malformed recording, naming the line")
    func replayMalformedTrace() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("trace-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(
            (#"{"trace":0,"eid":"0123456789","rssi":-40,"tx_power":null,"time_ms":0}"# + "\n{\"trace\":0,\"eid\":")
                .utf8
        ).write(to: file)
        let command = try processes.start(["simulate", "--trace", file.path], user: "sim")
        #expect(try await command.waitForExit() != 0)
        #expect(command.standardError.contains("line 2: not valid JSON"))
    }

    @Test(
        "Bad amounts on the command line are refused with the reason",
        arguments: ["-1", "1e3", "12.345", "abc", "0"]
    )
    func badAmounts(amount: String) async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let command = try processes.start(["receive", "--amount", amount, "--radio", "sim"], user: "bob")
        #expect(try await command.waitForExit() != 0)
        #expect(command.standardError.contains("--amount"))
    }
}
