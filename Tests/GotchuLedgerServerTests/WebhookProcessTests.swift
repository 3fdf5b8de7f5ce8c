import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuTesting
import Testing

/// Webhooks of a real `gotchu server` process: killed with SIGKILL between a commit and its delivery (on either
/// store), and driven by `gotchu webhooks` and `gotchu admin webhooks`.
@Suite("Webhooks of gotchu server processes", .serialized, .timeLimit(.minutes(10)))
struct WebhookProcessTests {
    /// The options every server here runs with: http to 127.0.0.1, retries from 1 s.
    static let webhookOptions = ["--webhook-allow-hosts", "127.0.0.1", "--webhook-retry-base", "1"]

    /// Starts `gotchu server` with `arguments` on `port` (a free one for 0) and returns it with its URL.
    static func start(
        _ arguments: [String],
        port: Int = 0,
        _ environment: [String: String]
    ) async throws -> (RunningCommand, URL) {
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            arguments + webhookOptions + ["--port", "\(port)"],
            environment: environment
        )
        let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        return (server, try #require(URL(string: String(line.dropFirst("listening on ".count)))))
    }

    /// A shop with an endpoint for every event at `receiver`, which trusts its secret.
    static func shop(_ url: URL, _ receiver: WebhookReceiver) async throws -> (LedgerClient, WebhookEndpointResponse) {
        let shop = try await CrashTests.login("shop@example.com", url)
        let endpoint = try await shop.createWebhookEndpoint(url: receiver.url, events: ["*"])
        try receiver.trust(endpoint.secret)
        return (shop, endpoint)
    }

    @Test(
        "SIGKILL while an attempt is in flight: the restarted server delivers the event again, same id, same bytes",
        arguments: StoreKind.available
    )
    func killedMidDelivery(store: StoreKind) async throws {
        try await AdminCommandTests.withDatabase(store) { database, environment in
            try await Self.killedMidDelivery(database: database, environment: environment)
        }
    }

    /// The body of ``killedMidDelivery(store:)`` on the store `database` names.
    private static func killedMidDelivery(database: String, environment: [String: String]) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var environment = environment
        environment["GOTCHU_JWT_SECRET"] = TestLedger.secret
        let arguments = ["server", "--dev", "--database", database]
        // Each answer takes a few seconds: the server is killed while it waits for the first.
        let receiver = try await WebhookReceiver.start(in: directory, delay: 3)
        defer { Task { await receiver.stop() } }
        var (server, url) = try await Self.start(arguments, environment)
        let (shop, endpoint) = try await Self.shop(url, receiver)
        _ = try await shop.fund(amountCents: 250)

        let arrived = try await eventually(timeout: .seconds(60)) { !receiver.arrivals.isEmpty }
        try #require(arrived, "no delivery started")
        let eventID = try #require(receiver.arrivals.first?.arrived)
        #expect(try await server.stop(signal: SIGKILL) == SIGKILL)
        // The receiver answered 200 into a closed connection: the dead server never learned it.
        try await receiver.wait(timeout: .seconds(60), "the first attempt's end") { $0.count == 1 }

        (server, url) = try await Self.start(arguments, port: url.port!, environment)
        // Its claim lapses, and the restarted server's worker sends it again.
        let again = try await receiver.wait(timeout: .seconds(180), "the event again") { deliveries in
            deliveries.filter { $0.id == eventID && $0.answered == 200 }.count >= 2
        }
        let attempts = again.filter { $0.id == eventID }
        #expect(attempts.allSatisfy { $0.valid && $0.type == "deposit.received" })
        #expect(Set(attempts.map(\.body)).count == 1, "the same bytes after the restart")
        #expect(attempts.last?.duplicate == true, "the receiver knows the second for what it is")
        let recorded = try await eventually(timeout: .seconds(60)) {
            try await shop.webhookDeliveries(endpointID: endpoint.id).first?.status == "delivered"
        }
        #expect(recorded)
        #expect(try await server.stop(signal: SIGTERM) == 0)
    }

    @Test(
        "SIGKILL after a commit while the receiver is down: once both are back, every event arrives",
        arguments: StoreKind.available
    )
    func killedWhileReceiverDown(store: StoreKind) async throws {
        try await AdminCommandTests.withDatabase(store) { database, environment in
            try await Self.killedWhileReceiverDown(database: database, environment: environment)
        }
    }

    /// The body of ``killedWhileReceiverDown(store:)`` on the store `database` names.
    private static func killedWhileReceiverDown(database: String, environment: [String: String]) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var environment = environment
        environment["GOTCHU_JWT_SECRET"] = TestLedger.secret
        let arguments = ["server", "--dev", "--database", database]
        let first = try await WebhookReceiver.start(in: directory)
        var (server, url) = try await Self.start(arguments, environment)
        let (shop, endpoint) = try await Self.shop(url, first)
        await first.stop()
        let payer = try await CrashTests.login("payer@example.com", url, funded: 1_000)
        var sessions: [String] = []
        for index in 0..<3 {
            let session = try await shop.createSession(amountCents: 100 + Cents(index))
            try await payer.lock(sid: session.sid)
            _ = try await payer.send(sid: session.sid, idempotencyKey: "pay-\(index)")
            sessions.append(session.sid)
        }
        // Committed; killed before any could be delivered.
        #expect(try await server.stop(signal: SIGKILL) == SIGKILL)
        let back = try await WebhookReceiver.start(in: directory, port: first.port, secrets: first.secrets)
        defer { Task { await back.stop() } }
        (server, url) = try await Self.start(arguments, port: url.port!, environment)
        try await back.wait(timeout: .seconds(180), "three payments") { _ in back.events.count == 3 }
        let paid = try back.events.map { try ReceivedEvent<SessionStatusResponse>($0).data.sid }
        #expect(Set(paid) == Set(sessions))
        #expect(back.deliveries.allSatisfy { $0.valid && $0.type == "payment.succeeded" })
        let delivered = try await eventually(timeout: .seconds(60)) {
            let deliveries = try await shop.webhookDeliveries(endpointID: endpoint.id)
            return deliveries.count == 3 && deliveries.allSatisfy { $0.status == "delivered" }
        }
        #expect(delivered)
        #expect(try await server.stop(signal: SIGTERM) == 0)
    }

    @Test(
        "gotchu webhooks add, list, deliveries, retry, rotate and remove; gotchu admin webhooks list, disable, enable"
    )
    func commandLine() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let receiver = try await WebhookReceiver.start(in: processes.directory)
        defer { Task { await receiver.stop() } }
        let (server, url) = try await processes.startServer(Self.webhookOptions)
        defer { _ = try? server.stopNow() }
        let database = processes.directory.url.appendingPathComponent("ledger.sqlite").path
        try await processes.run(["login", "--email", "shop@example.com", "--server", url], user: "shop")

        let added = try await processes.run(
            ["webhooks", "add", receiver.url, "--events", "deposit.received, payment.succeeded", "--server", url],
            user: "shop"
        )
        let secret = try #require(added.last)
        #expect(secret.hasPrefix("whsec_"), "\(added)")
        let id = try #require(added.first?.split(separator: " ").dropFirst().first.map(String.init))
        #expect(id.hasPrefix("we_") && added[0].contains("deposit.received, payment.succeeded"), "\(added)")
        try receiver.trust(secret)

        let listed = try await processes.run(["webhooks", "list", "--server", url], user: "shop")
        #expect(listed.count == 2 && listed[1].hasPrefix("\(id)  enabled  deposit.received,payment.succeeded"))
        #expect(listed.joined().contains("\"\(receiver.url)\"") && !listed.joined().contains("whsec_"))

        // A test event: signed, of its own type, sent to this endpoint alone, and kept nowhere.
        let tested = try await processes.run(["webhooks", "test", id, "--server", url], user: "shop")
        #expect(tested.count == 1 && tested[0].hasPrefix("delivered evt_"), "\(tested)")
        #expect(tested[0].contains(": HTTP 200 in ") && tested[0].hasSuffix(" ms"), "\(tested)")
        let test = try await receiver.event("webhook.test")
        #expect(test.valid && test.data["endpoint_id"] as? String == id, "\(test.body)")
        #expect(try await processes.run(["webhooks", "deliveries", id, "--server", url], user: "shop").count == 1)

        try await processes.run(["fund", "--amount", "2.50", "--server", url], user: "shop")
        let deposit = try await receiver.event("deposit.received")
        let deliveries = try await processes.run(["webhooks", "deliveries", id, "--server", url], user: "shop")
        let delivery = try #require(deliveries.dropFirst().first)
        #expect(
            delivery.contains(try #require(deposit.id)) && delivery.contains("delivered  1  HTTP 200"),
            "\(deliveries)"
        )
        let deliveryID = String(try #require(delivery.split(separator: " ").first))

        // Sent again on request: the same event.
        let retried = try await processes.run(["webhooks", "retry", deliveryID, "--server", url], user: "shop")
        #expect(retried == ["delivery \(deliveryID) of \(deposit.id!) is due again now"])
        try await receiver.wait("the deposit again") { $0.filter { $0.id == deposit.id }.count == 2 }

        let rotated = try await processes.run(["webhooks", "rotate", id, "--server", url], user: "shop")
        let newSecret = try #require(rotated.last)
        #expect(newSecret.hasPrefix("whsec_") && newSecret != secret)

        // The operator sees every endpoint. A reason that would drive the terminal is refused; quotes are shown
        // escaped inside the quoted reason.
        let admin = ["--database", database]
        let all = try await processes.run(["admin", "webhooks", "list"] + admin, user: "shop")
        #expect(all.count == 2 && all[1].contains("shop@example.com  enabled"), "\(all)")
        let hostile = try processes.start(
            ["admin", "webhooks", "disable", id, "--reason", "spam\u{1B}[2J"] + admin,
            user: "shop"
        )
        #expect(try await hostile.waitForExit() != 0)
        #expect(hostile.standardError.contains("U+1B") && !hostile.standardError.contains("\u{1B}"))
        let disabled = try await processes.run(
            ["admin", "webhooks", "disable", id, "--reason", #"answers "moved""#] + admin,
            user: "shop"
        )
        #expect(disabled == ["disabled endpoint \(id) of shop@example.com"])
        let shown = try await processes.run(["webhooks", "list", "--server", url], user: "shop")
        #expect(shown[1].contains("  disabled  ") && shown[1].hasSuffix(#"("answers \"moved\"")"#), "\(shown)")
        try await processes.run(["admin", "webhooks", "enable", id] + admin, user: "shop")
        let adminDeliveries = try await processes.run(["admin", "webhooks", "deliveries", id] + admin, user: "shop")
        #expect(adminDeliveries.count == 2 && adminDeliveries[1].hasPrefix(deliveryID))

        try await processes.run(["webhooks", "remove", id, "--server", url], user: "shop")
        #expect(try await processes.run(["webhooks", "list", "--server", url], user: "shop").count == 1)
        let unknown = try processes.start(["webhooks", "remove", id, "--server", url], user: "shop")
        #expect(try await unknown.waitForExit() != 0)
        #expect(unknown.standardError.contains("Not found"), "\(unknown.standardError)")
    }
}
