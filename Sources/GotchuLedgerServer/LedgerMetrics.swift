import CoreMetrics
import Foundation
import GotchuCore
public import GotchuLedger
import HTTPTypes
import Hummingbird
public import Prometheus
import Synchronization

/// The ledger server's metrics for Prometheus, recorded through swift-metrics into one registry.
///
/// Each server gets its own registry and factory, not the process-wide `MetricsSystem` (which can be bootstrapped
/// only once per process): several servers, and the tests, each count their own. Labels take values from small
/// fixed sets only (route templates, methods, status codes, outcome names), never from a request's path or body.
///
/// - `gotchu_ledger_requests_total{route, method, status}`: requests answered.
/// - `gotchu_ledger_request_duration_seconds{route, method}`: a histogram of the time to answer.
/// - `gotchu_ledger_payments_total{outcome}`: `POST /wallet/send` by outcome: `paid`, `replayed`, or the problem
///   kind of a refusal (`insufficient-funds`, `session-expired`, …).
/// - `gotchu_ledger_refunds_total{outcome}`: refunds by outcome, named like payments' (``refund(outcome:)``).
/// - `gotchu_ledger_rate_limited_total{route}`: requests refused by a rate limit (429).
/// - `gotchu_ledger_webhook_attempts_total{outcome}`: webhook delivery attempts, `delivered`, `failed` (retried later)
///   or `given-up`; `gotchu_ledger_webhook_attempt_duration_seconds`: a histogram of their time.
/// - `gotchu_ledger_store_transaction_duration_seconds{operation}`: a histogram of the store's transactions by the
///   engine operation that ran them (`login`, `send`, …), waits for the database included;
///   `gotchu_ledger_store_transactions_total{operation, outcome}`: the same by `committed` or `rolled-back`.
/// - `gotchu_ledger_store_connections{state}`: the store's connections `in-use` and the requests `waiting` for one
///   (SQLite: the one writer, and the transactions waiting their turn), read at each scrape;
///   `gotchu_ledger_store_connections_max`: the pool's size.
/// - `gotchu_ledger_sqlite_transactions_total` and `gotchu_ledger_sqlite_commits_total`: on SQLite, the write
///   transactions the writer ran and the commits it made (group commit: under load, several transactions share one;
///   the ratio of their rates is the transactions per commit), brought up to date at each scrape.
/// - `gotchu_ledger_open_connections`: connections being served now; `gotchu_ledger_refused_connections_total`:
///   connections turned away at the connection cap.
public struct LedgerMetrics: LedgerStoreObserver {
    /// The registry the metrics are written to; ``exposition()`` renders it.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let openConnections: CoreMetrics.Gauge
    private let refusedConnections: CoreMetrics.Counter
    /// The handles of the counters and timers recorded per request and per transaction, made once per label set:
    /// making one asks the registry, which checks the name and looks the labels up under its lock, and that cost
    /// more than recording.
    private let counters = BoundedCache<MetricKey, CoreMetrics.Counter>(capacity: 1024)
    private let timers = BoundedCache<MetricKey, CoreMetrics.Timer>(capacity: 1024)
    /// The writer's totals as last recorded, so that a scrape adds to the counters what is new since.
    private let writerTotals = WriterTotals()

    /// Creates the metrics over `registry` (a fresh one by default).
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        // From a cached health check to a payment waiting on a busy database.
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .seconds(2.5), .seconds(5), .seconds(10),
        ]
        self.factory = factory
        self.openConnections = CoreMetrics.Gauge(label: "gotchu_ledger_open_connections", factory: factory)
        self.refusedConnections = CoreMetrics.Counter(
            label: "gotchu_ledger_refused_connections_total",
            factory: factory
        )
        openConnections.record(0)
        // Listed from the start, so a dashboard finds the family before the first refund.
        CoreMetrics.Counter(
            label: "gotchu_ledger_refunds_total",
            dimensions: [("outcome", "refunded")],
            factory: factory
        ).increment(by: 0)
    }

    /// The Prometheus text exposition format (version 0.0.4) of every metric.
    public func exposition() -> [UInt8] { registry.emitToBuffer() }

    /// The media type of ``exposition()``.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    func request(route: String, method: String, status: Int, duration: Duration) {
        counter("gotchu_ledger_requests_total", [("route", route), ("method", method), ("status", String(status))])
            .increment()
        timer("gotchu_ledger_request_duration_seconds", [("route", route), ("method", method)])
            .recordNanoseconds(Self.nanoseconds(duration))
        if status == 429 { counter("gotchu_ledger_rate_limited_total", [("route", route)]).increment() }
    }

    func payment(outcome: String) {
        counter("gotchu_ledger_payments_total", [("outcome", outcome)]).increment()
    }

    /// Counts a refund (`gotchu_ledger_refunds_total{outcome}`): `refunded`, `replayed`, or the problem kind of a
    /// refusal, as ``payment(outcome:)`` names a payment's.
    func refund(outcome: String) {
        counter("gotchu_ledger_refunds_total", [("outcome", outcome)]).increment()
    }

    /// Counts a webhook delivery attempt (`gotchu_ledger_webhook_attempts_total{outcome}`: `delivered`, `failed` (to
    /// be retried) or `given-up`) and times it (`gotchu_ledger_webhook_attempt_duration_seconds`).
    func webhookAttempt(outcome: String, duration: Duration) {
        counter("gotchu_ledger_webhook_attempts_total", [("outcome", outcome)]).increment()
        timer("gotchu_ledger_webhook_attempt_duration_seconds", []).recordNanoseconds(Self.nanoseconds(duration))
    }

    public func transaction(operation: String, duration: Duration, committed: Bool) {
        timer("gotchu_ledger_store_transaction_duration_seconds", [("operation", operation)])
            .recordNanoseconds(Self.nanoseconds(duration))
        counter(
            "gotchu_ledger_store_transactions_total",
            [("operation", operation), ("outcome", committed ? "committed" : "rolled-back")]
        ).increment()
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// The counter `label` with `dimensions`, made the first time.
    private func counter(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Counter {
        Self.handle(in: counters, label, dimensions) {
            CoreMetrics.Counter(label: $0, dimensions: $1, factory: factory)
        }
    }

    /// The timer `label` with `dimensions`, made the first time.
    private func timer(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Timer {
        Self.handle(in: timers, label, dimensions) { CoreMetrics.Timer(label: $0, dimensions: $1, factory: factory) }
    }

    private static func handle<Metric: Sendable>(
        in cache: BoundedCache<MetricKey, Metric>,
        _ label: String,
        _ dimensions: [(String, String)],
        make: (String, [(String, String)]) -> Metric
    ) -> Metric {
        let key = MetricKey(label: label, dimensions: dimensions)
        if let known = cache[key] { return known }
        let made = make(label, dimensions)
        cache[key] = made
        return made
    }

    /// Records the store's connections as they are now (at a scrape).
    func pool(_ usage: LedgerPoolUsage) {
        CoreMetrics.Gauge(label: "gotchu_ledger_store_connections", dimensions: [("state", "in-use")], factory: factory)
            .record(usage.inUse)
        CoreMetrics.Gauge(
            label: "gotchu_ledger_store_connections",
            dimensions: [("state", "waiting")],
            factory: factory
        ).record(usage.waiting)
        if let idle = usage.idle {
            CoreMetrics.Gauge(
                label: "gotchu_ledger_store_connections",
                dimensions: [("state", "idle")],
                factory: factory
            ).record(idle)
        }
        CoreMetrics.Gauge(label: "gotchu_ledger_store_connections_max", factory: factory).record(usage.maximum)
        if let transactions = usage.transactions, let commits = usage.commits {
            let added = writerTotals.advance(to: (transactions, commits))
            CoreMetrics.Counter(label: "gotchu_ledger_sqlite_transactions_total", factory: factory)
                .increment(by: added.transactions)
            CoreMetrics.Counter(label: "gotchu_ledger_sqlite_commits_total", factory: factory)
                .increment(by: added.commits)
        }
    }

    func connections(open: Int) { openConnections.record(open) }

    func connectionRefused() { refusedConnections.increment() }
}

/// Counts and times every request under the status the client gets. It runs outside ``ProblemMiddleware``, which
/// answers every error; an error that reaches it all the same is answered here as the ledger answers it (an
/// `HTTPResponseError` that Hummingbird renders) and counted under that answer's status, so a count never says 500
/// for a 404, 401 or 409.
struct LedgerMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: LedgerMetrics

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        let method = Self.method(request.method)
        do {
            let response = try await next(request, context)
            metrics.request(
                route: Self.route(context),
                method: method,
                status: response.status.code,
                duration: ContinuousClock.now - start
            )
            return response
        } catch {
            let answer = HTTPProblem(answering: error, logger: context.logger)
            metrics.request(
                route: Self.route(context),
                method: method,
                status: answer.status.code,
                duration: ContinuousClock.now - start
            )
            throw answer
        }
    }

    /// The matched route's template (`/sessions/{sid}`), or `unmatched`: never the request's own path, whose values
    /// would be unbounded.
    static func route(_ context: Context) -> String {
        guard let path = context.endpointPath, path != "NotFound" else { return "unmatched" }
        return path
    }

    /// The method when it is a standard one, else `other`: a client can send any token as a method.
    static func method(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .post, .put, .delete, .patch, .options, .trace, .connect: method.rawValue
        default: "other"
        }
    }
}

/// The totals of a store's writer last added to the counters. A total that went down (another store reported) is
/// taken as the new start.
private final class WriterTotals: Sendable {
    private let recorded = Mutex<(transactions: Int, commits: Int)>((0, 0))

    /// What `totals` adds to the recorded totals, which become `totals`.
    func advance(to totals: (transactions: Int, commits: Int)) -> (transactions: Int, commits: Int) {
        recorded.withLock { recorded in
            defer { recorded = totals }
            return (max(0, totals.transactions - recorded.transactions), max(0, totals.commits - recorded.commits))
        }
    }
}

/// A metric's name and labels, as the handles made for them are found again.
private struct MetricKey: Hashable, Sendable {
    var label: String
    var dimensions: [String]

    init(label: String, dimensions: [(String, String)]) {
        self.label = label
        self.dimensions = dimensions.flatMap { [$0.0, $0.1] }
    }
}
