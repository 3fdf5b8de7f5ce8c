import Foundation
import GotchuCore
import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerTesting
import Testing

/// Every row `ledger verify` reads, straight from the store's backend: the webhook events among them.
func ledgerSnapshot(_ store: any LedgerStore) async throws -> LedgerSnapshot {
    if let store = store as? SQLiteLedgerStore { return try await store.backend.snapshot() }
    if let store = store as? PostgresLedgerStore { return try await store.backend.snapshot() }
    throw LedgerError(.inconsistent, detail: "not a store of the tests")
}

/// The transactional outbox on both stores: which movements write which event, for whom, with how many deliveries,
/// and that nothing else writes one.
@Suite("Webhook events are written with the money movements that cause them", .serialized, .timeLimit(.minutes(10)))
struct WebhookOutboxTests {
    /// The events written since `before` events, oldest first.
    static func events(_ store: any LedgerStore, after before: Int = 0) async throws -> [WebhookEvent] {
        Array(try await ledgerSnapshot(store).webhookEvents.dropFirst(before))
    }

    /// The deliveries of `event` among the endpoints' (every endpoint's deliveries, newest first).
    static func deliveries(
        of event: WebhookEvent,
        _ store: any LedgerStore,
        endpoints: [WebhookEndpoint]
    ) async throws -> [WebhookDelivery] {
        var found: [WebhookDelivery] = []
        for endpoint in endpoints {
            found += try await store.webhookDeliveries(endpointID: endpoint.id, userID: nil, limit: 1000)
                .filter { $0.eventID == event.id }
        }
        return found
    }

    @Test("Each movement writes one event for its user, with one pending delivery per subscribed endpoint")
    func oneEventPerMovement() async throws {
        for kind in StoreKind.available {
            let clock = ManualClock()
            try await TestStore.with(kind, clock: clock) { store, _, services in
                try await withServices(services) {
                    try await store.migrate()
                    let payee = try await store.login(email: "shop@example.com")
                    let payer = try await store.login(email: "ann@example.com")
                    let other = try await store.login(email: "other@example.com")
                    let all = try await store.createWebhookEndpoint(
                        userID: payee.id,
                        url: "https://shop.example/hooks",
                        events: ["*"]
                    )
                    #expect(all.secret.hasPrefix("whsec_") && all.secret.count == 6 + 43)
                    #expect(all.endpoint.id.hasPrefix("we_") && all.endpoint.userEmail == "shop@example.com")
                    let payments = try await store.createWebhookEndpoint(
                        userID: payee.id,
                        url: "https://shop.example/payments",
                        events: ["payment.succeeded", "payment.succeeded"]
                    ).endpoint
                    #expect(payments.events == ["payment.succeeded"])
                    // Another user's endpoint receives none of the shop's events.
                    let stranger = try await store.createWebhookEndpoint(
                        userID: other.id,
                        url: "https://other.example/",
                        events: ["*"]
                    ).endpoint
                    let endpoints = [all.endpoint, payments, stranger]

                    _ = try await store.fund(userID: payer.id, amountCents: 5_000)
                    let (session, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 1_000,
                        idempotencyKey: nil
                    )
                    try await store.lock(sid: session.sid, payerID: payer.id)
                    _ = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: "p", tipCents: 50)
                    _ = try await store.refund(
                        sid: session.sid,
                        payeeID: payee.id,
                        amountCents: 300,
                        idempotencyKey: "r"
                    )
                    let (cancelled, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 10,
                        idempotencyKey: nil
                    )
                    try await store.cancel(sid: cancelled.sid, payeeID: payee.id)
                    _ = try await store.deposit(
                        email: "shop@example.com",
                        amountCents: 700,
                        reference: "bank-1",
                        actor: "operator"
                    )
                    let settled = try await store.requestPayout(
                        userID: payee.id,
                        amountCents: 100,
                        idempotencyKey: "o1"
                    )
                    let failed = try await store.requestPayout(userID: payee.id, amountCents: 200, idempotencyKey: "o2")
                    _ = try await store.settlePayout(id: settled.payout.id, reference: "wire-1", actor: "operator")
                    _ = try await store.failPayout(id: failed.payout.id, reason: "account closed", actor: "operator")
                    let (expiring, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 20,
                        idempotencyKey: nil
                    )
                    #expect(try await store.markExpiredSessions(limit: 10) == 0)
                    clock.advance(seconds: 301)
                    #expect(try await store.markExpiredSessions(limit: 10) == 1)
                    #expect(try await store.markExpiredSessions(limit: 10) == 0)

                    let events = try await Self.events(store)
                    let summary = events.map { "\($0.type.rawValue) \($0.userID == payee.id ? "shop" : "ann")" }
                    #expect(
                        summary == [
                            "deposit.received ann", "payment.succeeded shop", "refund.succeeded shop",
                            "session.cancelled shop", "deposit.received shop", "payout.settled shop",
                            "payout.failed shop", "session.expired shop",
                        ]
                    )
                    #expect(events.allSatisfy { $0.id.hasPrefix("evt_") && $0.id.count == 36 })
                    #expect(events.map(\.amount) == [5_000, 1_050, 300, nil, 700, 100, 200, nil])
                    #expect(events[1].sessionID == session.sid && events[2].refundID != nil)
                    #expect(events[3].sessionID == cancelled.sid && events[7].sessionID == expiring.sid)
                    #expect(events[5].payoutID == settled.payout.id && events[6].payoutID == failed.payout.id)
                    for event in events {
                        let found = try await Self.deliveries(of: event, store, endpoints: endpoints)
                        var expected: Set<String> = event.userID == payee.id ? [all.endpoint.id] : []
                        if event.type == .paymentSucceeded { expected.insert(payments.id) }
                        #expect(Set(found.map(\.endpointID)) == expected, "\(event.type)")
                        #expect(found.count == expected.count)
                        #expect(
                            found.allSatisfy { $0.status == .pending && $0.attempts == 0 && $0.id.hasPrefix("whd_") }
                        )
                        #expect(found.allSatisfy { $0.nextAttemptAt == event.createdAt && $0.eventType == event.type })
                    }
                    let verification = try await store.verify()
                    #expect(verification.failure == nil, "\(verification)")
                    #expect(verification.passed.last?.contains("6 money movements since the outbox began") == true)
                }
            }
        }
    }

    @Test("Refused and replayed requests write no event; a cancel repeated writes one")
    func nothingMovedNoEvent() async throws {
        for kind in StoreKind.available {
            try await TestStore.with(kind, clock: ManualClock()) { store, _, services in
                try await withServices(services) {
                    try await store.migrate()
                    let payee = try await store.login(email: "shop@example.com")
                    let payer = try await store.login(email: "ann@example.com")
                    _ = try await store.createWebhookEndpoint(
                        userID: payee.id,
                        url: "https://s.example/",
                        events: ["*"]
                    )
                    _ = try await store.fund(userID: payer.id, amountCents: 100)
                    let (session, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 100,
                        idempotencyKey: nil
                    )
                    try await store.lock(sid: session.sid, payerID: payer.id)
                    let before = try await Self.events(store).count
                    // Refused: the tip makes it more than the payer has.
                    let (refused, _) = try await store.send(
                        sid: session.sid,
                        payerID: payer.id,
                        idempotencyKey: "tip",
                        tipCents: 1
                    )
                    guard case .refused(let refusal) = refused, refusal.kind == .insufficientFunds else {
                        Issue.record("the send went through: \(refused)")
                        return
                    }
                    #expect(try await Self.events(store, after: before).isEmpty)
                    // Paid, then the same key again: one event.
                    _ = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: "pay")
                    let (_, replayed) = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: "pay")
                    #expect(replayed)
                    // A refund and its replay; one beyond what was paid.
                    _ = try await store.refund(
                        sid: session.sid,
                        payeeID: payee.id,
                        amountCents: 40,
                        idempotencyKey: "r"
                    )
                    let (_, refundReplayed) = try await store.refund(
                        sid: session.sid,
                        payeeID: payee.id,
                        amountCents: 40,
                        idempotencyKey: "r"
                    )
                    #expect(refundReplayed)
                    await #expect(throws: LedgerError.self) {
                        try await store.refund(
                            sid: session.sid,
                            payeeID: payee.id,
                            amountCents: 61,
                            idempotencyKey: "x"
                        )
                    }
                    // A deposit and its replay.
                    _ = try await store.deposit(email: "ann@example.com", amountCents: 5, reference: "d", actor: "op")
                    #expect(
                        try await store.deposit(email: "ann@example.com", amountCents: 5, reference: "d", actor: "op")
                            .replayed
                    )
                    // A cancel, twice; then a payment of the cancelled session, refused.
                    let (other, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 5,
                        idempotencyKey: nil
                    )
                    try await store.cancel(sid: other.sid, payeeID: payee.id)
                    try await store.cancel(sid: other.sid, payeeID: payee.id)
                    _ = try? await store.send(sid: other.sid, payerID: payer.id, idempotencyKey: "late")
                    // A payout settled twice: the second is refused.
                    _ = try await store.fund(userID: payee.id, amountCents: 10)
                    let payout = try await store.requestPayout(userID: payee.id, amountCents: 10, idempotencyKey: "o")
                    _ = try await store.settlePayout(id: payout.payout.id, reference: "w", actor: "op")
                    await #expect(throws: LedgerError.self) {
                        try await store.failPayout(id: payout.payout.id, reason: "late", actor: "op")
                    }
                    let types = try await Self.events(store, after: before).map(\.type.rawValue)
                    #expect(
                        types == [
                            "payment.succeeded", "refund.succeeded", "deposit.received", "session.cancelled",
                            "deposit.received", "payout.settled",
                        ]
                    )
                    let verification = try await store.verify()
                    #expect(verification.failure == nil, "\(verification)")
                }
            }
        }
    }

    @Test("An event written in a transaction that rolls back is gone with it, deliveries and all")
    func rollbackLeavesNoEvent() async throws {
        for kind in StoreKind.available {
            try await TestStore.with(kind, clock: ManualClock()) { store, _, services in
                try await withServices(services) {
                    try await store.migrate()
                    let user = try await store.login(email: "shop@example.com")
                    let endpoint = try await store.createWebhookEndpoint(
                        userID: user.id,
                        url: "https://s.example/",
                        events: ["*"]
                    ).endpoint
                    struct Abort: Error {}
                    let event = WebhookEvent(
                        id: WebhookSecrets.id("evt_"),
                        type: .depositReceived,
                        userID: user.id,
                        createdAt: 0,
                        depositID: "x"
                    )
                    await #expect(throws: Abort.self) {
                        if let store = store as? SQLiteLedgerStore {
                            try await store.backend.transaction { transaction in
                                try await transaction.insert(webhookEvent: event)
                                throw Abort()
                            }
                        } else if let store = store as? PostgresLedgerStore {
                            try await store.backend.transaction { transaction in
                                try await transaction.insert(webhookEvent: event)
                                // A statement after it, so its held-back writes reach the database first.
                                _ = try await transaction.user(id: user.id)
                                throw Abort()
                            }
                        }
                    }
                    #expect(try await Self.events(store).isEmpty)
                    #expect(try await store.webhookDeliveries(endpointID: endpoint.id, userID: nil, limit: 10).isEmpty)
                    await #expect(throws: LedgerError.self) { try await store.webhookEvent(id: event.id) }
                    // The same write committed: the event and its delivery.
                    if let store = store as? SQLiteLedgerStore {
                        try await store.backend.transaction { transaction in
                            try await transaction.insert(webhookEvent: event)
                        }
                    } else if let store = store as? PostgresLedgerStore {
                        try await store.backend.transaction { transaction in
                            try await transaction.insert(webhookEvent: event)
                        }
                    }
                    #expect(try await Self.events(store).map(\.id) == [event.id])
                    #expect(
                        try await store.webhookDeliveries(endpointID: endpoint.id, userID: nil, limit: 10).count == 1
                    )
                }
            }
        }
    }

    @Test("An event fans out to its user's enabled, subscribed endpoints only: not to disabled or deleted ones")
    func fanOutSkipsDisabledAndDeleted() async throws {
        for kind in StoreKind.available {
            try await TestStore.with(kind, clock: ManualClock()) { store, _, services in
                try await withServices(services) {
                    try await store.migrate()
                    let payee = try await store.login(email: "shop@example.com")
                    let make = { (events: [String]) in
                        try await store.createWebhookEndpoint(
                            userID: payee.id,
                            url: "https://s.example/",
                            events: events
                        )
                        .endpoint
                    }
                    let live = try await make(["deposit.received"])
                    let disabled = try await make(["*"])
                    let deleted = try await make(["deposit.received"])
                    let unsubscribed = try await make(["payout.failed"])
                    _ = try await store.disableWebhookEndpoint(id: disabled.id, actor: "op", reason: "testing")
                    try await store.deleteWebhookEndpoint(id: deleted.id, userID: payee.id)
                    _ = try await store.fund(userID: payee.id, amountCents: 1)
                    let event = try #require(try await Self.events(store).first)
                    let found = try await Self.deliveries(
                        of: event,
                        store,
                        endpoints: [live, disabled, deleted, unsubscribed]
                    )
                    #expect(found.map(\.endpointID) == [live.id])
                    #expect(
                        Set(try await store.webhookEndpoints(userID: payee.id).map(\.id))
                            == [live.id, disabled.id, unsubscribed.id]
                    )
                    let audit = try await store.auditLog(limit: 1)
                    #expect(audit.first?.action == "webhook.disable" && audit.first?.subject == disabled.id)
                }
            }
        }
    }
}
