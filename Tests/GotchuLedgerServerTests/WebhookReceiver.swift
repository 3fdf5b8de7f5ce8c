import Foundation
import GotchuLedgerServer
import GotchuTesting
import Testing

/// A real receiver process for the webhook tests: `Tests/webhook_receiver.py` on a loopback port, verifying each
/// delivery's signature with the documented Python snippet (not the server's code) and reporting what it got.
final class WebhookReceiver: Sendable {
    /// One request the receiver got, as it reported it.
    struct Delivery: Decodable, Sendable, Hashable {
        var id: String?
        var type: String?
        /// Whether the signature verified with one of the secrets the receiver was given.
        var valid: Bool
        /// The status it answered with.
        var answered: Int
        var signature: String
        var body: String
        var path: String
        /// Whether the event's id had been answered 2xx before.
        var duplicate: Bool
        /// Whether another request of the same event was in progress when this one arrived.
        var overlap: Bool

        /// The body's `data` object.
        var data: [String: Any] {
            let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            return object?["data"] as? [String: Any] ?? [:]
        }

        /// The body's `created`.
        var created: Int? {
            let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            return object?["created"] as? Int
        }
    }

    let host: String
    let port: Int
    private let process: RunningCommand
    /// The file of the secrets it accepts, one a line; a receiver restarted with it accepts the same.
    let secrets: URL

    /// The endpoint URL to register: `http://HOST:PORT/hook`.
    var url: String { "http://\(host):\(port)/hook" }

    private init(host: String, port: Int, process: RunningCommand, secrets: URL) {
        self.host = host
        self.port = port
        self.process = process
        self.secrets = secrets
    }

    /// The receivers' source, beside the tests.
    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("webhook_receiver.py").path
    }

    /// Starts a receiver on `port` (a free one for 0) that answers its first requests with `answers`, then 200,
    /// after `delay` seconds each and, with `hold`, not before that file exists; it accepts the secrets in
    /// `secrets` (a new file in `directory` by default).
    static func start(
        in directory: TemporaryDirectory,
        host: String = "127.0.0.1",
        port: Int = 0,
        answers: [Int] = [],
        delay: Double = 0,
        hold: URL? = nil,
        secrets: URL? = nil
    ) async throws -> WebhookReceiver {
        let python = try #require(TestPython.executable, "no Python: \(TestPython.installHint)")
        let secrets = secrets ?? directory.url.appendingPathComponent("secrets-\(UUID().uuidString)")
        var arguments = [script, "--host", host, "--port", String(port), "--secrets", secrets.path]
        if !answers.isEmpty { arguments += ["--answers", answers.map(String.init).joined(separator: ",")] }
        if delay > 0 { arguments += ["--delay", String(delay)] }
        if let hold { arguments += ["--hold", hold.path] }
        let process = try RunningCommand(URL(fileURLWithPath: python), arguments)
        let line = try await process.waitForLine { $0.hasPrefix("listening on ") }
        let bound = try #require(Int(line.dropFirst("listening on ".count)))
        return WebhookReceiver(host: host, port: bound, process: process, secrets: secrets)
    }

    /// Makes the receiver accept deliveries signed with `secret` (besides those it accepts already).
    func trust(_ secret: String?) throws {
        let secret = try #require(secret, "the ledger showed no secret")
        let handle = try FileHandle(forWritingTo: secrets, creatingIfMissing: true)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((secret + "\n").utf8))
    }

    /// A request as it arrived, before it was answered.
    struct Arrival: Decodable, Sendable, Hashable {
        /// The event's id, from the `Gotchu-Event-Id` header.
        var arrived: String?
        /// How many requests were in progress at the receiver, this one included.
        var concurrent: Int
    }

    /// Every request as it arrived.
    var arrivals: [Arrival] {
        process.lines.filter { $0.hasPrefix("{\"arrived\"") }.compactMap {
            try? JSONDecoder().decode(Arrival.self, from: Data($0.utf8))
        }
    }

    /// Every request so far.
    var deliveries: [Delivery] {
        process.lines.filter { $0.hasPrefix("{") }.compactMap {
            try? JSONDecoder().decode(Delivery.self, from: Data($0.utf8))
        }
    }

    /// The requests answered 2xx, one per event id: what a receiver that drops duplicates handled.
    var events: [Delivery] {
        var seen = Set<String>()
        return deliveries.filter { (200..<300).contains($0.answered) && seen.insert($0.id ?? "").inserted }
    }

    /// Waits until `condition` holds of the deliveries; fails the test (and throws) if it never does.
    @discardableResult
    func wait(
        timeout: Duration = .seconds(120),
        _ what: String,
        until condition: ([Delivery]) -> Bool
    ) async throws -> [Delivery] {
        let held = try await eventually(timeout: timeout) { condition(self.deliveries) }
        if !held {
            Issue.record(
                "the receiver never got \(what); it got: \(deliveries.map { "\($0.type ?? "?") \($0.answered)" })"
            )
            throw TestingError("the receiver never got \(what)")
        }
        return deliveries
    }

    /// Waits for an accepted event of `type`, and returns it.
    func event(_ type: String, timeout: Duration = .seconds(120)) async throws -> Delivery {
        try await wait(timeout: timeout, "a \(type) event") { deliveries in
            deliveries.contains { $0.type == type && (200..<300).contains($0.answered) }
        }
        return try #require(events.first { $0.type == type })
    }

    /// Stops the receiver (SIGKILL: nothing it leaves matters) and waits for it.
    func stop() async {
        _ = try? await process.stop(signal: SIGKILL)
    }
}

extension FileHandle {
    /// A handle writing to `url`, made empty first when missing.
    fileprivate convenience init(forWritingTo url: URL, creatingIfMissing: Bool) throws {
        if creatingIfMissing, !FileManager.default.fileExists(atPath: url.path) {
            try Data().write(to: url)
        }
        try self.init(forWritingTo: url)
    }
}
