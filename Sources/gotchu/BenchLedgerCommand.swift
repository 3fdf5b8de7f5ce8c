import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct BenchLedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Complete payments per second over HTTP, and the same store operations driven directly.",
        discussion: """
            Each payment is create + resolve + lock + send. K payer/payee pairs run concurrently, each \
            paying in a loop. Both runs use a fresh SQLite file; the HTTP run goes through a real \
            server on a loopback port with the URLSession client. Prints both rates and HTTP/direct.
            """
    )

    @Option(name: .customShort("k"), help: "Concurrent payer/payee pairs.")
    var pairs = 8

    @Option(help: "Payments per pair in each run.")
    var payments = 150

    func validate() throws {
        guard pairs > 0, payments > 0 else { throw ValidationError("-k and --payments must be positive") }
    }

    func run() async throws {
        let total = pairs * payments
        print("ledger benchmark: \(pairs) pairs × \(payments) payments = \(total) payments per run (SQLite)")
        let direct = try await Self.measure { store, _ in
            try await Self.drive(pairs: pairs, payments: payments, store: store)
        }
        print(String(format: "direct (store, no HTTP): %8.1f payments/s", Double(total) / direct))
        let http = try await Self.measure { store, tokens in
            try await Self.driveHTTP(pairs: pairs, payments: payments, store: store, tokens: tokens)
        }
        print(String(format: "HTTP (server + client):  %8.1f payments/s", Double(total) / http))
        print(String(format: "HTTP / direct:           %8.2f", direct / http))
    }

    /// Runs `body` against a fresh store and returns its wall time in seconds.
    private static func measure(
        _ body: (SQLiteLedgerStore, TokenAuthority) async throws -> Void
    ) async throws -> Double {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gotchu-bench-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteLedgerStore(path: directory.appendingPathComponent("ledger.sqlite").path)
        try await store.migrate()
        let tokens = try await TokenAuthority(secret: UUID().uuidString + UUID().uuidString)
        let start = ContinuousClock.now
        try await body(store, tokens)
        let elapsed = ContinuousClock.now - start
        let audit = try await store.audit()
        guard audit.isHealthy else { throw CLIError("ledger invariants broken after the run: \(audit)") }
        return elapsed / .seconds(1)
    }

    private static func users(
        _ store: SQLiteLedgerStore,
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

    private static func drive(pairs: Int, payments: Int, store: SQLiteLedgerStore) async throws {
        let users = try await users(store, pairs: pairs, payments: payments)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (payer, payee) in users {
                group.addTask {
                    for index in 0..<payments {
                        let session = try await store.createSession(payeeID: payee.id, amountCents: 100)
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

    private static func driveHTTP(
        pairs: Int,
        payments: Int,
        store: SQLiteLedgerStore,
        tokens: TokenAuthority
    ) async throws {
        let users = try await users(store, pairs: pairs, payments: payments)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = pairs * 2
        let session = URLSession(configuration: configuration)
        try await LedgerServer.withRunning(store: store, tokens: tokens, developmentMode: false) { url in
            try await withThrowingTaskGroup(of: Void.self) { payers in
                for (payer, payee) in users {
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
