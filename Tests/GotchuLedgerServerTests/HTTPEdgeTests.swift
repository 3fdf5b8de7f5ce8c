import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerSQLite
import GotchuTesting
import Logging
import Synchronization
import Testing

@testable import GotchuLedgerServer

@Suite("The HTTP edge: connection cap, timeouts, HEAD, and requests the parser cannot take", .timeLimit(.minutes(10)))
struct HTTPEdgeTests {
    /// Limits with a small cap and short timeouts; what a test does not exercise is long enough not to interfere.
    static func limits(
        maximumOpenConnections: Int = 512,
        idleTimeout: Duration = .seconds(60),
        readTimeout: Duration = .seconds(60)
    ) -> LedgerLimits {
        var limits = LedgerLimits.unlimited
        limits.maximumOpenConnections = maximumOpenConnections
        limits.idleTimeout = idleTimeout
        limits.readTimeout = readTimeout
        return limits
    }

    static func problem(_ body: Data) throws -> Problem { try APIJSON.decoder().decode(Problem.self, from: body) }

    static let healthz = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    @Test("40 idle connections against a cap of 32: a fresh one still gets an answer, 32 are served, the rest told 503")
    func connectionCap() async throws {
        try await TestLedger.with(limits: Self.limits(maximumOpenConnections: 32)) { ledger in
            let port = ledger.url.port!
            var idle: [LoopbackConnection] = []
            for _ in 0..<40 { idle.append(try LoopbackConnection(port: port)) }
            // A fresh connection gets an answer, not a hang: 503 if the idle ones hold every slot. (Connections are
            // admitted on several event loops, so which of the 41 are the 32 served is not fixed; how many is.)
            let fresh = try LoopbackConnection(port: port)
            try fresh.send(Self.healthz)
            var statuses = [try await fresh.readResponse().status]
            var served: [LoopbackConnection] = statuses == [200] ? [fresh] : []
            for connection in idle {
                // A refused connection was answered on arrival and reads nothing more; the send may find it closed.
                try? connection.send(Self.healthz)
                let response = try await connection.readResponse()
                statuses.append(response.status)
                if response.status == 200 {
                    served.append(connection)
                } else {
                    #expect(response.status == 503)
                    #expect(response.headers["content-type"] == Problem.mediaType)
                    #expect(response.headers["retry-after"] == "1")
                    #expect(response.headers["connection"] == "close")
                    #expect(try Self.problem(response.body).kind == .unavailable)
                    try await connection.waitForClose()
                }
            }
            #expect(statuses.filter { $0 == 200 }.count == 32, "\(statuses)")
            #expect(statuses.filter { $0 == 503 }.count == 9, "\(statuses)")

            // Closing ten frees ten slots: a new client is served (its slot comes free when the server sees the close).
            for connection in served[..<10] { connection.disconnect() }
            let deadline = ContinuousClock.now + .seconds(10)
            var status = 0
            while status != 200 && ContinuousClock.now < deadline {
                let client = try LoopbackConnection(port: port)
                try client.send(Self.healthz)
                status = try await client.readResponse().status
            }
            #expect(status == 200)
        }
    }

    @Test("A connection that sends nothing, or nothing after its answer, is closed after the idle timeout")
    func idleTimeout() async throws {
        try await TestLedger.with(limits: Self.limits(idleTimeout: .milliseconds(200))) { ledger in
            let silent = try LoopbackConnection(port: ledger.url.port!)
            try await silent.waitForClose()
            let keptAlive = try LoopbackConnection(port: ledger.url.port!)
            try keptAlive.send(Self.healthz)
            #expect(try await keptAlive.readResponse().status == 200)
            try await keptAlive.waitForClose()
        }
    }

    @Test("A head that stops half-way is dropped after the read timeout (the idle timeout is far longer)")
    func slowHead() async throws {
        try await TestLedger.with(limits: Self.limits(readTimeout: .milliseconds(300))) { ledger in
            let connection = try LoopbackConnection(port: ledger.url.port!)
            try connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            #expect(try await connection.waitForClose().isEmpty)
        }
    }

    @Test("On a kept-alive connection, a request's read timeout counts from its own first byte, not the one before's")
    func readTimeoutPerRequest() async throws {
        try await TestLedger.with(limits: Self.limits(readTimeout: .milliseconds(600))) { ledger in
            let connection = try LoopbackConnection(port: ledger.url.port!)
            try connection.send(Self.healthz)
            #expect(try await connection.readResponse().status == 200)
            try await Task.sleep(for: .milliseconds(400))
            // The first request's time would run out 200 ms into this one's.
            let started = ContinuousClock.now
            try connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            #expect(try await connection.waitForClose().isEmpty)
            #expect(ContinuousClock.now - started >= .milliseconds(550))
        }
    }

    @Test("A body trickled a byte at a time is dropped after the read timeout, counted from the request's first byte")
    func slowBody() async throws {
        try await TestLedger.with(limits: Self.limits(readTimeout: .milliseconds(500))) { ledger in
            let connection = try LoopbackConnection(port: ledger.url.port!)
            try connection.send(
                "POST /sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 4096\r\n\r\n{\"eid\":\""
            )
            // Each byte is activity, so only a deadline on the whole request ends this; the test's own bound is far off.
            let deadline = ContinuousClock.now + .seconds(10)
            var closed = false
            while !closed && ContinuousClock.now < deadline {
                do {
                    try connection.send("a")
                } catch {
                    closed = true
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            try await connection.waitForClose()
        }
    }

    @Test("HTTP/0.9, a version-less request line, is answered 400 problem+json and closed, not held open")
    func http09() async throws {
        try await TestLedger.with { ledger in
            let connection = try LoopbackConnection(port: ledger.url.port!)
            try connection.send("GET /healthz\r\n")
            let response = try await connection.readResponse()
            #expect(response.status == 400)
            #expect(response.headers["content-type"] == Problem.mediaType)
            #expect(response.headers["connection"] == "close")
            #expect(try Self.problem(response.body).kind == .badRequest)
            #expect(try await connection.waitForClose().isEmpty)
        }
    }

    @Test(
        "A head the parser refuses is answered 400 problem+json and closed",
        arguments: [
            "GET /healthz HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "G@T /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            "GET /healthz HTTP/7.1\r\nHost: 127.0.0.1\r\n\r\n",
        ]
    )
    func malformedHead(request: String) async throws {
        try await TestLedger.with { ledger in
            let connection = try LoopbackConnection(port: ledger.url.port!)
            try connection.send(request)
            let response = try await connection.readResponse()
            #expect(response.status == 400)
            #expect(response.headers["content-type"] == Problem.mediaType)
            #expect(try Self.problem(response.body).kind == .badRequest)
            #expect(try await connection.waitForClose().isEmpty)
        }
    }

    @Test("A body that breaks the chunked framing is answered 400 problem+json by the route, then closed")
    func malformedBody() async throws {
        try await TestLedger.with { ledger in
            let connection = try LoopbackConnection(port: ledger.url.port!)
            try connection.send(
                "POST /sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "5\r\n{\"eid\r\nzz\r\n"
            )
            let response = try await connection.readResponse()
            #expect(response.status == 400)
            #expect(response.headers["content-type"] == Problem.mediaType)
            #expect(try Self.problem(response.body).kind == .badRequest)
            try await connection.waitForClose()
        }
    }

    @Test("A broken request after a good one on the same connection: the first is answered, then 400, then close")
    func malformedAfterKeepAlive() async throws {
        try await TestLedger.with { ledger in
            let connection = try LoopbackConnection(port: ledger.url.port!)
            try connection.send(Self.healthz)
            #expect(try await connection.readResponse().status == 200)
            try connection.send("GET /healthz HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n")
            let refused = try await connection.readResponse()
            #expect(refused.status == 400)
            #expect(refused.headers["content-type"] == Problem.mediaType)
            try await connection.waitForClose()
        }
    }

    @Test("HEAD on a GET path is answered as GET without a body; on a POST path it is 405 with Allow")
    func head() async throws {
        try await TestLedger.with { ledger in
            let connection = try LoopbackConnection(port: ledger.url.port!)
            try connection.send("HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let head = try await connection.readResponse(head: true)
            #expect(head.status == 200)
            #expect(head.headers["content-type"] == "application/json")
            // The length of the body GET would send, and none sent: the next answer on the connection parses.
            try connection.send(Self.healthz)
            let get = try await connection.readResponse()
            #expect(get.status == 200)
            #expect(head.headers["content-length"] == String(get.body.count))

            let openAPI = try await ledger.raw("HEAD", "/openapi.yaml")
            #expect(openAPI.status == 200)
            #expect(openAPI.body.isEmpty)
            #expect(try await ledger.raw("HEAD", "/wallet/me").status == 401)
            let post = try await ledger.raw("HEAD", "/sessions/create")
            #expect(post.status == 405)
            #expect(post.headers["allow"] == "POST")
            #expect(try await ledger.raw("PUT", "/healthz").headers["allow"] == "GET, HEAD")
        }
    }

    @Test("A client that hangs up mid-body is logged as a disconnect at info level, not an error or a 500")
    func hangUpMidBody() async throws {
        let records = LogRecords()
        let logger = Logger(label: "edge-test") { _ in CapturingLogHandler(records) }
        let directory = try TemporaryDirectory(prefix: "gotchu-edge")
        defer { directory.remove() }
        let store = try SQLiteLedgerStore(path: directory.url.appendingPathComponent("ledger.sqlite").path)
        let tokens = try await TokenAuthority(secret: TestLedger.secret)
        try await LedgerServer.withRunning(store: store, .inProcess(tokens: tokens), logger: logger) { url in
            let connection = try LoopbackConnection(port: url.port!)
            try connection.send(
                "POST /sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 100\r\n\r\n{\"eid\":"
            )
            // The server reads the head and the body's start, then the end of the stream: the body never ends.
            connection.disconnect()
            let deadline = ContinuousClock.now + .seconds(10)
            while records.all.first(where: { $0.message == "request abandoned" }) == nil {
                guard ContinuousClock.now < deadline else { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            let abandoned = try #require(records.all.first { $0.message == "request abandoned" })
            #expect(abandoned.level == .info)
            #expect(abandoned.metadata["reason"] == "client disconnected")
            #expect(abandoned.metadata["route"] == "/sessions/resolve")
            #expect(records.all.filter { $0.level >= .error }.isEmpty, "\(records.all)")
            #expect(records.all.allSatisfy { $0.metadata["status"] != "500" })

            #expect(abandoned.metadata["status"] == nil)

            // And the server keeps serving, with one line for the request.
            let client = try LoopbackConnection(port: url.port!)
            try client.send(Self.healthz)
            #expect(try await client.readResponse().status == 200)
            let served = try #require(records.all.first { $0.message == "request" && $0.metadata["status"] == "200" })
            #expect(served.metadata["method"] == "GET")
            let latency = try #require(served.metadata["latency_ms"].map { "\($0)" })
            #expect(latency.wholeMatch(of: /[0-9]+\.[0-9]{2}/) != nil, "\(latency)")
        }
    }

    @Test("Request latencies are logged in milliseconds with two decimals, rounded, never negative")
    func latencyText() {
        #expect(Duration.zero.millisecondsText == "0.00")
        #expect(Duration.microseconds(4).millisecondsText == "0.00")
        #expect(Duration.microseconds(5).millisecondsText == "0.01")
        #expect(Duration.microseconds(1_234).millisecondsText == "1.23")
        #expect(Duration.microseconds(1_235).millisecondsText == "1.24")
        #expect(Duration.milliseconds(12).millisecondsText == "12.00")
        #expect((Duration.seconds(3) + .microseconds(70)).millisecondsText == "3000.07")
        #expect(Duration.milliseconds(-5).millisecondsText == "0.00")
        #expect(Duration.seconds(Int64.max).millisecondsText == "1000000000000.00")
    }

    @Test("Connection slots: served up to the cap, then refused up to a bound, then dropped; a close frees its slot")
    func slots() {
        let logger = Logger(label: "slots") { _ in SwiftLogNoOpLogHandler() }
        let slots = ConnectionSlots(maximum: 2)
        #expect(slots.admit(logger: logger) == .serve)
        #expect(slots.admit(logger: logger) == .serve)
        for _ in 0..<ConnectionSlots.maximumRefusing { #expect(slots.admit(logger: logger) == .refuse) }
        #expect(slots.admit(logger: logger) == .drop)
        slots.release(.refuse, logger: logger)
        #expect(slots.admit(logger: logger) == .refuse)
        slots.release(.serve, logger: logger)
        #expect(slots.served == 1)
        #expect(slots.admit(logger: logger) == .serve)
    }

    @Test("Answers written below the codec carry an IMF-fixdate")
    func httpDate() {
        #expect(EdgeResponse.httpDate(Date(timeIntervalSince1970: 784_111_777)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(EdgeResponse.httpDate(Date(timeIntervalSince1970: 1_800_000_000.9)) == "Fri, 15 Jan 2027 08:00:00 GMT")
    }

    @Test("A rate too slow for Int: the wait is capped, nothing traps, and clients are told to come back in a day")
    func tinyRate() async throws {
        var limits = LedgerLimits.unlimited
        limits.resolvePerAddress = RateLimit(perSecond: 1e-20, burst: 1)
        try await TestLedger.with(limits: limits) { ledger in
            let body = #"{"eid":"0123456789"}"#
            let auth = ["Authorization": "Bearer " + (try await ledger.client("payer@example.com").token ?? "")]
            #expect(try await ledger.raw("POST", "/sessions/resolve", body: body, headers: auth).status == 404)
            let refused = try await ledger.raw("POST", "/sessions/resolve", body: body, headers: auth)
            #expect(refused.status == 429)
            #expect(refused.headers["retry-after"] == String(RateLimiter.maximumRetryAfter))
        }
    }
}

/// What a ``CapturingLogHandler`` recorded.
final class LogRecords: Sendable {
    struct Record: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let records = Mutex<[Record]>([])

    var all: [Record] { records.withLock { $0 } }

    func append(_ record: Record) { records.withLock { $0.append(record) } }
}

/// A log handler that keeps every entry, metadata flattened to strings.
struct CapturingLogHandler: LogHandler {
    let records: LogRecords
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(_ records: LogRecords) { self.records = records }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var flattened: [String: String] = [:]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            flattened[key] = "\(value)"
        }
        records.append(.init(level: event.level, message: "\(event.message)", metadata: flattened))
    }
}
