import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerTesting
import Logging
import PostgresNIO
import Testing

/// Where a race runs: one store of each kind, or two replicas (engines with pools of their own) on one PostgreSQL
/// database, sharing one manual clock.
enum SplitRaceTopology: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres
    case postgresReplicas = "2 PostgreSQL replicas"

    static var available: [SplitRaceTopology] { TestPostgres.server == nil ? [.sqlite] : allCases }

    var testDescription: String { rawValue }

    /// Runs `body` with the topology's stores (migrated), first one first, on `clock`.
    func with(
        policy: LedgerPolicy = LedgerPolicy(),
        clock: ManualClock,
        _ body: @Sendable ([any LedgerStore]) async throws -> Void
    ) async throws {
        switch self {
        case .sqlite, .postgres:
            try await TestStore.with(self == .sqlite ? .sqlite : .postgres, policy: policy, clock: clock) {
                store,
                _,
                services in
                try await withServices(services) {
                    try await store.migrate()
                    try await body([store])
                }
            }
        case .postgresReplicas:
            try await TestPostgres.withDatabase { url in
                let logger = Logger(label: "split-replicas") { _ in SwiftLogNoOpLogHandler() }
                let stores = (0..<2).map { _ in
                    PostgresLedgerStore(
                        url: url,
                        policy: policy,
                        clock: { clock.now() },
                        maximumConnections: 4,
                        connectionWait: TestPostgres.connectionWait,
                        logger: logger
                    )
                }
                try await withServices(stores.map(\.client)) {
                    try await stores[0].migrate()
                    try await stores[1].migrate()
                    try await body(stores)
                }
            }
        }
    }
}

/// Splits under concurrency: payers racing for shares, a cancel racing the last share's send, sweeps running at
/// once; on each store, and across two replicas of one PostgreSQL database. One test at a time, each with small
/// pools: the races are inside each test, and the suite's PostgreSQL connections stay few.
@Suite("Group splits under races", .serialized, .timeLimit(.minutes(10)))
struct SplitRaceTests {
    /// What one racer was answered.
    enum Answer: Hashable, Sendable {
        case paid
        case refused(lock: ProblemKind, send: ProblemKind)
        case other(String)
    }

    static func kind(_ error: any Error) -> ProblemKind {
        (error as? LedgerError).flatMap { ProblemKind(rawValue: $0.kind.rawValue) } ?? .internalError
    }

    static func balance(_ store: any LedgerStore, _ user: LedgerUser) async throws -> Cents {
        try await store.wallet(userID: user.id, recentLimit: 0).balance
    }

    static func verified(_ store: any LedgerStore) async throws {
        let audit = try await store.audit()
        #expect(audit.isHealthy, "\(audit)")
        let verification = try await store.verify()
        #expect(verification.failure == nil, "\(verification)")
    }

    @Test(
        "2×N payers race for the N shares of a split: exactly N paid, the sum exact, the losers refused with nothing moved",
        arguments: SplitRaceTopology.available
    )
    func payersRaceForShares(topology: SplitRaceTopology) async throws {
        try await topology.with(clock: ManualClock()) { stores in
            let store = stores[0]
            let shares = 6
            let payee = try await store.login(email: "payee@race.example")
            var payers: [LedgerUser] = []
            for index in 0..<(2 * shares) {
                let payer = try await store.login(email: "payer\(index)@race.example")
                _ = try await store.fund(userID: payer.id, amountCents: 5_000)
                payers.append(payer)
            }
            let (session, _) = try await store.createSession(
                payeeID: payee.id,
                amountCents: 1_003,
                shares: shares,
                idempotencyKey: nil
            )
            let answers = await withTaskGroup(of: (Int, Answer).self) { group in
                for (index, payer) in payers.enumerated() {
                    // Each racer goes through one of the replicas, alternately.
                    let store = stores[index % stores.count]
                    group.addTask {
                        let tip = Cents(index)
                        var lockRefusal: ProblemKind?
                        do {
                            _ = try await store.lock(sid: session.sid, payerID: payer.id, shares: 1)
                        } catch {
                            lockRefusal = Self.kind(error)
                        }
                        // A loser pays anyway: it must be refused, having locked nothing.
                        do {
                            let (outcome, _) = try await store.send(
                                sid: session.sid,
                                payerID: payer.id,
                                idempotencyKey: "race-\(index)",
                                tipCents: tip
                            )
                            switch (outcome, lockRefusal) {
                            case (.paid, nil): return (index, .paid)
                            case (.refused(let refusal), let lock?):
                                return (index, .refused(lock: lock, send: Self.kind(refusal)))
                            default: return (index, .other("lock \(String(describing: lockRefusal)), send \(outcome)"))
                            }
                        } catch {
                            return (index, .other("send threw \(error)"))
                        }
                    }
                }
                return await group.reduce(into: [Int: Answer]()) { $0[$1.0] = $1.1 }
            }
            let winners = answers.filter { $0.value == .paid }.map(\.key).sorted()
            #expect(winners.count == shares, "\(answers)")
            let losers = answers.filter { $0.value != .paid }
            // Refused at the lock while shares were held by others (no-free-share), or once all were paid
            // (session-already-paid); then at the send for holding no share (lock-required), or for the same.
            let allowed: Set<Answer> = [
                .refused(lock: .noFreeShare, send: .lockRequired),
                .refused(lock: .noFreeShare, send: .sessionAlreadyPaid),
                .refused(lock: .sessionAlreadyPaid, send: .sessionAlreadyPaid),
            ]
            #expect(losers.allSatisfy { allowed.contains($0.value) }, "\(losers)")
            for index in losers.keys { #expect(try await Self.balance(store, payers[index]) == 5_000) }
            let tips = winners.reduce(Cents(0)) { $0 + Cents($1) }
            var shareCents = [Int: Cents]()
            for (share, cents) in LedgerModel.shareAmounts(1_003, shares).enumerated() { shareCents[share + 1] = cents }
            let view = try await stores[stores.count - 1].session(sid: session.sid, viewerID: payee.id)
            #expect(view.status == .paid && view.sharesPaid == shares && view.paid == 1_003 && view.tip == tips)
            #expect(view.payments.flatMap(\.shareNumbers).sorted() == Array(1...shares))
            // Each winner paid exactly one share, its amount, and its own tip.
            for payment in view.payments {
                #expect(payment.shareNumbers.count == 1)
                #expect(payment.amount == payment.shareNumbers.reduce(0) { $0 + shareCents[$1]! })
            }
            #expect(view.payments.map(\.tip).sorted() == winners.map { Cents($0) })
            var paidOut: Cents = 0
            for index in winners { paidOut += 5_000 - (try await Self.balance(store, payers[index])) }
            #expect(paidOut == 1_003 + tips)
            #expect(try await Self.balance(store, payee) == 1_003 + tips)
            try await Self.verified(store)
        }
    }

    @Test(
        "Payers asking 1 to 3 shares at once: no share paid twice, every payment exactly its shares",
        arguments: SplitRaceTopology.available
    )
    func payersRaceForSeveralShares(topology: SplitRaceTopology) async throws {
        try await topology.with(clock: ManualClock()) { stores in
            let store = stores[0]
            let shares = 10
            let payee = try await store.login(email: "payee@race.example")
            var payers: [LedgerUser] = []
            for index in 0..<12 {
                let payer = try await store.login(email: "payer\(index)@race.example")
                _ = try await store.fund(userID: payer.id, amountCents: 5_000)
                payers.append(payer)
            }
            let (session, _) = try await store.createSession(
                payeeID: payee.id,
                amountCents: 2_007,
                shares: shares,
                idempotencyKey: nil
            )
            let amounts = LedgerModel.shareAmounts(2_007, shares)
            let outcomes = await withTaskGroup(of: (Int, LockedShares?, SendOutcome?).self) { group in
                for (index, payer) in payers.enumerated() {
                    let store = stores[index % stores.count]
                    group.addTask {
                        let locked = try? await store.lock(sid: session.sid, payerID: payer.id, shares: 1 + index % 3)
                        let sent = try? await store.send(
                            sid: session.sid,
                            payerID: payer.id,
                            idempotencyKey: "several-\(index)",
                            tipCents: 0
                        ).0
                        return (index, locked, sent)
                    }
                }
                return await group.reduce(into: [(Int, LockedShares?, SendOutcome?)]()) { $0.append($1) }
            }
            var taken: [Int] = []
            var paid: Cents = 0
            for (index, locked, sent) in outcomes {
                let balance = try await Self.balance(store, payers[index])
                if let locked {
                    #expect(locked.shareNumbers.count == 1 + index % 3)
                    #expect(locked.amount == locked.shareNumbers.reduce(0) { $0 + amounts[$1 - 1] })
                    #expect(sent == .paid(newBalanceCents: 5_000 - locked.amount), "\(String(describing: sent))")
                    #expect(balance == 5_000 - locked.amount)
                    taken += locked.shareNumbers
                    paid += locked.amount
                } else {
                    #expect(balance == 5_000)
                    guard case .refused(let refusal)? = sent else {
                        Issue.record("payer \(index) locked nothing but paid: \(String(describing: sent))")
                        continue
                    }
                    #expect([.lockRequired, .sessionAlreadyPaid].contains(refusal.kind))
                }
            }
            #expect(taken.count == Set(taken).count, "a share was taken twice: \(taken.sorted())")
            let view = try await stores[stores.count - 1].session(sid: session.sid, viewerID: payee.id)
            #expect(view.payments.flatMap(\.shareNumbers).sorted() == taken.sorted())
            #expect(view.paid == paid && view.sharesPaid == taken.count)
            #expect(try await Self.balance(store, payee) == paid)
            try await Self.verified(store)
        }
    }

    @Test(
        "The payee's cancel racing the last share's send: PAID with nothing refunded, or CANCELLED with every payment refunded",
        arguments: SplitRaceTopology.available
    )
    func cancelRacesLastShare(topology: SplitRaceTopology) async throws {
        try await topology.with(clock: ManualClock()) { stores in
            let store = stores[0]
            let payee = try await store.login(email: "payee@race.example")
            var payers: [LedgerUser] = []
            for index in 0..<4 {
                let payer = try await store.login(email: "payer\(index)@race.example")
                _ = try await store.fund(userID: payer.id, amountCents: 100_000)
                payers.append(payer)
            }
            var outcomes: [String: Int] = [:]
            for round in 0..<16 {
                let before = try await payers.asyncMap { try await Self.balance(store, $0) }
                let payeeBefore = try await Self.balance(store, payee)
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: 1_001,
                    shares: 4,
                    idempotencyKey: nil
                )
                // Three shares paid, with tips; the fourth locked by its payer.
                for index in 0..<3 {
                    _ = try await store.lock(sid: session.sid, payerID: payers[index].id, shares: 1)
                    let (outcome, _) = try await store.send(
                        sid: session.sid,
                        payerID: payers[index].id,
                        idempotencyKey: "r\(round)-\(index)",
                        tipCents: Cents(10 * index)
                    )
                    #expect(outcome.isPaid)
                }
                _ = try await stores[1 % stores.count].lock(sid: session.sid, payerID: payers[3].id, shares: 1)
                let sendStore = stores[round % stores.count]
                let cancelStore = stores[(round + 1) % stores.count]
                let lastPayer = payers[3].id
                let send = { @Sendable in
                    await Result {
                        try await sendStore.send(
                            sid: session.sid,
                            payerID: lastPayer,
                            idempotencyKey: "r\(round)-last",
                            tipCents: 7
                        ).0
                    }
                }
                let cancel = { @Sendable in
                    await Result { try await cancelStore.cancel(sid: session.sid, payeeID: payee.id) }
                }
                // Started in either order by turns, so both outcomes come up.
                let (sent, cancelled): (Result<SendOutcome, any Error>, Result<Void, any Error>)
                if round % 2 == 0 {
                    async let first = send()
                    async let second = cancel()
                    (sent, cancelled) = await (first, second)
                } else {
                    async let first = cancel()
                    async let second = send()
                    (cancelled, sent) = await (first, second)
                }
                let view = try await store.session(sid: session.sid, viewerID: payee.id)
                let after = try await payers.asyncMap { try await Self.balance(store, $0) }
                let payeeAfter = try await Self.balance(store, payee)
                switch (sent, cancelled) {
                case (.success(.paid), .failure(let error)) where Self.kind(error) == .sessionAlreadyPaid:
                    outcomes["paid", default: 0] += 1
                    #expect(view.status == .paid && view.refunded == 0 && view.sharesPaid == 4)
                    #expect(view.payments.allSatisfy { $0.refunded == 0 })
                    #expect(payeeAfter - payeeBefore == 1_001 + 0 + 10 + 20 + 7)
                case (.success(.refused(let refusal)), .success) where refusal.kind == .sessionCancelled:
                    outcomes["cancelled", default: 0] += 1
                    #expect(view.status == .cancelled && view.sharesPaid == 3)
                    #expect(view.refunded == view.paid + view.tip && view.refunded == 751 + 30)
                    #expect(view.payments.allSatisfy { $0.refunded == $0.amount + $0.tip })
                    #expect(after == before, "every payer whole again")
                    #expect(payeeAfter == payeeBefore)
                default:
                    Issue.record("round \(round): a mix: send \(sent), cancel \(cancelled), \(view.status)")
                }
            }
            // Either order may win each round; the money is right whichever did.
            #expect(outcomes.values.reduce(0, +) == 16, "\(outcomes)")
            try await Self.verified(store)
        }
    }

    @Test(
        "2 PostgreSQL replicas, the cancel and the last share's send queued on the session's row in either order: PAID with nothing refunded, or CANCELLED with everything refunded",
        .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason),
        arguments: [true, false]
    )
    func queuedOnTheSessionRow(sendFirst: Bool) async throws {
        let clock = ManualClock()
        try await TestPostgres.withDatabase { url in
            let logger = Logger(label: "split-replicas") { _ in SwiftLogNoOpLogHandler() }
            let stores = (0..<2).map { _ in
                PostgresLedgerStore(
                    url: url,
                    clock: { clock.now() },
                    maximumConnections: 4,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
            }
            try await withServices(stores.map(\.client)) {
                try await stores[0].migrate()
                let store = stores[0]
                let payee = try await store.login(email: "payee@race.example")
                var payers: [LedgerUser] = []
                for index in 0..<4 {
                    let payer = try await store.login(email: "payer\(index)@race.example")
                    _ = try await store.fund(userID: payer.id, amountCents: 10_000)
                    payers.append(payer)
                }
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: 1_001,
                    shares: 4,
                    idempotencyKey: nil
                )
                for index in 0..<3 {
                    _ = try await store.lock(sid: session.sid, payerID: payers[index].id, shares: 1)
                    _ = try await store.send(
                        sid: session.sid,
                        payerID: payers[index].id,
                        idempotencyKey: "k\(index)",
                        tipCents: Cents(index + 1)
                    )
                }
                _ = try await store.lock(sid: session.sid, payerID: payers[3].id, shares: 1)
                let lastPayer = payers[3].id
                let send = { @Sendable in
                    await Result {
                        try await stores[0].send(
                            sid: session.sid,
                            payerID: lastPayer,
                            idempotencyKey: "last",
                            tipCents: 9
                        )
                        .0
                    }
                }
                let cancel = { @Sendable in
                    await Result { try await stores[1].cancel(sid: session.sid, payeeID: payee.id) }
                }
                // The test holds the session's row; the first request queues on it, then the second behind it.
                let (sent, cancelled) = try await TestPostgres.withClient(url) { client in
                    try await client.withConnection { connection in
                        _ = try await connection.query("BEGIN", logger: logger).collect()
                        _ = try await connection.query(
                            "SELECT 1 FROM payment_sessions WHERE id = \(session.sid) FOR UPDATE",
                            logger: logger
                        ).collect()
                        var sending: Task<Result<SendOutcome, any Error>, Never>?
                        var cancelling: Task<Result<Void, any Error>, Never>?
                        if sendFirst { sending = Task { await send() } } else { cancelling = Task { await cancel() } }
                        try await Self.waitForLockWaiters(1, connection, logger)
                        if sendFirst { cancelling = Task { await cancel() } } else { sending = Task { await send() } }
                        try await Self.waitForLockWaiters(2, connection, logger)
                        _ = try await connection.query("ROLLBACK", logger: logger).collect()
                        return (await sending!.value, await cancelling!.value)
                    }
                }
                let view = try await store.session(sid: session.sid, viewerID: payee.id)
                if sendFirst {
                    // The cancel ran after the last share landed.
                    guard case .success(.paid) = sent else {
                        Issue.record("the last share was not paid: \(sent)")
                        return
                    }
                    #expect(view.status == .paid && view.refunded == 0 && view.sharesPaid == 4)
                    guard case .failure(let error) = cancelled else {
                        Issue.record("the cancel of a paid split went through")
                        return
                    }
                    #expect(Self.kind(error) == .sessionAlreadyPaid)
                    #expect(try await Self.balance(store, payee) == 1_001 + 1 + 2 + 3 + 9)
                } else {
                    // The send ran after the cancel: refused, and the three payments went back whole.
                    guard case .success(.refused(let refusal)) = sent else {
                        Issue.record("the last share was paid after the cancel: \(sent)")
                        return
                    }
                    #expect(refusal.kind == .sessionCancelled)
                    #expect(view.status == .cancelled && view.sharesPaid == 3 && view.refunded == 751 + 6)
                    for payer in payers { #expect(try await Self.balance(store, payer) == 10_000) }
                    #expect(try await Self.balance(store, payee) == 0)
                }
                try await Self.verified(store)
            }
        }
    }

    /// Waits until `count` other connections wait on a lock (the test's row).
    static func waitForLockWaiters(_ count: Int, _ connection: PostgresConnection, _ logger: Logger) async throws {
        while true {
            let rows = try await connection.query(
                """
                SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
                AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
                """,
                logger: logger
            ).collect()
            if try rows.first?.decode(Int64.self) ?? 0 >= Int64(count) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test(
        "Sweeps running at once (on every replica) return each payment of expired and cancelled splits exactly once",
        arguments: SplitRaceTopology.available
    )
    func concurrentSweeps(topology: SplitRaceTopology) async throws {
        let clock = ManualClock()
        try await topology.with(clock: clock) { stores in
            let store = stores[0]
            let payee = try await store.login(email: "payee@race.example")
            var payers: [LedgerUser] = []
            for index in 0..<3 {
                let payer = try await store.login(email: "payer\(index)@race.example")
                _ = try await store.fund(userID: payer.id, amountCents: 100_000)
                payers.append(payer)
            }
            let entriesBefore = try await store.audit().entryCount
            var sids: [String] = []
            var payments = 0
            var paidIn: Cents = 0
            for round in 0..<12 {
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: Cents(500 + round),
                    shares: 5,
                    idempotencyKey: nil
                )
                for index in 0..<(1 + round % 3) {
                    let locked = try await store.lock(
                        sid: session.sid,
                        payerID: payers[index].id,
                        shares: index == 1 ? 2 : 1
                    )
                    let (outcome, _) = try await store.send(
                        sid: session.sid,
                        payerID: payers[index].id,
                        idempotencyKey: "s\(round)-\(index)",
                        tipCents: Cents(round)
                    )
                    #expect(outcome.isPaid)
                    payments += 1
                    paidIn += locked.amount + Cents(round)
                }
                sids.append(session.sid)
            }
            // None is owed yet.
            #expect(try await store.returnDueSharePayments(limit: 100) == 0)
            #expect(try await store.audit().entryCount == entriesBefore + 2 * payments)
            // The payee takes its money out, then cancels four of them: their payments cannot go back yet (the
            // cancel tries, and leaves them to the sweep).
            _ = try await store.requestPayout(userID: payee.id, amountCents: paidIn, idempotencyKey: "out")
            for sid in sids.prefix(4) {
                try await stores[stores.count - 1].cancel(sid: sid, payeeID: payee.id)
                let view = try await store.session(sid: sid, viewerID: payee.id)
                #expect(view.status == .cancelled && view.refunded == 0)
            }
            _ = try await store.fund(userID: payee.id, amountCents: paidIn)
            // The rest expire: no request needed, the sweeps find them and the cancelled ones.
            clock.advance(seconds: 301)
            let entriesSwept = try await store.audit().entryCount
            let returned = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<6 {
                    let store = stores[index % stores.count]
                    group.addTask { try await store.returnDueSharePayments(limit: 100) }
                }
                return try await group.reduce(0, +)
            }
            #expect(returned == payments, "each payment returned once, by whichever sweep got it")
            #expect(try await stores[stores.count - 1].returnDueSharePayments(limit: 100) == 0)
            #expect(try await store.audit().entryCount == entriesSwept + 2 * payments)
            for (index, sid) in sids.enumerated() {
                let view = try await store.session(sid: sid, viewerID: payee.id)
                #expect(view.status == (index < 4 ? .cancelled : .expired))
                #expect(view.refunded == view.paid + view.tip)
                #expect(view.payments.allSatisfy { $0.refunded == $0.amount + $0.tip })
            }
            for payer in payers { #expect(try await Self.balance(store, payer) == 100_000) }
            #expect(try await Self.balance(store, payee) == 0)
            try await Self.verified(store)
        }
    }
}

extension SendOutcome {
    fileprivate var isPaid: Bool {
        if case .paid = self { return true }
        return false
    }
}

extension Array {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

extension Result where Failure == any Error {
    fileprivate init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
