import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer
import GotchuTesting
import Logging
import PostgresNIO
import Synchronization
import Testing

/// `gotchu server` processes on PostgreSQL, killed with SIGKILL at random moments under load and restarted.
@Suite("Crash recovery", .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason), .timeLimit(.minutes(10)))
struct CrashTests {
    /// One payment a client saw acknowledged: its key, session and the balance the server answered.
    struct Acknowledged: Sendable, Hashable {
        var payer: Int
        var key: String
        var sid: String
        var balance: Cents
    }

    /// What the load shares with the test: the stop flag and the payments acknowledged so far.
    final class Load: Sendable {
        let stopping = Atomic<Bool>(false)
        let acknowledged = Mutex<[Acknowledged]>([])
        /// Sends whose answer was lost in a crash and came back as a replay on retry.
        let replayedOnRetry = Atomic<Int>(0)
        /// Retries told the key was still in flight (its server died between admitting and paying).
        let inFlightAnswers = Atomic<Int>(0)
    }

    static let pairs = 6
    static let amount: Cents = 100
    static let funding: Cents = 1_000_000

    @Test("SIGKILL the server 10 times under load: every acknowledged payment is there exactly once")
    func killUnderLoad() async throws {
        try await TestPostgres.withDatabase { database in
            let gotchu = try BuiltProducts.gotchu
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let environment = [
                "XDG_DATA_HOME": directory.url.path,
                "GOTCHU_JWT_SECRET": TestLedger.secret,
            ]
            // An abandoned key blocks retries for 2 s instead of 60, so the clients' retries finish quickly. The lock
            // and send rate limits are off: how many locks a second the load reaches depends on the machine's speed, and a
            // refusal would end the load (the limits have tests of their own). A password, if the test server needs
            // one, reaches the process through PGPASSWORD.
            let arguments = [
                "server", "--dev", "--database", database.redacted, "--in-flight-timeout", "2",
                "--lock-rate", "0", "--user-lock-rate", "0", "--send-rate", "0",
            ]
            var server = try RunningCommand(gotchu, arguments + ["--port", "0"], environment: environment)
            let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
            let url = URL(string: String(line.dropFirst("listening on ".count)))!
            let port = url.port!

            var payers: [LedgerClient] = []
            var payees: [LedgerClient] = []
            for index in 0..<Self.pairs {
                payers.append(try await Self.login("payer\(index)@crash.example", url, funded: Self.funding))
                payees.append(try await Self.login("payee\(index)@crash.example", url))
            }
            let state = Load()
            let (clients, senders) = (payers, payees)
            let load = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<Self.pairs {
                        group.addTask {
                            var count = 0
                            // Keep paying until told to stop, then finish the payment under way.
                            while !state.stopping.load(ordering: .relaxed) {
                                count += 1
                                // The key is chosen before the first attempt and kept for every retry.
                                let key = "crash-\(index)-\(count)"
                                let paid = try await Self.pay(
                                    payer: clients[index],
                                    payee: senders[index],
                                    key: key,
                                    state
                                )
                                if let (sid, balance) = paid {
                                    state.acknowledged.withLock {
                                        $0.append(Acknowledged(payer: index, key: key, sid: sid, balance: balance))
                                    }
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            // Each server lives until the load has had a payment through it (however slow the machine), then a
            // random moment more: every kill lands on a server under load, and the load is never too little.
            var kills = 0
            for _ in 0..<10 {
                try await Self.waitForPayment(after: state.acknowledged.withLock { $0.count }, state)
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...300)))
                #expect(try await server.stop(signal: SIGKILL) == SIGKILL)
                kills += 1
                server = try RunningCommand(gotchu, arguments + ["--port", "\(port)"], environment: environment)
                _ = try await server.waitForLine { $0.hasPrefix("listening on") }
            }
            try await Self.waitForPayment(after: state.acknowledged.withLock { $0.count }, state)
            state.stopping.store(true, ordering: .relaxed)
            try await load.value
            #expect(kills >= 10)

            let payments = state.acknowledged.withLock { $0 }
            #expect(payments.count >= 11, "too little load to be meaningful: \(payments.count) payments")
            print(
                "crash test: \(kills) kills, \(payments.count) payments acknowledged,",
                "\(state.replayedOnRetry.load(ordering: .relaxed)) answered by replay after a crash,",
                "\(state.inFlightAnswers.load(ordering: .relaxed)) in-flight answers while retrying"
            )
            // Retrying with the same keys replays the outcomes; nothing moves twice.
            for payment in payments {
                let again = try await clients[payment.payer].send(sid: payment.sid, idempotencyKey: payment.key)
                #expect(again == SignedAnswer(newBalanceCents: payment.balance, replayed: true))
            }
            for index in 0..<Self.pairs {
                let mine = payments.filter { $0.payer == index }
                let expected = Self.funding - Cents(mine.count) * Self.amount
                #expect(try await clients[index].wallet().availableCents == expected)
                #expect(try await senders[index].wallet().availableCents == Cents(mine.count) * Self.amount)
            }
            #expect(try await server.stop(signal: SIGTERM) == 0)

            let logger = Logger(label: "crash-test") { _ in SwiftLogNoOpLogHandler() }
            let store = PostgresLedgerStore(
                url: database,
                maximumConnections: 2,
                connectionWait: TestPostgres.connectionWait,
                logger: logger
            )
            try await withServices([store.client]) {
                let audit = try await store.audit()
                #expect(audit.isHealthy, "\(audit)")
                // Every payment in the ledger was acknowledged, and every acknowledged one is there once.
                let debits = try await Self.sessionDebits(store.client)
                #expect(debits.values.allSatisfy { $0 == 1 })
                #expect(Set(debits.keys) == Set(payments.map(\.sid)))
                #expect(audit.entryCount == 2 * Self.pairs + 2 * payments.count)
            }
        }
    }

    /// One payment: create, lock and send, each step retried through crashes; the send keeps its key throughout.
    /// Returns the session and balance when paid, `nil` when the payment was refused because the lock lapsed while
    /// the server was down (that refusal releases the key; this load never sends it again, so it is never paid).
    static func pay(
        payer: LedgerClient,
        payee: LedgerClient,
        key: String,
        _ state: Load
    ) async throws -> (String, Cents)? {
        let session = try await retrying(state) { try await payee.createSession(amountCents: amount) }
        try await retrying(state) { try await payer.lock(sid: session.sid) }
        do {
            let result = try await retrying(state) { try await payer.send(sid: session.sid, idempotencyKey: key) }
            if result.replayed { state.replayedOnRetry.add(1, ordering: .relaxed) }
            return (session.sid, result.newBalanceCents)
        } catch let error as LedgerClientError where error.problemKind == .lockRequired {
            return nil
        }
    }

    /// Waits until more than `count` payments were acknowledged; the timeout only bounds a hang.
    static func waitForPayment(after count: Int, _ state: Load) async throws {
        let paid = try await eventually(timeout: .seconds(120)) { state.acknowledged.withLock { $0.count } > count }
        if !paid { throw TestPostgresError("no payment went through in two minutes") }
    }

    /// Runs `body` until it gets an answer that is not a transport failure, a 5xx or an in-flight key. The deadline
    /// only bounds a hang: a restart on a busy machine may take many seconds.
    static func retrying<T: Sendable>(_ state: Load, _ body: () async throws -> T) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            do {
                return try await body()
            } catch let error as LedgerClientError {
                switch error {
                case .transport, .unexpectedResponse: break
                case .problem(let problem) where problem.kind == .idempotencyInFlight:
                    state.inFlightAnswers.add(1, ordering: .relaxed)
                case .problem(let problem) where problem.status >= 500: break
                default: throw error
                }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestPostgresError("the server never answered")
    }

    static func login(_ email: String, _ url: URL, funded cents: Cents = 0) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: url)
        client.token = try await client.devLogin(email: email).token
        if cents > 0 { _ = try await client.fund(amountCents: cents) }
        return client
    }

    /// How many DEBIT entries each paid session has.
    static func sessionDebits(_ client: PostgresClient) async throws -> [String: Int] {
        var debits: [String: Int] = [:]
        let rows = try await client.query(
            "SELECT ref_id, COUNT(*) FROM ledger_entries WHERE ref_type = 'session' AND direction = 'DEBIT' GROUP BY ref_id"
        )
        for try await (sid, count) in rows.decode((String, Int64).self) { debits[sid] = Int(count) }
        return debits
    }
}

/// One payment interrupted by SIGKILL between admitting its key and committing, then retried with that key on a
/// restarted server: it must run at once (not after the in-flight timeout, by when the payer's lock would have
/// lapsed) and exactly once. Both lifetimes are an hour here, so a retry that had to wait would fail, not wait.
@Suite("A payment interrupted by a crash", .timeLimit(.minutes(10)))
struct InterruptedSendTests {
    static let options = ["--in-flight-timeout", "3600", "--lock-lifetime", "3600", "--session-lifetime", "3600"]

    /// A `gotchu server` process and its URL.
    static func start(
        _ arguments: [String],
        port: Int = 0,
        _ environment: [String: String]
    ) async throws -> (RunningCommand, URL) {
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            arguments + options + ["--port", "\(port)"],
            environment: environment
        )
        let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
        return (server, URL(string: String(line.dropFirst("listening on ".count)))!)
    }

    @Test("SQLite: SIGKILL after a payment failed inside its transaction; the restarted server pays it at once, once")
    func sqlite() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        let environment = ["XDG_DATA_HOME": directory.url.path, "GOTCHU_JWT_SECRET": TestLedger.secret]
        let arguments = ["server", "--dev", "--database", path]
        var (server, url) = try await Self.start(arguments, environment)
        let payer = try await CrashTests.login("payer@crash.example", url, funded: 1_000)
        let payee = try await CrashTests.login("payee@crash.example", url)
        let session = try await payee.createSession(amountCents: 250)
        try await payer.lock(sid: session.sid)

        // The server's payment fails at its last step, writing its outcome: its key, admitted in the same
        // transaction, and its transfer go with it, so the file holds nothing of the payment.
        let database = try DatabaseQueue(path: path)
        try await OutcomeFailure.impose(on: database)
        #expect(await problemKind { try await payer.send(sid: session.sid, idempotencyKey: "k") } == .internalError)
        let state = try await database.read { db in
            try String.fetchAll(db, sql: "SELECT state FROM idempotency_keys")
        }
        #expect(state.isEmpty)
        #expect(try await payer.wallet().availableCents == 1_000)
        #expect(try await server.stop(signal: SIGKILL) == SIGKILL)
        try await OutcomeFailure.lift(on: database)

        (server, _) = try await Self.start(arguments, port: url.port!, environment)
        #expect(
            try await payer.send(sid: session.sid, idempotencyKey: "k")
                == SignedAnswer(newBalanceCents: 750, replayed: false)
        )
        #expect(try await payer.send(sid: session.sid, idempotencyKey: "k").replayed)
        #expect(try await payee.wallet().availableCents == 250)
        #expect(try await server.stop(signal: SIGTERM) == 0)
        let debits = try await database.read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT COUNT(*) FROM ledger_entries WHERE ref_id = ? AND direction = 'DEBIT'",
                arguments: [session.sid]
            )
        }
        #expect(debits == 1)
    }

    @Test(
        "PostgreSQL: SIGKILL while the payment waits inside its transaction; the restarted server pays it at once, once",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
    )
    func postgres() async throws {
        try await TestPostgres.withDatabase { database in
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let environment = ["XDG_DATA_HOME": directory.url.path, "GOTCHU_JWT_SECRET": TestLedger.secret]
            let arguments = ["server", "--dev", "--database", database.redacted]
            var (server, url) = try await Self.start(arguments, environment)
            let payer = try await CrashTests.login("payer@crash.example", url, funded: 1_000)
            let payee = try await CrashTests.login("payee@crash.example", url)
            let session = try await payee.createSession(amountCents: 250)
            try await payer.lock(sid: session.sid)

            // Holding the session's row makes the server's payment wait inside its transaction: the key is admitted
            // there, nothing is committed.
            try await Self.kill(server, whileHolding: session.sid, in: database) {
                _ = try await payer.send(sid: session.sid, idempotencyKey: "k")
            }

            (server, _) = try await Self.start(arguments, port: url.port!, environment)
            #expect(
                try await payer.send(sid: session.sid, idempotencyKey: "k")
                    == SignedAnswer(newBalanceCents: 750, replayed: false)
            )
            #expect(try await payer.send(sid: session.sid, idempotencyKey: "k").replayed)
            #expect(try await payee.wallet().availableCents == 250)
            #expect(try await server.stop(signal: SIGTERM) == 0)
            let debits = try await TestPostgres.withClient(database) { client in
                try await CrashTests.sessionDebits(client)
            }
            #expect(debits == [session.sid: 1])
        }
    }

    /// Polls `query` until it returns a row, and answers that row's first column; bounded only against a hang.
    /// Holds session `sid`'s row in `database`, starts `request` against `server` (which then waits for the row
    /// inside its transaction), kills the server with SIGKILL once it waits, expects `request` to fail, and lets go
    /// of the row once the dead server's backend is gone (it finishes its statement, finds its client gone and
    /// rolls back).
    static func kill(
        _ server: RunningCommand,
        whileHolding sid: String,
        in database: PostgresURL,
        request: @escaping @Sendable () async throws -> Void
    ) async throws {
        let logger = Logger(label: "crash-test") { _ in SwiftLogNoOpLogHandler() }
        try await TestPostgres.withClient(database) { client in
            try await client.withConnection { connection in
                _ = try await connection.query("BEGIN", logger: logger).collect()
                _ = try await connection.query(
                    "SELECT 1 FROM payment_sessions WHERE id = \(sid) FOR UPDATE",
                    logger: logger
                ).collect()
                let running = Task { try await request() }
                let waiting = try await Self.waitForRow(connection, logger) {
                    """
                    SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                    AND pid <> pg_backend_pid()
                    """
                }
                #expect(try await server.stop(signal: SIGKILL) == SIGKILL)
                await #expect(throws: LedgerClientError.self) { try await running.value }
                _ = try await connection.query("ROLLBACK", logger: logger).collect()
                _ = try await Self.waitForRow(connection, logger) {
                    "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = \(waiting))"
                }
            }
        }
    }

    static func waitForRow(
        _ connection: PostgresConnection,
        _ logger: Logger,
        _ query: () -> PostgresQuery
    ) async throws -> Int32 {
        for _ in 0..<1_000 {
            if let row = try await connection.query(query(), logger: logger).collect().first {
                return try row.decode(Int32.self)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestPostgresError("the condition never came true")
    }
}
