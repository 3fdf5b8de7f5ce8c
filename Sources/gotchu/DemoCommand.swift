import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuPeer
import GotchuSimulatedRadio

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "A real payment over the simulated radio, with no hardware and no set-up.",
        discussion: """
            Starts a ledger server in this process on a temporary SQLite file, Bob's terminal asking \
            $12.50, two other terminals advertising 2 and 3 metres away, and Alice (funded $100.00) \
            who steps up to Bob's terminal. Her phone scans, picks the nearest terminal, resolves it \
            on the ledger, locks and pays, in real time; the demo ends with both balances and ledgers.
            """
    )

    @Option(help: "Seed of the simulated radio (shadowing, fading, packet loss).")
    var seed: UInt64 = 2026

    func run() async throws {
        let seed = self.seed
        let paid = try await withTaskCancellationOnSignals { try await Self.run(seed: seed) }
        if !paid { throw ExitCode.failure }
    }

    /// Serves the ledger, plays the scene; returns whether Alice paid Bob.
    private static func run(seed: UInt64) async throws -> Bool {
        let output = DemoOutput()
        return try await TemporaryLedger.with { ledger in
            try await ledger.serving { url in
                output.say("ledger", "listening on \(url.absoluteString) (SQLite in \(ledger.directory.path))")
                return try await scene(url: url, directory: ledger.directory, seed: seed, output: output)
            }
        }
    }

    /// Three terminals and a payer on one simulated air; returns whether Alice paid Bob.
    private static func scene(url: URL, directory: URL, seed: UInt64, output: DemoOutput) async throws -> Bool {
        let bob = try await login(url, "bob@example.com", output)
        let carol = try await login(url, "carol@example.com", output)
        let dave = try await login(url, "dave@example.com", output)
        let alice = try await login(url, "alice@example.com", output)
        let funded = try await alice.fund(amountCents: 10_000)
        output.say("alice", "funded with \(Money.format(funded.newBalanceCents))")

        let air = SimulatedAir(seed: seed, clock: .realTime)
        let terminals: [(String, LedgerClient, Position, Cents)] = [
            ("bob", bob, Position(x: 0, y: 0), 1_250),
            ("carol", carol, Position(x: 2.0, y: 0.4), 3_000),
            ("dave", dave, Position(x: -1.2, y: 2.8), 420),
        ]
        let aliceRadio = await air.addPeer(SimulatedPeer(name: "alice's phone", at: Position(x: 0.15, y: 0.05)))
        let journal = try PaymentJournal(path: directory.appendingPathComponent("journal.sqlite").path)

        return try await withThrowingTaskGroup(of: (String, ReceiverStateMachine.Outcome?).self) { group in
            for (name, client, position, amount) in terminals {
                let radio = await air.addPeer(SimulatedPeer(name: "\(name)'s terminal", at: position))
                output.say(name, "terminal at \(position), asking \(Money.format(amount))")
                group.addTask {
                    let outcome = await Receiver(radio: radio, ledger: client).run(
                        Receiver.Options(amountCents: amount)
                    ) {
                        output.receiver(name, $0)
                    }
                    return (name, outcome)
                }
            }
            // Let the terminals get on the air before Alice steps up.
            try await Task.sleep(for: .milliseconds(400))
            output.say("alice", "steps up to bob's terminal (15 cm away) and opens the app")
            var flow = PayerStateMachine.Configuration()
            flow.preApproved = true
            flow.maximumAmountCents = 2_000
            let outcome = try await Payer(radio: aliceRadio, ledger: alice, journal: journal)
                .run(Payer.Options(flow: flow), interaction: DemoInteraction(output: output))
            var paidBob = false
            switch outcome {
            case .paid(let offer, let balance):
                output.say(
                    "alice",
                    "paid \(Money.format(offer.amountCents)) to \(offer.payeeDescription); balance \(Money.format(balance))"
                )
                paidBob = offer.payeeName == "bob"
            case .failed(let failure):
                output.say("alice", "did not pay: \(failure)")
            }
            // Bob's terminal sees the payment and stops (or gives up waiting); the others are cancelled.
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return ("", nil)
            }
            while let (name, result) = try await group.next() {
                switch (name, result) {
                case ("bob", .paid?): output.say(name, "terminal saw the payment and stopped advertising")
                case (_, .cancelled?): output.say(name, "terminal stopped; its session is cancelled")
                case (_, let outcome?): output.say(name, "terminal stopped: \(outcome)")
                case (_, nil): break
                }
                if name == "bob" || name.isEmpty { group.cancelAll() }
            }
            try await summary(alice: alice, bob: bob, output: output)
            return paidBob
        }
    }

    private static func login(_ url: URL, _ email: String, _ output: DemoOutput) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: url)
        client.token = try await client.devLogin(email: email).token
        return client
    }

    private static func summary(alice: LedgerClient, bob: LedgerClient, output: DemoOutput) async throws {
        for (name, client) in [("alice", alice), ("bob", bob)] {
            let wallet = try await client.wallet()
            print("")
            print("\(name): balance \(Money.format(wallet.availableCents))")
            print(EntryTable.render(wallet.recent))
        }
    }
}

/// The demo's payer: confirms automatically and narrates.
private struct DemoInteraction: PayerInteraction {
    let output: DemoOutput

    func choose(from candidates: [ProximityCandidate]) async -> EID? {
        output.say("alice", "no terminal is clearly nearest; candidates: \(candidates.map(\.eid.rawValue))")
        return candidates.first?.eid
    }

    func confirm(_ offer: PaymentOffer) async -> Bool { true }

    func progress(_ progress: Payer.Progress) {
        switch progress {
        case .scanning: output.say("alice", "scanning for terminals…")
        case .sighted(let sighting):
            output.say("alice", "sighted \(sighting.eid) at \(sighting.rssi.map { "\($0) dBm" } ?? "unknown RSSI")")
        case .selected(let eid): output.say("alice", "nearest terminal: \(eid)")
        case .resolved(let offer):
            output.say(
                "alice",
                "resolved \(offer.eid): \(Money.format(offer.amountCents)) to \(offer.payeeDescription) — approved"
            )
        case .locked: output.say("alice", "locked the session")
        case .retrying(let reason): output.say("alice", "retrying: \(reason)")
        }
    }
}

/// Timestamped lines: `  0.42s  bob     advertising a1b2c3d4e5`.
final class DemoOutput: Sendable {
    private let start = ContinuousClock.now

    func say(_ who: String, _ what: String) {
        let elapsed = (ContinuousClock.now - start) / .seconds(1)
        Console().line(
            String(format: "%6.2fs  ", elapsed) + who.padding(toLength: 7, withPad: " ", startingAt: 0) + what
        )
    }

    func receiver(_ name: String, _ progress: Receiver.Progress) {
        switch progress {
        case .created(_, let eid, let amount, let shareCents):
            say(name, "session created: \(Money.format(amount))\(Console.shares(shareCents)), EID \(eid)")
        case .advertising(let eid): say(name, "advertising \(eid)…")
        case .rotated(let eid): say(name, "new EID \(eid) on the air")
        case .rotationFailed(let reason): say(name, "could not rotate the EID: \(reason)")
        case .checkout(let url): say(name, "web checkout \(url)")
        case .locked: say(name, "a payer locked the session")
        case .unlocked: say(name, "the lock lapsed")
        case .sharesPaid(let paid, let shares): say(name, "\(paid) of \(shares) paid")
        case .receiptUnverified(let reason): say(name, reason)
        case .ledgerUnreachable(let reason): say(name, "ledger unreachable: \(reason)")
        }
    }
}
