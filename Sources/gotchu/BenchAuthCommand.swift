import ArgumentParser
import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct BenchAuthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth",
        abstract: "GET /sessions/{sid} per second with an API key and with a user's token.",
        discussion: """
            One server on a loopback port over a fresh database (a SQLite file, or with --database \
            postgres://USER@HOST:PORT/DB a new database on that server, dropped afterwards). A payee's \
            session is read by C concurrent clients, first with an API key (`gk_…`: a SHA-256 and one \
            indexed lookup per request), then with the payee's HS256 token (a signature check and, once, \
            a user lookup). Prints both rates and their ratio.
            """
    )

    @Option(name: .customShort("c"), help: "Concurrent clients.")
    var clients = 8

    @Option(help: "Requests per client and credential.")
    var requests = 500

    @Option(
        help: ArgumentHelp(
            "A PostgreSQL server to measure on (default: SQLite), as postgres://USER@HOST:PORT/DB.",
            valueName: "url"
        )
    )
    var database: String?

    func validate() throws {
        guard clients > 0, requests > 0 else { throw ValidationError("-c and --requests must be positive") }
        if let database { _ = try PostgresURL(database) }
    }

    func run() async throws {
        let backend = try database.map { BenchBackend.postgres(try PostgresURL($0)) } ?? .sqlite
        let clients = self.clients
        let requests = self.requests
        print("auth benchmark: \(clients) clients × \(requests) GET /sessions/{sid} per credential (\(backend))")
        let rates = RateBox()
        _ = try await backend.measure(servers: 1) { stores, tokens in
            let store = stores[0]
            let payee = try await store.login(email: "payee@bench.example")
            let (key, secret) = try await store.createAPIKey(
                email: "payee@bench.example",
                name: "bench",
                scopes: [.sessionsRead],
                actor: "bench"
            )
            _ = key
            let (session, _) = try await store.createSession(
                payeeID: payee.id,
                amountCents: 100,
                idempotencyKey: nil
            )
            let token = try await tokens.issue(userID: payee.id)
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpMaximumConnectionsPerHost = clients * 2
            let urlSession = URLSession(configuration: configuration)
            try await LedgerServer.withRunning(store: store, tokens: tokens, developmentMode: false) { url in
                for (label, credential) in [("API key", secret), ("user token (HS256 JWT)", token)] {
                    let client = LedgerClient(baseURL: url, token: credential, session: urlSession)
                    // One warm-up round, so connections are open and caches filled before the clock starts.
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
                    let rate = Double(clients * requests) / seconds
                    rates.set(label, rate)
                    print(
                        label.padding(toLength: 24, withPad: " ", startingAt: 0)
                            + String(format: " %9.1f requests/s", rate)
                    )
                }
            }
        }
        if let key = rates.get("API key"), let jwt = rates.get("user token (HS256 JWT)") {
            print(String(format: "API key / user token:    %9.2f", key / jwt))
        }
    }
}

/// The rates measured, by label.
private final class RateBox: @unchecked Sendable {
    private let lock = NSLock()
    private var rates: [String: Double] = [:]

    func set(_ label: String, _ rate: Double) { lock.withLock { rates[label] = rate } }
    func get(_ label: String) -> Double? { lock.withLock { rates[label] } }
}
