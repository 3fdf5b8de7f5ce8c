import CoreMetrics
public import Prometheus
import Synchronization

/// The kiosk's metrics for Prometheus, served by the customer display at `GET /metrics`, recorded through
/// swift-metrics into their own registry (not the process-wide `MetricsSystem`).
///
/// They follow the kiosk's status as the display sees it:
/// - `gotchu_kiosk_state{state}`: 1 for the current state, 0 for the others.
/// - `gotchu_kiosk_charges_total{outcome}`: charges that ended, by outcome (`paid`, `expired`, `cancelled`, `failed`).
/// - `gotchu_kiosk_error_states_total`: times the kiosk entered the `error` state (the ledger or the radio keeps a
///   charge from progressing; the kiosk retries).
public final class KioskMetrics: Sendable {
    /// The registry the metrics are written to.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    /// The last state seen, and the last charge counted as ended.
    private let seen = Mutex<(state: KioskStatus.State?, endedCharge: String?)>((nil, nil))

    /// Creates the metrics over `registry` (a fresh one by default).
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        self.factory = PrometheusMetricsFactory(registry: registry)
    }

    /// The Prometheus text exposition format (version 0.0.4) of every metric.
    public func exposition() -> [UInt8] { registry.emitToBuffer() }

    /// The media type of ``exposition()``.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Follows `source` until its updates end.
    func observe(_ source: any KioskStatusSource) async {
        for await status in await source.statusUpdates() { record(status) }
    }

    /// Takes one status. A charge that had already ended when the first status arrived (before a restart) is not
    /// counted again.
    func record(_ status: KioskStatus) {
        let (first, enteredError, ended) = seen.withLock { seen -> (Bool, Bool, String?) in
            let first = seen.state == nil
            let enteredError = status.state == .error && seen.state != .error && !first
            var ended: String?
            if let charge = status.charge, charge.state.isFinal, charge.id != seen.endedCharge {
                seen.endedCharge = charge.id
                if !first { ended = charge.state.rawValue }
            }
            seen.state = status.state
            return (first, enteredError, ended)
        }
        for state in KioskStatus.State.allCases {
            Gauge(label: "gotchu_kiosk_state", dimensions: [("state", state.rawValue)], factory: factory)
                .record(state == status.state ? 1 : 0)
        }
        let errors = Counter(label: "gotchu_kiosk_error_states_total", factory: factory)
        if enteredError || (first && status.state == .error) { errors.increment() }
        for outcome in ["paid", "expired", "cancelled", "failed"] {
            let counter = Counter(
                label: "gotchu_kiosk_charges_total",
                dimensions: [("outcome", outcome)],
                factory: factory
            )
            if outcome == ended { counter.increment() }
        }
    }
}
