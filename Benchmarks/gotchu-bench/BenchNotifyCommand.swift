import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer

struct BenchNotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notify",
        abstract: "How soon a terminal learns that its session was paid: the event stream beside polling.",
        discussion: """
            Each sample creates a session, has a payer lock it, then times from the payer's payment request to \
            the moment the payee's terminal knows the session is paid: through its event stream \
            (GET /sessions/{sid}/events), or by reading GET /sessions/{sid} every --poll-interval as terminals \
            did before (starting at a random phase of the interval). Real servers on loopback ports; with \
            --database postgres://USER@HOST:PORT/DB also with two servers on one database, the terminal on one \
            and the payer on the other, where the news crosses through LISTEN/NOTIFY. Prints p50 and p95.

            With --split N each run is measured twice, one after the other on fresh databases: on sessions of one \
            payer as above, then on split sessions of N shares, each share paid by a payer of its own. Of a split, \
            N-1 shares are locked and paid first (not timed); then the last payer locks the last share, the \
            terminal's stream is opened (its first event is the current state, N-1 shares paid) or its polling \
            started, and what is timed is the last share's payment request to the terminal knowing the session \
            is paid (the `paid` event, or a poll reading PAID). The split's line is what a terminal waits for \
            at the end of a split bill; the single payer's line beside it, from the same run, is its baseline.
            """
    )

    @Option(help: "Payments timed per run.")
    var samples = 50

    @Option(help: "The polling terminal's interval, in milliseconds (the receiver's default is 250).")
    var pollInterval = 250

    @Option(
        help: ArgumentHelp(
            "A PostgreSQL server to measure on (default: SQLite, one server only), as postgres://USER@HOST:PORT/DB.",
            valueName: "url"
        )
    )
    var database: String?

    @Option(
        help: ArgumentHelp(
            "Also measure split sessions of N shares (2 to 50), timing the last share's payment.",
            valueName: "N"
        )
    )
    var split: Int?

    @Flag(help: "Measure the event stream only, not polling.")
    var noPoll = false

    enum Mode: String {
        case poll
        case stream
    }

    func validate() throws {
        guard samples > 1, pollInterval > 0 else {
            throw ValidationError("--samples must be 2 or more, --poll-interval positive")
        }
        if let split, !(2...50).contains(split) { throw ValidationError("--split must be 2 to 50") }
        if let database { _ = try PostgresURL(database) }
    }

    func run() async throws {
        let backend = try database.map { BenchBackend.postgres(try PostgresURL($0)) } ?? .sqlite
        print("notification benchmark: \(samples) payments per run (\(backend)); payment request → terminal knows")
        var runs: [(String, Int, Mode)] = [
            ("polling every \(pollInterval) ms, one server", 1, .poll),
            ("event stream, one server", 1, .stream),
        ]
        if case .postgres = backend {
            runs += [
                ("polling every \(pollInterval) ms, two servers", 2, .poll),
                ("event stream, two servers", 2, .stream),
            ]
        }
        if noPoll { runs.removeAll { $0.2 == .poll } }
        for (label, servers, mode) in runs {
            for shares in [1] + (split.map { [$0] } ?? []) {
                var latencies: [Duration] = []
                _ = try await backend.measure(servers: servers) { stores, tokens in
                    latencies = try await Self.sample(
                        samples: samples,
                        mode: mode,
                        poll: .milliseconds(pollInterval),
                        shares: shares,
                        stores: stores,
                        tokens: tokens
                    )
                }
                let figure = BenchFigure(payments: latencies.count, elapsed: .seconds(1), latencies: latencies)
                let name = shares > 1 ? "\(label), last of \(shares) shares" : label
                print(
                    "  \(name.padding(toLength: split == nil ? 38 : 64, withPad: " ", startingAt: 0))"
                        + String(format: "p50 %7.1f ms   p95 %7.1f ms", figure.latency(50), figure.latency(95))
                )
            }
        }
    }

    /// The terminal on the first server, the payers on the last. Sessions of `shares` shares (1: not split), a payer
    /// for each; the last share's payment is timed.
    private static func sample(
        samples: Int,
        mode: Mode,
        poll: Duration,
        shares: Int,
        stores: [any LedgerStore],
        tokens: TokenAuthority
    ) async throws -> [Duration] {
        let payee = try await stores[0].login(email: "terminal@bench.example")
        let payeeToken = try await tokens.issue(userID: payee.id)
        var payerTokens: [String] = []
        for index in 0..<shares {
            let payer = try await stores[0].login(
                email: index == 0 ? "payer@bench.example" : "payer\(index)@bench.example"
            )
            _ = try await stores[0].fund(userID: payer.id, amountCents: Cents(samples) * 100)
            payerTokens.append(try await tokens.issue(userID: payer.id))
        }
        // The stores' pools are run by the caller, so the servers get none of their own.
        return try await LedgerServer.withRunning(
            stores.map { LedgerServer.Replica(store: $0) },
            .inProcess(tokens: tokens) { $0.developmentMode = false }
        ) { [payerTokens] urls in
            let terminal = LedgerClient(baseURL: urls[0], token: payeeToken)
            let payers = payerTokens.map { LedgerClient(baseURL: urls[urls.count - 1], token: $0) }
            let paying = payers[payers.count - 1]
            var latencies: [Duration] = []
            for index in 0..<samples {
                let created = try await terminal.createSession(
                    amountCents: 100 * Cents(shares),
                    shares: shares > 1 ? shares : nil
                )
                // Every share but the last, each by a payer of its own.
                for earlier in payers.dropLast() {
                    try await earlier.lock(sid: created.sid)
                    _ = try await earlier.send(sid: created.sid, idempotencyKey: "\(index)")
                }
                try await paying.lock(sid: created.sid)
                let clock = ContinuousClock()
                switch mode {
                case .stream:
                    var events = terminal.sessionEvents(sid: created.sid).makeAsyncIterator()
                    // The current state first (locked; of a split, every share but the last paid): the stream is open
                    // before the payment.
                    let first = try await events.next()
                    if shares > 1 {
                        guard first?.kind == .sharePaid, first?.session.sharesPaid == shares - 1 else {
                            throw CLIError("the stream did not open on a split with all shares but one paid")
                        }
                    } else {
                        guard first?.kind == .locked else {
                            throw CLIError("the stream did not open on a locked session")
                        }
                    }
                    let start = clock.now
                    async let sent = paying.send(sid: created.sid, idempotencyKey: "\(index)")
                    while let event = try await events.next(), event.kind != .paid {}
                    latencies.append(clock.now - start)
                    _ = try await sent
                case .poll:
                    let polling = Task {
                        while true {
                            if try await terminal.session(sid: created.sid).status == .paid { return clock.now }
                            try await Task.sleep(for: poll)
                        }
                    }
                    // The payment lands anywhere in the polling cycle.
                    try await Task.sleep(for: poll * Double.random(in: 0..<1))
                    let start = clock.now
                    _ = try await paying.send(sid: created.sid, idempotencyKey: "\(index)")
                    latencies.append(try await polling.value - start)
                }
            }
            return latencies
        }
    }
}
