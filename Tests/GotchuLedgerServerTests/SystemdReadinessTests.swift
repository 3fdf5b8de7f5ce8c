import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuTesting
import Testing

#if os(Linux)
    @Suite("gotchu server under systemd (Type=notify)", .timeLimit(.minutes(10)))
    struct SystemdReadinessTests {
        @Test("READY=1 comes once the port answers, with its address as the status; SIGTERM ends with STOPPING=1")
        func readyOnceListening() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let notify = try NotifySocket()
            let server = try RunningCommand(
                try BuiltProducts.gotchu,
                [
                    "server", "--dev", "--port", "0",
                    "--database", directory.url.appendingPathComponent("ledger.sqlite").path,
                ],
                environment: [
                    "XDG_DATA_HOME": directory.url.appendingPathComponent("data").path,
                    "NOTIFY_SOCKET": notify.address,
                ]
            )
            defer { _ = try? server.stopNow() }
            let ready = try #require(await notify.receive(timeout: .seconds(60)))
            let lines = ready.split(separator: "\n").map(String.init)
            #expect(lines.first == "READY=1")
            let status = try #require(lines.first { $0.hasPrefix("STATUS=listening on http://127.0.0.1:") })
            let url = try #require(URL(string: String(status.dropFirst("STATUS=listening on ".count))))
            // Readiness means a client connecting now is answered.
            #expect(try await LedgerClient(baseURL: url).health().status == "ok")
            #expect(try await server.stop(signal: SIGTERM) == 0)
            let stopping = try #require(await notify.receive(timeout: .seconds(60)))
            #expect(stopping.hasPrefix("STOPPING=1"))
        }
    }
#endif
