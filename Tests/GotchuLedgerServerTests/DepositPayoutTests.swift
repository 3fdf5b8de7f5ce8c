import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import Logging
import PostgresNIO
import Testing

/// Money in (an operator's deposit) and out (a user's payout, settled or failed), on each store: idempotency, the
/// states of a payout, races between operators, and the ledger's invariants after each step.
@Suite("Deposits and payouts", .timeLimit(.minutes(5)))
struct DepositPayoutTests {
    /// The invariants after a step: a healthy audit (sum over all accounts zero, no user below zero) and every check
    /// of `gotchu ledger verify`, deposits and payouts included.
    static func expectSound(_ store: any LedgerStore, _ comment: Comment? = nil) async throws {
        let audit = try await store.audit()
        #expect(audit.isHealthy, "\(audit) \(comment?.rawValue ?? "")")
        #expect(audit.totalBalanceCents == 0)
        let verification = try await store.verify()
        #expect(verification.isValid, "\(verification.failure ?? "") \(comment?.rawValue ?? "")")
        #expect(verification.passed.contains { $0.hasPrefix("deposits and payouts:") })
    }

    static func withStore(
        _ kind: StoreKind,
        _ body: @Sendable (any LedgerStore, TestDatabase) async throws -> Void
    ) async throws {
        try await TestStore.with(kind, clock: ManualClock()) { store, database, services in
            try await withServices(services) {
                try await store.migrate()
                try await body(store, database)
            }
        }
    }

    static func refusal(_ body: () async throws -> some Any) async -> LedgerError? {
        do {
            _ = try await body()
            return nil
        } catch let refusal as LedgerError {
            return refusal
        } catch {
            Issue.record("not a refusal: \(error)")
            return nil
        }
    }

    @Test(
        "A deposit is one per reference: again is answered as the same; another amount or user is refused",
        arguments: StoreKind.available
    )
    func depositIdempotency(store kind: StoreKind) async throws {
        do {
            try await Self.withStore(kind) { store, _ in
                let alice = try await store.login(email: "alice@example.com")
                _ = try await store.login(email: "bob@example.com")
                let first = try await store.deposit(
                    email: "Alice@Example.com",
                    amountCents: 5_000,
                    reference: "BANK-0042",
                    actor: "operator"
                )
                #expect(!first.replayed)
                #expect(first.balance == 5_000)
                try await Self.expectSound(store, "after the first deposit")

                let again = try await store.deposit(
                    email: "alice@example.com",
                    amountCents: 5_000,
                    reference: "BANK-0042",
                    actor: "operator"
                )
                #expect(again.replayed)
                #expect(again.deposit == first.deposit)
                #expect(again.balance == 5_000)

                let otherAmount = await Self.refusal {
                    try await store.deposit(
                        email: "alice@example.com",
                        amountCents: 5_001,
                        reference: "BANK-0042",
                        actor: "operator"
                    )
                }
                #expect(otherAmount?.kind == .idempotencyKeyReused)
                #expect(otherAmount?.detail.contains("$50.00") == true, "\(String(describing: otherAmount))")
                let otherUser = await Self.refusal {
                    try await store.deposit(
                        email: "bob@example.com",
                        amountCents: 5_000,
                        reference: "BANK-0042",
                        actor: "operator"
                    )
                }
                #expect(otherUser?.kind == .idempotencyKeyReused)

                let wallet = try await store.wallet(userID: alice.id, recentLimit: 20)
                #expect(wallet.balance == 5_000)
                #expect(wallet.recent.map(\.type) == ["DEPOSIT"])
                #expect(wallet.recent.first?.refType == "deposit")
                #expect(wallet.recent.first?.refID == first.deposit.id)
                // Recorded once, with who did it; a replay changed nothing and adds nothing.
                let audit = try await store.auditLog(limit: 10).filter { $0.action == "deposit" }
                #expect(audit.count == 1)
                #expect(audit.first?.actor == "operator")
                #expect(audit.first?.subject == "alice@example.com")
                #expect(audit.first?.detail.contains("BANK-0042") == true)
                try await Self.expectSound(store, "after the refused deposits")
            }
        }
    }

    @Test(
        "Hostile references and reasons, amounts out of range and unknown users are refused and change nothing",
        arguments: StoreKind.available
    )
    func hostileInput(store kind: StoreKind) async throws {
        try await Self.withStore(kind) { store, _ in
            let alice = try await store.login(email: "alice@example.com")
            for reference in [
                "", " BANK", "BANK ", "BANK\u{1B}[2J", "BANK\n1", "BANK\u{202E}1", "BANK\u{200B}", "BANK\u{0}",
                String(repeating: "x", count: OperatorText.maximumReferenceLength + 1),
            ] {
                let refused = await Self.refusal {
                    try await store.deposit(
                        email: "alice@example.com",
                        amountCents: 100,
                        reference: reference,
                        actor: "operator"
                    )
                }
                #expect(refused?.kind == .invalidInput, "\(reference.debugDescription)")
            }
            // Inner spaces and non-ASCII letters are fine.
            _ = try await store.deposit(
                email: "alice@example.com",
                amountCents: 100,
                reference: "Überweisung 7",
                actor: "operator"
            )
            for amount: Cents in [0, -5, store.policy.maximumAmount + 1] {
                let refused = await Self.refusal {
                    try await store.deposit(
                        email: "alice@example.com",
                        amountCents: amount,
                        reference: "R-\(amount)",
                        actor: "operator"
                    )
                }
                #expect(refused?.kind == .invalidAmount, "\(amount)")
                let payout = await Self.refusal {
                    try await store.requestPayout(userID: alice.id, amountCents: amount, idempotencyKey: "k\(amount)")
                }
                #expect(payout?.kind == .invalidAmount, "\(amount)")
            }
            let unknown = await Self.refusal {
                try await store.deposit(
                    email: "nobody@example.com",
                    amountCents: 100,
                    reference: "R-unknown",
                    actor: "operator"
                )
            }
            #expect(unknown?.kind == .unknownUser)
            // A payout with a reason that could rewrite the operator's terminal is refused; the payout stays pending.
            let (payout, _) = try await store.requestPayout(userID: alice.id, amountCents: 50, idempotencyKey: "k")
            let reason = await Self.refusal {
                try await store.failPayout(id: payout.id, reason: "\u{1B}]0;pwned\u{7}", actor: "operator")
            }
            #expect(reason?.kind == .invalidInput)
            #expect(try await store.payouts(status: .pending, limit: 10).map(\.payout.id) == [payout.id])
            #expect(try await store.wallet(userID: alice.id, recentLimit: 1).balance == 50)
            try await Self.expectSound(store)
        }
    }

    @Test(
        "A payout moves the money at once, pending; settling it moves it out of the ledger",
        arguments: StoreKind.available
    )
    func settle(store kind: StoreKind) async throws {
        try await Self.withStore(kind) { store, _ in
            let alice = try await store.login(email: "alice@example.com")
            _ = try await store.deposit(email: "alice@example.com", amountCents: 1_000, reference: "D1", actor: "op")
            let (payout, replayed) = try await store.requestPayout(
                userID: alice.id,
                amountCents: 400,
                idempotencyKey: "payout-1"
            )
            #expect(!replayed)
            #expect(payout.status == .pending)
            #expect(payout.amount == 400)
            #expect(payout.balanceAfter == 600)
            #expect(try await store.wallet(userID: alice.id, recentLimit: 20).balance == 600)
            let pending = try await store.payouts(status: .pending, limit: 10)
            #expect(pending.map(\.payout.id) == [payout.id])
            #expect(pending.first?.email == "alice@example.com")
            try await Self.expectSound(store, "pending")

            let settled = try await store.settlePayout(id: payout.id, reference: "SEPA-7", actor: "op")
            #expect(settled.status == .settled)
            #expect(settled.reference == "SEPA-7")
            #expect(try await store.payouts(status: .pending, limit: 10).isEmpty)
            #expect(try await store.payouts(status: .settled, limit: 10).map(\.payout.id) == [payout.id])
            // The wallet is not touched by the settlement: the money left it when the payout was requested.
            let wallet = try await store.wallet(userID: alice.id, recentLimit: 20)
            #expect(wallet.balance == 600)
            #expect(wallet.recent.map(\.type) == ["PAYOUT", "DEPOSIT"])
            try await Self.expectSound(store, "settled")

            let twice = await Self.refusal {
                try await store.settlePayout(id: payout.id, reference: "SEPA-8", actor: "op")
            }
            #expect(twice?.kind == .payoutNotPending)
            #expect(twice?.detail.contains("settled already") == true)
            let failAfter = await Self.refusal {
                try await store.failPayout(id: payout.id, reason: "too late", actor: "op")
            }
            #expect(failAfter?.kind == .payoutNotPending)
            let unknown = await Self.refusal {
                try await store.settlePayout(id: UUID().uuidString.lowercased(), reference: "X", actor: "op")
            }
            #expect(unknown?.kind == .notFound)
            #expect(try await store.auditLog(limit: 10).filter { $0.action == "payout.settle" }.count == 1)
            try await Self.expectSound(store, "after the refusals")
        }
    }

    @Test(
        "A payout leaves the money that the user's locked sessions count on; once the lock is paid, the rest goes",
        arguments: StoreKind.available
    )
    func payoutRespectsLocks(store kind: StoreKind) async throws {
        try await Self.withStore(kind) { store, _ in
            let alice = try await store.login(email: "alice@example.com")
            let shop = try await store.login(email: "shop@example.com")
            _ = try await store.deposit(email: "alice@example.com", amountCents: 5_000, reference: "D1", actor: "op")
            let (session, _) = try await store.createSession(payeeID: shop.id, amountCents: 3_000, idempotencyKey: nil)
            try await store.lock(sid: session.sid, payerID: alice.id)
            let refused = await Self.refusal {
                try await store.requestPayout(userID: alice.id, amountCents: 2_001, idempotencyKey: "too-much")
            }
            #expect(refused?.kind == .insufficientFunds)
            #expect(refused?.detail.contains("locked") == true, "\(String(describing: refused))")
            #expect(try await store.wallet(userID: alice.id, recentLimit: 1).balance == 5_000)
            let (payout, _) = try await store.requestPayout(
                userID: alice.id,
                amountCents: 2_000,
                idempotencyKey: "the-rest"
            )
            #expect(payout.balanceAfter == 3_000)
            // The lock still holds what it promised: the payment goes through.
            let (outcome, _) = try await store.send(sid: session.sid, payerID: alice.id, idempotencyKey: "pay")
            #expect(outcome == .paid(newBalanceCents: 0), "\(outcome)")
            try await Self.expectSound(store, "after the payment")
        }
    }

    @Test(
        "Failing a pending payout returns the money; it cannot be failed or settled again",
        arguments: StoreKind.available
    )
    func fail(store kind: StoreKind) async throws {
        try await Self.withStore(kind) { store, _ in
            let alice = try await store.login(email: "alice@example.com")
            _ = try await store.deposit(email: "alice@example.com", amountCents: 1_000, reference: "D1", actor: "op")
            let (payout, _) = try await store.requestPayout(userID: alice.id, amountCents: 1_000, idempotencyKey: "p")
            #expect(payout.balanceAfter == 0)
            let failed = try await store.failPayout(id: payout.id, reason: "account closed", actor: "op")
            #expect(failed.status == .failed)
            #expect(failed.reason == "account closed")
            let wallet = try await store.wallet(userID: alice.id, recentLimit: 20)
            #expect(wallet.balance == 1_000)
            #expect(wallet.recent.map(\.type) == ["PAYOUT_RETURN", "PAYOUT", "DEPOSIT"])
            try await Self.expectSound(store, "failed")
            let twice = await Self.refusal {
                try await store.failPayout(id: payout.id, reason: "again", actor: "op")
            }
            #expect(twice?.kind == .payoutNotPending)
            let settleAfter = await Self.refusal {
                try await store.settlePayout(id: payout.id, reference: "R", actor: "op")
            }
            #expect(settleAfter?.kind == .payoutNotPending)
            #expect(try await store.wallet(userID: alice.id, recentLimit: 1).balance == 1_000)
            #expect(try await store.auditLog(limit: 10).filter { $0.action == "payout.fail" }.count == 1)
            try await Self.expectSound(store, "after the refusals")
        }
    }

    @Test(
        "A payout's key replays its first answer; another amount under it is refused; a refusal keeps nothing",
        arguments: StoreKind.available
    )
    func payoutIdempotency(store kind: StoreKind) async throws {
        try await Self.withStore(kind) { store, _ in
            let alice = try await store.login(email: "alice@example.com")
            let bob = try await store.login(email: "bob@example.com")
            // Insufficient funds: nothing moves, nothing is kept under the key.
            let broke = await Self.refusal {
                try await store.requestPayout(userID: alice.id, amountCents: 300, idempotencyKey: "k1")
            }
            #expect(broke?.kind == .insufficientFunds)
            #expect(try await store.payouts(status: nil, limit: 10).isEmpty)
            _ = try await store.deposit(email: "alice@example.com", amountCents: 1_000, reference: "D1", actor: "op")
            let (first, firstReplayed) = try await store.requestPayout(
                userID: alice.id,
                amountCents: 300,
                idempotencyKey: "k1"
            )
            #expect(!firstReplayed)
            let (again, replayed) = try await store.requestPayout(
                userID: alice.id,
                amountCents: 300,
                idempotencyKey: "k1"
            )
            #expect(replayed)
            #expect(again == first)
            let reused = await Self.refusal {
                try await store.requestPayout(userID: alice.id, amountCents: 301, idempotencyKey: "k1")
            }
            #expect(reused?.kind == .idempotencyKeyReused)
            // Keys are the user's own: bob's k1 is another payout (refused here for his empty wallet).
            let bobs = await Self.refusal {
                try await store.requestPayout(userID: bob.id, amountCents: 300, idempotencyKey: "k1")
            }
            #expect(bobs?.kind == .insufficientFunds)
            #expect(try await store.wallet(userID: alice.id, recentLimit: 1).balance == 700)
            #expect(try await store.payouts(status: nil, limit: 10).count == 1)
            // Concurrent requests with one new key: one payout.
            let results = await withTaskGroup(of: Result<Bool, any Error>.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        do {
                            return .success(
                                try await store.requestPayout(userID: alice.id, amountCents: 100, idempotencyKey: "k2")
                                    .replayed
                            )
                        } catch {
                            return .failure(error)
                        }
                    }
                }
                var results: [Result<Bool, any Error>] = []
                for await result in group { results.append(result) }
                return results
            }
            let fresh = results.filter { if case .success(false) = $0 { true } else { false } }
            let replays = results.filter { if case .success(true) = $0 { true } else { false } }
            #expect(fresh.count == 1 && replays.count == 5, "\(results)")
            #expect(try await store.wallet(userID: alice.id, recentLimit: 1).balance == 600)
            try await Self.expectSound(store)
        }
    }

    /// Two stores on one database, as two servers (or an operator's two terminals) would be.
    static func withTwoStores(
        _ kind: StoreKind,
        _ body: @Sendable (any LedgerStore, any LedgerStore) async throws -> Void
    ) async throws {
        switch kind {
        case .sqlite:
            let directory = try TemporaryDirectory(prefix: "gotchu-payouts")
            defer { directory.remove() }
            let path = directory.url.appendingPathComponent("ledger.sqlite").path
            // Two stores in one process wait for each other's lock on a thread pool a loaded machine may starve:
            // the timeout only bounds a hang.
            let first = try SQLiteLedgerStore(path: path, busyTimeout: .seconds(120))
            try await first.migrate()
            let second = try SQLiteLedgerStore(path: path, busyTimeout: .seconds(120))
            try await body(first, second)
        case .postgres:
            try await TestPostgres.withDatabase { url in
                let logger = Logger(label: "test-payouts") { _ in SwiftLogNoOpLogHandler() }
                let stores = (0..<2).map { _ in
                    PostgresLedgerStore(
                        url: url,
                        maximumConnections: 4,
                        connectionWait: TestPostgres.connectionWait,
                        logger: logger
                    )
                }
                try await withServices(stores.map(\.client)) {
                    try await stores[0].migrate()
                    try await stores[1].migrate()
                    try await body(stores[0], stores[1])
                }
            }
        }
    }

    @Test(
        "Settle and fail of one payout at once, through two stores on one database: exactly one wins",
        arguments: StoreKind.available
    )
    func concurrentSettleAndFail(store kind: StoreKind) async throws {
        try await Self.withTwoStores(kind) { first, second in
            let alice = try await first.login(email: "alice@example.com")
            _ = try await first.deposit(email: "alice@example.com", amountCents: 100_000, reference: "D", actor: "op")
            var settledCount = 0
            var failedCount = 0
            for round in 0..<10 {
                let (payout, _) = try await first.requestPayout(
                    userID: alice.id,
                    amountCents: 1_000,
                    idempotencyKey: "round-\(round)"
                )
                let id = payout.id
                let settle = Task { try await first.settlePayout(id: id, reference: "R\(round)", actor: "one") }
                let fail = Task { try await second.failPayout(id: id, reason: "no", actor: "two") }
                let outcomes = [await settle.result.map(\.status), await fail.result.map(\.status)]
                let wins = outcomes.compactMap { try? $0.get() }
                let losses = outcomes.compactMap { outcome -> LedgerError? in
                    guard case .failure(let error) = outcome else { return nil }
                    return error as? LedgerError
                }
                #expect(wins.count == 1 && losses.count == 1, "\(outcomes)")
                #expect(losses.allSatisfy { $0.kind == .payoutNotPending }, "\(losses)")
                if wins.first == .settled { settledCount += 1 } else { failedCount += 1 }
                let stored = try await first.payouts(status: nil, limit: 100).first { $0.payout.id == id }
                #expect(stored?.payout.status == wins.first)
            }
            // Every failed payout came back; every settled one left.
            #expect(
                try await first.wallet(userID: alice.id, recentLimit: 1).balance
                    == 100_000 - Cents(settledCount) * 1_000
            )
            #expect(settledCount + failedCount == 10)
            try await Self.expectSound(first)
        }
    }

    @Test(
        "Deposits under one reference at once, through two stores on one database: one deposit, the rest replays",
        arguments: StoreKind.available
    )
    func concurrentDeposits(store kind: StoreKind) async throws {
        try await Self.withTwoStores(kind) { first, second in
            let alice = try await first.login(email: "alice@example.com")
            let results = await withTaskGroup(of: Result<DepositResult, any Error>.self) { group in
                for index in 0..<8 {
                    let store = index % 2 == 0 ? first : second
                    group.addTask {
                        do {
                            return .success(
                                try await store.deposit(
                                    email: "alice@example.com",
                                    amountCents: 2_500,
                                    reference: "WIRE-1",
                                    actor: "op\(index)"
                                )
                            )
                        } catch {
                            return .failure(error)
                        }
                    }
                }
                var results: [Result<DepositResult, any Error>] = []
                for await result in group { results.append(result) }
                return results
            }
            let deposits = results.compactMap { try? $0.get() }
            #expect(deposits.count == 8, "\(results)")
            #expect(deposits.filter { !$0.replayed }.count == 1)
            #expect(Set(deposits.map(\.deposit.id)).count == 1)
            #expect(try await second.wallet(userID: alice.id, recentLimit: 20).recent.map(\.type) == ["DEPOSIT"])
            #expect(try await first.wallet(userID: alice.id, recentLimit: 1).balance == 2_500)
            try await Self.expectSound(first)
        }
    }

    @Test("ledger verify names a payout whose state disagrees with its entries, and a deposit edited by hand")
    func verifyFindsEditedRows() async throws {
        try await Self.withStore(.sqlite) { store, database in
            guard case .sqlite(let path) = database else { return }
            let alice = try await store.login(email: "alice@example.com")
            let deposit = try await store.deposit(
                email: "alice@example.com",
                amountCents: 900,
                reference: "D",
                actor: "op"
            )
            let (payout, _) = try await store.requestPayout(userID: alice.id, amountCents: 200, idempotencyKey: "k")
            try await Self.expectSound(store)
            let queue = try DatabaseQueue(path: path)
            // Marked settled without its settlement's transfer.
            try await queue.write { db in
                try db.execute(sql: "UPDATE payouts SET status = 'SETTLED' WHERE id = ?", arguments: [payout.id])
            }
            var verification = try await store.verify()
            #expect(verification.failure?.contains("payout \(payout.id) is SETTLED") == true, "\(verification)")
            try await queue.write { db in
                try db.execute(sql: "UPDATE payouts SET status = 'PENDING' WHERE id = ?", arguments: [payout.id])
                try db.execute(
                    sql: "UPDATE deposits SET amount_cents = 1900 WHERE id = ?",
                    arguments: [deposit.deposit.id]
                )
            }
            verification = try await store.verify()
            #expect(verification.failure?.contains("deposit \(deposit.deposit.id)") == true, "\(verification)")
        }
    }

    @Test("POST /wallet/payouts over HTTP: taken, replayed, refused without a key or for a reused key or an API key")
    func overHTTP() async throws {
        for kind in StoreKind.available {
            try await TestLedger.with(store: kind) { ledger in
                let alice = try await ledger.client("alice@example.com", funded: 1_000)
                let (payout, replayed) = try await alice.requestPayout(amountCents: 250, idempotencyKey: "http-1")
                #expect(!replayed)
                #expect(payout.newBalanceCents == 750)
                let (again, replay) = try await alice.requestPayout(amountCents: 250, idempotencyKey: "http-1")
                #expect(replay)
                #expect(again == payout)
                #expect(
                    await problemKind { try await alice.requestPayout(amountCents: 251, idempotencyKey: "http-1") }
                        == .idempotencyKeyReused
                )
                #expect(
                    await problemKind { try await alice.requestPayout(amountCents: 5_000, idempotencyKey: "http-2") }
                        == .insufficientFunds
                )
                let noKey = try await ledger.raw(
                    "POST",
                    "/wallet/payouts",
                    body: #"{"amount_cents": 10}"#,
                    headers: ["Authorization": "Bearer \(alice.token ?? "")", "Content-Type": "application/json"]
                )
                #expect(noKey.status == 400 && TestLedger.problemKind(noKey.body) == .idempotencyKeyMissing)
                let secret = try await ledger.store.createAPIKey(
                    email: "alice@example.com",
                    name: "till",
                    scopes: Set(APIKeyScope.allCases),
                    actor: "test"
                ).secret
                let terminal = LedgerClient(baseURL: ledger.url, token: secret)
                #expect(
                    await problemKind { try await terminal.requestPayout(amountCents: 10, idempotencyKey: "key-1") }
                        == .forbidden
                )
                let wallet = try await alice.wallet()
                #expect(wallet.availableCents == 750)
                #expect(wallet.recent.map(\.type) == ["PAYOUT", "DEV_FUND"])
                try await Self.expectSound(ledger.store)
            }
        }
    }
}

/// `gotchu admin deposit`, `gotchu payout` and `gotchu admin payout` as an operator and a user run them: real
/// processes, a real server without `--dev`, on each store.
@Suite("gotchu admin deposit and payouts as processes", .timeLimit(.minutes(10)))
struct DepositPayoutCommandTests {
    @Test(
        "A deposit once per reference, a payout taken by the user, listed, settled once; verify passes",
        arguments: StoreKind.available
    )
    func operatorAndUser(store: StoreKind) async throws {
        try await AdminCommandTests.withDatabase(store) { database, environment in
            let db = ["--database", database]
            let gotchu = AdminCommandTests.gotchu
            let add = try await gotchu(
                ["admin", "user", "add", "alice@example.com", "--password-stdin", "--bcrypt-cost", "10"] + db,
                environment,
                AdminCommandTests.password + "\n"
            )
            #expect(add.status == 0, "\(add.error)")
            let deposit = try await gotchu(
                ["admin", "deposit", "alice@example.com", "12.50", "--reference", "BANK-1"] + db,
                environment,
                nil
            )
            #expect(deposit.status == 0, "\(deposit.error)")
            #expect(deposit.lines.first?.hasPrefix("deposited: deposit ") == true, "\(deposit.lines)")
            #expect(deposit.lines.first?.hasSuffix("balance $12.50") == true, "\(deposit.lines)")
            let again = try await gotchu(
                ["admin", "deposit", "alice@example.com", "12.50", "--reference", "BANK-1"] + db,
                environment,
                nil
            )
            #expect(again.status == 0, "\(again.error)")
            #expect(again.lines.first?.hasPrefix("already deposited: ") == true, "\(again.lines)")
            let other = try await gotchu(
                ["admin", "deposit", "alice@example.com", "13.00", "--reference", "BANK-1"] + db,
                environment,
                nil
            )
            #expect(other.status != 0)
            #expect(other.error.contains("a new deposit needs a new reference"), "\(other.error)")
            let hostile = try await gotchu(
                ["admin", "deposit", "alice@example.com", "1.00", "--reference", "BANK\u{1B}[2J"] + db,
                environment,
                nil
            )
            #expect(hostile.status != 0)
            #expect(hostile.error.contains("printable"), "\(hostile.error)")
            #expect(!hostile.error.contains("\u{1B}"))
            let badAmount = try await gotchu(
                ["admin", "deposit", "alice@example.com", "12.505", "--reference", "BANK-2"] + db,
                environment,
                nil
            )
            #expect(badAmount.status != 0)

            let server = try RunningCommand(
                try BuiltProducts.gotchu,
                ["server", "--port", "0", "--jwt-secret", String(repeating: "k", count: 40)] + db,
                environment: environment
            )
            let line = try await server.waitForLine { $0.hasPrefix("listening on http://127.0.0.1:") }
            let url = String(line.dropFirst("listening on ".count))
            let login = try await gotchu(
                ["login", "--email", "alice@example.com", "--password-stdin", "--server", url],
                environment,
                AdminCommandTests.password + "\n"
            )
            #expect(login.status == 0, "\(login.error)")
            let payout = try await gotchu(["payout", "--amount", "5.00", "--server", url], environment, nil)
            #expect(payout.status == 0, "\(payout.error)")
            let words = payout.lines.first?.split(separator: " ") ?? []
            #expect(words.first == "payout" && words.count > 1, "\(payout.lines)")
            let id = words.count > 1 ? String(words[1]) : ""
            #expect(payout.lines.first?.hasSuffix("is pending; balance $7.50") == true, "\(payout.lines)")
            let wallet = try await gotchu(["wallet", "--server", url], environment, nil)
            #expect(wallet.lines.contains { $0.contains("PAYOUT") && $0.contains("-$5.00") }, "\(wallet.lines)")
            #expect(wallet.lines.contains { $0.contains("DEPOSIT") && $0.contains("+$12.50") }, "\(wallet.lines)")
            _ = try await server.stop()

            let list = try await gotchu(["admin", "payout", "list", "--status", "pending"] + db, environment, nil)
            #expect(list.status == 0, "\(list.error)")
            #expect(list.lines.count == 2, "\(list.lines)")
            let columns = list.lines.last?.split(separator: " ").prefix(4).map(String.init)
            #expect(columns == [id, "PENDING", "$5.00", "alice@example.com"], "\(list.lines)")
            let settle = try await gotchu(
                ["admin", "payout", "settle", id, "--reference", "SEPA-9"] + db,
                environment,
                nil
            )
            #expect(settle.status == 0, "\(settle.error)")
            #expect(settle.lines == ["settled payout \(id) of $5.00, reference \"SEPA-9\""], "\(settle.lines)")
            let fail = try await gotchu(["admin", "payout", "fail", id, "--reason", "late"] + db, environment, nil)
            #expect(fail.status != 0)
            #expect(fail.error.contains("settled already"), "\(fail.error)")
            let settled = try await gotchu(["admin", "payout", "list", "--status", "settled"] + db, environment, nil)
            #expect(settled.lines.last?.contains("\"SEPA-9\"") == true, "\(settled.lines)")
            let none = try await gotchu(["admin", "payout", "list", "--status", "pending"] + db, environment, nil)
            #expect(none.lines == ["no payouts pending"], "\(none.lines)")
            let badID = try await gotchu(
                ["admin", "payout", "settle", "nope", "--reference", "X"] + db,
                environment,
                nil
            )
            #expect(badID.status != 0)

            let audit = try await gotchu(["admin", "audit"] + db, environment, nil)
            #expect(audit.lines.contains { $0.contains("  deposit  alice@example.com") }, "\(audit.lines)")
            #expect(audit.lines.contains { $0.contains("  payout.settle  \(id)") }, "\(audit.lines)")
            let verify = try await gotchu(["ledger", "verify"] + db, environment, nil)
            #expect(verify.status == 0, "\(verify.lines) \(verify.error)")
            #expect(
                verify.lines.contains { $0.contains("deposits and payouts: 1 deposits, 1 payouts") },
                "\(verify.lines)"
            )
        }
    }
}
