import Foundation
import GotchuPeer
import GotchuTesting
import Testing

@Suite("Payment journal", .timeLimit(.minutes(10)))
struct PaymentJournalTests {
    @Test("Intents survive a reopen until finished; the file is owner-only")
    func lifecycle() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("state/journal.sqlite").path
        let journal = try PaymentJournal(path: path)
        let first = try journal.begin(server: "http://s", sid: "sid-1", amountCents: 1_250, payeeName: "bob")
        let second = try journal.begin(server: "http://s", sid: "sid-2", amountCents: 99, payeeName: "carol")
        #expect(first.key != second.key)

        let reopened = try PaymentJournal(path: path)
        #expect(try reopened.unfinished().map(\.sid) == ["sid-1", "sid-2"])
        try reopened.markPaid(key: first.key, newBalanceCents: 8_750)
        try reopened.markFailed(key: second.key, reason: "session expired")
        #expect(try reopened.unfinished().isEmpty)
        #expect(try reopened.entry(key: first.key)?.state == .paid)
        #expect(try reopened.entry(key: first.key)?.newBalanceCents == 8_750)
        #expect(try reopened.entry(key: second.key)?.failure == "session expired")

        // A finished entry is final: a late, contradictory report does not rewrite it.
        try reopened.markFailed(key: first.key, reason: "late")
        #expect(try reopened.entry(key: first.key)?.state == .paid)

        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }
}
