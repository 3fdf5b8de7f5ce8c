import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerServer
import Logging
import Testing

@Suite("PostgreSQL store on the database clock", .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason))
struct DatabaseClockTests {
    @Test("Without an injected clock, expiry and lock lapses follow the database's clock_timestamp()")
    func databaseClock() async throws {
        var policy = LedgerPolicy()
        policy.sessionLifetime = .seconds(3)
        policy.lockLifetime = .seconds(1)
        try await TestPostgres.withDatabase { [policy] url in
            let logger = Logger(label: "database-clock") { _ in SwiftLogNoOpLogHandler() }
            let store = PostgresLedgerStore(url: url, policy: policy, logger: logger)
            try await withServices([store.client]) {
                try await store.migrate()
                let payee = try await store.login(email: "payee@example.com")
                let first = try await store.login(email: "first@example.com")
                let second = try await store.login(email: "second@example.com")
                for user in [first, second] { _ = try await store.fund(userID: user.id, amountCents: 1_000) }
                let before = Date()
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: 100,
                    idempotencyKey: nil
                )
                // The database runs on this machine, so its clock agrees with ours to well within a second.
                #expect(abs(session.expiresAt.timeIntervalSince(before) - 3) < 1)
                try await store.lock(sid: session.sid, payerID: first.id)
                await #expect(
                    throws: Problem(.sessionLocked, detail: "another payer holds this session; try again shortly")
                ) {
                    try await store.lock(sid: session.sid, payerID: second.id)
                }
                try await Task.sleep(for: .milliseconds(1_100))
                try await store.lock(sid: session.sid, payerID: second.id)  // the first lock lapsed
                try await Task.sleep(for: .milliseconds(2_000))
                let status = try await store.session(sid: session.sid, viewerID: payee.id)
                #expect(status.status == .expired)
                let outcome = try await store.send(sid: session.sid, payerID: second.id, idempotencyKey: "late").0
                #expect(
                    outcome == .refused(Problem(.sessionExpired, detail: "this session has expired; ask for a new one"))
                )
            }
        }
    }
}
