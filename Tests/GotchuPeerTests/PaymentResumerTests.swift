import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuPeer
import GotchuTesting
import Testing

@Suite("Resuming journaled payments against a real ledger server")
struct PaymentResumerTests {
    private func login(_ url: String, _ email: String, funded: Int64 = 0) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: URL(string: url)!)
        client.token = try await client.devLogin(email: email).token
        if funded > 0 { _ = try await client.fund(amountCents: funded) }
        return client
    }

    @Test("A resume the ledger refuses closes the entry and gives back the payer's lock")
    func refusedResumeReleasesTheLock() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let bob = try await login(url, "bob@example.com")
        let alice = try await login(url, "alice@example.com", funded: 2_000)
        let first = try await bob.createSession(amountCents: 1_250).sid
        let second = try await bob.createSession(amountCents: 1_250).sid

        // A run locked the first session and died before sending; meanwhile the money went to the second.
        let journal = try PaymentJournal(path: processes.directory.url.appendingPathComponent("journal.sqlite").path)
        let entry = try journal.begin(
            server: alice.baseURL.absoluteString,
            sid: first,
            amountCents: 1_250,
            payeeName: "bob"
        )
        try await alice.lock(sid: first)
        try await alice.lock(sid: second)
        _ = try await alice.send(sid: second, idempotencyKey: UUID().uuidString)

        let results = try await PaymentResumer(ledger: alice, journal: journal).resumeAll()
        guard case .failed(let failed, let reason)? = results.first, results.count == 1 else {
            Issue.record("expected one refused resume: \(results)")
            return
        }
        #expect(failed.key == entry.key)
        #expect(reason.hasPrefix("Insufficient funds"))
        #expect(try journal.unfinished().isEmpty)
        #expect(try await alice.wallet().availableCents == 750)

        // Released at once rather than left to lapse.
        #expect(try await bob.session(sid: first).status == .advertising)
    }
}
