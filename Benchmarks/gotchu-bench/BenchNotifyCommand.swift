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

    enum Mode: String {
        case poll
        case stream
    }

    func validate() throws {
        guard samples > 1, pollInterval > 0 else {
            throw ValidationError("--samples must be 2 or more, --poll-interval positive")
        }
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
        for (label, servers, mode) in runs {
            var latencies: [Duration] = []
            _ = try await backend.measure(servers: servers) { stores, tokens in
                latencies = try await Self.sample(
                    samples: samples,
                    mode: mode,
                    poll: .milliseconds(pollInterval),
                    stores: stores,
                    tokens: tokens
                )
            }
            let figure = BenchFigure(payments: latencies.count, elapsed: .seconds(1), latencies: latencies)
            print(
                "  \(label.padding(toLength: 38, withPad: " ", startingAt: 0))"
                    + String(format: "p50 %7.1f ms   p95 %7.1f ms", figure.latency(50), figure.latency(95))
            )
        }
    }

    /// The terminal on the first server, the payer on the last.
    private static func sample(
        samples: Int,
        mode: Mode,
        poll: Duration,
        stores: [any LedgerStore],
        tokens: TokenAuthority
    ) async throws -> [Duration] {
        let payee = try await stores[0].login(email: "terminal@bench.example")
        let payer = try await stores[0].login(email: "payer@bench.example")
        _ = try await stores[0].fund(userID: payer.id, amountCents: Cents(samples) * 100)
        let (payeeToken, payerToken) = (
            try await tokens.issue(userID: payee.id), try await tokens.issue(userID: payer.id)
        )
        // The stores' pools are run by the caller, so the servers get none of their own.
        return try await LedgerServer.withRunning(
            stores.map { LedgerServer.Replica(store: $0) },
            tokens: tokens,
            developmentMode: false
        ) { urls in
            let terminal = LedgerClient(baseURL: urls[0], token: payeeToken)
            let paying = LedgerClient(baseURL: urls[urls.count - 1], token: payerToken)
            var latencies: [Duration] = []
            for index in 0..<samples {
                let created = try await terminal.createSession(amountCents: 100)
                try await paying.lock(sid: created.sid)
                let clock = ContinuousClock()
                switch mode {
                case .stream:
                    var events = terminal.sessionEvents(sid: created.sid).makeAsyncIterator()
                    // The current state (locked) first: the stream is open before the payment.
                    guard try await events.next()?.kind == .locked else {
                        throw CLIError("the stream did not open on a locked session")
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
