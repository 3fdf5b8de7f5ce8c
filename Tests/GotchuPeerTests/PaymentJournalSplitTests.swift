import Foundation
import GotchuPeer
import GotchuTesting
import Testing

@Suite("Payment journal: tips and shares", .timeLimit(.minutes(10)))
struct PaymentJournalSplitTests {
    @Test("The tip and the shares are journaled; the lock's figures replace the confirmed ones while pending")
    func tipsAndShares() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("state/journal.sqlite").path
        let journal = try PaymentJournal(path: path)
        let plain = try journal.begin(server: "http://s", sid: "sid-1", amountCents: 1_250, payeeName: "bob")
        #expect(plain.tipCents == 0 && plain.shares == 1)
        let split = try journal.begin(
            server: "http://s",
            sid: "sid-2",
            amountCents: 2_000,
            payeeName: "bob",
            tipCents: 300,
            shares: 2
        )

        let reopened = try PaymentJournal(path: path)
        let entry = try #require(try reopened.entry(key: split.key))
        #expect(entry.amountCents == 2_000 && entry.tipCents == 300 && entry.shares == 2)
        let settled = try #require(try reopened.settleAmount(key: split.key, amountCents: 1_999, tipCents: 300))
        #expect(settled.amountCents == 1_999 && settled.tipCents == 300 && settled.state == .pending)

        // Once finished, an entry's figures are what was paid: nothing rewrites them.
        try reopened.markPaid(key: split.key, newBalanceCents: 2_701)
        try reopened.settleAmount(key: split.key, amountCents: 5, tipCents: 0)
        #expect(try reopened.entry(key: split.key)?.amountCents == 1_999)
        #expect(try reopened.entry(key: split.key)?.tipCents == 300)
        #expect(try reopened.unfinished().map(\.sid) == ["sid-1"])
    }
}
