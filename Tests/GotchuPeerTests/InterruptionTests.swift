import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuPeer
import GotchuTesting
import Testing

/// A ledger server, Bob logged in, Alice logged in with $50.00, and Bob's terminal advertising $12.50.
private struct Counter {
    let processes: GotchuProcesses
    let server: RunningCommand
    let url: String
    let receiver: RunningCommand
    /// The session the receiver created.
    let sid: String
    /// Bob's client, to read his session's status.
    let bob: LedgerClient
    /// Alice's client.
    let alice: LedgerClient

    static func open(receiverFault: String? = nil) async throws -> Counter {
        let processes = try GotchuProcesses()
        let (server, url) = try await processes.startServer()
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        try await processes.run(["fund", "--amount", "50.00", "--server", url], user: "alice")
        let receiver = try processes.start(
            ["receive", "--amount", "12.50", "--radio", "sim", "--server", url],
            user: "bob",
            extra: receiverFault.map { ["GOTCHU_FAULT": $0] } ?? [:]
        )
        let created = try await receiver.waitForLine { $0.hasPrefix("session ") }
        _ = try await receiver.waitForLine { $0.hasPrefix("advertising ") }
        let sid = String(created.dropFirst("session ".count).prefix { $0 != ":" })
        return Counter(
            processes: processes,
            server: server,
            url: url,
            receiver: receiver,
            sid: sid,
            bob: try await Self.login(url, "bob@example.com"),
            alice: try await Self.login(url, "alice@example.com")
        )
    }

    private static func login(_ url: String, _ email: String) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: URL(string: url)!)
        client.token = try await client.devLogin(email: email).token
        return client
    }

    func close() {
        try? receiver.stopNow()
        try? server.stopNow()
        processes.remove()
    }

    /// The session's status as the ledger has it now.
    func status() async throws -> SessionStatus { try await bob.session(sid: sid).status }

    /// `gotchu pay --yes` as Alice, with a fault point.
    func pay(fault: String? = nil) throws -> RunningCommand {
        try processes.start(
            ["pay", "--radio", "sim", "--yes", "--server", url],
            user: "alice",
            extra: fault.map { ["GOTCHU_FAULT": $0] } ?? [:]
        )
    }

    /// Alice's payment journal.
    func journal() throws -> PaymentJournal {
        try PaymentJournal(
            path: processes.directory.url.appendingPathComponent("alice/state/gotchu/journal.sqlite").path
        )
    }

}

/// Waits until `command` says it holds at a fault point.
private func waitForHold(_ command: RunningCommand, _ point: String) async throws {
    let held = try await eventually(timeout: .seconds(30)) {
        command.standardError.contains("fault: holding at \(point)") || !command.isRunning
    }
    #expect(held && command.isRunning, "never held at \(point): \(command.lines) \(command.standardError)")
}

@Suite("Ctrl-C on gotchu receive reports what the ledger says", .timeLimit(.minutes(10)))
struct ReceiverInterruptionTests {
    @Test("Ctrl-C after the session was paid, before the receiver saw it: reported paid, exit 0")
    func paidWins() async throws {
        let counter = try await Counter.open(receiverFault: "hold-watching")
        defer { counter.close() }
        // The receiver has read the status once and watches no more: only the cancel's answer can tell it.
        try await waitForHold(counter.receiver, "hold-watching")
        let payer = try counter.pay()
        #expect(try await payer.waitForExit() == 0)
        #expect(try await counter.status() == .paid)

        #expect(try await counter.receiver.stop(signal: SIGINT, timeout: .seconds(30)) == 0)
        #expect(counter.receiver.lines.last?.hasPrefix("paid: $12.50 received (session \(counter.sid))") == true)
        #expect(!counter.receiver.lines.contains("cancelled"))
    }

    @Test("Ctrl-C with the ledger down: the cancel is retried, then reported unconfirmed with exit 4")
    func ledgerDown() async throws {
        let counter = try await Counter.open()
        defer { counter.close() }
        try counter.server.stopNow()
        _ = try await counter.server.waitForExit()

        #expect(try await counter.receiver.stop(signal: SIGINT, timeout: .seconds(60)) == 4)
        let lines = counter.receiver.lines
        let last = lines.last ?? ""
        #expect(last.hasPrefix("could not confirm the cancel ("), "\(lines)")
        #expect(last.contains("; the session may still be paid until it expires at 20"))
        #expect(!lines.contains("cancelled"))
    }

    @Test("Ctrl-C on a session nobody paid: cancelled on the ledger, exit 130")
    func cancels() async throws {
        let counter = try await Counter.open()
        defer { counter.close() }
        #expect(try await counter.receiver.stop(signal: SIGINT, timeout: .seconds(30)) == 130)
        #expect(counter.receiver.lines.last == "cancelled")
        #expect(try await counter.status() == .cancelled)
    }
}

@Suite("Ctrl-C on gotchu pay", .timeLimit(.minutes(10)))
struct PayerInterruptionTests {
    @Test("Ctrl-C at the confirmation prompt: nothing paid, nothing locked, exit 130")
    func atThePrompt() async throws {
        let counter = try await Counter.open()
        defer { counter.close() }
        let payer = try PromptedCommand(
            try BuiltProducts.gotchu,
            ["pay", "--radio", "sim", "--server", counter.url],
            environment: counter.processes.environment(user: "alice")
        )
        defer { payer.close() }
        // The question waits for an answer on standard input, which stays open and silent.
        let asked = try await eventually(timeout: .seconds(30)) {
            payer.output.contains("Pay $12.50 to ") && payer.output.hasSuffix("? [y/N] ") || !payer.isRunning
        }
        #expect(asked, "no question: \(payer.output)")

        kill(payer.pid, SIGINT)
        #expect(try await payer.waitForExit(timeout: .seconds(30)) == 130)
        #expect(payer.output.hasSuffix("[y/N] \ncancelled; nothing was paid\n"), "\(payer.output)")
        #expect(try await counter.status() == .advertising)
        #expect(try await counter.alice.wallet().availableCents == 5_000)
        #expect(counter.receiver.isRunning)
    }

    @Test("Ctrl-C while the lock is taken: nothing sent, nothing left to resume, exit 130")
    func afterTheLock() async throws {
        let counter = try await Counter.open()
        defer { counter.close() }
        let payer = try counter.pay(fault: "hold-after-lock")
        try await waitForHold(payer, "hold-after-lock")
        #expect(try await counter.status() == .locked)

        #expect(try await payer.stop(signal: SIGINT, timeout: .seconds(30)) == 130)
        #expect(payer.lines.last == "cancelled; nothing was paid")
        #expect(try await counter.alice.wallet().availableCents == 5_000)
        // The journaled intent is closed: the next `gotchu pay` must not send it.
        let journal = try counter.journal()
        #expect(try journal.unfinished().isEmpty)
        #expect(try journal.recent().first?.failure == "cancelled before it was sent")

        // Released at once rather than left to lapse.
        #expect(try await counter.status() == .advertising)
    }

    @Test("Ctrl-C while the payment is on its way: its outcome is settled and reported paid, exit 0")
    func whileSending() async throws {
        let counter = try await Counter.open()
        defer { counter.close() }
        let payer = try counter.pay(fault: "hold-before-send")
        try await waitForHold(payer, "hold-before-send")

        #expect(try await payer.stop(signal: SIGINT, timeout: .seconds(60)) == 0)
        #expect(payer.lines.contains("interrupted while paying; settling the payment's outcome with the ledger…"))
        #expect(payer.lines.last == "paid $12.50 to \"bob\" (example.com); new balance $37.50")
        #expect(try await counter.status() == .paid)
        #expect(try await counter.receiver.waitForExit() == 0)
    }

    @Test("Ctrl-C while the payment is on its way and the ledger refuses it: nothing paid, exit 130")
    func whileSendingRefused() async throws {
        let counter = try await Counter.open()
        defer { counter.close() }
        let payer = try counter.pay(fault: "hold-before-send")
        try await waitForHold(payer, "hold-before-send")
        // The payee cancels the session first.
        #expect(try await counter.receiver.stop(signal: SIGINT, timeout: .seconds(30)) == 130)
        #expect(try await counter.status() == .cancelled)

        #expect(try await payer.stop(signal: SIGINT, timeout: .seconds(60)) == 130)
        #expect(
            payer.lines.last?.hasPrefix("cancelled; nothing was paid (the ledger refused it: Session cancelled") == true
        )
        #expect(try await counter.alice.wallet().availableCents == 5_000)
        #expect(try counter.journal().unfinished().isEmpty)
    }

    @Test("Ctrl-C while the payment is on its way and the ledger is down: reported pending, exit 4, resumable")
    func whileSendingLedgerDown() async throws {
        let counter = try await Counter.open()
        defer { counter.close() }
        let payer = try counter.pay(fault: "hold-before-send")
        try await waitForHold(payer, "hold-before-send")
        try counter.server.stopNow()
        _ = try await counter.server.waitForExit()

        #expect(try await payer.stop(signal: SIGINT, timeout: .seconds(60)) == 4)
        #expect(payer.lines.contains { $0.hasPrefix("ledger did not answer (") })
        #expect(payer.lines.last?.contains("it is still pending: run `gotchu pay` again") == true)
        #expect(try counter.journal().unfinished().count == 1)

        // Still unreachable: the next run says the payment is still pending and does not exit 0 either.
        let again = try counter.pay()
        #expect(try await again.waitForExit(timeout: .seconds(60)) == 4)
        #expect(again.lines.count == 1)
        #expect(again.lines.first?.contains("is still pending") == true)
    }
}

@Suite("gotchu pay's exit status after resuming", .timeLimit(.minutes(10)))
struct ResumeExitStatusTests {
    @Test("A resumed payment that did not go through exits non-zero")
    func didNotGoThrough() async throws {
        let counter = try await Counter.open()
        defer { counter.close() }
        let crashing = try counter.pay(fault: "after-lock")
        #expect(try await crashing.waitForExit() == SIGKILL)
        // The payee cancels the locked session before the payer comes back.
        #expect(try await counter.receiver.stop(signal: SIGINT, timeout: .seconds(30)) == 130)

        let resumed = try counter.pay()
        #expect(try await resumed.waitForExit() == 1)
        #expect(resumed.lines.count == 1)
        #expect(resumed.lines.first?.contains("did not go through") == true)
        #expect(try await counter.alice.wallet().availableCents == 5_000)
    }
}

/// `gotchu` with a standard input that stays open, its output read raw (a question has no newline).
private final class PromptedCommand: @unchecked Sendable {
    // Unchecked: `text` is guarded by `lock`.
    private let process: SpawnedProcess
    private let lock = NSLock()
    private var text = Data()
    private let reader = NSCondition()
    private var readerDone = false

    init(_ executable: URL, _ arguments: [String], environment: [String: String]) throws {
        process = try SpawnedProcess(
            executable: executable.path,
            arguments: arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            input: .pipe,
            output: .pipe
        )
        let output = process.output
        Thread.detachNewThread { [self] in
            while let output {
                let data = output.read()
                if data.isEmpty { break }
                lock.withLock { text.append(data) }
            }
            reader.withLock {
                readerDone = true
                reader.broadcast()
            }
        }
    }

    var pid: Int32 { process.pid }
    var isRunning: Bool { process.isRunning }
    var output: String { lock.withLock { String(decoding: text, as: UTF8.self) } }

    func waitForExit(timeout: Duration) async throws -> Int32 {
        let status: Int32
        do {
            status = try await process.exit(timeout: timeout)
        } catch {
            throw RunningCommandError("did not exit: \(output)")
        }
        // The rest of its output, up to the pipe's end; bounded only against a descendant holding it open.
        let deadline = Date().addingTimeInterval(30)
        reader.withLock {
            while !readerDone && reader.wait(until: deadline) {}
        }
        return status
    }

    func close() {
        process.signal(SIGKILL)
        process.input?.close()
    }
}
