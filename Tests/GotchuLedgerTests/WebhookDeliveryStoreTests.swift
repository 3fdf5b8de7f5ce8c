import Foundation
import GotchuCore
import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerTesting
import GotchuReceipts
import Logging
import Testing

/// The store's side of webhook delivery, on both stores: endpoints and their secrets, claims and their leases, the
/// outcome of attempts, the data an event is sent with; and claims across two PostgreSQL replicas.
@Suite("Webhook endpoints, deliveries and claims in the store", .serialized, .timeLimit(.minutes(10)))
struct WebhookDeliveryStoreTests {
    static let lease: Duration = .seconds(60)

    /// A store of `kind`, migrated, with a payee `shop@example.com` that has one endpoint for every event type.
    static func withShop(
        _ kind: StoreKind,
        policy: LedgerPolicy = LedgerPolicy(),
        clock: ManualClock,
        _ body: @Sendable (any LedgerStore, LedgerUser, WebhookEndpoint) async throws -> Void
    ) async throws {
        try await TestStore.with(kind, policy: policy, clock: clock) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let shop = try await store.login(email: "shop@example.com")
                let endpoint = try await store.createWebhookEndpoint(
                    userID: shop.id,
                    url: "https://shop.example/hooks",
                    events: ["*"]
                ).endpoint
                try await body(store, shop, endpoint)
            }
        }
    }

    @Test("A claim leases a due delivery to one worker; a failure is retried when told, a success ends it")
    func claimAndRecord() async throws {
        for kind in StoreKind.available {
            let clock = ManualClock()
            try await Self.withShop(kind, clock: clock) { store, shop, endpoint in
                _ = try await store.fund(userID: shop.id, amountCents: 100)
                let first = try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease)
                try #require(first.count == 1)
                let claim = first[0]
                #expect(claim.attempt == 1 && claim.event.type == .depositReceived && claim.event.amount == 100)
                #expect(claim.endpoint.id == endpoint.id && claim.secrets.previous == nil)
                #expect(claim.secrets == (try await store.webhookSecrets(endpointID: endpoint.id)))
                #expect(claim.leaseUntil == claim.now + 60_000)
                // Leased: no one else gets it.
                #expect(try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease).isEmpty)

                let failed = try await store.recordWebhookAttempt(
                    deliveryID: claim.delivery.id,
                    leaseToken: claim.leaseToken,
                    outcome: .failed(
                        statusCode: 500,
                        error: "HTTP 500\n\u{1B}[31m",
                        duration: .milliseconds(12),
                        retryAfter: .seconds(30)
                    )
                )
                #expect(
                    failed == WebhookAttemptResult(recorded: true, failingSince: claim.now, endpointDisabled: false)
                )
                // Its lease ended with the attempt: the same token again is not recorded.
                let again = try await store.recordWebhookAttempt(
                    deliveryID: claim.delivery.id,
                    leaseToken: claim.leaseToken,
                    outcome: .delivered(statusCode: 200, duration: .zero)
                )
                #expect(!again.recorded)
                var listed = try await store.webhookDeliveries(endpointID: endpoint.id, userID: shop.id, limit: 10)
                #expect(listed.count == 1 && listed[0].status == .pending && listed[0].attempts == 1)
                #expect(listed[0].lastStatusCode == 500 && listed[0].lastError == "HTTP 500??[31m")
                #expect(listed[0].nextAttemptAt == claim.now + 30_000 && listed[0].lastDurationMilliseconds == 12)
                #expect(try await store.webhookEndpoints(userID: shop.id).first?.failingSince == claim.now)

                // Not due before its time.
                clock.advance(seconds: 29)
                #expect(try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease).isEmpty)
                clock.advance(seconds: 1)
                let second = try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease)
                try #require(second.count == 1)
                #expect(second[0].attempt == 2 && second[0].event.id == claim.event.id)
                let delivered = try await store.recordWebhookAttempt(
                    deliveryID: second[0].delivery.id,
                    leaseToken: second[0].leaseToken,
                    outcome: .delivered(statusCode: 204, duration: .milliseconds(3))
                )
                #expect(delivered == WebhookAttemptResult(recorded: true, failingSince: nil, endpointDisabled: false))
                listed = try await store.webhookDeliveries(endpointID: endpoint.id, userID: nil, limit: 10)
                #expect(listed[0].status == .delivered && listed[0].attempts == 2 && listed[0].lastStatusCode == 204)
                #expect(listed[0].deliveredAt == second[0].now && listed[0].nextAttemptAt == nil)
                #expect(listed[0].lastError == nil)
                #expect(try await store.webhookEndpoints(userID: shop.id).first?.failingSince == nil)
                #expect(try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease).isEmpty)

                // Retried by its user: pending and due now, the attempts made still counted.
                let retried = try await store.retryWebhookDelivery(id: listed[0].id, userID: shop.id)
                #expect(retried.status == .pending)
                let third = try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease)
                #expect(third.map(\.attempt) == [3])
                // Given up: failed, and visible as such.
                _ = try await store.recordWebhookAttempt(
                    deliveryID: third[0].delivery.id,
                    leaseToken: third[0].leaseToken,
                    outcome: .failed(statusCode: nil, error: "connection refused", duration: .zero, retryAfter: nil)
                )
                listed = try await store.webhookDeliveries(endpointID: endpoint.id, userID: shop.id, limit: 10)
                #expect(listed[0].status == .failed && listed[0].attempts == 3 && listed[0].lastStatusCode == nil)
                #expect(try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease).isEmpty)
                // Another user sees neither the endpoint's deliveries nor the delivery.
                let stranger = try await store.login(email: "stranger@example.com")
                await #expect(throws: LedgerError.self) {
                    try await store.webhookDeliveries(endpointID: endpoint.id, userID: stranger.id, limit: 10)
                }
                await #expect(throws: LedgerError.self) {
                    try await store.retryWebhookDelivery(id: listed[0].id, userID: stranger.id)
                }
                // A disabled endpoint's delivery is not retried: refused, saying why, and left as it was.
                _ = try await store.disableWebhookEndpoint(id: endpoint.id, actor: "operator", reason: "test")
                do {
                    _ = try await store.retryWebhookDelivery(id: listed[0].id, userID: shop.id)
                    Issue.record("a disabled endpoint's delivery was retried")
                } catch let refusal as LedgerError {
                    #expect(refusal.kind == .invalidInput && refusal.detail.contains("is disabled"), "\(refusal)")
                }
                #expect(
                    try await store.webhookDeliveries(endpointID: endpoint.id, userID: shop.id, limit: 10)[0].status
                        == .failed
                )
            }
        }
    }

    @Test("A lease that lapses lets another worker claim the delivery; the first worker's outcome is then refused")
    func lapsedLease() async throws {
        for kind in StoreKind.available {
            let clock = ManualClock()
            try await Self.withShop(kind, clock: clock) { store, shop, _ in
                _ = try await store.fund(userID: shop.id, amountCents: 1)
                let first = try await store.claimWebhookDeliveries(limit: 1, perEndpoint: 1, lease: .seconds(20))
                clock.advance(seconds: 20)
                let second = try await store.claimWebhookDeliveries(limit: 1, perEndpoint: 1, lease: .seconds(20))
                try #require(first.count == 1 && second.count == 1)
                #expect(first[0].delivery.id == second[0].delivery.id && first[0].leaseToken != second[0].leaseToken)
                #expect(second[0].attempt == 1)
                let late = try await store.recordWebhookAttempt(
                    deliveryID: first[0].delivery.id,
                    leaseToken: first[0].leaseToken,
                    outcome: .delivered(statusCode: 200, duration: .zero)
                )
                #expect(!late.recorded)
                let current = try await store.recordWebhookAttempt(
                    deliveryID: second[0].delivery.id,
                    leaseToken: second[0].leaseToken,
                    outcome: .delivered(statusCode: 200, duration: .zero)
                )
                #expect(current.recorded)
            }
        }
    }

    @Test("At most N deliveries per endpoint are in flight; a busy endpoint leaves room for the others")
    func perEndpointLimit() async throws {
        for kind in StoreKind.available {
            try await Self.withShop(kind, clock: ManualClock()) { store, shop, busy in
                let other = try await store.login(email: "other@example.com")
                let quiet = try await store.createWebhookEndpoint(
                    userID: other.id,
                    url: "https://other.example/",
                    events: ["deposit.received"]
                ).endpoint
                for _ in 0..<6 { _ = try await store.fund(userID: shop.id, amountCents: 1) }
                for _ in 0..<2 { _ = try await store.fund(userID: other.id, amountCents: 1) }
                let claimed = try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 2, lease: Self.lease)
                #expect(claimed.filter { $0.endpoint.id == busy.id }.count == 2)
                #expect(claimed.filter { $0.endpoint.id == quiet.id }.count == 2)
                // Both at their limit now.
                #expect(try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 2, lease: Self.lease).isEmpty)
                let done = try #require(claimed.first { $0.endpoint.id == busy.id })
                _ = try await store.recordWebhookAttempt(
                    deliveryID: done.delivery.id,
                    leaseToken: done.leaseToken,
                    outcome: .delivered(statusCode: 200, duration: .zero)
                )
                let next = try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 2, lease: Self.lease)
                #expect(next.map(\.endpoint.id) == [busy.id])
            }
        }
    }

    @Test("An endpoint failing for 3 days is disabled with an audit entry; enabled again, it is claimed again")
    func disabledAfterThreeDays() async throws {
        for kind in StoreKind.available {
            let clock = ManualClock()
            try await Self.withShop(kind, clock: clock) { store, shop, endpoint in
                _ = try await store.fund(userID: shop.id, amountCents: 1)
                var result = WebhookAttemptResult(recorded: false, failingSince: nil, endpointDisabled: false)
                var attempts = 0
                while !result.endpointDisabled && attempts < 20 {
                    let claim = try #require(
                        try await store.claimWebhookDeliveries(limit: 1, perEndpoint: 1, lease: Self.lease).first
                    )
                    result = try await store.recordWebhookAttempt(
                        deliveryID: claim.delivery.id,
                        leaseToken: claim.leaseToken,
                        outcome: .failed(
                            statusCode: 503,
                            error: "down",
                            duration: .zero,
                            retryAfter: .seconds(6 * 3600)
                        )
                    )
                    attempts += 1
                    clock.advance(seconds: 6 * 3600)
                }
                // The failures began at the first attempt; the one 3 days (12 × 6 h) later disables it.
                #expect(result.endpointDisabled && attempts == 13)
                let listed = try #require(try await store.webhookEndpoints(userID: shop.id).first)
                #expect(listed.disabledAt != nil && listed.disabledReason?.contains("3.0 days") == true)
                let audit = try #require(try await store.auditLog(limit: 1).first)
                #expect(audit.action == "webhook.disable" && audit.actor == "gotchu" && audit.subject == endpoint.id)
                // Disabled: its pending delivery waits, and new events do not fan out to it.
                _ = try await store.fund(userID: shop.id, amountCents: 1)
                #expect(try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease).isEmpty)
                #expect(try await store.webhookDeliveries(endpointID: endpoint.id, userID: nil, limit: 10).count == 1)
                let enabled = try await store.enableWebhookEndpoint(id: endpoint.id, actor: "operator")
                #expect(enabled.disabledAt == nil && enabled.failingSince == nil)
                #expect(try await store.auditLog(limit: 1).first?.action == "webhook.enable")
                #expect(try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease).count == 1)
            }
        }
    }

    @Test("Rotation keeps the old secret for 24 hours; delete hides the endpoint and fails its pending deliveries")
    func rotateAndDelete() async throws {
        for kind in StoreKind.available {
            let clock = ManualClock()
            try await Self.withShop(kind, clock: clock) { store, shop, endpoint in
                let before = try await store.webhookSecrets(endpointID: endpoint.id)
                let (rotated, secret) = try await store.rotateWebhookSecret(id: endpoint.id, userID: shop.id)
                #expect(secret.hasPrefix("whsec_") && secret != before.current)
                let during = try await store.webhookSecrets(endpointID: endpoint.id)
                #expect(during == WebhookSigningSecrets(current: secret, previous: before.current))
                #expect(rotated.previousSecretExpiresAt != nil)
                // A second rotation within the overlap would drop the first secret at once: refused, nothing changed.
                clock.advance(seconds: 3600)
                do {
                    _ = try await store.rotateWebhookSecret(id: endpoint.id, userID: shop.id)
                    Issue.record("a second rotation within the overlap went through")
                } catch let refusal as LedgerError {
                    #expect(refusal.kind == .invalidInput && refusal.detail.contains("still honoured until"))
                }
                #expect(try await store.webhookSecrets(endpointID: endpoint.id) == during)
                clock.advance(seconds: 23 * 3600 - 1)
                #expect(try await store.webhookSecrets(endpointID: endpoint.id).previous == before.current)
                clock.advance(seconds: 1)
                #expect(
                    try await store.webhookSecrets(endpointID: endpoint.id)
                        == WebhookSigningSecrets(current: secret, previous: nil)
                )
                // Once the overlap has ended, the next rotation goes through.
                let (_, third) = try await store.rotateWebhookSecret(id: endpoint.id, userID: shop.id)
                #expect(
                    try await store.webhookSecrets(endpointID: endpoint.id)
                        == WebhookSigningSecrets(current: third, previous: secret)
                )

                let stranger = try await store.login(email: "stranger@example.com")
                await #expect(throws: LedgerError.self) {
                    try await store.rotateWebhookSecret(id: endpoint.id, userID: stranger.id)
                }
                await #expect(throws: LedgerError.self) {
                    try await store.deleteWebhookEndpoint(id: endpoint.id, userID: stranger.id)
                }
                _ = try await store.fund(userID: shop.id, amountCents: 1)
                try await store.deleteWebhookEndpoint(id: endpoint.id, userID: shop.id)
                #expect(try await store.webhookEndpoints(userID: shop.id).isEmpty)
                #expect(try await store.webhookEndpoints(email: nil).isEmpty)
                let deliveries = try await store.webhookDeliveries(endpointID: endpoint.id, userID: nil, limit: 10)
                #expect(deliveries.map(\.status) == [.failed] && deliveries[0].lastError == "the endpoint was deleted")
                #expect(try await store.claimWebhookDeliveries(limit: 10, perEndpoint: 5, lease: Self.lease).isEmpty)
                for attempt in [
                    { try await store.deleteWebhookEndpoint(id: endpoint.id, userID: shop.id) },
                    { _ = try await store.webhookSecrets(endpointID: endpoint.id) },
                    { _ = try await store.retryWebhookDelivery(id: deliveries[0].id, userID: shop.id) },
                ] as [@Sendable () async throws -> Void] {
                    await #expect(throws: LedgerError.self) { try await attempt() }
                }
            }
        }
    }

    @Test("Bad URLs and event types, and a 17th endpoint, are refused with nothing stored")
    func validation() async throws {
        for kind in StoreKind.available {
            try await Self.withShop(kind, clock: ManualClock()) { store, shop, _ in
                for (url, events) in [
                    ("ftp://shop.example/", ["*"]), ("https://", ["*"]), ("https://a b.example/", ["*"]),
                    ("https://shop.example/\u{7}", ["*"]), (String(repeating: "a", count: 2049), ["*"]),
                    ("https://shop.example/", []), ("https://shop.example/", ["payment.failed"]),
                    ("https://shop.example/", ["*", "payment.succeeded"]),
                ] {
                    await #expect(throws: LedgerError.self, "\(url) \(events)") {
                        try await store.createWebhookEndpoint(userID: shop.id, url: url, events: events)
                    }
                }
                for index in 1..<16 {
                    _ = try await store.createWebhookEndpoint(
                        userID: shop.id,
                        url: "https://shop.example/\(index)",
                        events: ["refund.succeeded"]
                    )
                }
                let refusal = await #expect(throws: LedgerError.self) {
                    try await store.createWebhookEndpoint(
                        userID: shop.id,
                        url: "https://shop.example/17",
                        events: ["*"]
                    )
                }
                #expect(refusal?.kind == .invalidInput)
                #expect(try await store.webhookEndpoints(userID: shop.id).count == 16)
                #expect(try await store.webhookEndpoints(email: "shop@example.com").count == 16)
            }
        }
    }

    @Test("An event's data: the session as its payee sees it with the receipt, the refund, the payout, the deposit")
    func eventData() async throws {
        for kind in StoreKind.available {
            let clock = ManualClock()
            try await Self.withShop(kind, clock: clock) { store, shop, _ in
                let payer = try await store.login(email: "ann@example.com")
                _ = try await store.fund(userID: payer.id, amountCents: 1_000)
                let (single, _) = try await store.createSession(payeeID: shop.id, amountCents: 300, idempotencyKey: nil)
                try await store.lock(sid: single.sid, payerID: payer.id)
                _ = try await store.send(sid: single.sid, payerID: payer.id, idempotencyKey: "a", tipCents: 10)
                let (refund, _) = try await store.refund(
                    sid: single.sid,
                    payeeID: shop.id,
                    amountCents: 50,
                    idempotencyKey: "r"
                )
                let (split, _) = try await store.createSession(
                    payeeID: shop.id,
                    amountCents: 200,
                    shares: 2,
                    idempotencyKey: nil
                )
                _ = try await store.lock(sid: split.sid, payerID: payer.id, shares: 1)
                _ = try await store.send(sid: split.sid, payerID: payer.id, idempotencyKey: "b", tipCents: 0)
                _ = try await store.deposit(
                    email: "shop@example.com",
                    amountCents: 70,
                    reference: "bank 7",
                    actor: "op"
                )
                let payout = try await store.requestPayout(userID: shop.id, amountCents: 20, idempotencyKey: "o")
                _ = try await store.settlePayout(id: payout.payout.id, reference: "wire 9", actor: "op")
                try await store.cancel(sid: split.sid, payeeID: shop.id)

                let events = try await WebhookOutboxTests.events(store).filter { $0.userID == shop.id }
                var details: [WebhookEventDetail] = []
                for event in events { details.append(try await store.webhookEvent(id: event.id)) }
                #expect(
                    details.map(\.event.type.rawValue) == [
                        "payment.succeeded", "refund.succeeded", "payment.succeeded", "deposit.received",
                        "payout.settled", "session.cancelled", "refund.succeeded",
                    ]
                )
                guard case .session(let paid, nil, let receipt?) = details[0].data else {
                    Issue.record("payment: \(details[0].data)")
                    return
                }
                #expect(paid.sid == single.sid && paid.status == .paid && paid.tip == 10 && paid.refunded == 50)
                #expect(receipt.sessionID == single.sid && receipt.amountCents == 300 && receipt.tipCents == 10)
                guard case .refund(let refunded) = details[1].data else {
                    Issue.record("refund: \(details[1].data)")
                    return
                }
                #expect(refunded == refund && refunded.receipt != nil)
                guard case .session(let partly, let paymentID?, let shareReceipt?) = details[2].data else {
                    Issue.record("share payment: \(details[2].data)")
                    return
                }
                #expect(
                    partly.sid == split.sid && shareReceipt.id == paymentID && partly.payments.map(\.id) == [paymentID]
                )
                guard case .deposit(let deposit) = details[3].data else {
                    Issue.record("deposit: \(details[3].data)")
                    return
                }
                #expect(deposit.amount == 70 && deposit.reference == "bank 7")
                guard case .payout(let settled) = details[4].data else {
                    Issue.record("payout: \(details[4].data)")
                    return
                }
                #expect(settled.id == payout.payout.id && settled.status == .settled && settled.reference == "wire 9")
                guard case .session(let cancelled, nil, nil) = details[5].data else {
                    Issue.record("cancel: \(details[5].data)")
                    return
                }
                #expect(cancelled.status == .cancelled)
                // The payer's funding, a development funding: no reference, its amount from the event.
                let funding = try #require(try await WebhookOutboxTests.events(store).first)
                guard case .deposit(let funded) = try await store.webhookEvent(id: funding.id).data else {
                    Issue.record("funding")
                    return
                }
                #expect(funded.amount == 1_000 && funded.reference == nil && funded.id == funding.depositID)
                await #expect(throws: LedgerError.self) { try await store.webhookEvent(id: "evt_unknown") }

                // The body is pinned once: every later render gets the first.
                let first = try await store.pinWebhookBody(eventID: funding.id, body: Data("one".utf8))
                let second = try await store.pinWebhookBody(eventID: funding.id, body: Data("two".utf8))
                #expect(first == Data("one".utf8) && second == first)
                #expect(try await store.webhookEvent(id: funding.id).event.body == first)
                await #expect(throws: LedgerError.self) {
                    try await store.pinWebhookBody(eventID: "evt_unknown", body: Data())
                }
            }
        }
    }

    @Test(
        "Two PostgreSQL replicas claiming at once never hold one delivery both, nor pass an endpoint's limit",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
    )
    func replicasClaimApart() async throws {
        let clock = ManualClock()
        try await TestPostgres.withDatabase { url in
            let logger = Logger(label: "webhook-replicas") { _ in SwiftLogNoOpLogHandler() }
            let stores = (0..<2).map { _ in
                PostgresLedgerStore(
                    url: url,
                    clock: { clock.now() },
                    maximumConnections: 4,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
            }
            try await withServices(stores.map(\.client)) {
                try await stores[0].migrate()
                try await stores[1].migrate()
                var endpoints: [String] = []
                for index in 0..<4 {
                    let user = try await stores[0].login(email: "shop\(index)@example.com")
                    endpoints.append(
                        try await stores[0].createWebhookEndpoint(
                            userID: user.id,
                            url: "https://shop\(index).example/",
                            events: ["*"]
                        ).endpoint.id
                    )
                    try await stores[0].fund(userID: user.id, amountCents: 1, times: 60)
                }
                // Without recording: across both replicas, at most 3 in flight per endpoint.
                let held = try await withThrowingTaskGroup(of: [ClaimedWebhookDelivery].self) { group in
                    for store in stores + stores {
                        group.addTask {
                            try await store.claimWebhookDeliveries(limit: 8, perEndpoint: 3, lease: .seconds(60))
                        }
                    }
                    return try await group.reduce(into: []) { $0 += $1 }
                }
                #expect(Set(held.map(\.delivery.id)).count == held.count)
                for endpoint in endpoints { #expect(held.filter { $0.endpoint.id == endpoint }.count <= 3) }
                for claim in held {
                    _ = try await stores[0].recordWebhookAttempt(
                        deliveryID: claim.delivery.id,
                        leaseToken: claim.leaseToken,
                        outcome: .delivered(statusCode: 200, duration: .zero)
                    )
                }
                // Both replicas drain the rest at once, each claim recorded as delivered before the next.
                let endpointIDs = endpoints
                let drained = try await withThrowingTaskGroup(of: [String].self) { group in
                    for store in stores {
                        group.addTask {
                            var mine: [String] = []
                            let deadline = ContinuousClock.now + .seconds(60)
                            while ContinuousClock.now < deadline {
                                let claims = try await store.claimWebhookDeliveries(
                                    limit: 7,
                                    perEndpoint: 100,
                                    lease: .seconds(60)
                                )
                                for claim in claims { mine.append(try await Self.deliver(claim, store)) }
                                // None claimable: done once none is pending (the other replica may hold the last
                                // ones for a moment).
                                if claims.isEmpty, try await Self.pending(store, endpointIDs) == 0 { return mine }
                            }
                            throw LedgerError(.unavailable, detail: "the deliveries were not drained within 60 s")
                        }
                    }
                    return try await group.reduce(into: []) { $0 += $1 }
                }
                let all = held.map(\.delivery.id) + drained
                #expect(Set(all).count == all.count, "a delivery was claimed twice")
                #expect(all.count == 4 * 60)
                for endpoint in endpoints {
                    let deliveries = try await stores[1].webhookDeliveries(
                        endpointID: endpoint,
                        userID: nil,
                        limit: 100
                    )
                    #expect(
                        deliveries.count == 60 && deliveries.allSatisfy { $0.status == .delivered && $0.attempts == 1 }
                    )
                }
            }
        }
    }

    /// Records `claim` delivered; returns its delivery's id.
    static func deliver(_ claim: ClaimedWebhookDelivery, _ store: any LedgerStore) async throws -> String {
        let result = try await store.recordWebhookAttempt(
            deliveryID: claim.delivery.id,
            leaseToken: claim.leaseToken,
            outcome: .delivered(statusCode: 200, duration: .zero)
        )
        guard result.recorded else { throw LedgerError(.inconsistent, detail: "a claim's outcome was refused") }
        return claim.delivery.id
    }

    /// How many deliveries to these endpoints are still pending.
    static func pending(_ store: any LedgerStore, _ endpoints: [String]) async throws -> Int {
        var count = 0
        for endpoint in endpoints {
            count += try await store.webhookDeliveries(endpointID: endpoint, userID: nil, limit: 1000)
                .filter { $0.status == .pending }.count
        }
        return count
    }
}
