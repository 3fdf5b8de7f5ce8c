import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import Histogram
import Logging
import PostgresNIO
import ServiceLifecycle

struct BenchLedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract:
            "Complete payments per second through the store, over HTTP, and against the database's own anchors.",
        discussion: """
            Each payment is create + resolve + lock + send, through the store directly and over HTTP. K \
            payer/payee pairs run concurrently, each pair paying in a loop. Every run gets a fresh database: \
            a SQLite file in a temporary directory, or with --database postgres://USER@HOST:PORT/DB a new \
            database created on that server (the role needs CREATEDB) and dropped afterwards.

            Anchors in the same run, so every figure has a ratio: on SQLite the same statements as raw SQL \
            through the SQLite C API in this binary and from Python's sqlite3 module (one thread; needs \
            python3, and Benchmarks/ledger_sqlite.py, found in the package this program was built from or \
            given with --python-script), and with K above one the C API again committing as many \
            transactions at once as the store's group commit did (the ceiling of group commit on this \
            machine: one thread, no framework, nothing to wait for); on PostgreSQL the same statements from pgbench with K \
            clients, prepared once per connection (as the store sends them) and parsed every time (what \
            parsing costs the database). The HTTP server is measured with our own client and with wrk (K \
            connections, a Lua script carrying the JSON bodies and tokens), so the client's cost and the \
            server's are told apart. \
            An anchor whose tool is missing is skipped with a note. Latencies are per payment (wrk: per \
            request). Run on a quiet machine, built in release mode: swift run -c release gotchu-bench ledger.
            """
    )

    @Option(name: .customShort("k"), help: "Concurrent payer/payee pairs; repeat for several runs (default 1 and 32).")
    var pairs: [Int] = []

    @Option(help: "Payments per run, shared among the pairs.")
    var payments = 2000

    @Option(
        help: ArgumentHelp(
            "A PostgreSQL server to measure on (default: SQLite), as postgres://USER@HOST:PORT/DB.",
            valueName: "url"
        )
    )
    var database: String?

    @Option(
        help: ArgumentHelp(
            "The Python anchor script (SQLite); by default Benchmarks/ledger_sqlite.py in the package this program "
                + "was built from.",
            valueName: "path"
        )
    )
    var pythonScript = BenchPaths.helper("Benchmarks/ledger_sqlite.py")

    @Option(help: "How long each wrk run lasts, in seconds.")
    var wrkSeconds = 5

    @Flag(help: "Measure only the store and our HTTP client: no C, Python, pgbench or wrk anchors.")
    var noAnchors = false

    @Flag(help: "Measure only the store directly (for profiling it).")
    var directOnly = false

    func validate() throws {
        guard pairs.allSatisfy({ $0 > 0 }), payments > 0, wrkSeconds > 0 else {
            throw ValidationError("-k, --payments and --wrk-seconds must be positive")
        }
        if let database { _ = try PostgresURL(database) }
    }

    func run() async throws {
        let backend = try database.map { BenchBackend.postgres(try PostgresURL($0)) } ?? .sqlite
        print("ledger benchmark on \(backend): \(payments) payments per run; latency p50/p99 per payment")
        for pairs in pairs.isEmpty ? [1, 32] : pairs {
            try await run(pairs: pairs, backend: backend)
        }
    }

    private func run(pairs: Int, backend: BenchBackend) async throws {
        let perPair = max(1, payments / pairs)
        print("\nK = \(pairs) (\(pairs * perPair) payments)")
        let direct = try await backend.measureFigure { stores, _ in
            try await Self.drive(pairs: pairs, payments: perPair, store: stores[0])
        }
        direct.print("store, direct")
        if let commits = direct.commits {
            print(String(format: "    group commit: %.1f transactions per commit", commits))
        }
        if directOnly { return }
        var anchors: [(String, BenchFigure)] = []
        if !noAnchors {
            switch backend {
            case .sqlite:
                if pairs > 1, let commits = direct.commits, commits > 1 {
                    // What the same statements can do on this machine, committed in groups the size the store's were.
                    let perCommit = Int(commits.rounded())
                    let raw = try await backend.measureFigure { stores, _ in
                        let users = try await Self.users(stores[0], pairs: 1, payments: pairs * perPair)
                        return try RawSQLiteAnchor.run(
                            path: stores.path,
                            payer: users[0].0.id,
                            payee: users[0].1.id,
                            payments: pairs * perPair,
                            transactionsPerCommit: perCommit
                        )
                    }
                    raw.print("raw SQL, C API, \(perCommit)/commit")
                    anchors.append(("C API \(perCommit)/commit", raw))
                }
                if pairs == 1 {
                    let raw = try await backend.measureFigure { stores, _ in
                        let users = try await Self.users(stores[0], pairs: 1, payments: perPair)
                        return try RawSQLiteAnchor.run(
                            path: stores.path,
                            payer: users[0].0.id,
                            payee: users[0].1.id,
                            payments: perPair
                        )
                    }
                    raw.print("raw SQL, SQLite C API")
                    anchors.append(("C API", raw))
                    if let python = try await backend.measureFigure({ stores, _ in
                        let users = try await Self.users(stores[0], pairs: 1, payments: perPair)
                        return try PythonAnchor.run(
                            script: pythonScript,
                            path: stores.path,
                            payer: users[0].0.id,
                            payee: users[0].1.id,
                            payments: perPair
                        )
                    }).nonEmpty {
                        python.print("raw SQL, Python sqlite3")
                        anchors.append(("Python", python))
                    }
                }
            case .postgres(let server):
                for mode in PgbenchAnchor.Mode.allCases {
                    if let pgbench = try await PgbenchAnchor.run(
                        server: server,
                        clients: pairs,
                        payments: perPair,
                        mode: mode
                    ) {
                        pgbench.print("same SQL, pgbench \(mode)")
                        anchors.append(("pgbench \(mode)", pgbench))
                    }
                }
            }
        }
        let http = try await backend.measureFigure { stores, tokens in
            try await Self.driveHTTP(pairs: pairs, payments: perPair, stores: stores, tokens: tokens)
        }
        http.print("HTTP, our client")
        var wrk: BenchFigure?
        if !noAnchors {
            wrk = try await backend.measureFigure { stores, tokens in
                try await WrkAnchor.run(store: stores[0], tokens: tokens, pairs: pairs, seconds: wrkSeconds)
            }.nonEmpty
            wrk?.print("HTTP, wrk", latencyUnit: "per request")
        }
        print("  ratios:")
        for (name, anchor) in anchors {
            print("    direct / \(name): " + String(format: "%.2f", direct.rate / anchor.rate))
        }
        if let wrk { print(String(format: "    wrk / direct: %.2f", wrk.rate / direct.rate)) }
        print(String(format: "    our client / direct: %.2f", http.rate / direct.rate))
        if let wrk { print(String(format: "    our client / wrk: %.2f", http.rate / wrk.rate)) }
    }

    static func users(_ store: any LedgerStore, pairs: Int, payments: Int) async throws -> [(LedgerUser, LedgerUser)] {
        var users: [(LedgerUser, LedgerUser)] = []
        for index in 0..<pairs {
            let payer = try await store.login(email: "payer\(index)@bench.example")
            let payee = try await store.login(email: "payee\(index)@bench.example")
            _ = try await store.fund(userID: payer.id, amountCents: Cents(payments) * 100)
            users.append((payer, payee))
        }
        return users
    }

    @discardableResult
    static func drive(pairs: Int, payments: Int, store: any LedgerStore) async throws -> BenchFigure {
        let users = try await users(store, pairs: pairs, payments: payments)
        let cpu = BenchCPU.now()
        let start = ContinuousClock.now
        let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for (payer, payee) in users {
                group.addTask {
                    var latencies: [Duration] = []
                    latencies.reserveCapacity(payments)
                    for index in 0..<payments {
                        let began = ContinuousClock.now
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
                        latencies.append(ContinuousClock.now - began)
                    }
                    return latencies
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        return BenchFigure(payments: latencies.count, elapsed: ContinuousClock.now - start, latencies: latencies)
            .with(cpu: BenchCPU.since(cpu).own)
    }

    /// Runs one server per store and splits the pairs across them.
    private static func driveHTTP(
        pairs: Int,
        payments: Int,
        stores: BenchStores,
        tokens: TokenAuthority
    ) async throws -> BenchFigure {
        let users = try await users(stores[0], pairs: pairs, payments: payments)
        // The stores' pools are run by the caller, so the servers get none of their own.
        return try await LedgerServer.withRunning(
            stores.stores.map { LedgerServer.Replica(store: $0) },
            .inProcess(tokens: tokens) { $0.developmentMode = false }
        ) { servers in
            var clients: [(LedgerClient, LedgerClient)] = []
            for (index, (payer, payee)) in users.enumerated() {
                let url = servers[index % servers.count]
                clients.append(
                    (
                        LedgerClient(
                            baseURL: url,
                            token: try await tokens.issue(userID: payer.id),
                            maximumConnections: pairs * 2
                        ),
                        LedgerClient(
                            baseURL: url,
                            token: try await tokens.issue(userID: payee.id),
                            maximumConnections: pairs * 2
                        )
                    )
                )
            }
            let cpu = BenchCPU.now()
            let start = ContinuousClock.now
            let latencies = try await withThrowingTaskGroup(of: [Duration].self) { payers in
                for (payerClient, payeeClient) in clients {
                    payers.addTask {
                        var latencies: [Duration] = []
                        for index in 0..<payments {
                            let began = ContinuousClock.now
                            let created = try await payeeClient.createSession(amountCents: 100)
                            let resolved = try await payerClient.resolve(eid: created.eid)
                            try await payerClient.lock(sid: resolved.sid)
                            _ = try await payerClient.send(sid: resolved.sid, idempotencyKey: "\(index)")
                            latencies.append(ContinuousClock.now - began)
                        }
                        return latencies
                    }
                }
                return try await payers.reduce(into: []) { $0 += $1 }
            }
            return BenchFigure(payments: latencies.count, elapsed: ContinuousClock.now - start, latencies: latencies)
                .with(cpu: BenchCPU.since(cpu).own)
        }
    }
}

/// One measured run: payments, wall time, and the latency distribution.
struct BenchFigure: Sendable {
    /// Where a run's latency percentiles come from.
    enum Latencies: Sendable {
        /// Every latency, in microseconds, in an HdrHistogram (three significant digits).
        case recorded(Histogram<UInt64>)
        /// The percentiles the measuring tool computed itself (wrk), in microseconds.
        case reported(p50: UInt64, p99: UInt64)
    }

    var payments: Int
    var elapsed: Duration
    var latencies: Latencies
    /// Write transactions per commit in the run, where the store commits in groups.
    var commits: Double?
    /// The CPU the measured side used in the run: this process (the store, and for HTTP runs the server and our
    /// client; with wrk the server alone), or the anchor's own process.
    var cpu: Duration?

    init(payments: Int, elapsed: Duration, latencies: [Duration]) {
        self.init(payments: payments, elapsed: elapsed, microseconds: latencies.map { Int($0 / .microseconds(1)) })
    }

    init(payments: Int, elapsed: Duration, microseconds: [Int]) {
        var histogram = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
        histogram.autoResize = true
        for value in microseconds { _ = histogram.record(UInt64(max(value, 0))) }
        self.init(payments: payments, elapsed: elapsed, latencies: .recorded(histogram))
    }

    init(payments: Int, elapsed: Duration, latencies: Latencies) {
        self.payments = payments
        self.elapsed = elapsed
        self.latencies = latencies
    }

    /// This figure with the CPU its measured side used.
    func with(cpu: Duration) -> BenchFigure {
        var figure = self
        figure.cpu = cpu
        return figure
    }

    /// Payments per second.
    var rate: Double { Double(payments) / (elapsed / .seconds(1)) }

    /// The latency at `percentile` (50 or 99 where the tool reported its own), in milliseconds.
    func latency(_ percentile: Double) -> Double {
        switch latencies {
        case .recorded(let histogram):
            guard histogram.totalCount > 0 else { return .nan }
            return Double(histogram.valueAtPercentile(percentile)) / 1000
        case .reported(let p50, let p99):
            return Double(percentile < 99 ? p50 : p99) / 1000
        }
    }

    /// `nil` for a skipped anchor.
    var nonEmpty: BenchFigure? { payments > 0 ? self : nil }

    func print(_ name: String, latencyUnit: String = "") {
        let label = "  " + name + String(repeating: " ", count: max(0, 26 - name.count))
        var figures = String(format: "%9.1f payments/s   p50 %7.2f ms   p99 %7.2f ms", rate, latency(50), latency(99))
        if !latencyUnit.isEmpty { figures += " " + latencyUnit }
        if let cpu, payments > 0 {
            figures += String(format: "   cpu %6.0f µs/payment", cpu / .microseconds(1) / Double(payments))
        }
        Swift.print(label + figures)
    }

    static var skipped: BenchFigure { BenchFigure(payments: 0, elapsed: .seconds(1), microseconds: []) }
}

/// The stores of one run on one fresh database, and where it is.
struct BenchStores: Sendable {
    var stores: [any LedgerStore]
    /// The SQLite file (empty on PostgreSQL).
    var path: String
    /// The PostgreSQL database (`nil` on SQLite).
    var url: PostgresURL?

    subscript(index: Int) -> any LedgerStore { stores[index] }
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
        try await measureFigure(servers: servers, policy: policy) { stores, tokens in
            let start = ContinuousClock.now
            try await body(stores.stores, tokens)
            return BenchFigure(payments: 0, elapsed: ContinuousClock.now - start, microseconds: [])
        }.elapsed / .seconds(1)
    }

    /// Runs `body` over `max(servers, 1)` stores on one fresh database; checks the ledger's invariants afterwards.
    func measureFigure(
        servers: Int = 1,
        policy: LedgerPolicy = LedgerPolicy(),
        _ body: (BenchStores, TokenAuthority) async throws -> BenchFigure
    ) async throws -> BenchFigure {
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
            let before = stores[0].backend.groupCommitStatistics
            var figure = try await Self.checked(BenchStores(stores: stores, path: path), tokens, body)
            let after = stores[0].backend.groupCommitStatistics
            if after.commits > before.commits {
                figure.commits =
                    Double(after.transactions - before.transactions) / Double(after.commits - before.commits)
            }
            return figure
        case .postgres(let server):
            let name = "gotchu_bench_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
            try await Self.administer(server, "CREATE DATABASE \(name)", logger: logger)
            do {
                let url = server.with(database: name)
                let stores = (0..<count).map { _ in PostgresLedgerStore(url: url, policy: policy, logger: logger) }
                let figure = try await withThrowingTaskGroup(of: Void.self) { pools in
                    for store in stores { pools.addTask { await store.client.run() } }
                    defer { pools.cancelAll() }
                    try await stores[0].migrate()
                    return try await Self.checked(BenchStores(stores: stores, path: "", url: url), tokens, body)
                }
                try await Self.administer(server, "DROP DATABASE \(name) WITH (FORCE)", logger: logger)
                return figure
            } catch {
                try? await Self.administer(server, "DROP DATABASE \(name) WITH (FORCE)", logger: logger)
                throw error
            }
        }
    }

    private static func checked(
        _ stores: BenchStores,
        _ tokens: TokenAuthority,
        _ body: (BenchStores, TokenAuthority) async throws -> BenchFigure
    ) async throws -> BenchFigure {
        let figure = try await body(stores, tokens)
        let audit = try await stores[0].audit()
        guard audit.isHealthy else { throw CLIError("ledger invariants broken after the run: \(audit)") }
        return figure
    }

    static func administer(_ server: PostgresURL, _ statement: String, logger: Logger) async throws {
        let client = PostgresClient(configuration: server.configuration)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await client.run() }
            defer { tasks.cancelAll() }
            _ = try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
        }
    }
}
