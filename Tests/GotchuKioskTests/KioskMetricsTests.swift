import Foundation
import GotchuAPI
import GotchuKiosk
import GotchuLedgerClient
import GotchuTesting
import Testing

@Suite("The kiosk's ledger errors in its metrics", .serialized, .timeLimit(.minutes(3)))
struct KioskMetricsTests {
    @Test("Failed ledger calls are counted by kind: the problem the ledger answered, or an unreachable ledger")
    func ledgerErrors() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let metrics = KioskMetrics()
        let ledger = MeteredKioskLedger(
            KioskLedger(baseURL: try #require(URL(string: daemon.url)), credentials: .email("shop@example.com")),
            metrics: metrics
        )
        let created = try await ledger.createSession(amountCents: 100, idempotencyKey: "metrics-1")
        _ = try await ledger.sessionStatus(sid: created.sid)
        // An unknown session: the ledger answers a problem.
        await #expect(throws: LedgerClientError.self) { try await ledger.cancelSession(sid: "no-such-session") }

        // Nothing listens on port 1 (tcpmux) of the loopback: the connection is refused.
        let unreachable = MeteredKioskLedger(
            KioskLedger(
                baseURL: try #require(URL(string: "http://127.0.0.1:1")),
                credentials: .email("shop@example.com")
            ),
            metrics: metrics
        )
        await #expect(throws: LedgerClientError.self) {
            _ = try await unreachable.createSession(amountCents: 100, idempotencyKey: "metrics-2")
        }

        let samples = try PrometheusText.parse(
            String(decoding: metrics.exposition(), as: UTF8.self),
            in: daemon.processes.directory.url
        )
        #expect(samples.type("gotchu_kiosk_ledger_errors_total") == "counter")
        #expect(samples.value("gotchu_kiosk_ledger_errors_total", ["kind": "transport"]) == 1)
        let problems = samples.filter {
            $0.name == "gotchu_kiosk_ledger_errors_total" && $0.labels["kind"] != "transport"
        }
        #expect(problems.map(\.value).reduce(0, +) == 1, "\(problems)")
        #expect(!problems.contains { $0.labels["kind"] == "other-problem" }, "\(problems)")
    }
}
