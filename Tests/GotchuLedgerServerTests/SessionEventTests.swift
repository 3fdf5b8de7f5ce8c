import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import Logging
import PostgresNIO
import Synchronization
import Testing

/// Reads one event stream event by event; each read is bounded only against a hang.
final class EventReader: Sendable {
    private let iterator: Mutex<AsyncThrowingStream<SessionEvent, any Error>.Iterator>
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(_ stream: AsyncThrowingStream<SessionEvent, any Error>) {
        iterator = Mutex(stream.makeAsyncIterator())
    }

    /// The next event, `nil` when the stream finished; throws its failure, or after `seconds` without one.
    func next(within seconds: Double = 30) async throws -> SessionEvent? {
        let box = EventBox(iterator: iterator.withLock { $0 })
        let result: SessionEvent? = try await withThrowingTaskGroup(of: SessionEvent?.self) { group in
            group.addTask { try await box.next() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw TestPostgresError("no event within \(seconds) s")
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        iterator.withLock { $0 = box.iterator }
        return result
    }
}

/// Moves an iterator into one child task and back.
final class EventBox: @unchecked Sendable {
    var iterator: AsyncThrowingStream<SessionEvent, any Error>.Iterator
    init(iterator: AsyncThrowingStream<SessionEvent, any Error>.Iterator) { self.iterator = iterator }
    func next() async throws -> SessionEvent? { try await iterator.next() }
}

@Suite("Session event streams", .timeLimit(.minutes(2)))
struct SessionEventTests {
    /// Limits under which nothing but a change notice can deliver an event within a test: no safety poll.
    static var noticesOnly: LedgerLimits {
        var limits = LedgerLimits.unlimited
        limits.eventSafetyPoll = .seconds(3_600)
        return limits
    }

    @Test(
        "The payee sees advertising, locked, paid, then the end of the stream; notices alone deliver them",
        arguments: StoreKind.available
    )
    func lockedThenPaid(kind: StoreKind) async throws {
        try await TestLedger.with(store: kind, limits: Self.noticesOnly) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 5_000)
            let session = try await payee.createSession(amountCents: 1_250)
            let events = EventReader(payee.sessionEvents(sid: session.sid))
            let first = try #require(try await events.next())
            #expect(first.kind == .advertising)
            #expect(first.session.sid == session.sid)
            #expect(first.session.amountCents == 1_250)
            try await payer.lock(sid: session.sid)
            let locked = try #require(try await events.next())
            #expect(locked.kind == .locked)
            #expect(locked.session.status == .locked)
            #expect(locked.id != first.id)
            _ = try await payer.send(sid: session.sid, idempotencyKey: UUID().uuidString)
            let paid = try #require(try await events.next())
            #expect(paid.kind == .paid)
            #expect(paid.session.paidAt != nil)
            #expect(try await events.next() == nil)
        }
    }

    @Test("An unlock is reported as unlocked, a cancel as cancelled", arguments: StoreKind.available)
    func unlockedThenCancelled(kind: StoreKind) async throws {
        try await TestLedger.with(store: kind, limits: Self.noticesOnly) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 5_000)
            let session = try await payee.createSession(amountCents: 300)
            let events = EventReader(payee.sessionEvents(sid: session.sid))
            #expect(try await events.next()?.kind == .advertising)
            try await payer.lock(sid: session.sid)
            #expect(try await events.next()?.kind == .locked)
            try await payer.unlock(sid: session.sid)
            #expect(try await events.next()?.kind == .unlocked)
            try await payee.cancel(sid: session.sid)
            #expect(try await events.next()?.kind == .cancelled)
            #expect(try await events.next() == nil)
        }
    }

    @Test("Expiry, which nothing writes, is found by the safety poll")
    func expiredBySafetyPoll() async throws {
        var limits = LedgerLimits.unlimited
        limits.eventSafetyPoll = .milliseconds(100)
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let session = try await payee.createSession(amountCents: 300)
            let events = EventReader(payee.sessionEvents(sid: session.sid))
            #expect(try await events.next()?.kind == .advertising)
            ledger.clock.advance(seconds: 301)
            let expired = try #require(try await events.next())
            #expect(expired.kind == .expired)
            #expect(expired.session.status == .expired)
            #expect(try await events.next() == nil)
        }
    }

    @Test("Reconnecting with Last-Event-ID sends only what changed since, named against the state it names")
    func resume() async throws {
        try await TestLedger.with(limits: Self.noticesOnly) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 5_000)
            let session = try await payee.createSession(amountCents: 700)
            let advertising = try #require(try await EventReader(payee.sessionEvents(sid: session.sid)).next())
            #expect(advertising.kind == .advertising)
            // Locked while nobody listened: the resumed stream starts with it.
            try await payer.lock(sid: session.sid)
            let resumed = EventReader(payee.sessionEvents(sid: session.sid, lastEventID: advertising.id))
            let locked = try #require(try await resumed.next())
            #expect(locked.kind == .locked)
            // Resuming at the current state sends nothing until the state moves on; the lock's release is then
            // called an unlock, since the client's last state was locked.
            let current = EventReader(payee.sessionEvents(sid: session.sid, lastEventID: locked.id))
            try await payer.unlock(sid: session.sid)
            let unlocked = try #require(try await current.next())
            #expect(unlocked.kind == .unlocked)
            // An id the server never made is ignored: the current state is sent.
            let stranger = EventReader(payee.sessionEvents(sid: session.sid, lastEventID: "s1.BOGUS.1"))
            #expect(try await stranger.next()?.kind == .advertising)
        }
    }

    @Test("Only the payee may watch; a malformed sid is refused before any lookup")
    func onlyThePayee() async throws {
        try await TestLedger.with { ledger in
            let payee = try await ledger.client("shop@example.com")
            let stranger = try await ledger.client("stranger@example.com")
            let session = try await payee.createSession(amountCents: 300)
            let refusal = await problemKind { try await EventReader(stranger.sessionEvents(sid: session.sid)).next() }
            #expect(refusal == .sessionNotFound)
            #expect(
                await problemKind { try await EventReader(payee.sessionEvents(sid: "not-a-sid")).next() } == .badRequest
            )
            let anonymous = try await ledger.raw("GET", "/sessions/\(session.sid)/events")
            #expect(anonymous.status == 401)
            #expect(TestLedger.problemKind(anonymous.body) == .unauthorized)
        }
    }

    @Test("Streams per user are bounded: the next is told 429 in a problem, and a closed one frees its place")
    func boundPerUser() async throws {
        var limits = LedgerLimits.unlimited
        limits.eventStreamsPerUser = 2
        limits.eventHeartbeat = .milliseconds(100)
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let other = try await ledger.client("other@example.com")
            let session = try await payee.createSession(amountCents: 300)
            let otherSession = try await other.createSession(amountCents: 300)
            let first = EventReader(payee.sessionEvents(sid: session.sid))
            let second = EventReader(payee.sessionEvents(sid: session.sid))
            #expect(try await first.next()?.kind == .advertising)
            #expect(try await second.next()?.kind == .advertising)
            let refused = try await ledger.raw(
                "GET",
                "/sessions/\(session.sid)/events",
                headers: ["Authorization": "Bearer \(try #require(payee.token))"]
            )
            #expect(refused.status == 429)
            #expect(refused.headers["content-type"] == Problem.mediaType)
            #expect(refused.headers["retry-after"] != nil)
            let problem = try APIJSON.decoder().decode(Problem.self, from: refused.body)
            #expect(problem.kind == .rateLimited)
            #expect(problem.detail?.contains("at most 2 event streams") == true)
            // Another user is not counted against this one.
            #expect(try await EventReader(other.sessionEvents(sid: otherSession.sid)).next()?.kind == .advertising)
            // The client lets go of one; the server notices at its next heartbeat and the place is free again.
            _ = consume first
            var reopened: SessionEvent?
            // The deadline only bounds a hang.
            let deadline = ContinuousClock.now + .seconds(90)
            while reopened == nil, ContinuousClock.now < deadline {
                do {
                    reopened = try await EventReader(payee.sessionEvents(sid: session.sid)).next()
                } catch let error as LedgerClientError where error.problemKind == .rateLimited {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            #expect(reopened?.kind == .advertising)
        }
    }

    @Test("A quiet stream sends heartbeats, and stays the same stream through them")
    func heartbeats() async throws {
        var limits = Self.noticesOnly
        limits.eventHeartbeat = .milliseconds(50)
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let session = try await payee.createSession(amountCents: 300)
            let connection = try LoopbackConnection(port: try #require(ledger.url.port))
            try connection.send(
                "GET /sessions/\(session.sid)/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + "Authorization: Bearer \(try #require(payee.token))\r\nAccept: text/event-stream\r\n\r\n"
            )
            try await connection.waitFor("event: advertising")
            try await connection.waitFor(": keep-alive", occurrences: 3)
            try await payee.cancel(sid: session.sid)
            try await connection.waitFor("event: cancelled")
        }
    }

    @Test("The client takes a stream silent past its limit for lost")
    func silenceIsLoss() async throws {
        var limits = Self.noticesOnly
        limits.eventHeartbeat = .seconds(3_600)
        try await TestLedger.with(limits: limits) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let session = try await payee.createSession(amountCents: 300)
            let events = EventReader(payee.sessionEvents(sid: session.sid, quietLimit: .milliseconds(300)))
            // However slow the machine, the stream ends in a silence failure, with nothing but the first state before.
            var kinds: [SessionEventKind] = []
            do {
                while let event = try await events.next() { kinds.append(event.kind) }
                Issue.record("a silent stream ended without failing")
            } catch let error as LedgerClientError {
                #expect(error.description.contains("silent"))
            }
            #expect(kinds.allSatisfy { $0 == .advertising })
        }
    }

    @Test(
        "An EID rotation notice becomes an eid-rotated event with the state unchanged",
        arguments: StoreKind.available
    )
    func eidRotated(kind: StoreKind) async throws {
        try await TestLedger.with(store: kind, limits: Self.noticesOnly) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let session = try await payee.createSession(amountCents: 300)
            let events = EventReader(payee.sessionEvents(sid: session.sid))
            let first = try #require(try await events.next())
            switch ledger.database {
            case .sqlite:
                ledger.store.changes.publish(sid: session.sid, .eidRotated)
            case .postgres(let url):
                // As another server's rotation would announce it: a notification on the channel, heard by LISTEN.
                let payload = SessionNotice.payload(sid: session.sid, .eidRotated)
                try await TestPostgres.withClient(url) { client in
                    _ = try await client.query(
                        "SELECT pg_notify(\(PostgresLedgerBackend.changeChannel), \(payload))"
                    ).collect()
                }
            }
            let rotated = try #require(try await events.next())
            #expect(rotated.kind == .eidRotated)
            #expect(rotated.id == first.id)
            #expect(rotated.session == first.session)
        }
    }

    @Test("A change whose notice never comes is found by the safety poll: two servers on one SQLite file")
    func convergesWithoutNotice() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-events")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        // Two stores, two broadcasters, nothing relaying between them: only reading again tells one of the other.
        let stores = try (0..<2).map { _ in try SQLiteLedgerStore(path: path, busyTimeout: .seconds(120)) }
        try await stores[0].migrate()
        var limits = LedgerLimits.unlimited
        limits.eventSafetyPoll = .milliseconds(200)
        let tokens = try await TokenAuthority(secret: TestLedger.secret)
        try await LedgerServer.withRunning(
            stores.map { LedgerServer.Replica(store: $0) },
            .inProcess(tokens: tokens) { $0.limits = limits }
        ) { urls in
            var payee = LedgerClient(baseURL: urls[0])
            payee.token = try await payee.devLogin(email: "shop@example.com").token
            var payer = LedgerClient(baseURL: urls[1])
            payer.token = try await payer.devLogin(email: "payer@example.com").token
            _ = try await payer.fund(amountCents: 1_000)
            let session = try await payee.createSession(amountCents: 400)
            let events = EventReader(payee.sessionEvents(sid: session.sid))
            #expect(try await events.next()?.kind == .advertising)
            try await payer.lock(sid: session.sid)
            _ = try await payer.send(sid: session.sid, idempotencyKey: UUID().uuidString)
            // The lock may fall between two reads and never be seen; the payment is final and must be.
            var last: SessionEvent?
            while let event = try await events.next() { last = event }
            #expect(last?.kind == .paid)
        }
    }

    @Test("Graceful shutdown ends open streams instead of waiting for them")
    func shutdownEndsStreams() async throws {
        let clock = ManualClock()
        let ended = try await TestStore.with(.sqlite, clock: clock) { store, _, services in
            let tokens = try await TokenAuthority(secret: TestLedger.secret, clock: { clock.now() })
            let reader = try await LedgerServer.withRunning(
                store: store,
                .inProcess(tokens: tokens) { $0.limits = Self.noticesOnly }
            ) { url in
                var payee = LedgerClient(baseURL: url)
                payee.token = try await payee.devLogin(email: "shop@example.com").token
                let session = try await payee.createSession(amountCents: 300)
                let events = EventReader(payee.sessionEvents(sid: session.sid))
                #expect(try await events.next()?.kind == .advertising)
                #expect(store.changes.watcherCount == 1)
                return events
            }
            // withRunning returned: the server shut down with the stream open. The client sees its end.
            do {
                return try await reader.next() == nil
            } catch {
                return true
            }
        }
        #expect(ended)
    }

    @Test("A notice that lands as a watcher's wait times out is returned by that wait or the next, never lost")
    func noticeAtTimeoutIsKept() async {
        let changes = SessionChanges()
        let watcher = changes.watch(sid: "s")
        var lost = 0
        // Each notice is published about when the wait runs out, so the two race in both orders many times. On a
        // starved machine every round takes long: the run stops after 20 s, however many rounds that was.
        let deadline = ContinuousClock.now + .seconds(20)
        for round in 0..<500 where ContinuousClock.now < deadline {
            async let waited = watcher.wait(for: .microseconds(200))
            try? await Task.sleep(for: .microseconds(100 + round % 200))
            changes.publish(sid: "s")
            let first = await waited
            let second = first == .timedOut ? await watcher.wait(for: .milliseconds(50)) : .timedOut
            if first == .timedOut && second == .timedOut { lost += 1 }
        }
        #expect(lost == 0)
        withExtendedLifetime(watcher) {}
    }
}

@Suite(
    "Session event streams across replicas on one PostgreSQL database",
    .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason),
    .timeLimit(.minutes(2))
)
struct ReplicaEventTests {
    @Test("A payment through one replica reaches the stream on the other through LISTEN/NOTIFY")
    func acrossReplicas() async throws {
        try await TestPostgres.withDatabase { url in
            let logger = Logger(label: "test-replicas") { _ in SwiftLogNoOpLogHandler() }
            let tokens = try await TokenAuthority(secret: TestLedger.secret)
            let stores = (0..<2).map { _ in
                PostgresLedgerStore(
                    url: url,
                    maximumConnections: 8,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
            }
            try await LedgerServer.withRunning(
                stores.map { LedgerServer.Replica(store: $0, services: [$0.client]) },
                .inProcess(tokens: tokens) { $0.limits = SessionEventTests.noticesOnly }
            ) { urls in
                var payee = LedgerClient(baseURL: urls[0])
                payee.token = try await payee.devLogin(email: "shop@example.com").token
                var payer = LedgerClient(baseURL: urls[1])
                payer.token = try await payer.devLogin(email: "payer@example.com").token
                _ = try await payer.fund(amountCents: 5_000)
                let session = try await payee.createSession(amountCents: 900)
                let events = EventReader(payee.sessionEvents(sid: session.sid))
                #expect(try await events.next()?.kind == .advertising)
                try await payer.lock(sid: session.sid)
                #expect(try await events.next()?.kind == .locked)
                _ = try await payer.send(sid: session.sid, idempotencyKey: UUID().uuidString)
                let paid = try #require(try await events.next())
                #expect(paid.kind == .paid)
                #expect(paid.session.status == .paid)
                // A stream that reconnects to the other replica with its last id is told nothing new, and ends.
                var resumedPayee = LedgerClient(baseURL: urls[1])
                resumedPayee.token = payee.token
                #expect(
                    try await EventReader(resumedPayee.sessionEvents(sid: session.sid, lastEventID: paid.id)).next()
                        == nil
                )
            }
        }
    }
}

@Suite("Server-sent event parsing", .timeLimit(.minutes(10)))
struct ServerSentEventParserTests {
    @Test("Events split anywhere across chunks, CRLF or LF, comments and retry fields")
    func chunks() throws {
        let text =
            "retry: 2000\r\n\r\n: keep-alive\n\nevent: locked\nid: s1.LOCKED.5\ndata: {\"a\":\ndata: 1}\n\n"
            + "data: plain\r\n\r\n"
        let bytes = Array(text.utf8)
        for split in 0...bytes.count {
            var parser = ServerSentEventParser()
            let events = try parser.feed(bytes[..<split]) + parser.feed(bytes[split...])
            #expect(
                events == [
                    .init(type: "locked", data: "{\"a\":\n1}", lastEventID: "s1.LOCKED.5"),
                    .init(type: "message", data: "plain", lastEventID: "s1.LOCKED.5"),
                ]
            )
            #expect(parser.retryMilliseconds == 2000)
        }
    }

    @Test("A line without end is refused past its bound")
    func boundedLine() {
        var parser = ServerSentEventParser()
        #expect(throws: ServerSentEventParser.Malformed.self) {
            _ = try parser.feed(Array(repeating: UInt8(ascii: "x"), count: ServerSentEventParser.maximumLineLength + 1))
        }
    }

    @Test("A server without the route is told apart from a refusal of this stream")
    func unsupported() {
        #expect(LedgerClient.eventStreamsUnsupported(.problem(Problem(.notFound))))
        #expect(LedgerClient.eventStreamsUnsupported(.problem(Problem(.methodNotAllowed))))
        #expect(LedgerClient.eventStreamsUnsupported(.unexpectedResponse(status: 404, body: "")))
        #expect(!LedgerClient.eventStreamsUnsupported(.problem(Problem(.sessionNotFound))))
        #expect(!LedgerClient.eventStreamsUnsupported(.problem(Problem(.rateLimited))))
        #expect(!LedgerClient.eventStreamsUnsupported(.transport("connection refused")))
    }

    @Test("Notification payloads: ours are read, anything else is not")
    func payloads() {
        let sid = "0f8fad5b-d9cb-469f-a165-70867728950e"
        #expect(SessionNotice.parse(payload: sid)! == (sid, .changed))
        #expect(SessionNotice.parse(payload: SessionNotice.payload(sid: sid, .eidRotated))! == (sid, .eidRotated))
        #expect(SessionNotice.parse(payload: "\(sid) exploded") == nil)
        #expect(SessionNotice.parse(payload: "'; DROP TABLE sessions; --") == nil)
        #expect(SessionNotice.parse(payload: "") == nil)
    }
}
