import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuTesting
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Testing

@testable import GotchuLedgerServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("GET /metrics in the Prometheus text format", .timeLimit(.minutes(10)))
struct MetricsTests {
    @Test("Requests by route and status, latency histograms, payments by outcome, rate-limit refusals, connections")
    func scrape() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try SQLiteLedgerStore(path: directory.url.appendingPathComponent("ledger.sqlite").path)
        let tokens = try await TokenAuthority(secret: String(repeating: "s", count: 40))
        var limits = LedgerLimits.unlimited
        // One resolve per address, then 429 for a long while.
        limits.resolvePerAddress = RateLimit(perSecond: 0.001, burst: 1)
        let metrics = LedgerMetrics()
        let text = try await LedgerServer.withRunning(
            store: store,
            .inProcess(tokens: tokens) {
                $0.limits = limits
                $0.made.metrics = metrics
            }
        ) { url in
            var payee = LedgerClient(baseURL: url)
            payee.token = try await payee.devLogin(email: "payee@example.com").token
            var payer = LedgerClient(baseURL: url)
            payer.token = try await payer.devLogin(email: "payer@example.com").token
            _ = try await payer.fund(amountCents: 500)
            _ = try await payer.health()

            let first = try await payee.createSession(amountCents: 300)
            try await payer.lock(sid: first.sid)
            _ = try await payer.send(sid: first.sid, idempotencyKey: "metrics-1")
            #expect(try await payer.send(sid: first.sid, idempotencyKey: "metrics-1").replayed)
            // Paying without a lock is refused.
            let second = try await payee.createSession(amountCents: 100)
            await #expect(throws: LedgerClientError.self) {
                _ = try await payer.send(sid: second.sid, idempotencyKey: "metrics-2")
            }

            _ = try? await payer.resolve(eid: second.eid)
            await #expect(throws: LedgerClientError.self) { _ = try await payer.resolve(eid: second.eid) }
            // A path no route serves is counted without its own path as a label.
            _ = try await URLSession.shared.data(from: url.appendingPathComponent("no/such/path/12345"))

            let (body, response) = try await URLSession.shared.data(from: url.appendingPathComponent("metrics"))
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200)
            #expect(http.value(forHTTPHeaderField: "Content-Type") == LedgerMetrics.contentType)
            return String(decoding: body, as: UTF8.self)
        }
        let samples = try PrometheusText.parse(text, in: directory.url)
        func value(_ name: String, _ labels: [String: String]) -> Double? {
            samples.first { sample in
                sample.name == name && labels.allSatisfy { key, value in sample.labels[key] == value }
            }?.value
        }

        #expect(value("gotchu_ledger_requests_total", ["route": "/healthz", "method": "GET", "status": "200"]) == 1)
        #expect(
            value("gotchu_ledger_requests_total", ["route": "/wallet/send", "method": "POST", "status": "200"]) == 2
        )
        #expect(
            value("gotchu_ledger_requests_total", ["route": "/wallet/send", "method": "POST", "status": "409"]) == 1,
            "\(samples.filter { $0.labels["route"] == "/wallet/send" })"
        )
        #expect(value("gotchu_ledger_requests_total", ["route": "unmatched", "status": "404"]) == 1)
        #expect(!samples.contains { $0.labels["route"]?.contains("12345") == true })

        #expect(value("gotchu_ledger_payments_total", ["outcome": "paid"]) == 1)
        #expect(value("gotchu_ledger_payments_total", ["outcome": "replayed"]) == 1)
        #expect(value("gotchu_ledger_payments_total", ["outcome": "lock-required"]) == 1)

        #expect(value("gotchu_ledger_rate_limited_total", ["route": "/sessions/resolve"]) == 1)
        #expect(
            value("gotchu_ledger_requests_total", ["route": "/sessions/resolve", "method": "POST", "status": "429"])
                == 1
        )

        // Latency: a histogram per route, its count the route's requests and its +Inf bucket the same.
        let sends = ["route": "/wallet/send", "method": "POST"]
        #expect(value("gotchu_ledger_request_duration_seconds_count", sends) == 3)
        #expect(
            value("gotchu_ledger_request_duration_seconds_bucket", sends.merging(["le": "+Inf"]) { a, _ in a }) == 3
        )
        #expect((value("gotchu_ledger_request_duration_seconds_sum", sends) ?? -1) > 0)

        // The scrape's own connection was open when it was rendered; none was refused.
        #expect((value("gotchu_ledger_open_connections", [:]) ?? 0) >= 1)
        #expect(value("gotchu_ledger_refused_connections_total", [:]) == 0)

        // The store's transactions, by the operation that ran them; its one writer, free at the scrape.
        func type(_ name: String) -> String? { samples.first { $0.name == name }?.type }
        #expect(type("gotchu_ledger_store_transaction_duration_seconds_count") == "histogram")
        #expect(value("gotchu_ledger_store_transaction_duration_seconds_count", ["operation": "fund"]) == 1)
        #expect(
            value(
                "gotchu_ledger_store_transaction_duration_seconds_bucket",
                ["operation": "createSession", "le": "+Inf"]
            ) == 2
        )
        #expect(type("gotchu_ledger_store_transactions_total") == "counter")
        #expect(value("gotchu_ledger_store_transactions_total", ["operation": "fund", "outcome": "committed"]) == 1)
        #expect(type("gotchu_ledger_store_connections") == "gauge")
        #expect(value("gotchu_ledger_store_connections", ["state": "in-use"]) == 0)
        #expect(value("gotchu_ledger_store_connections", ["state": "waiting"]) == 0)
        #expect(value("gotchu_ledger_store_connections_max", [:]) == 1)
        // The writer's group commit: every write transaction so far, in as many commits or fewer.
        #expect(type("gotchu_ledger_sqlite_transactions_total") == "counter")
        #expect(type("gotchu_ledger_sqlite_commits_total") == "counter")
        let transactions = value("gotchu_ledger_sqlite_transactions_total", [:]) ?? 0
        let commits = value("gotchu_ledger_sqlite_commits_total", [:]) ?? 0
        #expect(commits >= 1 && transactions >= commits, "\(transactions) transactions, \(commits) commits")
        // Refunds are listed before the first one.
        #expect(type("gotchu_ledger_refunds_total") == "counter")
        #expect(value("gotchu_ledger_refunds_total", ["outcome": "refunded"]) == 0)
        #expect(type("gotchu_ledger_payments_total") == "counter")
    }

    @Test("SQLite's pool usage: the writer held by one transaction, another waiting its turn")
    func sqlitePoolUsage() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try SQLiteLedgerStore(path: directory.url.appendingPathComponent("ledger.sqlite").path)
        try await store.migrate()
        // The connections alone; the writer's totals are checked at the end.
        func connections() async -> LedgerPoolUsage? {
            guard let usage = await store.poolUsage() else { return nil }
            return LedgerPoolUsage(inUse: usage.inUse, waiting: usage.waiting, idle: usage.idle, maximum: usage.maximum)
        }
        let before = await store.poolUsage()
        #expect(await connections() == LedgerPoolUsage(inUse: 0, waiting: 0, maximum: 1))
        let (entered, enteredSink) = AsyncStream<Void>.makeStream()
        let (release, releaseSink) = AsyncStream<Void>.makeStream()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    try await store.backend.transaction { _ in
                        enteredSink.yield()
                        for await _ in release { break }
                    }
                }
            }
            var entries = entered.makeAsyncIterator()
            _ = await entries.next()
            // The second transaction reaches the gate soon after the first entered; the deadline only bounds a hang.
            #expect(try await eventually(timeout: .seconds(30)) { await store.poolUsage()?.waiting == 1 })
            #expect(await connections() == LedgerPoolUsage(inUse: 1, waiting: 1, maximum: 1))
            releaseSink.yield()
            _ = await entries.next()
            #expect(await connections() == LedgerPoolUsage(inUse: 1, waiting: 0, maximum: 1))
            releaseSink.yield()
            try await group.waitForAll()
        }
        #expect(await connections() == LedgerPoolUsage(inUse: 0, waiting: 0, maximum: 1))
        // Both transactions ran, committed in one commit or two.
        let after = await store.poolUsage()
        let transactions = (after?.transactions ?? 0) - (before?.transactions ?? 0)
        let commits = (after?.commits ?? 0) - (before?.commits ?? 0)
        #expect(transactions == 2 && (1...2).contains(commits), "\(transactions) transactions, \(commits) commits")
    }

    @Test(
        "PostgreSQL's pool usage: connections leased by transactions, one more waiting for a full pool",
        .enabled(if: TestPostgres.isConfigured, TestPostgres.skipReason)
    )
    func postgresPoolUsage() async throws {
        try await TestPostgres.withDatabase { url in
            let logger = Logger(label: "pool-test") { _ in SwiftLogNoOpLogHandler() }
            let store = PostgresLedgerStore(
                url: url,
                maximumConnections: 2,
                connectionWait: TestPostgres.connectionWait,
                logger: logger
            )
            try await withServices([store.client]) {
                try await store.migrate()
                #expect(await store.poolUsage() == LedgerPoolUsage(inUse: 0, waiting: 0, maximum: 2))
                let (entered, enteredSink) = AsyncStream<Int>.makeStream()
                // One release per transaction: a stream has one reader at a time.
                let releases = (0..<3).map { _ in AsyncStream<Void>.makeStream() }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<3 {
                        group.addTask {
                            try await store.backend.transaction { _ in
                                enteredSink.yield(index)
                                for await _ in releases[index].stream { break }
                            }
                        }
                    }
                    var entries = entered.makeAsyncIterator()
                    let first = await entries.next()
                    let second = await entries.next()
                    // The third asks the full pool for a connection; the deadline only bounds a hang.
                    #expect(try await eventually(timeout: .seconds(30)) { await store.poolUsage()?.waiting == 1 })
                    #expect(await store.poolUsage() == LedgerPoolUsage(inUse: 2, waiting: 1, maximum: 2))
                    for index in [first, second].compactMap({ $0 }) { releases[index].continuation.yield() }
                    if let third = await entries.next() { releases[third].continuation.yield() }
                    try await group.waitForAll()
                }
                #expect(await store.poolUsage() == LedgerPoolUsage(inUse: 0, waiting: 0, maximum: 2))
            }
        }
    }

    @Test("A refusal thrown through the metrics middleware is counted under the status the client gets")
    func thrownRefusals() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let metrics = LedgerMetrics()
        // The metrics middleware alone, over handlers that throw as the routes do: whatever reaches it thrown is
        // answered as the ledger answers it, and counted so.
        let router = Router(context: BareContext.self)
        router.add(middleware: LedgerMetricsMiddleware(metrics: metrics))
        router.get("/sessions/{sid}") { _, _ -> Response in
            throw Problem(.sessionNotFound, detail: "no such session")
        }
        router.get("/wallet/me") { _, _ -> Response in
            throw Problem(.unauthorized, detail: "send Authorization: Bearer <token>")
        }
        router.post("/sessions/lock") { _, _ -> Response in
            throw LedgerError(.sessionLocked, detail: "another payer holds the lock")
        }
        let responder = router.buildResponder()
        let requests: [(HTTPRequest.Method, String, Int)] = [
            (.get, "/sessions/0", 404), (.get, "/wallet/me", 401), (.post, "/sessions/lock", 409),
        ]
        for (method, path, status) in requests {
            let request = Request(
                head: HTTPRequest(method: method, scheme: "http", authority: "localhost", path: path),
                body: RequestBody(buffer: ByteBuffer())
            )
            let context = BareContext(source: .init(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }))
            let response = try await responder.respond(to: request, context: context)
            #expect(response.status.code == status, "\(method) \(path)")
            #expect(response.headers[.contentType] == Problem.mediaType, "\(method) \(path)")
        }
        let samples = try PrometheusText.parse(
            String(decoding: metrics.exposition(), as: UTF8.self),
            in: directory.url
        )
        func count(_ route: String, _ status: String) -> Double? {
            samples.first { sample in
                sample.name == "gotchu_ledger_requests_total" && sample.labels["route"] == route
                    && sample.labels["status"] == status
            }?.value
        }
        #expect(count("/sessions/{sid}", "404") == 1)
        #expect(count("/wallet/me", "401") == 1)
        #expect(count("/sessions/lock", "409") == 1)
        #expect(!samples.contains { $0.name == "gotchu_ledger_requests_total" && $0.labels["status"] == "500" })
    }

    @Test("Without metrics there is no /metrics route")
    func off() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try SQLiteLedgerStore(path: directory.url.appendingPathComponent("ledger.sqlite").path)
        let tokens = try await TokenAuthority(secret: String(repeating: "s", count: 40))
        try await LedgerServer.withRunning(store: store, .inProcess(tokens: tokens)) { url in
            let (_, response) = try await URLSession.shared.data(from: url.appendingPathComponent("metrics"))
            #expect((response as? HTTPURLResponse)?.statusCode == 404)
        }
    }
}

/// A request context with nothing but Hummingbird's core, for middleware tested without a server.
private struct BareContext: RequestContext {
    struct Source: RequestContextSource {
        var logger: Logger
    }

    var coreContext: CoreRequestContextStorage

    init(source: Source) { self.coreContext = .init(source: source) }
}
