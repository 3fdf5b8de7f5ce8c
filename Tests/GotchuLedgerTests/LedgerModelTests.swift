import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerAPI
import GotchuLedgerPostgres
import GotchuLedgerTesting
import GotchuSimulatedRadio
import PostgresNIO
import Testing

/// Random operations against a store and the in-memory ``LedgerModel``: every answer must match the model's, and
/// after every step the audit must be healthy and every balance equal the model's; after every batch of
/// ``verifyBatch`` steps `gotchu ledger verify`'s checks must pass.
///
/// `GOTCHU_MODEL_SEED=N` replays one run (the seed a failure prints; the two concurrent operations may interleave
/// differently on a replay, everything else repeats); `GOTCHU_MODEL_STEPS` sets its length.
@Suite("Model-based: random operations against an oracle", .timeLimit(.minutes(10)))
struct LedgerModelTests {
    static let users = 5
    /// How many steps run between two whole-ledger verifications.
    static let verifyBatch = 100

    /// Ten independent runs of 1,000 steps each (10,000 operations per store), each on a fresh store so the audit
    /// stays cheap; or the one run named by `GOTCHU_MODEL_SEED`.
    static var runs: [(seed: UInt64, steps: Int)] {
        let environment = ProcessInfo.processInfo.environment
        let steps = environment["GOTCHU_MODEL_STEPS"].flatMap(Int.init) ?? 1_000
        if let seed = environment["GOTCHU_MODEL_SEED"].flatMap(UInt64.init) { return [(seed, steps)] }
        var generator = SystemRandomNumberGenerator()
        return (0..<10).map { _ in (UInt64.random(in: 0...UInt64(Int64.max), using: &generator), steps) }
    }

    /// Outcomes the ten default runs must each have met at least once between them, so a generator that drifts
    /// away from splits, tips and refunds is noticed rather than passing on easy paths. Each comes up a dozen times
    /// or more in a default run (rarer ones, such as a refund naming an unknown payment, have tests of their own).
    static let expectedOutcomes = [
        "create refused(invalid-shares)", "lock ok (split)", "lock refused(no-free-share)",
        "lock refused(invalid-shares)", "send ok (share)", "send ok (last share)", "send ok (tip)",
        "send refused(invalid-tip)", "send refused(lock-required)", "cancel returned payments",
        "sweep returned payments", "refund ok (payment)", "refund refused(bad-request)", "pay shown ok",
        "pay shown amount changed", "pay shown paid before",
        "refund refused(refund-exceeds-payment)", "race matched", "view ok (split)", "expiries noted",
    ]

    @Test("10,000 random operations match the oracle; invariants hold after every step", arguments: StoreKind.available)
    func randomOperations(store kind: StoreKind) async throws {
        var seen: [String: Int] = [:]
        for run in Self.runs {
            do {
                seen.merge(try await Self.run(kind, seed: run.seed, steps: run.steps)) { $0 + $1 }
            } catch let failure as ModelFailure {
                Issue.record(
                    "\(kind) seed \(run.seed), step \(failure.step): \(failure.message)\nreplay: GOTCHU_MODEL_SEED=\(run.seed) swift test --filter LedgerModelTests"
                )
                return
            }
        }
        if Self.runs.count == 10 && Self.runs.allSatisfy({ $0.steps >= 1_000 }) {
            let missing = Self.expectedOutcomes.filter { seen[$0, default: 0] == 0 }
            #expect(missing.isEmpty, "never met: \(missing); met: \(seen.sorted { $0.key < $1.key })")
        }
    }

    struct ModelFailure: Error {
        var step: Int
        var message: String
    }

    /// One run; returns how often it met each outcome.
    static func run(_ kind: StoreKind, seed: UInt64, steps: Int) async throws -> [String: Int] {
        let clock = ManualClock()
        return try await TestStore.with(kind, clock: clock) { store, database, services in
            try await withServices(services) {
                try await store.migrate()
                var driver = try await Driver(store: store, database: database, clock: clock, seed: seed)
                for step in 0..<steps {
                    do {
                        try await driver.step()
                        try await driver.check()
                        // The whole-ledger audit after every batch (and the last step): chain, balances from
                        // entries, sessions against their payments, receipts against their keys.
                        if step % Self.verifyBatch == Self.verifyBatch - 1 || step == steps - 1 {
                            try await driver.verify()
                        }
                    } catch let failure as DriverFailure {
                        throw ModelFailure(step: step, message: failure.message + "\nlast operations:\n" + driver.trace)
                    }
                }
                return driver.seen
            }
        }
    }
}

struct DriverFailure: Error {
    var message: String
}

/// Drives one store with random operations and checks each answer against the model.
struct Driver {
    let store: any LedgerStore
    let database: TestDatabase
    let clock: ManualClock
    var model: LedgerModel
    var random: SplitMix64
    var users: [LedgerUser] = []
    var sids: [String] = []
    var keyCounter = 0
    var recent: [String] = []
    let balances: BalanceReader
    /// The sessions the current step touched: their status is checked against the model after it.
    var touched: Set<String> = []
    /// How often each outcome was met ("send refused(invalid-tip)", "sweep returned payments").
    var seen: [String: Int] = [:]

    mutating func saw(_ outcome: String) { seen[outcome, default: 0] += 1 }

    /// Reads the wallet rows under the store, so the check does not trust the store's own answers.
    enum BalanceReader {
        case sqlite(DatabaseQueue)
        case postgres(PostgresClient)

        func read() async throws -> [String: Cents] {
            switch self {
            case .sqlite(let database):
                return try await database.read { db in
                    var balances: [String: Cents] = [:]
                    for row in try Row.fetchAll(
                        db,
                        sql: "SELECT user_id, available_cents FROM wallet_accounts WHERE user_id IS NOT NULL"
                    ) {
                        balances[row["user_id"]] = row["available_cents"]
                    }
                    return balances
                }
            case .postgres(let client):
                var balances: [String: Cents] = [:]
                let rows = try await client.query(
                    "SELECT user_id, available_cents FROM wallet_accounts WHERE user_id IS NOT NULL"
                )
                for try await (user, balance) in rows.decode((String, Int64).self) { balances[user] = balance }
                return balances
            }
        }
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    init(store: any LedgerStore, database: TestDatabase, clock: ManualClock, seed: UInt64) async throws {
        self.store = store
        self.database = database
        self.clock = clock
        self.random = SplitMix64(seed: seed)
        self.model = LedgerModel(
            users: LedgerModelTests.users,
            policy: store.policy,
            now: Self.milliseconds(clock.now())
        )
        switch database {
        case .sqlite(let path): self.balances = .sqlite(try DatabaseQueue(path: path))
        case .postgres: self.balances = .postgres((store as! PostgresLedgerStore).client)
        }
        for index in 0..<LedgerModelTests.users {
            users.append(try await store.login(email: "user\(index)@model.example"))
        }
    }

    var trace: String { recent.suffix(8).joined(separator: "\n") }

    mutating func note(_ line: String) {
        recent.append(line)
        if recent.count > 16 { recent.removeFirst(8) }
    }

    mutating func user() -> Int { Int.random(in: 0..<users.count, using: &random) }

    mutating func session() -> String? {
        sids.isEmpty ? nil : sids[Int.random(in: 0..<sids.count, using: &random)]
    }

    mutating func freshKey() -> String {
        keyCounter += 1
        return "k\(keyCounter)"
    }

    /// A key this payer used before, if any.
    mutating func usedKey(of payer: Int) -> (key: String, sid: String)? {
        let prefix = "\(payer)/"
        let mine = model.keys.filter { $0.key.hasPrefix(prefix) }.sorted { $0.key < $1.key }
        guard !mine.isEmpty else { return nil }
        let (scoped, state) = mine[Int.random(in: 0..<mine.count, using: &random)]
        let sid: String
        switch state {
        case .inFlight(let first, _), .done(let first, _): sid = first
        }
        return (String(scoped.dropFirst(prefix.count)), sid)
    }

    mutating func step() async throws {
        touched = []
        let roll = Int.random(in: 0..<112, using: &random)
        switch roll {
        case 0..<8:
            let user = user()
            let amount = Cents.random(in: 1...5_000, using: &random)
            note("fund u\(user) \(amount)")
            let balance = try await store.fund(userID: users[user].id, amountCents: amount)
            try expect(.ok(balance), model.fund(user, amount), "fund")
        case 8..<22:
            try await create()
        case 22..<28:
            guard let sid = session() else { return }
            note("resolve \(sid.prefix(8))")
            let eid = model.sessions[sid]!.eid
            var resolved: ResolvedSession?
            let actual = await outcome {
                resolved = try await store.resolve(eid: eid)
                return resolved?.amount
            }
            try expect(actual, model.resolve(sid), "resolve")
            if let resolved {
                let expected = model.resolvedShares(sid)
                let got = (resolved.shares, resolved.sharesPaid, resolved.shareCents, resolved.remaining)
                guard got == expected else { throw DriverFailure(message: "resolve: store \(got), model \(expected)") }
            }
        case 28..<41:
            guard let sid = session() else { return }
            try await lock(sid, by: user(), shares: shareCount(for: sid))
        case 41..<44:
            guard let sid = lockedSession() ?? session() else { return }
            touched.insert(sid)
            let holder = lockHolder(sid)
            let payer = Int.random(in: 0..<4, using: &random) == 0 ? user() : holder ?? user()
            note("unlock \(sid.prefix(8)) by u\(payer)")
            let actual = await outcome { () -> Cents? in
                try await store.unlock(sid: sid, payerID: users[payer].id)
                return nil
            }
            try expect(actual, model.unlock(sid, by: payer), "unlock")
        case 44..<62:
            guard let sid = lockedSession() ?? session() else { return }
            let payer = lockHolder(sid) ?? user()
            let key = freshKey()
            try await send(sid, by: payer, key: key, tip: tip(sid, by: payer))
        case 62..<68:
            // Retry with a key used before: the same session replays, another session is refused.
            let payer = user()
            guard let used = usedKey(of: payer) else { return }
            let sid = Int.random(in: 0..<4, using: &random) == 0 ? (session() ?? used.sid) : used.sid
            try await send(sid, by: payer, key: used.key)
        case 68..<72:
            try await concurrentDuplicates()
        case 72..<75:
            try await concurrentLocks()
        case 75..<78:
            // A server admits the key and dies before paying.
            guard let sid = lockedSession() ?? session() else { return }
            let payer = lockHolder(sid) ?? user()
            let key = freshKey()
            note("admit only \(sid.prefix(8)) by u\(payer) key \(key)")
            guard let admitting = store as? any SendAdmitting else {
                throw DriverFailure(message: "the store cannot admit a key alone")
            }
            let admission = try await admitting.beginSend(sid: sid, payerID: users[payer].id, idempotencyKey: key)
            guard admission == .proceed else { throw DriverFailure(message: "new key not admitted: \(admission)") }
            model.admitOnly(sid, by: payer, key: key)
        case 78..<83:
            // Often a split with shares paid: its cancel returns them.
            let partlyPaid = sids.filter { model.status(model.sessions[$0]!) == .partiallyPaid }
            let pickPartlyPaid = !partlyPaid.isEmpty && Bool.random(using: &random)
            guard
                let sid = pickPartlyPaid
                    ? partlyPaid[Int.random(in: 0..<partlyPaid.count, using: &random)] : session()
            else { return }
            let by = Int.random(in: 0..<3, using: &random) == 0 ? user() : model.sessions[sid]!.payee
            note("cancel \(sid.prefix(8)) by u\(by)")
            touched.insert(sid)
            let actual = await outcome { () -> Cents? in
                try await store.cancel(sid: sid, payeeID: users[by].id)
                return nil
            }
            let refunded = model.sessions[sid]!.refunded
            try expect(actual, model.cancel(sid, by: by), "cancel")
            if model.sessions[sid]!.refunded > refunded { saw("cancel returned payments") }
        case 83..<88:
            guard let sid = session() else { return }
            touched.insert(sid)
            let viewer = user()
            note("view \(sid.prefix(8)) by u\(viewer)")
            let expected = model.view(sid, by: viewer)
            do {
                let response = try await store.session(sid: sid, viewerID: users[viewer].id)
                guard case .success(let status) = expected, status == response.status else {
                    throw DriverFailure(message: "view: store \(response.status), model \(expected)")
                }
                // The payee sees every payment of a split, a payer its own.
                let session = model.sessions[sid]!
                let visible = model.orderedPayments(session).map { session.payments[$0] }.filter {
                    viewer == session.payee || $0.payer == viewer
                }
                if session.isSplit { saw("view ok (split)") }
                guard response.payments.map(\.id) == visible.map(\.id) else {
                    throw DriverFailure(
                        message:
                            "view by u\(viewer): payments \(response.payments.map(\.id)), model \(visible.map(\.id))"
                    )
                }
            } catch let refusal as LedgerError {
                guard case .failure(let modelProblem) = expected, modelProblem.kind == Problem(refusal).kind else {
                    throw DriverFailure(message: "view: store \(refusal), model \(expected)")
                }
            }
        case 88..<92:
            // Deposits and payouts (LedgerModelTests+MoneyInOut.swift).
            try await moneyInOutStep()
        case 92..<95:
            try await refund()
        case 100..<104:
            // The sweep every server runs each second (LedgerModelTests+Splits.swift).
            try await sweep()
        case 104..<108:
            try await race()
        case 108..<112:
            // The web checkout's Pay (LedgerModelTests+ShownPayments.swift).
            try await payShown()
        default:
            // Time: mostly small steps, sometimes exactly onto or past a lock's lapse, the in-flight timeout or a
            // session's expiry (the boundaries are where off-by-one mistakes hide).
            let model = self.model
            let partlyPaid = sids.lazy.map { model.sessions[$0]! }.first { model.status($0) == .partiallyPaid }
            let seconds: Double =
                switch Int.random(in: 0..<20, using: &random) {
                case 0: 30
                case 1: 31
                case 2: 60
                case 3: Bool.random(using: &random) ? 300 : 301
                case 4: 0.001
                case 5, 6:
                    // Exactly onto the expiry of a split with shares paid: its payments are owed back from then.
                    partlyPaid.map { Double($0.expiresAt - model.now) / 1000 } ?? 0.5
                default: Double(Int.random(in: 0...3_000, using: &random)) / 1000
                }
            note("advance \(seconds) s")
            clock.advance(seconds: seconds)
            self.model.now = Self.milliseconds(clock.now())
        }
    }

    /// A session someone holds a lock on, preferably; payments on those are the interesting ones.
    private mutating func lockedSession() -> String? {
        let locked = sids.filter { lockHolder($0) != nil }
        guard !locked.isEmpty, Int.random(in: 0..<4, using: &random) != 0 else { return nil }
        return locked[Int.random(in: 0..<locked.count, using: &random)]
    }

    private mutating func send(_ sid: String, by payer: Int, key: String, tip: Cents = 0) async throws {
        note("send \(sid.prefix(8)) by u\(payer) key \(key) tip \(tip)")
        touched.insert(sid)
        let actual = await outcome {
            try await paid(store.send(sid: sid, payerID: users[payer].id, idempotencyKey: key, tipCents: tip).0)
        }
        try expect(actual, model.send(sid, by: payer, key: key, tip: tip), "send")
        try await nameLastPayment(payer: payer, key: key)
    }

    /// Two requests with the same new key at once: one runs, the other replays its outcome or is told the key is
    /// in flight; never two payments.
    private mutating func concurrentDuplicates() async throws {
        guard let sid = lockedSession() ?? session() else { return }
        let payer = lockHolder(sid) ?? user()
        let key = freshKey()
        note("duplicate sends \(sid.prefix(8)) by u\(payer) key \(key)")
        let store = self.store
        let payerID = users[payer].id
        let first = Task { try await store.send(sid: sid, payerID: payerID, idempotencyKey: key) }
        let second = Task { try await store.send(sid: sid, payerID: payerID, idempotencyKey: key) }
        let results = [await first.result, await second.result]
        touched.insert(sid)
        let expected = model.send(sid, by: payer, key: key)
        try await nameLastPayment(payer: payer, key: key)
        let fresh = results.compactMap { result -> LedgerModel.Expected? in
            guard case .success((let outcome, false)) = result else { return nil }
            return Self.expected(outcome)
        }
        // An outcome that is not stored leaves the key free, so the second may run afresh to the same refusal.
        let runs = LedgerModel.isRecorded(expected) ? 1...1 : 1...2
        guard runs.contains(fresh.count), fresh.allSatisfy({ $0 == expected }) else {
            throw DriverFailure(message: "duplicates: \(results), model \(expected)")
        }
        for result in results {
            switch result {
            case .success((let outcome, true)) where Self.expected(outcome) == expected: continue
            case .success((_, false)): continue
            case .failure(let refusal as LedgerError) where refusal.kind == .idempotencyInFlight: continue
            default: throw DriverFailure(message: "duplicates: \(results), model \(expected)")
            }
        }
    }

    /// Two payers lock one session at once: if both may, exactly one wins and the other is told it is locked.
    private mutating func concurrentLocks() async throws {
        guard let sid = session() else { return }
        let payers = (user(), user())
        guard payers.0 != payers.1 else { return }
        let counts = (shareCount(for: sid), shareCount(for: sid))
        note("concurrent locks \(sid.prefix(8)) by u\(payers.0) (\(counts.0)) and u\(payers.1) (\(counts.1))")
        touched.insert(sid)
        let store = self.store
        let ids = (users[payers.0].id, users[payers.1].id)
        let first = Task { try await store.lock(sid: sid, payerID: ids.0, shares: counts.0) }
        let second = Task { try await store.lock(sid: sid, payerID: ids.1, shares: counts.1) }
        let results = [await first.result, await second.result]
        // The store took them in some order; the model must agree with one of the two.
        var mismatches: [String] = []
        for order in [[0, 1], [1, 0]] {
            var candidate = model
            var matches = true
            for index in order {
                let payer = index == 0 ? payers.0 : payers.1
                let expected = candidate.lock(sid, by: payer, shares: index == 0 ? counts.0 : counts.1)
                let actual: LedgerModel.Expected =
                    switch results[index] {
                    case .success(let locked) where locked.shareNumbers == candidate.lastLockedShares:
                        .ok(locked.amount)
                    case .success: .refused(.internalError)
                    case .failure(let refusal as LedgerError): .refused(Problem(refusal).kind ?? .internalError)
                    case .failure(let error): throw error
                    }
                if actual != expected {
                    matches = false
                    mismatches.append("u\(payer): store \(actual), model \(expected)")
                }
            }
            if matches {
                model = candidate
                return
            }
        }
        throw DriverFailure(message: "concurrent locks match no order: \(mismatches)")
    }

    private func paid(_ outcome: SendOutcome) throws -> Cents? {
        switch outcome {
        case .paid(let balance): return balance
        case .refused(let refusal): throw refusal
        }
    }

    private static func expected(_ outcome: SendOutcome) -> LedgerModel.Expected {
        switch outcome {
        case .paid(let balance): .ok(balance)
        case .refused(let refusal): .refused(Problem(refusal).kind ?? .internalError)
        }
    }

    func outcome(_ body: () async throws -> Cents?) async -> LedgerModel.Expected {
        do {
            return .ok(try await body())
        } catch let refusal as LedgerError {
            return .refused(Problem(refusal).kind ?? .internalError)
        } catch {
            return .refused(.internalError)
        }
    }

    mutating func expect(_ actual: LedgerModel.Expected, _ expected: LedgerModel.Expected, _ what: String) throws {
        guard actual == expected else { throw DriverFailure(message: "\(what): store \(actual), model \(expected)") }
        if case .refused(let kind) = expected { saw("\(what) refused(\(kind.rawValue))") }
    }

    /// A refund of a session, mostly a paid one by its payee, sometimes under a key used before (a replay, or a
    /// reuse with another request); the status must show the model's refunded total.
    private mutating func refund() async throws {
        let paid = sids.filter { model.sessions[$0]!.paidBy != nil }
        let pickPaid = !paid.isEmpty && Int.random(in: 0..<5, using: &random) != 0
        guard let sid = pickPaid ? paid[Int.random(in: 0..<paid.count, using: &random)] : session() else { return }
        let session = model.sessions[sid]!
        let by = Int.random(in: 0..<6, using: &random) == 0 ? user() : session.payee
        // Of a split, mostly one of its payments (up to a little more than it paid); sometimes none, or an unknown
        // one; of a session of one share, sometimes a payment id it cannot have.
        var paymentID: String?
        var amount = Cents.random(in: 1...max(1, session.amount * 2 / 3), using: &random)
        switch (session.isSplit, Int.random(in: 0..<10, using: &random)) {
        case (true, 0): paymentID = nil
        case (true, 1), (true, 2), (false, 0): paymentID = UUID().uuidString.lowercased()
        case (true, _):
            if let payment = session.payments.randomElement(using: &random) {
                paymentID = payment.id
                amount = Cents.random(in: 1...(payment.amount + payment.tip + 1), using: &random)
            } else {
                paymentID = UUID().uuidString.lowercased()
            }
        default: break
        }
        let mine = model.refundKeys.keys.filter { $0.hasPrefix("\(by)/") }.sorted()
        let key =
            !mine.isEmpty && Int.random(in: 0..<4, using: &random) == 0
            ? String(mine[Int.random(in: 0..<mine.count, using: &random)].drop { $0 != "/" }.dropFirst())
            : freshKey()
        // A replay of the same request half of the times a used key is taken.
        let replayed = model.refundKeys["\(by)/\(key)"]
        let (refundSID, refundAmount, refundPayment) =
            replayed.map {
                Bool.random(using: &random) ? ($0.sid, $0.amount, $0.paymentID) : (sid, amount, paymentID)
            } ?? (sid, amount, paymentID)
        note("refund \(refundSID.prefix(8)) \(refundAmount) of \(refundPayment?.prefix(8) ?? "-") by u\(by) key \(key)")
        touched.insert(refundSID)
        let actual = await outcome {
            try await store.refund(
                sid: refundSID,
                payeeID: users[by].id,
                amountCents: refundAmount,
                paymentID: refundPayment,
                idempotencyKey: key
            ).refund.refundedTotal
        }
        let expected = model.refund(refundSID, by: by, amount: refundAmount, paymentID: refundPayment, key: key)
        try expect(actual, expected, "refund")
        if case .ok = expected, refundPayment != nil { saw("refund ok (payment)") }
        let status = try await store.session(sid: refundSID, viewerID: users[model.sessions[refundSID]!.payee].id)
        guard status.refunded == model.sessions[refundSID]!.refunded else {
            throw DriverFailure(
                message: "refunded total: store \(status.refunded), model \(model.sessions[refundSID]!.refunded)"
            )
        }
    }

    /// `gotchu ledger verify`'s checks over the whole ledger.
    func verify() async throws {
        let verification = try await store.verify()
        if let failure = verification.failure { throw DriverFailure(message: "verify: \(failure)") }
    }

    /// The invariants: a healthy audit, and every balance (read from the wallet rows) equal to the model's.
    func check() async throws {
        let audit = try await store.audit()
        guard audit.isHealthy else { throw DriverFailure(message: "audit: \(audit)") }
        let stored = try await balances.read()
        for (index, user) in users.enumerated() where stored[user.id] != model.balances[index] {
            throw DriverFailure(
                message: "balance of u\(index): store \(stored[user.id] ?? -1), model \(model.balances[index])"
            )
        }
        for sid in touched.sorted() { try await checkSession(sid) }
        try await checkWebhookEvents()
    }
}
