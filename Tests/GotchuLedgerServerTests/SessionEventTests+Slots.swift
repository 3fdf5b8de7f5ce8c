import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuTesting
import Testing

extension SessionEventTests {
    @Test("A stream whose client hung up frees its per-user place at once, not at the next heartbeat")
    func closedStreamFreesItsPlace() async throws {
        var limits = Self.noticesOnly
        limits.eventStreamsPerUser = 1
        // No heartbeat within the test's life: only the hang-up itself can free the place.
        limits.eventHeartbeat = .seconds(3_600)
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let session = try await payee.createSession(amountCents: 300)
            let request =
                "GET /sessions/\(session.sid)/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer \(try #require(payee.token))\r\nAccept: text/event-stream\r\n\r\n"
            for _ in 0..<3 {
                // Whenever the server has seen the last hang-up, the place is free again; the deadline only bounds
                // a hang.
                var connection: LoopbackConnection?
                let opened = try await eventually(timeout: .seconds(60)) {
                    let attempt = try LoopbackConnection(port: try #require(ledger.url.port))
                    try attempt.send(request)
                    guard try await attempt.readHead().status == 200 else { return false }
                    connection = attempt
                    return true
                }
                #expect(opened)
                let stream = try #require(connection)
                // The stream's first event, the retry hint aside.
                var event = try await stream.nextEvent()
                if event?.first?.hasPrefix("retry:") == true { event = try await stream.nextEvent() }
                #expect(event?.contains("event: advertising") == true, "\(event ?? [])")
                stream.disconnect()
            }
        }
    }
}
