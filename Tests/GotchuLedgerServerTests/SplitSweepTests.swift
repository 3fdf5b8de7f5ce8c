import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuTesting
import Testing

/// A split that expires with shares paid is refunded by the server's own sweep, with no request arriving: seen on
/// the session's status and on its event stream, never timed.
@Suite("Splits: the server returns an expired split's payments by itself", .serialized, .timeLimit(.minutes(10)))
struct SplitSweepTests {
    /// A split of 1,001 cents in 4 shares of which Ann paid one (tip 25) and Bob two (tip 0); returns the session
    /// and the payers.
    static func partlyPaid(
        _ ledger: TestLedger,
        _ payee: LedgerClient
    ) async throws -> (CreateSessionResponse, [LedgerClient]) {
        let ann = try await ledger.client("ann@example.com", funded: 2_000)
        let bob = try await ledger.client("bob@example.com", funded: 2_000)
        let session = try await payee.createSession(amountCents: 1_001, shares: 4)
        _ = try await ann.lock(sid: session.sid, shares: 1)
        _ = try await ann.send(sid: session.sid, idempotencyKey: "ann", tipCents: 25)
        _ = try await bob.lock(sid: session.sid, shares: 2)
        _ = try await bob.send(sid: session.sid, idempotencyKey: "bob")
        return (session, [ann, bob])
    }

    @Test(
        "Expired with shares paid: refunded_cents reaches all that was paid, each payment whole, no request needed",
        arguments: StoreKind.available
    )
    func expiredSplitIsRefunded(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let (session, payers) = try await Self.partlyPaid(ledger, payee)
            let before = try await payee.session(sid: session.sid)
            #expect(before.status == .partiallyPaid && before.sharesPaid == 3 && before.paidCents == 751)
            #expect(before.tipCents == 25 && before.refundedCents == 0)
            ledger.clock.advance(seconds: 301)
            // Nothing is asked of the server but the session's status: its sweep does the rest.
            let refunded = try await eventually { try await payee.session(sid: session.sid).refundedCents == 751 + 25 }
            #expect(refunded)
            let after = try await payee.session(sid: session.sid)
            #expect(after.status == .expired && after.refundedCents == 776)
            #expect(after.payments.map(\.refundedCents) == after.payments.map { $0.amountCents + $0.tipCents })
            for payer in payers { #expect(try await payer.wallet().availableCents == 2_000) }
            #expect(try await payee.wallet().availableCents == 0)
            let verification = try await ledger.store.verify()
            #expect(verification.failure == nil, "\(verification)")
        }
    }

    @Test(
        "The payee's event stream: share-paid for each share but the last, then expired until every payment is returned",
        arguments: StoreKind.available
    )
    func expiredSplitOnTheStream(store: StoreKind) async throws {
        var limits = LedgerLimits.unlimited
        // Expiry is found by the safety poll (nothing writes it); the refunds are written and noticed.
        limits.eventSafetyPoll = .milliseconds(100)
        try await TestLedger.with(store: store, limits: limits) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let ann = try await ledger.client("ann@example.com", funded: 2_000)
            let bob = try await ledger.client("bob@example.com", funded: 2_000)
            let session = try await payee.createSession(amountCents: 1_001, shares: 4)
            let events = EventReader(payee.sessionEvents(sid: session.sid))
            #expect(try await events.next()?.kind == .advertising)
            _ = try await ann.lock(sid: session.sid, shares: 1)
            _ = try await ann.send(sid: session.sid, idempotencyKey: "ann", tipCents: 25)
            let first = try #require(try await events.next())
            #expect(first.kind == .sharePaid && first.session.status == .partiallyPaid && first.session.sharesPaid == 1)
            _ = try await bob.lock(sid: session.sid, shares: 2)
            _ = try await bob.send(sid: session.sid, idempotencyKey: "bob")
            let second = try #require(try await events.next())
            #expect(second.kind == .sharePaid && second.session.sharesPaid == 3 && second.session.paidCents == 751)
            ledger.clock.advance(seconds: 301)
            // Expired, then again as each payment is returned: the stream ends only once all are, so its last event
            // says so, and each says no less than the one before.
            var seen: [SessionEvent] = []
            while let event = try await events.next() {
                #expect(event.kind == .expired && event.session.status == .expired)
                #expect(event.session.sharesPaid == 3 && event.session.paidCents == 751 && event.session.tipCents == 25)
                #expect(event.session.refundedCents >= (seen.last?.session.refundedCents ?? 0))
                seen.append(event)
            }
            let last = try #require(seen.last)
            #expect(last.session.refundedCents == 751 + 25)
            #expect(Set(seen.map(\.id)).count == seen.count, "an event was sent twice: \(seen.map(\.id))")
            // A stream resumed from the last event is sent nothing new and ends.
            let resumed = EventReader(payee.sessionEvents(sid: session.sid, lastEventID: last.id))
            #expect(try await resumed.next() == nil)
        }
    }
}
