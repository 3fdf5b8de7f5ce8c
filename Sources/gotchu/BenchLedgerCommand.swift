import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import Logging
import PostgresNIO
import ServiceLifecycle

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct BenchLedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract:
            "Complete payments per second over HTTP (one server and two), and the same store operations driven directly.",
        discussion: """
            Each payment is create + resolve + lock + send. K payer/payee pairs run concurrently, each \
            pair paying in a loop. Every run gets a fresh database: a SQLite file in a temporary \
            directory, or with --database postgres://USER@HOST:PORT/DB a new database created on that \
            server (the role needs CREATEDB) and dropped afterwards. The HTTP runs go through real \
            servers on loopback ports with the URLSession client; with two servers (two stores, two \
            connection pools, one database) the pairs are split across them. Prints the rates and \
            HTTP/direct.
            """
    )

    @Option(name: .customShort("k"), help: "Concurrent payer/payee pairs.")
    var pairs = 8

    @Option(help: "Payments per pair in each run.")
    var payments = 150

    @Option(
        help: ArgumentHelp(
            "A PostgreSQL server to measure on (default: SQLite), as postgres://USER@HOST:PORT/DB.",
            valueName: "url"
        )
    )
    var database: String?

    func validate() throws {
        guard pairs > 0, payments > 0 else { throw ValidationError("-k and --payments must be positive") }
        if let database { _ = try PostgresURL(database) }
    }

    func run() async throws {
        let backend = try database.map { BenchBackend.postgres(try PostgresURL($0)) } ?? .sqlite
        let total = pairs * payments
        print("ledger benchmark: \(pairs) pairs × \(payments) payments = \(total) payments per run (\(backend))")
        let direct = try await backend.measure(servers: 0) { stores, _ in
            try await Self.drive(pairs: pairs, payments: payments, store: stores[0])
        }
        print(String(format: "direct (store, no HTTP):   %8.1f payments/s", Double(total) / direct))
        let http = try await backend.measure(servers: 1) { stores, tokens in
            try await Self.driveHTTP(pairs: pairs, payments: payments, stores: stores, tokens: tokens)
        }
        print(String(format: "HTTP, one server:          %8.1f payments/s", Double(total) / http))
        let replicated = try await backend.measure(servers: 2) { stores, tokens in
            try await Self.driveHTTP(pairs: pairs, payments: payments, stores: stores, tokens: tokens)
        }
        print(String(format: "HTTP, two servers:         %8.1f payments/s", Double(total) / replicated))
        print(String(format: "HTTP (one server) / direct: %7.2f", direct / http))
        print(String(format: "two servers / one:          %7.2f", http / replicated))
    }

    private static func users(
        _ store: any LedgerStore,
        pairs: Int,
        payments: Int
    ) async throws -> [(LedgerUser, LedgerUser)] {
        var users: [(LedgerUser, LedgerUser)] = []
        for index in 0..<pairs {
            let payer = try await store.login(email: "payer\(index)@bench.example")
            let payee = try await store.login(email: "payee\(index)@bench.example")
            _ = try await store.fund(userID: payer.id, amountCents: Cents(payments) * 100)
            users.append((payer, payee))
        }
        return users
    }

    static func drive(pairs: Int, payments: Int, store: any LedgerStore) async throws {
        let users = try await users(store, pairs: pairs, payments: payments)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (payer, payee) in users {
                group.addTask {
                    for index in 0..<payments {
                        let (session, _) = try await store.createSession(
                            payeeID: payee.id,
                            amountCents: 100,
                            idempotencyKey: nil
                        )
                        let resolved = try await store.resolve(eid: session.eid)
                        try await store.lock(sid: resolved.sid, payerID: payer.id)
                        let (outcome, _) = try await store.send(
                            sid: resolved.sid,
                            payerID: payer.id,
                            idempotencyKey: "\(index)"
                        )
                        guard case .paid = outcome else { throw CLIError("payment refused: \(outcome)") }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Runs one server per store and splits the pairs across them.
    private static func driveHTTP(
        pairs: Int,
        payments: Int,
        stores: [any LedgerStore],
        tokens: TokenAuthority
    ) async throws {
        let users = try await users(stores[0], pairs: pairs, payments: payments)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = pairs * 2
        let session = URLSession(configuration: configuration)
        // The stores' pools are run by the caller, so the servers get none of their own.
        try await LedgerServer.withRunning(
            stores.map { LedgerServer.Replica(store: $0) },
            tokens: tokens,
            developmentMode: false
        ) { servers in
            try await withThrowingTaskGroup(of: Void.self) { payers in
                for (index, (payer, payee)) in users.enumerated() {
                    let url = servers[index % servers.count]
                    let payerClient = LedgerClient(
                        baseURL: url,
                        token: try await tokens.issue(userID: payer.id),
                        session: session
                    )
                    let payeeClient = LedgerClient(
                        baseURL: url,
                        token: try await tokens.issue(userID: payee.id),
                        session: session
                    )
                    payers.addTask {
                        for index in 0..<payments {
                            let created = try await payeeClient.createSession(amountCents: 100)
                            let resolved = try await payerClient.resolve(eid: created.eid)
                            try await payerClient.lock(sid: resolved.sid)
                            _ = try await payerClient.send(sid: resolved.sid, idempotencyKey: "\(index)")
                        }
                    }
                }
                try await payers.waitForAll()
            }
        }
    }
}

/// Where the benchmark keeps its ledgers: fresh ones for every run.
enum BenchBackend: CustomStringConvertible {
    case sqlite
    case postgres(PostgresURL)

    var description: String {
        switch self {
        case .sqlite: "SQLite"
        case .postgres(let url): "PostgreSQL at \(url.redacted)"
        }
    }

    /// Runs `body` over `max(servers, 1)` stores on one fresh database and returns its wall time in seconds; the
    /// setup and the final audit are not timed.
    func measure(
        servers: Int,
        policy: LedgerPolicy = LedgerPolicy(),
        _ body: ([any LedgerStore], TokenAuthority) async throws -> Void
    ) async throws -> Double {
        let tokens = try await TokenAuthority(secret: UUID().uuidString + UUID().uuidString)
        let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let count = max(servers, 1)
        switch self {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "gotchu-bench-\(UUID().uuidString)"
            )
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("ledger.sqlite").path
            let stores = try (0..<count).map { _ in try SQLiteLedgerStore(path: path, policy: policy) }
            try await stores[0].migrate()
            return try await Self.time(stores, tokens, body)
        case .postgres(let server):
            let name = "gotchu_bench_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
            try await Self.administer(server, "CREATE DATABASE \(name)", logger: logger)
            do {
                let stores = (0..<count).map { _ in
                    PostgresLedgerStore(url: server.with(database: name), policy: policy, logger: logger)
                }
                let seconds = try await withThrowingTaskGroup(of: Void.self) { pools in
                    for store in stores { pools.addTask { await store.client.run() } }
                    defer { pools.cancelAll() }
                    try await stores[0].migrate()
                    return try await Self.time(stores, tokens, body)
                }
                try await Self.administer(server, "DROP DATABASE \(name) WITH (FORCE)", logger: logger)
                return seconds
            } catch {
                try? await Self.administer(server, "DROP DATABASE \(name) WITH (FORCE)", logger: logger)
                throw error
            }
        }
    }

    private static func time(
        _ stores: [any LedgerStore],
        _ tokens: TokenAuthority,
        _ body: ([any LedgerStore], TokenAuthority) async throws -> Void
    ) async throws -> Double {
        let start = ContinuousClock.now
        try await body(stores, tokens)
        let elapsed = ContinuousClock.now - start
        let audit = try await stores[0].audit()
        guard audit.isHealthy else { throw CLIError("ledger invariants broken after the run: \(audit)") }
        return elapsed / .seconds(1)
    }

    private static func administer(_ server: PostgresURL, _ statement: String, logger: Logger) async throws {
        let client = PostgresClient(configuration: server.configuration)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await client.run() }
            defer { tasks.cancelAll() }
            _ = try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
        }
    }
}
