import CoreMetrics
import Foundation
public import GotchuLedger
import HTTPTypes
import Hummingbird
public import Prometheus

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
/// - `gotchu_ledger_store_transaction_duration_seconds{operation}`: a histogram of the store's transactions by the
///   engine operation that ran them (`login`, `send`, …), waits for the database included;
///   `gotchu_ledger_store_transactions_total{operation, outcome}`: the same by `committed` or `rolled-back`.
/// - `gotchu_ledger_store_connections{state}`: the store's connections `in-use` and the requests `waiting` for one
///   (SQLite: the one writer, and the transactions waiting their turn), read at each scrape;
///   `gotchu_ledger_store_connections_max`: the pool's size.
/// - `gotchu_ledger_open_connections`: connections being served now; `gotchu_ledger_refused_connections_total`:
///   connections turned away at the connection cap.
public struct LedgerMetrics: LedgerStoreObserver {
    /// The registry the metrics are written to; ``exposition()`` renders it.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let openConnections: CoreMetrics.Gauge
    private let refusedConnections: CoreMetrics.Counter

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
        CoreMetrics.Counter(
            label: "gotchu_ledger_requests_total",
            dimensions: [("route", route), ("method", method), ("status", String(status))],
            factory: factory
        ).increment()
        let (seconds, attoseconds) = duration.components
        CoreMetrics.Timer(
            label: "gotchu_ledger_request_duration_seconds",
            dimensions: [("route", route), ("method", method)],
            factory: factory
        ).recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        if status == 429 {
            CoreMetrics.Counter(
                label: "gotchu_ledger_rate_limited_total",
                dimensions: [("route", route)],
                factory: factory
            )
            .increment()
        }
    }

    func payment(outcome: String) {
        CoreMetrics.Counter(label: "gotchu_ledger_payments_total", dimensions: [("outcome", outcome)], factory: factory)
            .increment()
    }

    /// Counts a refund (`gotchu_ledger_refunds_total{outcome}`): `refunded`, `replayed`, or the problem kind of a
    /// refusal, as ``payment(outcome:)`` names a payment's.
    func refund(outcome: String) {
        CoreMetrics.Counter(label: "gotchu_ledger_refunds_total", dimensions: [("outcome", outcome)], factory: factory)
            .increment()
    }

    public func transaction(operation: String, duration: Duration, committed: Bool) {
        let (seconds, attoseconds) = duration.components
        CoreMetrics.Timer(
            label: "gotchu_ledger_store_transaction_duration_seconds",
            dimensions: [("operation", operation)],
            factory: factory
        ).recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        CoreMetrics.Counter(
            label: "gotchu_ledger_store_transactions_total",
            dimensions: [("operation", operation), ("outcome", committed ? "committed" : "rolled-back")],
            factory: factory
        ).increment()
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
    }

    func connections(open: Int) { openConnections.record(open) }

    func connectionRefused() { refusedConnections.increment() }
}

/// Counts and times every request, outside the middleware that turns errors into problems, so it sees the status
/// the client gets.
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
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.request(
                route: Self.route(context),
                method: method,
                status: status,
                duration: ContinuousClock.now - start
            )
            throw error
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
