import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuPeer
import GotchuReceipts
import GotchuTesting
import Testing

@Suite("Resuming journaled payments against a real ledger server", .timeLimit(.minutes(10)))
struct PaymentResumerTests {
    // A lock now needs funds for every session the payer holds, so a held lock can no longer meet "insufficient
    // funds"; the refusal a crashed run meets is the payee's cancel. Releasing a held lock is covered by the Ctrl-C
    // tests of `gotchu pay`.
    @Test("A resume the ledger refuses (the payee cancelled meanwhile) closes the entry and pays nothing")
    func refusedResumeClosesTheEntry() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let bob = try await loggedIn(url, "bob@example.com")
        let alice = try await loggedIn(url, "alice@example.com", funded: 2_000)
        let sid = try await bob.createSession(amountCents: 1_250).sid

        // A run locked the session and died before sending; meanwhile the payee cancelled it.
        let journal = try PaymentJournal(path: processes.directory.url.appendingPathComponent("journal.sqlite").path)
        let entry = try journal.begin(
            server: alice.baseURL.absoluteString,
            sid: sid,
            amountCents: 1_250,
            payeeName: "bob"
        )
        try await alice.lock(sid: sid)
        try await bob.cancel(sid: sid)

        let results = try await PaymentResumer(ledger: alice, journal: journal).resumeAll()
        guard case .failed(let failed, _)? = results.first, results.count == 1 else {
            Issue.record("expected one refused resume: \(results)")
            return
        }
        #expect(failed.key == entry.key)
        #expect(try journal.unfinished().isEmpty)
        #expect(try await alice.wallet().availableCents == 2_000)
        #expect(try await bob.session(sid: sid).status == .cancelled)
    }

    @Test("A resumed payment counts as paid only with a receipt that verifies against the trusted keys")
    func resumeChecksTheReceipt() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let bob = try await loggedIn(url, "bob@example.com")
        let alice = try await loggedIn(url, "alice@example.com", funded: 5_000)
        let journal = try PaymentJournal(path: processes.directory.url.appendingPathComponent("journal.sqlite").path)
        let stranger = ReceiptSigner.generate().signer
        let misled = ReceiptTrust(.fixed(ReceiptKeySet(keys: [stranger.publicKey])))
        let pinned = ReceiptTrust(.pinned(file: processes.directory.url.appendingPathComponent("pins.json")))
        var outcomes: [PaymentResumer.Result] = []
        for trust in [misled, pinned] {
            let sid = try await bob.createSession(amountCents: 1_000).sid
            _ = try journal.begin(server: alice.baseURL.absoluteString, sid: sid, amountCents: 1_000, payeeName: "bob")
            try await alice.lock(sid: sid)
            outcomes += try await PaymentResumer(ledger: alice, journal: journal, receiptTrust: trust).resumeAll()
        }
        guard outcomes.count == 2, case .failed(_, let reason) = outcomes[0], case .paid = outcomes[1] else {
            Issue.record("expected a refused receipt, then a paid resume: \(outcomes)")
            return
        }
        #expect(reason.contains("receipt does not verify"), "\(reason)")
    }
}
