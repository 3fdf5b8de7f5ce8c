import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer
import Logging
import ServiceLifecycle
import Testing

/// Several servers, each with its own store and connection pool, on one PostgreSQL database and its clock.
struct TestReplicas: Sendable {
    let urls: [URL]
    let store: PostgresLedgerStore
    let tokens: TokenAuthority

    /// Runs `body` against `count` started servers on a fresh database, judged by the database's clock.
    static func with<T: Sendable>(
        count: Int,
        policy: LedgerPolicy = LedgerPolicy(),
        _ body: @Sendable (TestReplicas) async throws -> T
    ) async throws -> T {
        try await TestPostgres.withDatabase { url in
            let logger = Logger(label: "test-replicas") { _ in SwiftLogNoOpLogHandler() }
            let tokens = try await TokenAuthority(secret: TestLedger.secret)
            let stores = (0..<count).map { _ in
                PostgresLedgerStore(
                    url: url,
                    policy: policy,
                    maximumConnections: 8,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
            }
            return try await LedgerServer.withRunning(
                stores.map { LedgerServer.Replica(store: $0, services: [$0.client]) },
                .inProcess(tokens: tokens)
            ) { urls in
                try await body(TestReplicas(urls: urls, store: stores[0], tokens: tokens))
            }
        }
    }

    /// A client of replica `replica` logged in as `email`, funded with `cents` when positive, that waits `timeout`
    /// seconds of the server's silence.
    func client(
        _ email: String,
        replica: Int,
        funded cents: Cents = 0,
        timeout: TimeInterval = 10
    ) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: urls[replica % urls.count], timeout: timeout)
        client.token = try await client.devLogin(email: email).token
        if cents > 0 { _ = try await client.fund(amountCents: cents) }
        return client
    }
}

@Suite(
    "Replicas on one PostgreSQL database",
    .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason),
    .timeLimit(.minutes(10))
)
struct ReplicaTests {
    /// Every answer's status, so a 500 (a deadlock or a serialization failure surfacing) cannot hide.
    enum Answer: Hashable {
        case paid
        case refused(Int, ProblemKind?)
    }

    @Test("2 replicas, 50 payers race for one session: exactly one payment, no 5xx")
    func raceAcrossReplicas() async throws {
        try await TestReplicas.with(count: 2) { replicas in
            let payee = try await replicas.client("payee@example.com", replica: 0)
            var payers: [LedgerClient] = []
            for index in 0..<50 {
                payers.append(try await replicas.client("payer\(index)@example.com", replica: index, funded: 1_000))
            }
            let session = try await payee.createSession(amountCents: 700)
            let answers = await withTaskGroup(of: Answer.self) { group in
                for payer in payers {
                    group.addTask {
                        do {
                            try await payer.lock(sid: session.sid)
                            _ = try await payer.send(sid: session.sid, idempotencyKey: UUID().uuidString)
                            return .paid
                        } catch {
                            return Self.refusal(error)
                        }
                    }
                }
                return await group.reduce(into: [Answer]()) { $0.append($1) }
            }
            #expect(answers.filter { $0 == .paid }.count == 1)
            let refusals = Set(answers.filter { $0 != .paid })
            #expect(
                refusals.isSubset(of: [.refused(409, .sessionLocked), .refused(409, .sessionAlreadyPaid)]),
                "\(refusals)"
            )
            #expect(try await payee.wallet().availableCents == 700)
            let audit = try await replicas.store.audit()
            #expect(audit.isHealthy, "\(audit)")
            #expect(audit.entryCount == 50 * 2 + 2)
        }
    }

    @Test("2 replicas, payments crossing in both directions between the same wallets: no deadlock, no 5xx")
    func crossingPayments() async throws {
        // Payers hold many locks at once here; the cap on locks held has its own test.
        var policy = LedgerPolicy()
        policy.maximumLocksPerPayer = 120
        // Real time: on a starved machine a payment's lock and send can be far apart, and a lapse is not what this
        // test is about (lapses have tests on injected clocks).
        policy.lockLifetime = .seconds(3_600)
        policy.sessionLifetime = .seconds(86_400)
        try await TestReplicas.with(count: 2, policy: policy) { replicas in
            var users: [LedgerClient] = []
            for index in 0..<6 {
                // Requests queue behind each other by design: on a loaded machine one may wait long for its turn.
                users.append(
                    try await replicas.client("u\(index)@example.com", replica: index, funded: 100_000, timeout: 120)
                )
            }
            let clients = users
            let answers = await withTaskGroup(of: Answer.self) { group in
                for index in 0..<120 {
                    group.addTask {
                        // Pairs (a, b) and (b, a) run at once, so their wallet locks are requested in both orders.
                        let payee = clients[index % 6]
                        let payer = clients[(index % 6 + 1 + (index / 6) % 5) % 6]
                        do {
                            let session = try await payee.createSession(amountCents: Cents(100 + index))
                            try await payer.lock(sid: session.sid)
                            _ = try await payer.send(sid: session.sid, idempotencyKey: "x\(index)")
                            return .paid
                        } catch {
                            return Self.refusal(error)
                        }
                    }
                }
                return await group.reduce(into: [Answer]()) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0 == .paid }, "\(Set(answers))")
            let audit = try await replicas.store.audit()
            #expect(audit.isHealthy, "\(audit)")
            #expect(audit.entryCount == 6 * 2 + 120 * 2)
        }
    }

    @Test("2 replicas, one payer locking 10 sessions at once through both: exactly the cap are held")
    func lockCapAcrossReplicas() async throws {
        try await TestReplicas.with(count: 2) { replicas in
            let payee = try await replicas.client("payee@example.com", replica: 0)
            let first = try await replicas.client("squatter@example.com", replica: 0, funded: 100_000)
            var second = LedgerClient(baseURL: replicas.urls[1])
            second.token = first.token
            var sids: [String] = []
            for _ in 0..<10 { sids.append(try await payee.createSession(amountCents: 100).sid) }
            let through = [first, second]
            let answers = await withTaskGroup(of: Answer.self) { group in
                for (index, sid) in sids.enumerated() {
                    group.addTask {
                        do {
                            try await through[index % 2].lock(sid: sid)
                            return .paid
                        } catch {
                            return Self.refusal(error)
                        }
                    }
                }
                return await group.reduce(into: [Answer]()) { $0.append($1) }
            }
            #expect(answers.filter { $0 == .paid }.count == LedgerPolicy().maximumLocksPerPayer, "\(answers)")
            #expect(answers.filter { $0 != .paid }.allSatisfy { $0 == .refused(409, .lockLimitReached) })
        }
    }

    private static func refusal(_ error: any Error) -> Answer {
        guard let error = error as? LedgerClientError else { return .refused(0, nil) }
        switch error {
        case .problem(let problem): return .refused(problem.status, problem.kind)
        case .unexpectedResponse(let status, _): return .refused(status, nil)
        default: return .refused(0, nil)
        }
    }
}
