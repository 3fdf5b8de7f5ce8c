import CoreMetrics
import GotchuAPI
package import GotchuBlueZ
import GotchuLedgerClient
package import Prometheus
import Synchronization

/// The kiosk's metrics for Prometheus, served by the customer display at `GET /metrics`, recorded through
/// swift-metrics into their own registry (not the process-wide `MetricsSystem`).
///
/// They follow the kiosk's status as the display sees it:
/// - `gotchu_kiosk_state{state}`: 1 for the current state, 0 for the others.
/// - `gotchu_kiosk_charges_total{outcome}`: charges that ended, by outcome (`paid`, `expired`, `cancelled`, `failed`).
/// - `gotchu_kiosk_error_states_total`: times the kiosk entered the `error` state (the ledger or the radio keeps a
///   charge from progressing; the kiosk retries).
///
/// And what the kiosk does on the way:
/// - `gotchu_kiosk_ledger_errors_total{kind}`: ledger calls that failed, by the problem kind the ledger answered
///   (`session-expired`, `unauthorized`, …), `transport` (unreachable, timed out), `unexpected-response`,
///   `not-logged-in` or `invalid-url`.
/// - `gotchu_kiosk_dbus_calls_total{method, outcome}`: method calls on `io.gotchu.Kiosk1` (`Charge`, `Cancel`,
///   `GetCharge`) by outcome: `ok` or the D-Bus error name's last part (`Busy`, `InvalidArgs`, …).
/// - `gotchu_kiosk_bluez_calls_total{method, outcome}`: the kiosk's method calls to bluetoothd
///   (`RegisterAdvertisement`, `StartDiscovery`, …), `ok` or `error`.
/// - `gotchu_kiosk_bluez_reregistrations_total{reason}`: advertisements registered again with bluetoothd: on an EID
///   `rotation`, after a bluetoothd `restart`, or when it `released` one.
package final class KioskMetrics: BlueZRadioObserver {
    /// The registry the metrics are written to.
    package let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    /// The last state seen, and the last charge counted as ended.
    private let seen = Mutex<(state: KioskStatus.State?, endedCharge: String?)>((nil, nil))

    /// Creates the metrics over `registry` (a fresh one by default).
    package init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        self.factory = PrometheusMetricsFactory(registry: registry)
        // Listed from the start at 0, so a dashboard finds each family before its first event.
        for reason in BlueZReregistration.allCases {
            Counter(label: Self.reregistrations, dimensions: [("reason", reason.rawValue)], factory: factory)
                .increment(by: 0)
        }
        for method in KioskControl.methods {
            Counter(label: Self.controlCalls, dimensions: [("method", method), ("outcome", "ok")], factory: factory)
                .increment(by: 0)
        }
        Counter(label: Self.ledgerErrors, dimensions: [("kind", "transport")], factory: factory).increment(by: 0)
    }

    private static let reregistrations = "gotchu_kiosk_bluez_reregistrations_total"
    private static let bluezCalls = "gotchu_kiosk_bluez_calls_total"
    private static let controlCalls = "gotchu_kiosk_dbus_calls_total"
    private static let ledgerErrors = "gotchu_kiosk_ledger_errors_total"

    package func called(_ method: String, succeeded: Bool) {
        Counter(
            label: Self.bluezCalls,
            dimensions: [("method", method), ("outcome", succeeded ? "ok" : "error")],
            factory: factory
        ).increment()
    }

    package func registeredAgain(_ reason: BlueZReregistration) {
        Counter(label: Self.reregistrations, dimensions: [("reason", reason.rawValue)], factory: factory).increment()
    }

    /// Counts a method call on `io.gotchu.Kiosk1`; `error` is the D-Bus error name it was answered with, if any.
    func controlCall(_ method: String, error: String?) {
        // Our own error names (io.gotchu.Kiosk1.Error.Busy, org.freedesktop.DBus.Error.InvalidArgs): the last part.
        let outcome = error.map { String($0.split(separator: ".").last ?? "error") } ?? "ok"
        Counter(label: Self.controlCalls, dimensions: [("method", method), ("outcome", outcome)], factory: factory)
            .increment()
    }

    /// Counts a failed ledger call by what went wrong.
    func ledgerError(_ error: LedgerClientError) {
        let kind: String
        switch error {
        // An unknown problem type comes from elsewhere: never a label of its own.
        case .problem(let problem): kind = problem.kind?.rawValue ?? "other-problem"
        case .transport: kind = "transport"
        case .unexpectedResponse: kind = "unexpected-response"
        case .notLoggedIn: kind = "not-logged-in"
        case .invalidURL: kind = "invalid-url"
        }
        Counter(label: Self.ledgerErrors, dimensions: [("kind", kind)], factory: factory).increment()
    }

    /// The Prometheus text exposition format (version 0.0.4) of every metric.
    package func exposition() -> [UInt8] { registry.emitToBuffer() }

    /// The media type of ``exposition()``.
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

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
