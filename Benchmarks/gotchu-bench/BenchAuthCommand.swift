import ArgumentParser
import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer

struct BenchAuthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth",
        abstract: "GET /sessions/{sid} per second with an API key and with a user's token.",
        discussion: """
            One server on a loopback port over a fresh database (a SQLite file, or with --database \
            postgres://USER@HOST:PORT/DB a new database on that server, dropped afterwards). A payee's \
            session is read by C concurrent clients with an API key (`gk_…`: a SHA-256 and one indexed \
            lookup per request) and with the payee's HS256 token (a signature check and a read of the user, \
            which must not be disabled), in alternating order over several rounds. Prints the median rates \
            and their ratio.
            """
    )

    @Option(name: .customShort("c"), help: "Concurrent clients.")
    var clients = 8

    @Option(help: "Requests per client, credential and round.")
    var requests = 300

    @Option(help: "Rounds; each measures both credentials, in alternating order. The medians are compared.")
    var rounds = 5

    @Option(
        help: ArgumentHelp(
            "A PostgreSQL server to measure on (default: SQLite), as postgres://USER@HOST:PORT/DB.",
            valueName: "url"
        )
    )
    var database: String?

    func validate() throws {
        guard clients > 0, requests > 0, rounds > 0 else {
            throw ValidationError("-c, --requests and --rounds must be positive")
        }
        if let database { _ = try PostgresURL(database) }
    }

    func run() async throws {
        let backend = try database.map { BenchBackend.postgres(try PostgresURL($0)) } ?? .sqlite
        let clients = self.clients
        let requests = self.requests
        let rounds = self.rounds
        print(
            "auth benchmark: \(clients) clients × \(requests) GET /sessions/{sid} per credential and round, "
                + "\(rounds) rounds (\(backend))"
        )
        let rates = RateBox()
        _ = try await backend.measure(servers: 1) { stores, tokens in
            let store = stores[0]
            let payee = try await store.login(email: "payee@bench.example")
            let secret = try await store.createAPIKey(
                email: "payee@bench.example",
                name: "bench",
                scopes: [.sessionsRead],
                actor: "bench"
            ).secret
            let (session, _) = try await store.createSession(
                payeeID: payee.id,
                amountCents: 100,
                idempotencyKey: nil
            )
            let token = try await tokens.issue(userID: payee.id)
            try await LedgerServer.withRunning(store: store, .inProcess(tokens: tokens) { $0.developmentMode = false })
            { url in
                let credentials = [(Self.keyLabel, secret), (Self.tokenLabel, token)]
                for round in 0..<rounds {
                    // The order alternates, so neither credential always runs on a warmer (or busier) machine.
                    for (label, credential) in round.isMultiple(of: 2) ? credentials : credentials.reversed() {
                        let client = LedgerClient(baseURL: url, token: credential, maximumConnections: clients * 2)
                        // One warm-up request, so connections are open before the clock starts.
                        _ = try await client.session(sid: session.sid)
                        let start = ContinuousClock.now
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            for _ in 0..<clients {
                                group.addTask {
                                    for _ in 0..<requests { _ = try await client.session(sid: session.sid) }
                                }
                            }
                            try await group.waitForAll()
                        }
                        let seconds = (ContinuousClock.now - start) / .seconds(1)
                        rates.add(label, Double(clients * requests) / seconds)
                    }
                }
            }
        }
        for label in [Self.keyLabel, Self.tokenLabel] {
            let all = rates.get(label)
            print(
                label.padding(toLength: 24, withPad: " ", startingAt: 0)
                    + String(format: " %9.1f requests/s (median; rounds: ", Self.median(all))
                    + all.map { String(format: "%.0f", $0) }.joined(separator: ", ") + ")"
            )
        }
        print(
            String(
                format: "API key / user token:    %9.2f",
                Self.median(rates.get(Self.keyLabel)) / Self.median(rates.get(Self.tokenLabel))
            )
        )
    }

    static let keyLabel = "API key"
    static let tokenLabel = "user token (HS256 JWT)"

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count.isMultiple(of: 2)
            ? (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2 : sorted[sorted.count / 2]
    }
}

/// The rates measured, by label.
private final class RateBox: @unchecked Sendable {
    private let lock = NSLock()
    private var rates: [String: [Double]] = [:]

    func add(_ label: String, _ rate: Double) { lock.withLock { rates[label, default: []].append(rate) } }
    func get(_ label: String) -> [Double] { lock.withLock { rates[label] ?? [] } }
}
