import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer
import GotchuReceipts
import GotchuTesting
import GotchuWebhooks
import Logging
import NIOCore
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Ledger servers delivering webhooks to receiver processes on loopback, over a store of either kind (or several
/// servers on one PostgreSQL database), on a clock the test moves: retries come due when the test says, never by
/// waiting.
struct WebhookLedger: Sendable {
    let urls: [URL]
    let store: any LedgerStore
    let clock: ManualClock
    let directory: TemporaryDirectory

    /// The options of the tests' servers: http to 127.0.0.1 allowed, retries from 1 s, a quick poll.
    static func options(_ configure: (inout WebhookOptions) -> Void = { _ in }) -> WebhookOptions {
        var options = WebhookOptions()
        options.allowedHosts = ["127.0.0.1"]
        options.resolver = TestWebhookResolver()
        options.retryBase = .seconds(1)
        options.pollInterval = .milliseconds(100)
        configure(&options)
        return options
    }

    /// Runs `body` against `replicas` servers (more than one only on PostgreSQL) on one fresh store.
    static func with<T: Sendable>(
        _ kind: StoreKind,
        replicas: Int = 1,
        webhooks: WebhookOptions = options(),
        _ body: @Sendable (WebhookLedger) async throws -> T
    ) async throws -> T {
        let clock = ManualClock()
        let directory = try TemporaryDirectory(prefix: "gotchu-webhooks")
        defer { directory.remove() }
        let tokens = try await TokenAuthority(secret: TestLedger.secret, clock: { clock.now() })
        @Sendable func run(_ stores: [LedgerServer.Replica]) async throws -> T {
            try await LedgerServer.withRunning(stores, .inProcess(tokens: tokens) { $0.webhooks = webhooks }) { urls in
                try await body(WebhookLedger(urls: urls, store: stores[0].store, clock: clock, directory: directory))
            }
        }
        if replicas == 1 {
            return try await TestStore.with(kind, clock: clock) { store, _, services in
                try await run([LedgerServer.Replica(store: store, services: services)])
            }
        }
        precondition(kind == .postgres, "replicas share a PostgreSQL database")
        return try await TestPostgres.withDatabase { url in
            let logger = Logger(label: "webhook-replicas") { _ in SwiftLogNoOpLogHandler() }
            let stores = (0..<replicas).map { _ in
                PostgresLedgerStore(
                    url: url,
                    clock: { clock.now() },
                    maximumConnections: 4,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
            }
            return try await run(stores.map { LedgerServer.Replica(store: $0, services: [$0.client]) })
        }
    }

    /// A client of the first server logged in as `email`, funded with `cents` when positive.
    func client(_ email: String, funded cents: Cents = 0, replica: Int = 0) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: urls[replica % urls.count])
        client.token = try await client.devLogin(email: email).token
        if cents > 0 { _ = try await client.fund(amountCents: cents) }
        return client
    }

    /// Moves the clock `seconds` on every `interval` of real time until `condition` holds; whether it did. Retries
    /// come due on the clock, and the servers notice at their next poll.
    func advance(
        by seconds: Double = 5,
        timeout: Duration = .seconds(120),
        until condition: @Sendable () async throws -> Bool
    ) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            clock.advance(seconds: seconds)
            try await Task.sleep(for: .milliseconds(150))
        }
        return try await condition()
    }
}

/// An event as a receiver got it, its `data` decoded as the API's type.
struct ReceivedEvent<Data: Decodable>: Decodable {
    var id: String
    var type: String
    var created: Int
    var data: Data

    init(_ delivery: WebhookReceiver.Delivery) throws {
        self = try APIJSON.decoder().decode(Self.self, from: Foundation.Data(delivery.body.utf8))
    }
}

@Suite("Webhooks delivered to receivers", .serialized, .timeLimit(.minutes(10)))
struct WebhookDeliveryTests {
    @Test(
        "A test event goes to one endpoint at once, signed, and says how it answered; nothing is stored",
        arguments: StoreKind.available
    )
    func testEvent(kind: StoreKind) async throws {
        try await WebhookLedger.with(kind) { ledger in
            let receiver = try await WebhookReceiver.start(in: ledger.directory, answers: [503])
            defer { Task { await receiver.stop() } }
            let shop = try await ledger.client("shop@example.com")
            let endpoint = try await shop.createWebhookEndpoint(url: receiver.url, events: ["payment.succeeded"])
            try receiver.trust(endpoint.secret)
            let refused = try await shop.testWebhookEndpoint(id: endpoint.id)
            #expect(!refused.delivered && refused.statusCode == 503, "\(refused)")
            #expect(refused.error?.hasPrefix("answered HTTP 503") == true, "\(refused)")
            let passed = try await shop.testWebhookEndpoint(id: endpoint.id)
            #expect(passed.delivered && passed.statusCode == 200 && passed.error == nil, "\(passed)")
            #expect(passed.eventID.hasPrefix("evt_") && passed.eventID != refused.eventID)
            try await receiver.wait("both tests") { $0.count == 2 }
            let arrived = receiver.deliveries
            #expect(arrived.allSatisfy { $0.valid && $0.type == "webhook.test" }, "\(arrived.map(\.body))")
            #expect(arrived.map(\.id) == [refused.eventID, passed.eventID])
            #expect(arrived.allSatisfy { $0.data["endpoint_id"] as? String == endpoint.id })
            #expect(try await shop.webhookDeliveries(endpointID: endpoint.id).isEmpty)

            // Only the endpoint's own user may test it; an id of no endpoint is no endpoint.
            let other = try await ledger.client("other@example.com")
            for (client, id) in [(other, endpoint.id), (shop, "we_" + String(repeating: "0", count: 32))] {
                let refusal = await #expect(throws: LedgerClientError.self) {
                    try await client.testWebhookEndpoint(id: id)
                }
                #expect(refusal?.problemKind == .notFound)
            }
        }
    }

    @Test(
        "A payment, a refund, a cancel, an expiry, a settled and a failed payout and a deposit each arrive, signed",
        arguments: StoreKind.available
    )
    func everyKindArrivesSigned(kind: StoreKind) async throws {
        try await WebhookLedger.with(kind) { ledger in
            let receiver = try await WebhookReceiver.start(in: ledger.directory)
            defer { Task { await receiver.stop() } }
            let shop = try await ledger.client("shop@example.com")
            let endpoint = try await shop.createWebhookEndpoint(url: receiver.url, events: ["*"])
            #expect(endpoint.secret?.hasPrefix("whsec_") == true && endpoint.events == ["*"])
            #expect(endpoint.id.hasPrefix("we_") && endpoint.status == "enabled" && endpoint.url == receiver.url)
            try receiver.trust(endpoint.secret)
            let payer = try await ledger.client("payer@example.com", funded: 10_000)

            // The session's order reference rides in every event of it.
            let session = try await shop.createSession(amountCents: 1_250, reference: "order 1017")
            try await payer.lock(sid: session.sid)
            let sent = try await payer.send(sid: session.sid, idempotencyKey: "pay-1")
            let payment = try ReceivedEvent<SessionStatusResponse>(try await receiver.event("payment.succeeded"))
            #expect(payment.data.sid == session.sid && payment.data.status == .paid)
            #expect(payment.data.reference == "order 1017")
            #expect(payment.data.amountCents == 1_250 && payment.data.receipt != nil)
            #expect(payment.data.receipt == sent.receipt)
            #expect(payment.id.hasPrefix("evt_"))

            let refund = try await shop.refund(sid: session.sid, amountCents: 250, idempotencyKey: "refund-1")
            let refunded = try ReceivedEvent<RefundResponse>(try await receiver.event("refund.succeeded"))
            #expect(refunded.data == refund.refund)
            #expect(refunded.data.reference == "order 1017")

            let cancelled = try await shop.createSession(amountCents: 300, reference: "table 4")
            try await shop.cancel(sid: cancelled.sid)
            let cancel = try ReceivedEvent<SessionStatusResponse>(try await receiver.event("session.cancelled"))
            #expect(cancel.data.sid == cancelled.sid && cancel.data.status == .cancelled)
            #expect(cancel.data.reference == "table 4")

            let expiring = try await shop.createSession(amountCents: 400)
            ledger.clock.advance(seconds: Double(LedgerPolicy().sessionLifetime.components.seconds) + 1)
            let expired = try await receiver.event("session.expired")
            let expiry = try ReceivedEvent<SessionStatusResponse>(expired)
            #expect(expiry.data.sid == expiring.sid && expiry.data.status == .expired)
            #expect(expiry.data.reference == nil && !expired.body.contains("\"reference\""))

            let settled = try await shop.requestPayout(amountCents: 300, idempotencyKey: "payout-1").payout
            _ = try await ledger.store.settlePayout(id: settled.payoutID, reference: "BANK-1", actor: "test")
            let settle = try ReceivedEvent<PayoutResponse>(try await receiver.event("payout.settled"))
            #expect(settle.data.payoutID == settled.payoutID && settle.data.status == "SETTLED")
            #expect(settle.data.reference == "BANK-1" && settle.data.amountCents == 300)

            let failed = try await shop.requestPayout(amountCents: 200, idempotencyKey: "payout-2").payout
            _ = try await ledger.store.failPayout(id: failed.payoutID, reason: "account closed", actor: "test")
            let fail = try ReceivedEvent<PayoutResponse>(try await receiver.event("payout.failed"))
            #expect(fail.data.payoutID == failed.payoutID && fail.data.status == "FAILED")
            #expect(fail.data.failureReason == "account closed")

            _ = try await ledger.store.deposit(
                email: "shop@example.com",
                amountCents: 500,
                reference: "WIRE-9",
                actor: "test"
            )
            let deposit = try ReceivedEvent<WebhookDepositData>(try await receiver.event("deposit.received"))
            #expect(deposit.data.amountCents == 500 && deposit.data.reference == "WIRE-9")

            // Every delivery verified with the documented snippet, once per event, answered at once.
            let deliveries = receiver.deliveries
            #expect(deliveries.allSatisfy { $0.valid && $0.answered == 200 && !$0.duplicate && $0.path == "/hook" })
            #expect(Set(deliveries.compactMap(\.type)) == Set(WebhookEventType.allCases.map(\.rawValue)))
            #expect(Set(deliveries.compactMap(\.id)).count == deliveries.count)
            // The receiver's own check and the Swift one agree.
            for delivery in deliveries {
                #expect(
                    verifyGotchuWebhook(
                        body: Data(delivery.body.utf8),
                        header: delivery.signature,
                        secret: endpoint.secret!
                    )
                )
            }
            // As the API lists them: delivered, one attempt each, once the server has recorded the last answer (the
            // receiver has it before the server does).
            let recorded = try await eventually(timeout: .seconds(60)) {
                try await !shop.webhookDeliveries(endpointID: endpoint.id).contains { $0.status == "pending" }
            }
            #expect(recorded)
            let listed = try await shop.webhookDeliveries(endpointID: endpoint.id)
            #expect(listed.count == deliveries.count)
            #expect(listed.allSatisfy { $0.status == "delivered" && $0.attempts == 1 && $0.lastStatusCode == 200 })
            #expect(Set(listed.map(\.eventID)) == Set(deliveries.compactMap(\.id)))
        }
    }

    @Test(
        "A receiver answering 500 twice, then 200, gets the same event three times, byte for byte",
        arguments: StoreKind.available
    )
    func retriedUntilAccepted(kind: StoreKind) async throws {
        try await WebhookLedger.with(kind) { ledger in
            let receiver = try await WebhookReceiver.start(in: ledger.directory, answers: [500, 500])
            defer { Task { await receiver.stop() } }
            let shop = try await ledger.client("shop@example.com")
            let endpoint = try await shop.createWebhookEndpoint(url: receiver.url, events: ["deposit.received"])
            try receiver.trust(endpoint.secret)
            _ = try await shop.fund(amountCents: 700)

            for attempt in 1...2 {
                try await receiver.wait("attempt \(attempt)") { $0.count == attempt }
                // Recorded with its retry due a second or so later on the ledger's clock; moved past it, the next
                // poll sends it again.
                let recorded = try await eventually(timeout: .seconds(60)) {
                    let delivery = try await shop.webhookDeliveries(endpointID: endpoint.id).first
                    return delivery?.attempts == attempt && delivery?.status == "pending"
                }
                try #require(recorded)
                let pending = try #require(try await shop.webhookDeliveries(endpointID: endpoint.id).first)
                #expect(pending.lastStatusCode == 500 && pending.lastError?.hasPrefix("answered HTTP 500") == true)
                #expect(pending.nextAttemptAt != nil)
                ledger.clock.advance(seconds: 10)
            }
            let all = try await receiver.wait("the accepted attempt") { $0.count == 3 }
            #expect(all.map(\.answered) == [500, 500, 200])
            #expect(Set(all.compactMap(\.id)).count == 1 && all.allSatisfy { $0.valid })
            #expect(Set(all.map(\.body)).count == 1, "every attempt sends the same bytes")
            let delivered = try await eventually(timeout: .seconds(60)) {
                try await shop.webhookDeliveries(endpointID: endpoint.id).first?.status == "delivered"
            }
            #expect(delivered)
            let delivery = try #require(try await shop.webhookDeliveries(endpointID: endpoint.id).first)
            #expect(delivery.attempts == 3 && delivery.lastStatusCode == 200 && delivery.lastError == nil)
        }
    }

    @Test("A receiver down for a while gets every event once it is back", arguments: StoreKind.available)
    func receiverBackAfterOutage(kind: StoreKind) async throws {
        try await WebhookLedger.with(kind) { ledger in
            let first = try await WebhookReceiver.start(in: ledger.directory)
            let shop = try await ledger.client("shop@example.com")
            let endpoint = try await shop.createWebhookEndpoint(url: first.url, events: ["*"])
            try first.trust(endpoint.secret)
            await first.stop()

            let payer = try await ledger.client("payer@example.com", funded: 5_000)
            var sessions: [String] = []
            for index in 0..<3 {
                let session = try await shop.createSession(amountCents: 100 + Cents(index))
                try await payer.lock(sid: session.sid)
                _ = try await payer.send(sid: session.sid, idempotencyKey: "pay-\(index)")
                sessions.append(session.sid)
            }
            // Each tried and refused at the door.
            let tried = try await eventually(timeout: .seconds(60)) {
                let deliveries = try await shop.webhookDeliveries(endpointID: endpoint.id)
                return deliveries.count == 3 && deliveries.allSatisfy { $0.attempts >= 1 && $0.status == "pending" }
            }
            try #require(tried)
            let failing = try await shop.webhookDeliveries(endpointID: endpoint.id)
            #expect(
                failing.allSatisfy { $0.lastStatusCode == nil && $0.lastError?.contains("could not connect") == true }
            )
            #expect(try await shop.webhookEndpoints().first?.failingSince != nil)

            let back = try await WebhookReceiver.start(in: ledger.directory, port: first.port, secrets: first.secrets)
            defer { Task { await back.stop() } }
            let all = try await ledger.advance { back.events.count == 3 }
            #expect(all, "\(back.deliveries.map(\.answered))")
            // The clock moved past the access token's lifetime.
            let shopAgain = try await ledger.client("shop@example.com")
            let paid = try back.events.map { try ReceivedEvent<SessionStatusResponse>($0).data.sid }
            #expect(Set(paid) == Set(sessions))
            #expect(back.deliveries.allSatisfy { $0.valid })
            let recovered = try await eventually(timeout: .seconds(60)) {
                try await shopAgain.webhookEndpoints().first?.failingSince == nil
            }
            #expect(recovered)
        }
    }

    @Test("A slow endpoint holds up no other: at most N at once to it, the fast one served meanwhile")
    func slowEndpoint() async throws {
        // The slow receiver answers nothing until the test lets it, within a timeout longer than the test.
        let options = WebhookLedger.options {
            $0.concurrencyPerEndpoint = 2
            $0.timeout = .seconds(600)
        }
        try await WebhookLedger.with(.sqlite, webhooks: options) { ledger in
            let hold = ledger.directory.url.appendingPathComponent("release-slow")
            let slow = try await WebhookReceiver.start(in: ledger.directory, hold: hold)
            let fast = try await WebhookReceiver.start(in: ledger.directory)
            let shop = try await ledger.client("shop@example.com")
            try slow.trust(try await shop.createWebhookEndpoint(url: slow.url, events: ["*"]).secret)
            try fast.trust(try await shop.createWebhookEndpoint(url: fast.url + "?fast", events: ["*"]).secret)
            for index in 0..<6 { _ = try await shop.fund(amountCents: 100 + Cents(index)) }
            try await fast.wait("six deposits") { deliveries in deliveries.filter { $0.answered == 200 }.count == 6 }
            // Meanwhile the slow one got two requests, still open, and the other four wait their turn.
            try await slow.wait(timeout: .seconds(60), "two arrivals") { _ in slow.arrivals.count >= 2 }
            #expect(slow.arrivals.count == 2 && slow.deliveries.isEmpty, "\(slow.arrivals)")
            #expect(fast.deliveries.allSatisfy { $0.valid })
            // Let go, it gets the other four, never more than two at once.
            try Data().write(to: hold)
            try await slow.wait("six deposits") { deliveries in deliveries.filter { $0.answered == 200 }.count == 6 }
            #expect(slow.arrivals.count == 6 && slow.arrivals.allSatisfy { $0.concurrent <= 2 }, "\(slow.arrivals)")
            await slow.stop()
            await fast.stop()
        }
    }

    @Test(
        "Two servers on one PostgreSQL database deliver each event's attempts one after the other, never at once",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
    )
    func twoReplicas() async throws {
        try await WebhookLedger.with(.postgres, replicas: 2) { ledger in
            // Every event refused once, each answer a little slow: overlapping attempts would be seen.
            let receiver = try await WebhookReceiver.start(
                in: ledger.directory,
                answers: Array(repeating: 503, count: 12),
                delay: 0.2
            )
            defer { Task { await receiver.stop() } }
            let shop = try await ledger.client("shop@example.com")
            try receiver.trust(try await shop.createWebhookEndpoint(url: receiver.url, events: ["*"]).secret)
            for index in 0..<12 {
                let funder = try await ledger.client("shop@example.com", replica: index)
                _ = try await funder.fund(amountCents: 100 + Cents(index))
            }
            let all = try await ledger.advance(by: 3) { receiver.events.count == 12 }
            #expect(all, "\(receiver.deliveries.map(\.answered))")
            #expect(
                receiver.deliveries.allSatisfy { !$0.overlap && $0.valid },
                "\(receiver.deliveries.filter(\.overlap))"
            )
            #expect(receiver.deliveries.filter { $0.answered == 503 }.count == 12)
            // Each event's deliveries carry one body.
            for (_, attempts) in Dictionary(grouping: receiver.deliveries, by: { $0.id ?? "" }) {
                #expect(Set(attempts.map(\.body)).count == 1)
            }
        }
    }

    @Test("A secret rotation: both signatures for a day, so a receiver with either verifies")
    func rotation() async throws {
        try await WebhookLedger.with(.sqlite) { ledger in
            let receiver = try await WebhookReceiver.start(in: ledger.directory)
            defer { Task { await receiver.stop() } }
            let shop = try await ledger.client("shop@example.com")
            let endpoint = try await shop.createWebhookEndpoint(url: receiver.url, events: ["deposit.received"])
            // The receiver knows only the first secret.
            try receiver.trust(endpoint.secret)
            let rotated = try await shop.rotateWebhookSecret(id: endpoint.id)
            let new = try #require(rotated.secret)
            #expect(new != endpoint.secret && new.hasPrefix("whsec_") && rotated.previousSecretExpiresAt != nil)
            #expect(try await shop.webhookEndpoints().first?.secret == nil)
            _ = try await shop.fund(amountCents: 100)
            let delivery = try await receiver.event("deposit.received")
            #expect(delivery.valid)
            #expect(delivery.signature.split(separator: ",").filter { $0.hasPrefix("v1=") }.count == 2)
            #expect(verifyGotchuWebhook(body: Data(delivery.body.utf8), header: delivery.signature, secret: new))
            // A day later only the new secret signs.
            ledger.clock.advance(seconds: 86_400 + 1)
            _ = try await ledger.client("shop@example.com").fund(amountCents: 101)
            let later = try await receiver.wait("the second deposit") { $0.count == 2 }[1]
            #expect(later.signature.split(separator: ",").filter { $0.hasPrefix("v1=") }.count == 1)
            #expect(!later.valid, "the receiver that never learned the new secret refuses it")
            #expect(verifyGotchuWebhook(body: Data(later.body.utf8), header: later.signature, secret: new))
        }
    }
}

@Suite("Webhook endpoints refused and checked", .timeLimit(.minutes(10)))
struct WebhookEndpointRuleTests {
    /// The problem a raw request was answered with, and its detail.
    static func refusal(
        _ ledger: WebhookLedger,
        _ token: String?,
        _ method: String,
        _ path: String,
        body: String? = nil
    ) async throws -> (status: Int, kind: ProblemKind?, detail: String) {
        var request = URLRequest(url: URL(string: path, relativeTo: ledger.urls[0])!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let problem = try? APIJSON.decoder().decode(Problem.self, from: data)
        return ((response as! HTTPURLResponse).statusCode, problem?.kind, problem?.detail ?? "")
    }

    static func endpointBody(_ url: String, _ events: [String] = ["*"]) -> String {
        String(decoding: try! APIJSON.encoder().encode(WebhookEndpointRequest(url: url, events: events)), as: UTF8.self)
    }

    @Test(
        "Loopback addresses not on the allow list are refused at registration, and at delivery once a name resolves to one"
    )
    func serverSideRequestForgery() async throws {
        let resolver = SwitchingResolver()
        let options = WebhookLedger.options { $0.resolver = resolver }
        try await WebhookLedger.with(.sqlite, webhooks: options) { ledger in
            // A receiver on 127.0.0.2, which is not on the allow list: nothing may reach it.
            let bystander = try await WebhookReceiver.start(in: ledger.directory, host: "127.0.0.2")
            defer { Task { await bystander.stop() } }
            let shop = try await ledger.client("shop@example.com")
            let token = try #require(shop.token)
            let port = bystander.port
            let refused: [(String, String)] = [
                (
                    "http://127.0.0.2:\(port)/hook",
                    "url must be https (http only for the hosts of the server's --webhook-allow-hosts)"
                ),
                ("https://127.0.0.2:\(port)/hook", "url's address 127.0.0.2 is refused (loopback)"),
                ("https://[::1]:\(port)/hook", "url's address ::1 is refused (loopback)"),
                (
                    "https://[::ffff:127.0.0.2]:\(port)/hook",
                    "url's address ::ffff:127.0.0.2 is refused (IPv4-mapped, loopback)"
                ),
                ("https://localhost:\(port)/hook", "url is refused: localhost resolves to"),
                (
                    "https://loopback.test:\(port)/hook",
                    "url is refused: loopback.test resolves to 127.0.0.2, which is refused (loopback)"
                ),
            ]
            for (url, detail) in refused {
                let answer = try await Self.refusal(
                    ledger,
                    token,
                    "POST",
                    "/webhooks/endpoints",
                    body: Self.endpointBody(url)
                )
                #expect(answer.status == 400 && answer.kind == .badRequest, "\(url): \(answer)")
                #expect(answer.detail.hasPrefix(detail), "\(url): \(answer.detail)")
            }
            #expect(try await shop.webhookEndpoints().isEmpty)

            // A name that resolved to an allowed address at registration and to loopback since: refused at connect
            // time, nothing sent.
            let endpoint = try await shop.createWebhookEndpoint(
                url: "https://rebinding.test:\(port)/hook",
                events: ["*"]
            )
            resolver.rebind()
            _ = try await shop.fund(amountCents: 100)
            let refusedAtDelivery = try await eventually(timeout: .seconds(60)) {
                try await shop.webhookDeliveries(endpointID: endpoint.id).first?.attempts == 1
            }
            try #require(refusedAtDelivery)
            let delivery = try #require(try await shop.webhookDeliveries(endpointID: endpoint.id).first)
            #expect(
                delivery.lastError == "rebinding.test resolves to 127.0.0.2, which is refused (loopback)"
                    + allowHostsHint
            )
            #expect(delivery.lastStatusCode == nil && delivery.status == "pending")
            #expect(bystander.deliveries.isEmpty && bystander.arrivals.isEmpty)
        }
    }

    @Test("Unknown event types, bad or long URLs, too many endpoints, missing scopes and others' ids are refused")
    func validation() async throws {
        try await WebhookLedger.with(.sqlite) { ledger in
            let shop = try await ledger.client("shop@example.com")
            let other = try await ledger.client("other@example.com")
            let token = try #require(shop.token)
            let good = "http://127.0.0.1:9/hook"
            let bad: [(String, Int, String)] = [
                (Self.endpointBody(good, ["payment.refunded"]), 400, "events: unknown event type \"payment.refunded\""),
                (Self.endpointBody(good, []), 400, "events must name at least one event type"),
                (Self.endpointBody(good, ["*", "payment.succeeded"]), 400, "events: \"*\" takes every type"),
                (Self.endpointBody("not a url"), 400, "url must be printable ASCII without spaces"),
                (Self.endpointBody("mailto:x@example.com"), 400, "url must start with https://"),
                (
                    Self.endpointBody("https://" + String(repeating: "a", count: 2050)), 400,
                    "url must be at most 2048 bytes"
                ),
                (#"{"url": 5, "events": ["*"]}"#, 400, "the body must be a JSON object"),
                ("[]", 400, "the body must be a JSON object"),
            ]
            for (body, status, detail) in bad {
                let answer = try await Self.refusal(ledger, token, "POST", "/webhooks/endpoints", body: body)
                #expect(answer.status == status && answer.detail.contains(detail), "\(body.prefix(60)): \(answer)")
            }
            #expect(try await Self.refusal(ledger, nil, "GET", "/webhooks/endpoints").status == 401)

            // Sixteen endpoints, not seventeen.
            var ids: [String] = []
            for index in 0..<16 {
                ids.append(try await shop.createWebhookEndpoint(url: good + "\(index)", events: ["*"]).id)
            }
            let seventeenth = try await Self.refusal(
                ledger,
                token,
                "POST",
                "/webhooks/endpoints",
                body: Self.endpointBody(good)
            )
            #expect(seventeenth.status == 400 && seventeenth.detail.contains("16"), "\(seventeenth)")
            try await shop.deleteWebhookEndpoint(id: ids.removeFirst())
            _ = try await shop.createWebhookEndpoint(url: good, events: ["payment.succeeded"])
            #expect(try await shop.webhookEndpoints().count == 16)
            #expect(try await shop.webhookEndpoints().allSatisfy { $0.secret == nil })

            // Another user's endpoint, or no such id, is not found; an id of the wrong shape too.
            let theirs = ids[0]
            #expect(await problemKind { try await other.deleteWebhookEndpoint(id: theirs) } == .notFound)
            #expect(await problemKind { try await other.rotateWebhookSecret(id: theirs) } == .notFound)
            #expect(await problemKind { try await other.webhookDeliveries(endpointID: theirs) } == .notFound)
            #expect(await problemKind { try await shop.deleteWebhookEndpoint(id: "we_nope") } == .notFound)
            #expect(
                await problemKind {
                    try await shop.retryWebhookDelivery(id: "whd_" + String(repeating: "0", count: 32))
                } == .notFound
            )
            #expect(await problemKind { try await shop.webhookDeliveries(endpointID: theirs, limit: 0) } == .badRequest)
            #expect(try await shop.webhookEndpoints().count == 16)

            // An API key needs webhooks:manage.
            let (_, plain) = try await ledger.store.createAPIKey(
                email: "shop@example.com",
                name: "till",
                scopes: [.sessionsCreate],
                actor: "test"
            )
            let (_, managing) = try await ledger.store.createAPIKey(
                email: "shop@example.com",
                name: "shop-backend",
                scopes: [.webhooksManage],
                actor: "test"
            )
            let forbidden = try await Self.refusal(ledger, plain, "GET", "/webhooks/endpoints")
            #expect(forbidden.status == 403 && forbidden.detail.contains("webhooks:manage"), "\(forbidden)")
            let key = LedgerClient(baseURL: ledger.urls[0], token: managing)
            #expect(try await key.webhookEndpoints().count == 16)
            try await key.deleteWebhookEndpoint(id: ids[1])
            #expect(try await shop.webhookEndpoints().count == 15)
        }
    }
}

/// A resolver for the tests' names: `loopback.test` → 127.0.0.2; `rebinding.test` → a documentation address
/// (192.0.2.1, never connected to) until ``rebind()``, then 127.0.0.2; any other name as ``TestWebhookResolver``.
final class SwitchingResolver: WebhookResolver {
    private let rebound = Atomic(false)

    func rebind() { rebound.store(true, ordering: .relaxed) }

    func addresses(host: String, port: Int) async throws -> [SocketAddress] {
        switch host {
        case "loopback.test": return [try SocketAddress(ipAddress: "127.0.0.2", port: port)]
        case "rebinding.test":
            let address = rebound.load(ordering: .relaxed) ? "127.0.0.2" : "192.0.2.1"
            return [try SocketAddress(ipAddress: address, port: port)]
        default: return try await TestWebhookResolver().addresses(host: host, port: port)
        }
    }
}
