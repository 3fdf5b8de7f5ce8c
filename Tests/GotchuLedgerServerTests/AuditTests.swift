import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import Logging
import Testing

@Suite("Audit: the hash chain and gotchu ledger verify", .timeLimit(.minutes(10)))
struct AuditTests {
    /// Fundings and `payments` payments between two users, through the engine.
    static func fill(_ store: any LedgerStore, payments: Int) async throws -> (payer: LedgerUser, payee: LedgerUser) {
        let payer = try await store.login(email: "payer@example.com")
        let payee = try await store.login(email: "payee@example.com")
        _ = try await store.fund(userID: payer.id, amountCents: 100_000)
        for index in 0..<payments {
            let (session, _) = try await store.createSession(
                payeeID: payee.id,
                amountCents: Cents(100 + index),
                idempotencyKey: nil
            )
            try await store.lock(sid: session.sid, payerID: payer.id)
            let (outcome, _) = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: "\(index)")
            guard case .paid = outcome else { throw AuditTestError("payment \(index) refused: \(outcome)") }
        }
        return (payer, payee)
    }

    @Test("A sound ledger verifies, and every check says what it covered", arguments: StoreKind.available)
    func sound(store kind: StoreKind) async throws {
        try await TestStore.with(kind, clock: ManualClock()) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                _ = try await Self.fill(store, payments: 5)
                let verification = try await store.verify()
                #expect(verification.isValid, "\(verification)")
                #expect(verification.passed.count == 10)
                #expect(verification.passed[0].hasPrefix("hash chain: 12 entries"))
                #expect(verification.passed.contains { $0.hasPrefix("receipts: 5,") })
                #expect(verification.passed.contains { $0.hasPrefix("refunds") })
                #expect(verification.passed.contains { $0.hasPrefix("deposits and payouts") })
                // The payer's funding and the 5 payments, each with its webhook event.
                #expect(
                    verification.passed.contains {
                        $0.hasSuffix("6 money movements since the outbox began, each with exactly one")
                    }
                )
            }
        }
    }

    @Test("One amount edited by hand in SQLite is found, named by its row; so is a deleted row")
    func editedAmount() async throws {
        try await TestStore.with(.sqlite, clock: ManualClock()) { store, database, _ in
            _ = try await Self.fill(store, payments: 3)
            guard case .sqlite(let path) = database else { throw AuditTestError("not SQLite") }
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(sql: "UPDATE ledger_entries SET amount_cents = amount_cents + 1 WHERE seq = 5")
            }
            let edited = try await store.verify()
            let failure = try #require(edited.failure)
            #expect(failure.hasPrefix("entry seq 5 "), "\(failure)")
            #expect(edited.passed.isEmpty)

            // Put back, the ledger is sound again; the last row deleted, the head gives it away.
            try await queue.write { db in
                try db.execute(sql: "UPDATE ledger_entries SET amount_cents = amount_cents - 1 WHERE seq = 5")
            }
            #expect(try await store.verify().isValid)
            try await queue.write { db in
                try db.execute(sql: "PRAGMA foreign_keys = OFF")
                try db.execute(sql: "DELETE FROM ledger_entries WHERE seq = (SELECT MAX(seq) FROM ledger_entries)")
            }
            let truncated = try #require(try await store.verify().failure)
            #expect(truncated.hasPrefix("the chain head says 8 entries"), "\(truncated)")
        }
    }

    @Test("Entries written before the chain existed are chained, oldest first, when the store next migrates")
    func backfill() async throws {
        try await TestStore.with(.sqlite, clock: ManualClock()) { store, database, _ in
            _ = try await Self.fill(store, payments: 2)
            guard case .sqlite(let path) = database else { throw AuditTestError("not SQLite") }
            // As a ledger upgraded from before the chain holds them.
            try await DatabaseQueue(path: path).write { db in
                try db.execute(sql: "UPDATE ledger_entries SET hash = NULL")
                try db.execute(
                    sql: "UPDATE ledger_chain SET head_hash = ?, entry_count = 0",
                    arguments: [LedgerChain.genesis]
                )
            }
            #expect(try await store.verify().failure?.hasPrefix("entry seq 1 ") == true)
            try await store.migrate()
            let verification = try await store.verify()
            #expect(verification.isValid, "\(verification)")
            #expect(verification.passed.first?.hasPrefix("hash chain: 6 entries") == true)
        }
    }

    @Test("A balance edited by hand fails the balance check, naming the wallet")
    func editedBalance() async throws {
        try await TestStore.with(.sqlite, clock: ManualClock()) { store, database, _ in
            let (payer, _) = try await Self.fill(store, payments: 1)
            guard case .sqlite(let path) = database else { throw AuditTestError("not SQLite") }
            try await DatabaseQueue(path: path).write { db in
                try db.execute(
                    sql: "UPDATE wallet_accounts SET available_cents = available_cents + 7 WHERE user_id = ?",
                    arguments: [payer.id]
                )
            }
            let failure = try #require(try await store.verify().failure)
            #expect(failure.contains("balance") && failure.contains("add up to"), "\(failure)")
        }
    }

    @Test("gotchu ledger verify prints its checks and exits 1 at an edited row, naming it")
    func command() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("ledger.sqlite").path
        let store = try SQLiteLedgerStore(path: path)
        try await store.migrate()
        _ = try await Self.fill(store, payments: 2)
        let gotchu = try BuiltProducts.gotchu
        let sound = try RunningCommand(gotchu, ["ledger", "verify", "--database", path])
        #expect(try await sound.waitForExit() == 0)
        #expect(sound.lines.first?.hasPrefix("ok    hash chain: 6 entries") == true, "\(sound.lines)")
        #expect(sound.lines.last?.hasPrefix("ledger verified in") == true)

        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE ledger_entries SET amount_cents = 1 WHERE seq = 3")
        }
        let broken = try RunningCommand(gotchu, ["ledger", "verify", "--database", path])
        #expect(try await broken.waitForExit() == 1)
        #expect(broken.lines.last?.hasPrefix("FAIL  entry seq 3 ") == true, "\(broken.lines)")

        let missing = try RunningCommand(gotchu, ["ledger", "verify", "--database", path + ".absent"])
        #expect(try await missing.waitForExit() != 0)
        #expect(!FileManager.default.fileExists(atPath: path + ".absent"))
    }

    @Test(
        "The chain stays whole under concurrent payments through two stores on one PostgreSQL database",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason)
    )
    func concurrentPostgres() async throws {
        try await TestPostgres.withDatabase { url in
            let logger = Logger(label: "audit-test") { _ in SwiftLogNoOpLogHandler() }
            let stores = (0..<2).map { _ in
                PostgresLedgerStore(
                    url: url,
                    maximumConnections: 8,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
            }
            try await withServices(stores.map(\.client)) {
                try await stores[0].migrate()
                try await stores[1].migrate()
                var pairs: [(LedgerUser, LedgerUser)] = []
                for index in 0..<6 {
                    let payer = try await stores[0].login(email: "payer\(index)@example.com")
                    let payee = try await stores[0].login(email: "payee\(index)@example.com")
                    _ = try await stores[index % 2].fund(userID: payer.id, amountCents: 10_000)
                    pairs.append((payer, payee))
                }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, (payer, payee)) in pairs.enumerated() {
                        let store = stores[index % 2]
                        group.addTask {
                            for payment in 0..<10 {
                                let (session, _) = try await store.createSession(
                                    payeeID: payee.id,
                                    amountCents: 10,
                                    idempotencyKey: nil
                                )
                                try await store.lock(sid: session.sid, payerID: payer.id)
                                let (outcome, _) = try await store.send(
                                    sid: session.sid,
                                    payerID: payer.id,
                                    idempotencyKey: "\(payment)"
                                )
                                guard case .paid = outcome else { throw AuditTestError("refused: \(outcome)") }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let verification = try await stores[1].verify()
                #expect(verification.isValid, "\(verification)")
                #expect(verification.passed.first?.hasPrefix("hash chain: 132 entries") == true)
            }
        }
    }
}

struct AuditTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
