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
        try await PostgresPair.with { pair in try await Self.payThroughFailover(pair) }
    }

    @Test(
        "gotchu ledger check-replication: the primary and its synchronous standby; the standby away; the standby promoted"
    )
    func checkReplication() async throws {
        try await PostgresPair.with { pair in
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
