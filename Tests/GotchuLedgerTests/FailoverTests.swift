import Foundation
import GotchuCore
import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerTesting
import GotchuTesting
import Logging
import PostgresNIO
import Synchronization
import Testing

/// The sessions of the payments the stores acknowledged, in the order they were, and what went wrong otherwise.
final class Acknowledged: Sendable {
    private let sessions = Mutex<[String]>([])
    private let failures = Mutex<[String]>([])
    func append(_ sid: String) { sessions.withLock { $0.append(sid) } }
    func failed(_ failure: String) { failures.withLock { $0.append(failure) } }
    var all: [String] { sessions.withLock { $0 } }
    var problems: [String] { failures.withLock { $0 } }
}

/// A primary and its synchronous standby started by `scripts/postgres-pair`, deleted by ``stop()``.
struct PostgresPair {
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/postgres-pair")

    let directory: URL
    let primaryPort: Int
    let standbyPort: Int

    static func start() async throws -> PostgresPair {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-pair-\(UUID())")
        let output = try await run("start", directory)
        func port(_ name: String) throws -> Int {
            let line = output.first { $0.hasPrefix(name + " ") }
            return try #require(line.flatMap { Int($0.dropFirst(name.count + 1)) }, "\(output)")
        }
        return PostgresPair(directory: directory, primaryPort: try port("primary"), standbyPort: try port("standby"))
    }

    @discardableResult
    static func run(_ command: String, _ directory: URL) async throws -> [String] {
        let process = try RunningCommand(script, [command, directory.path])
        let status = try await process.waitForExit(timeout: .seconds(300))
        guard status == 0 else {
            throw TestPostgresError("postgres-pair \(command) failed (\(status)): \(process.standardError)")
        }
        return process.lines
    }

    func killPrimary() async throws { try await Self.run("kill-primary", directory) }
    func stopStandby() async throws { try await Self.run("stop-standby", directory) }
    func startStandby() async throws { try await Self.run("start-standby", directory) }
    func promote() async throws { try await Self.run("promote", directory) }
    func stop() async { _ = try? await Self.run("stop", directory) }

    /// `postgres://gotchu@PRIMARY,STANDBY/DATABASE`, the primary first.
    func url(database: String = "postgres") throws -> PostgresURL {
        try PostgresURL("postgres://gotchu@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)/\(database)")
    }
}

/// The ledger on a primary with a synchronous standby, through one multi-host URL: the primary's machine dies
/// (SIGKILL) while two stores pay, the standby is promoted, and the stores find it by themselves.
@Suite(
    "PostgreSQL failover",
    .serialized,
    .timeLimit(.minutes(10)),
    .enabled(if: TestPostgres.isConfigured, TestPostgres.skipReason)
)
struct FailoverTests {
    @Test(
        "SIGKILL the primary under load, promote the standby: the stores write to it without a restart, every payment acknowledged is there exactly once, and the ledger verifies"
    )
    func primaryKilledUnderLoad() async throws {
        let pair = try await PostgresPair.start()
        do {
            try await Self.payThroughFailover(pair)
        } catch {
            await pair.stop()
            throw error
        }
        await pair.stop()
    }

    @Test(
        "The synchronous standby away: a write is refused as unavailable after the connection wait, not held; with the standby back, its retry under the same key finds the one write"
    )
    func standbyAway() async throws {
        let pair = try await PostgresPair.start()
        do {
            try await Self.writeWhileTheStandbyIsAway(pair)
        } catch {
            await pair.stop()
            throw error
        }
        await pair.stop()
    }

    static func writeWhileTheStandbyIsAway(_ pair: PostgresPair) async throws {
        let logger = Logger(label: "standby-away") { _ in SwiftLogNoOpLogHandler() }
        let store = PostgresLedgerStore(
            url: try pair.url(),
            maximumConnections: 2,
            connectionWait: .seconds(2),
            logger: logger
        )
        try await withServices([store.primary]) {
            try await store.migrate()
            let payee = try await store.login(email: "payee@standby.example")
            try await pair.stopStandby()
            // The commit waits for the standby; the store gives up on it after its wait.
            let refused = await #expect(throws: LedgerError.self) {
                try await store.createSession(payeeID: payee.id, amountCents: 300, idempotencyKey: "away-1")
            }
            #expect(refused?.kind == .databaseUnavailable, "\(String(describing: refused))")
            #expect(refused?.detail.contains("did not confirm the commit") == true, "\(String(describing: refused))")
            try await pair.startStandby()
            // Committed on the primary while the answer was lost: the retry finds that session, and there is one.
            let (first, firstReplayed) = try await Self.retrying {
                try await store.createSession(payeeID: payee.id, amountCents: 300, idempotencyKey: "away-1")
            }
            let (again, replayed) = try await store.createSession(
                payeeID: payee.id,
                amountCents: 300,
                idempotencyKey: "away-1"
            )
            #expect(firstReplayed, "the refused write had committed on the primary")
            #expect(again.sid == first.sid && replayed)
            let wallet = try await store.wallet(userID: payee.id, recentLimit: 10)
            #expect(wallet.balance == 0)
            let verification = try await store.verify()
            #expect(verification.failure == nil, "\(verification)")
        }
    }

    @Test(
        "gotchu ledger check-replication: the primary and its synchronous standby; the standby away; the standby promoted"
    )
    func checkReplication() async throws {
        let pair = try await PostgresPair.start()
        do {
            let url = try pair.url().redacted
            func check() async throws -> (status: Int32, lines: [String]) {
                let process = try RunningCommand(
                    try BuiltProducts.gotchu,
                    ["ledger", "check-replication", "--database", url]
                )
                let status = try await process.waitForExit()
                return (status, process.lines)
            }
            let healthy = try await check()
            #expect(healthy.status == 0, "\(healthy.lines)")
            #expect(
                healthy.lines.contains { $0.hasPrefix("127.0.0.1:\(pair.primaryPort)  primary") },
                "\(healthy.lines)"
            )
            #expect(
                healthy.lines.contains { $0.contains("standby \"standby1\"") && $0.contains("sync") },
                "\(healthy.lines)"
            )
            #expect(
                healthy.lines.contains("127.0.0.1:\(pair.standbyPort)  standby  receiver streaming"),
                "\(healthy.lines)"
            )
            #expect(healthy.lines.last?.hasPrefix("ok    one primary") == true, "\(healthy.lines)")

            try await pair.stopStandby()
            let away = try await check()
            #expect(away.status == 1, "\(away.lines)")
            #expect(away.lines.contains { $0.hasPrefix("127.0.0.1:\(pair.standbyPort)  unreachable") }, "\(away.lines)")
            #expect(
                away.lines.last?.hasPrefix("FAIL  the primary waits for a synchronous standby") == true,
                "\(away.lines)"
            )

            try await pair.startStandby()
            try await pair.killPrimary()
            try await pair.promote()
            let promoted = try await check()
            #expect(promoted.status == 0, "\(promoted.lines)")
            #expect(
                promoted.lines.contains { $0.hasPrefix("127.0.0.1:\(pair.standbyPort)  primary") },
                "\(promoted.lines)"
            )
            #expect(
                promoted.lines.last?.hasPrefix("WARN  commits are acknowledged once the primary alone") == true,
                "\(promoted.lines)"
            )
        } catch {
            await pair.stop()
            throw error
        }
        await pair.stop()
    }

    /// `body` again while the database is unavailable (the primary catching up with its standby).
    static func retrying<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        while true {
            do {
                return try await body()
            } catch let error as LedgerError where error.kind == .databaseUnavailable {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    static func payThroughFailover(_ pair: PostgresPair) async throws {
        let url = try pair.url()
        let logger = Logger(label: "failover") { _ in SwiftLogNoOpLogHandler() }
        // Two replicas of the server, each with its pools to both hosts; a request waits 2 s for a connection.
        let stores = (0..<2).map { _ in
            PostgresLedgerStore(url: url, maximumConnections: 4, connectionWait: .seconds(2), logger: logger)
        }
        let amount: Cents = 125
        let workers = 6
        let paymentsPerWorker = 15
        let acknowledged = Acknowledged()
        let funds: Cents = 100_000
        let (payee, payers) = try await withServices(stores.map(\.primary)) {
            try await stores[0].migrate()
            try await stores[1].migrate()
            let payee = try await stores[0].login(email: "payee@failover.example")
            // One payer per worker, each paying one payment at a time, as people at terminals do.
            var payers: [LedgerUser] = []
            for worker in 0..<workers {
                let payer = try await stores[0].login(email: "payer\(worker)@failover.example")
                _ = try await stores[0].fund(userID: payer.id, amountCents: funds)
                payers.append(payer)
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<workers {
                    let store = stores[worker % stores.count]
                    let payer = payers[worker]
                    group.addTask {
                        // A worker records what went wrong and stops, rather than throw: the others finish their
                        // payments, and nothing is cancelled mid-request.
                        for number in 0..<paymentsPerWorker {
                            let key = "w\(worker)-\(number)"
                            do {
                                acknowledged.append(
                                    try await Self.payUntilAcknowledged(store, payee, payer, amount, key: key)
                                )
                            } catch {
                                acknowledged.failed("\(key): \(error)")
                                return
                            }
                        }
                    }
                }
                group.addTask {
                    // Mid-load: some payments acknowledged, most still to come.
                    guard try await eventually(timeout: .seconds(120), { acknowledged.all.count >= 20 }) else {
                        throw TestPostgresError("no payment was acknowledged before the failover")
                    }
                    try await pair.killPrimary()
                    try await pair.promote()
                }
                try await group.waitForAll()
            }
            return (payee, payers)
        }
        #expect(acknowledged.problems.isEmpty, "\(acknowledged.problems)")
        let sessions = acknowledged.all
        #expect(sessions.count == workers * paymentsPerWorker)
        #expect(Set(sessions).count == sessions.count, "one session per payment")

        // Read back on the promoted standby alone: what the stores were told is there, once.
        let survivor = try PostgresURL("postgres://gotchu@127.0.0.1:\(pair.standbyPort)/postgres")
        let store = PostgresLedgerStore(url: survivor, maximumConnections: 2, logger: logger)
        try await withServices([store.primary]) {
            let total = amount * Cents(sessions.count)
            #expect(try await store.wallet(userID: payee.id, recentLimit: 0).balance == total)
            for payer in payers {
                let paid = amount * Cents(paymentsPerWorker)
                #expect(try await store.wallet(userID: payer.id, recentLimit: 0).balance == funds - paid)
            }
            for sid in sessions {
                #expect(try await store.session(sid: sid, viewerID: payee.id).status == .paid, "\(sid)")
            }
            let audit = try await store.audit()
            #expect(audit.isHealthy, "\(audit)")
            let verification = try await store.verify()
            #expect(verification.failure == nil, "\(verification)")
        }
    }

    /// Creates the session of payment `key`, locks it and pays it, all under keys of its own, again and again until
    /// a payment is acknowledged, as an idempotent client does; returns the session's id.
    static func payUntilAcknowledged(
        _ store: PostgresLedgerStore,
        _ payee: LedgerUser,
        _ payer: LedgerUser,
        _ amount: Cents,
        key: String
    ) async throws -> String {
        while true {
            do {
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: amount,
                    idempotencyKey: "session-" + key
                )
                do {
                    _ = try await store.lock(sid: session.sid, payerID: payer.id, shares: 1)
                } catch let refusal as LedgerError where refusal.kind == .sessionAlreadyPaid {
                    // Paid by an attempt whose answer was lost: the send under the same key replays it.
                }
                let (outcome, _) = try await store.send(
                    sid: session.sid,
                    payerID: payer.id,
                    idempotencyKey: "payment-" + key,
                    tipCents: 0
                )
                switch outcome {
                case .paid:
                    return session.sid
                case .refused(let refusal) where refusal.kind == .lockRequired:
                    // The lock was lost with the old primary's connection: lock again.
                    continue
                case .refused(let refusal):
                    throw TestPostgresError("payment \(key) refused: \(refusal)")
                }
            } catch let error as LedgerError
                where error.kind == .databaseUnavailable || error.kind == .idempotencyInFlight
            {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}
