import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer
import GotchuWebhooks
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

struct BenchWebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "How fast signed webhooks reach a receiver: latency after a payment, events per second, a backlog.",
        discussion: """
            A real ledger server on a loopback port delivers to a receiver in this process that answers 200 at \
            once (it checks each signature). Three figures: (1) latency, one payment at a time, from the \
            payment's request (and from its answer, once the payment committed) to the receiver having its \
            payment.succeeded event, p50 and p95; (2) events per second, --events deposits credited as fast as \
            the store takes them (eight writers, straight into the store) while the server delivers them, from \
            the first deposit to the last event received; (3) a backlog: --backlog deposits written while no \
            server runs (an outage), then a server started, timed from its start to the last event received. \
            With --database postgres://USER@HOST:PORT/DB on PostgreSQL, else on SQLite.
            """
    )

    @Option(help: "Payments timed one at a time for the latency.")
    var samples = 200

    @Option(help: "Events delivered for the events-per-second figure.")
    var events = 2_000

    @Option(help: "Events waiting when the server starts, for the drain figure.")
    var backlog = 10_000

    @Option(help: "Deliveries in flight to the endpoint at once (--webhook-concurrency).")
    var concurrency = 4

    @Option(
        help: ArgumentHelp(
            "A PostgreSQL server to measure on (default: SQLite), as postgres://USER@HOST:PORT/DB.",
            valueName: "url"
        )
    )
    var database: String?

    func validate() throws {
        guard samples > 1, events > 0, backlog > 0, (1...64).contains(concurrency) else {
            throw ValidationError("--samples must be 2 or more, --events and --backlog positive, --concurrency 1 to 64")
        }
        if let database { _ = try PostgresURL(database) }
    }

    func run() async throws {
        let backend = try database.map { BenchBackend.postgres(try PostgresURL($0)) } ?? .sqlite
        print(
            "webhook benchmark (\(backend)): \(samples) payments, \(events) events, a backlog of \(backlog); "
                + "\(concurrency) deliveries at once per endpoint"
        )
        let options = {
            var options = WebhookOptions()
            options.allowedHosts = ["127.0.0.1"]
            options.concurrencyPerEndpoint = concurrency
            return options
        }()
        let (samples, events, backlog) = (self.samples, self.events, self.backlog)
        try await BenchReceiver.withRunning { receiver in
            _ = try await backend.measure(servers: 1) { stores, tokens in
                let store = stores[0]
                let shop = try await store.login(email: "shop@bench.example")
                let created = try await store.createWebhookEndpoint(
                    userID: shop.id,
                    url: receiver.url,
                    events: ["payment.succeeded", "deposit.received"]
                )
                receiver.secret.withLock { $0 = created.secret }
                let payer = try await store.login(email: "payer@bench.example")
                _ = try await store.fund(userID: payer.id, amountCents: Cents(samples) * 100)
                let (shopToken, payerToken) = (
                    try await tokens.issue(userID: shop.id), try await tokens.issue(userID: payer.id)
                )

                // (1) and (2), with the server running.
                try await LedgerServer.withRunning(
                    [LedgerServer.Replica(store: store)],
                    .inProcess(tokens: tokens) {
                        $0.developmentMode = false
                        $0.webhooks = options
                    }
                ) { urls in
                    let terminal = LedgerClient(baseURL: urls[0], token: shopToken)
                    let paying = LedgerClient(baseURL: urls[0], token: payerToken)
                    var fromRequest: [Duration] = []
                    var fromAnswer: [Duration] = []
                    for index in 0..<samples {
                        let session = try await terminal.createSession(amountCents: 100)
                        try await paying.lock(sid: session.sid)
                        let start = ContinuousClock.now
                        _ = try await paying.send(sid: session.sid, idempotencyKey: "\(index)")
                        let answered = ContinuousClock.now
                        let arrived = try await receiver.arrival(ofSession: session.sid)
                        fromRequest.append(arrived - start)
                        fromAnswer.append(max(arrived - answered, .zero))
                    }
                    Self.line("payment request → receiver", fromRequest)
                    Self.line("payment answer → receiver", fromAnswer)

                    let before = receiver.count
                    let start = ContinuousClock.now
                    try await Self.deposit(events, into: store, for: shop.id)
                    let written = ContinuousClock.now - start
                    try await receiver.waitFor(count: before + events)
                    let elapsed = ContinuousClock.now - start
                    print(
                        "  events to a fast receiver        "
                            + String(format: "%8.0f events/s", Double(events) / elapsed.seconds)
                            + String(format: "   (written at %.0f/s)", Double(events) / written.seconds)
                    )
                }

                // (3) An outage: the events are written with no server running, then one starts.
                let before = receiver.count
                try await Self.deposit(backlog, into: store, for: shop.id)
                let start = ContinuousClock.now
                try await LedgerServer.withRunning(
                    [LedgerServer.Replica(store: store)],
                    .inProcess(tokens: tokens) {
                        $0.developmentMode = false
                        $0.webhooks = options
                    }
                ) { _ in
                    try await receiver.waitFor(count: before + backlog)
                }
                let elapsed = ContinuousClock.now - start
                print(
                    "  backlog of \(backlog) drained in   "
                        + String(format: "%8.1f s", elapsed.seconds)
                        + String(format: "   (%.0f events/s)", Double(backlog) / elapsed.seconds)
                )
                let invalid = receiver.invalid.load(ordering: .relaxed)
                if invalid > 0 { throw CLIError("\(invalid) deliveries did not verify") }
            }
        }
    }

    /// Credits `count` deposits to `userID` straight into the store, eight at a time.
    static func deposit(_ count: Int, into store: any LedgerStore, for userID: String) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for _ in stride(from: writer, to: count, by: 8) {
                        _ = try await store.fund(userID: userID, amountCents: 1)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    static func line(_ label: String, _ latencies: [Duration]) {
        let figure = BenchFigure(payments: latencies.count, elapsed: .seconds(1), latencies: latencies)
        print(
            "  \(label.padding(toLength: 32, withPad: " ", startingAt: 0))"
                + String(format: " p50 %7.1f ms   p95 %7.1f ms", figure.latency(50), figure.latency(95))
        )
    }
}

/// A receiver in this process that checks each delivery's signature and answers 200 at once, noting when each
/// event arrived.
final class BenchReceiver: Sendable {
    let url: String
    let secret = Mutex<String>("")
    let invalid = Atomic<Int>(0)
    private let arrivals = Mutex<(ids: Set<String>, sessions: [String: ContinuousClock.Instant])>(([], [:]))

    private init(url: String) { self.url = url }

    /// How many distinct events arrived.
    var count: Int { arrivals.withLock { $0.ids.count } }

    /// Runs a receiver on a free loopback port while `body` runs.
    static func withRunning(_ body: @Sendable (BenchReceiver) async throws -> Void) async throws {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let router = Router()
        let box = Mutex<BenchReceiver?>(nil)
        router.post("/hook") { request, _ -> Response in
            let data = Data(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            box.withLock { $0 }?.received(data, signature: request.headers[HTTPField.Name("Gotchu-Signature")!] ?? "")
            return Response(status: .ok)
        }
        let application = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            logger: Logger(label: "bench-receiver") { _ in SwiftLogNoOpLogHandler() }
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.run() }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CLIError("the receiver did not start") }
            let receiver = BenchReceiver(url: "http://127.0.0.1:\(port)/hook")
            box.withLock { $0 = receiver }
            try await body(receiver)
        }
    }

    private func received(_ body: Data, signature: String) {
        let now = ContinuousClock.now
        if !WebhookSignature.isValid(header: signature, body: body, secret: secret.withLock { $0 }) {
            invalid.add(1, ordering: .relaxed)
        }
        guard let event = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let id = event["id"] as? String
        else { return }
        let sid = (event["data"] as? [String: Any])?["sid"] as? String
        arrivals.withLock { arrivals in
            arrivals.ids.insert(id)
            if let sid, arrivals.sessions[sid] == nil { arrivals.sessions[sid] = now }
        }
    }

    /// Waits until `count` distinct events arrived (for at most ten minutes).
    func waitFor(count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(600)
        while self.count < count {
            guard ContinuousClock.now < deadline else {
                throw CLIError("only \(self.count) of \(count) events arrived")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// When the payment event of session `sid` arrived, waiting for it (for at most a minute).
    func arrival(ofSession sid: String) async throws -> ContinuousClock.Instant {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            if let instant = arrivals.withLock({ $0.sessions[sid] }) { return instant }
            guard ContinuousClock.now < deadline else { throw CLIError("no event arrived for session \(sid)") }
            try await Task.sleep(for: .microseconds(200))
        }
    }
}

extension Duration {
    /// In seconds, with the fraction.
    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}
