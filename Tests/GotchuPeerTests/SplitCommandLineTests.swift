import Foundation
import GotchuTesting
import Testing

/// A ledger server, Bob's terminal asking for a split payment on the simulated air, and payers with $50.00 each.
private struct SplitCounter {
    let processes: GotchuProcesses
    let server: RunningCommand
    let url: String
    let receiver: RunningCommand
    /// The session's id, from the receiver's `session SID: …` line.
    let sid: String
    /// The EID as the receiver printed it, grouped.
    let eid: String

    /// Starts it all: `receive --amount AMOUNT` with `receiveOptions` (such as `--split 4`) as Bob.
    static func start(
        _ processes: GotchuProcesses,
        amount: String,
        receiveOptions: [String],
        payers: [String],
        serverOptions: [String] = []
    ) async throws -> SplitCounter {
        let (server, url) = try await processes.startServer(serverOptions)
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        for payer in payers {
            try await processes.run(["login", "--email", "\(payer)@example.com", "--server", url], user: payer)
            try await processes.run(["fund", "--amount", "50.00", "--server", url], user: payer)
        }
        let receiver = try processes.start(
            ["receive", "--amount", amount, "--radio", "sim", "--rotate-every", "off", "--server", url]
                + receiveOptions,
            user: "bob"
        )
        let created = try await receiver.waitForLine { $0.hasPrefix("session ") }
        _ = try await receiver.waitForLine { $0.hasPrefix("advertising ") }
        // "session SID: $40.00 in 4 shares of $10.00, EID a1b2 c3d4 e5, code 47"
        let sid = String(created.dropFirst("session ".count).prefix { $0 != ":" })
        let eid = try #require(created.components(separatedBy: ", EID ").last?.components(separatedBy: ", code ").first)
        return SplitCounter(processes: processes, server: server, url: url, receiver: receiver, sid: sid, eid: eid)
    }

    /// Runs `gotchu pay ARGUMENTS --server URL` as `user`, answering its question with `answer` when given.
    func pay(_ user: String, _ arguments: [String], answer: String? = nil) throws -> RunningCommand {
        try RunningCommand(
            try BuiltProducts.gotchu,
            ["pay"] + arguments + ["--server", url],
            environment: processes.environment(user: user),
            input: answer.map { Data(($0 + "\n").utf8) }
        )
    }

    /// Pays to its end as `user` (exit 0) and returns its last line.
    func paid(_ user: String, _ arguments: [String], answer: String? = nil) async throws -> String {
        let payer = try pay(user, arguments, answer: answer)
        let status = try await payer.waitForExit()
        #expect(status == 0, "gotchu pay \(arguments): \(payer.standardError) / \(payer.lines)")
        return payer.lines.last ?? ""
    }

    /// The first line of `gotchu wallet` as `user`: `balance $X.XX   wallet …`.
    func balance(_ user: String) async throws -> String {
        try await processes.run(["wallet", "--server", url], user: user).first ?? ""
    }

    /// The payment id in a payer's `paid …; payment ID; new balance …` line.
    static func paymentID(_ line: String) throws -> String {
        let after = try #require(line.components(separatedBy: "; payment ").dropFirst().first)
        return String(after.prefix { $0 != ";" })
    }

    func stop() {
        _ = try? receiver.stopNow()
        _ = try? server.stopNow()
    }
}

@Suite(
    "gotchu receive --split and gotchu pay --shares/--tip as processes on the simulated air",
    .timeLimit(.minutes(5))
)
struct SplitCommandLineTests {
    @Test("A 4-way split paid by 4 payers: the terminal prints each share as it lands, then paid")
    func fourPayers() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let payers = ["alice", "carol", "dave", "erin"]
        let counter = try await SplitCounter.start(
            processes,
            amount: "40",
            receiveOptions: ["--split", "4"],
            payers: payers
        )
        defer { counter.stop() }
        let created = try await counter.receiver.waitForLine { $0.hasPrefix("session ") }
        #expect(created.hasPrefix("session \(counter.sid): $40.00 in 4 shares of $10.00, EID "))

        var shares: Set<String> = []
        var paymentIDs: Set<String> = []
        for (index, payer) in payers.enumerated() {
            let last: String
            if index == 2 {
                // Dave answers the question himself: it names his share of the whole and how many are paid.
                let paying = try counter.pay(payer, ["--radio", "sim", "--timeout", "60"], answer: "y")
                #expect(try await paying.waitForExit() == 0, "\(paying.standardError)")
                #expect(
                    paying.lines.contains {
                        $0.hasPrefix(#"Pay your share $10.00 of $40.00 to "bob" (example.com) (2 of 4 paid)"#)
                    },
                    "\(paying.lines)"
                )
                last = paying.lines.last ?? ""
            } else {
                last = try await counter.paid(payer, ["--radio", "sim", "--yes", "--timeout", "60"])
            }
            #expect(last.hasPrefix("paid $10.00 (share "), "\(last)")
            #expect(last.contains(#" of 4) to "bob" (example.com); payment "#), "\(last)")
            #expect(last.hasSuffix("; new balance $40.00"), "\(last)")
            shares.insert(String(last.dropFirst("paid $10.00 (share ".count).prefix { $0 != " " }))
            paymentIDs.insert(try SplitCounter.paymentID(last))
            if index < 3 {
                _ = try await counter.receiver.waitForLine { $0 == "\(index + 1) of 4 paid" }
            }
        }
        #expect(shares == ["1", "2", "3", "4"])
        #expect(paymentIDs.count == 4)

        #expect(try await counter.receiver.waitForExit() == 0)
        let lines = counter.receiver.lines
        #expect(lines.last == "paid: $40.00 received in 4 shares (session \(counter.sid))")
        let steps = ["1 of 4 paid", "2 of 4 paid", "3 of 4 paid"].compactMap { lines.firstIndex(of: $0) }
        #expect(steps.count == 3 && steps == steps.sorted(), "\(lines)")
        #expect(!lines.contains("4 of 4 paid"))
        #expect(try await counter.balance("bob").hasPrefix("balance $40.00"))
    }

    @Test("--tip 15% and --shares 2 --tip 2.00 in the question; cancelled, the terminal says what was refunded")
    func tipsThenCancel() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let counter = try await SplitCounter.start(
            processes,
            amount: "40",
            receiveOptions: ["--split", "4"],
            payers: ["alice", "carol"]
        )
        defer { counter.stop() }

        let alice = try await counter.paid("alice", ["--eid", counter.eid, "--yes", "--tip", "15%"])
        #expect(
            alice.hasPrefix(#"paid $10.00 (share 1 of 4) + tip $1.50 to "bob" (example.com); payment "#),
            "\(alice)"
        )
        #expect(alice.hasSuffix("; new balance $38.50"), "\(alice)")
        _ = try await counter.receiver.waitForLine { $0 == "1 of 4 paid" }

        let carol = try counter.pay("carol", ["--eid", counter.eid, "--shares", "2", "--tip", "2.00"], answer: "yes")
        #expect(try await carol.waitForExit() == 0, "\(carol.standardError)")
        #expect(
            carol.lines.contains {
                $0.hasPrefix(
                    #"Pay 2 shares, $20.00 of $40.00 + tip $2.00 ($22.00 in all) to "bob" (example.com) (1 of 4 paid)"#
                )
            },
            "\(carol.lines)"
        )
        let carolPaid = carol.lines.last ?? ""
        #expect(carolPaid.hasPrefix(#"paid $20.00 (shares 2, 3 of 4) + tip $2.00 to "bob""#), "\(carolPaid)")
        #expect(carolPaid.hasSuffix("; new balance $28.00"), "\(carolPaid)")
        _ = try await counter.receiver.waitForLine { $0 == "3 of 4 paid" }
        #expect(try await counter.balance("bob").hasPrefix("balance $33.50"))

        #expect(try await counter.receiver.stop(signal: SIGINT) == 130)
        #expect(counter.receiver.lines.last == "cancelled: refunded $33.50 to 2 payers", "\(counter.receiver.lines)")
        #expect(try await counter.balance("alice").hasPrefix("balance $50.00"))
        #expect(try await counter.balance("carol").hasPrefix("balance $50.00"))
        #expect(try await counter.balance("bob").hasPrefix("balance $0.00"))
    }

    @Test("Expired with a share paid: the ledger refunds it and its tip, and the terminal says so")
    func expiresWithAShare() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        // Long enough for one payer to pay however busy the machine, short enough to wait for.
        let counter = try await SplitCounter.start(
            processes,
            amount: "40",
            receiveOptions: ["--split", "2"],
            payers: ["alice"],
            serverOptions: ["--session-lifetime", "10"]
        )
        defer { counter.stop() }
        let paid = try await counter.paid("alice", ["--eid", counter.eid, "--yes", "--tip", "1.00"])
        #expect(paid.hasPrefix(#"paid $20.00 (share 1 of 2) + tip $1.00 to "bob""#), "\(paid)")
        _ = try await counter.receiver.waitForLine { $0 == "1 of 2 paid" }
        #expect(try await counter.receiver.waitForExit(timeout: .seconds(120)) == 2)
        #expect(
            counter.receiver.lines.last == "expired before every share was paid: refunded $21.00 to 1 payer",
            "\(counter.receiver.lines)"
        )
        #expect(try await counter.balance("alice").hasPrefix("balance $50.00"))
        #expect(try await counter.balance("bob").hasPrefix("balance $0.00"))
    }

    @Test("A split is refunded by payment id; without one the refund is refused with the list of payments")
    func refundByPaymentID() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let counter = try await SplitCounter.start(
            processes,
            amount: "40",
            receiveOptions: ["--split", "2"],
            payers: ["alice", "carol"]
        )
        defer { counter.stop() }
        let alicePaid = try await counter.paid("alice", ["--eid", counter.eid, "--yes", "--tip", "10%"])
        let carolPaid = try await counter.paid("carol", ["--eid", counter.eid, "--yes"])
        let (alice, carol) = (try SplitCounter.paymentID(alicePaid), try SplitCounter.paymentID(carolPaid))
        #expect(try await counter.receiver.waitForExit() == 0)
        #expect(
            counter.receiver.lines.last == "paid: $40.00 received in 2 shares + $2.00 in tips (session \(counter.sid))"
        )

        let status = try await processes.run(["status", counter.sid, "--server", counter.url], user: "bob")
        #expect(status.first?.hasPrefix("session \(counter.sid): PAID, $40.00 in 2 shares, 2 paid ($40.00)") == true)
        #expect(status.contains { $0.hasPrefix("  payment \(alice): share ") && $0.contains("$20.00 + tip $2.00") })
        #expect(status.contains { $0.hasPrefix("  payment \(carol): share ") && $0.hasSuffix("receipt verified") })

        let unnamed = try processes.start(["refund", counter.sid, "--server", counter.url], user: "bob")
        #expect(try await unnamed.waitForExit() == 1)
        #expect(unnamed.standardError.contains("is split into 2 shares"), "\(unnamed.standardError)")
        #expect(unnamed.standardError.contains("--payment"))
        #expect(unnamed.standardError.contains(alice) && unnamed.standardError.contains(carol))

        let refunded = try await processes.run(
            ["refund", counter.sid, "--payment", alice, "--server", counter.url],
            user: "bob"
        )
        #expect(
            refunded.last?.hasPrefix(#"refunded $22.00 of session \#(counter.sid), payment "\#(alice)""#) == true,
            "\(refunded)"
        )
        #expect(refunded.last?.hasSuffix("verified") == true)
        #expect(try await counter.balance("alice").hasPrefix("balance $50.00"))

        let part = try await processes.run(
            ["refund", counter.sid, "--payment", carol, "--amount", "5.00", "--server", counter.url],
            user: "bob"
        )
        #expect(part.last?.hasPrefix("refunded $5.00 of session \(counter.sid), payment") == true, "\(part)")
        #expect(try await counter.balance("carol").hasPrefix("balance $35.00"))
        #expect(try await counter.balance("bob").hasPrefix("balance $15.00"))
    }

    @Test("On a session that is not split, --shares 2 is refused clearly; a tip is paid; bad tips never leave")
    func unsplitSession() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let counter = try await SplitCounter.start(processes, amount: "12.50", receiveOptions: [], payers: ["alice"])
        defer { counter.stop() }
        let created = try await counter.receiver.waitForLine { $0.hasPrefix("session ") }
        #expect(created.hasPrefix("session \(counter.sid): $12.50, EID "))

        let twoShares = try counter.pay("alice", ["--eid", counter.eid, "--yes", "--shares", "2"])
        #expect(try await twoShares.waitForExit() == 1)
        #expect(twoShares.standardError.contains("not split into shares"), "\(twoShares.standardError)")
        #expect(twoShares.standardError.contains("No share of this session is free"), "\(twoShares.standardError)")

        for (tip, reason) in [("150%", "more than 100%"), ("abc", "is not a tip"), ("1.234", "more than two decimals")]
        {
            let refused = try counter.pay("alice", ["--eid", counter.eid, "--yes", "--tip", tip])
            #expect(try await refused.waitForExit() != 0)
            #expect(refused.standardError.contains("--tip"), "\(refused.standardError)")
            #expect(refused.standardError.contains(reason), "\(refused.standardError)")
        }
        let tooLarge = try counter.pay("alice", ["--eid", counter.eid, "--yes", "--tip", "20.00"])
        #expect(try await tooLarge.waitForExit() == 1)
        #expect(tooLarge.standardError.contains("a tip is at most the amount paid"), "\(tooLarge.standardError)")

        let paid = try await counter.paid("alice", ["--eid", counter.eid, "--yes", "--tip", "2.00"])
        #expect(paid == #"paid $12.50 + tip $2.00 to "bob" (example.com); new balance $35.50"#)
        #expect(try await counter.receiver.waitForExit() == 0)
        #expect(counter.receiver.lines.last == "paid: $12.50 received + $2.00 in tips (session \(counter.sid))")
        #expect(try await counter.balance("bob").hasPrefix("balance $14.50"))
    }
}
