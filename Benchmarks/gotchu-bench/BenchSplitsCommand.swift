import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer

struct BenchSplitsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "splits",
        abstract: "Payments per second of split sessions paid share by share, beside single-payer sessions.",
        discussion: """
            K payers pay at once in both measurements, the same number of payments each. Single payer: K \
            payer/payee pairs, each payer paying sessions its own payee creates (create + resolve + lock + \
            send, as in `ledger`). Split: the payers in groups of --shares, each group paying one payee's sessions of \
            --shares equal shares; every payer of the group resolves each session's EID, locks one share and \
            pays it (resolve + lock + send per share), so all of a group's payers work on the same session at \
            once. The first of them to reach a session creates it; a payer goes on to the next session as soon \
            as its share is paid, without waiting for the others. Each share is worth what a single payer's \
            session is (1.00), so a share payment moves as much money as a single payment.

            Figures, each over the whole measurement (wall time from the first request to the last answer): \
            payments/s counts payments (a share of a split, or a whole single session); sessions/s counts \
            sessions paid in full (a split only when its last share is). p50/p99 are per payment: for a split \
            resolve + lock + send of one share (not the session's creation), for a single payer create + \
            resolve + lock + send. "whole session" is a split's time from its creation to its last share paid, which \
            includes how far its payers have drifted apart (none waits for the others). \
            cpu is this process's CPU per payment (the store, and with --http the server and our client too; \
            not the PostgreSQL server's). The ratios divide the split's figures by the single payers' of the \
            same round; each round measures both, one after the other (alternating which goes first), on a fresh \
            database each, and the summary gives the median of the rounds' ratios. Compare ratios, not rates: \
            rates move by a tenth from run to run on a quiet machine and far more on a busy one, where the ratio \
            of CPU per payment is the steadier figure.

            Every measurement gets a fresh database: a SQLite file in a temporary directory, or with --database \
            postgres://USER@HOST:PORT/DB a new database created on that server (the role needs CREATEDB) and \
            dropped afterwards (scripts/with-postgres starts a throwaway server and sets \
            GOTCHU_TEST_POSTGRES_URL). The ledger's invariants are checked after each. Run built in release mode: \
            swift run -c release gotchu-bench splits.
            """
    )

    @Option(help: "Shares of each split session, each paid by a payer of its own (2 to 50).")
    var shares = 10

    @Option(
        name: .customShort("k"),
        help: ArgumentHelp("Payers paying at once: a multiple of --shares (default: --shares).", valueName: "payers")
    )
    var payers: Int?

    @Option(help: "Payments per measurement, shared among the payers (shares of splits; sessions of single payers).")
    var payments = 1000

    @Option(help: "Rounds, each measuring single payers and splits once.")
    var rounds = 3

    @Option(
        help: ArgumentHelp(
            "A PostgreSQL server to measure on (default: SQLite), as postgres://USER@HOST:PORT/DB.",
            valueName: "url"
        )
    )
    var database: String?

    @Flag(help: "Also measure over HTTP: one server on a loopback port, a client of ours per user.")
    var http = false

    func validate() throws {
        guard (2...50).contains(shares) else { throw ValidationError("--shares must be 2 to 50") }
        let payers = payers ?? shares
        guard payers > 0, payers % shares == 0 else { throw ValidationError("-k must be a multiple of --shares") }
        guard payments >= payers, rounds > 0 else {
            throw ValidationError("--payments must be at least -k, --rounds positive")
        }
        if let database { _ = try PostgresURL(database) }
    }

    func run() async throws {
        let backend = try database.map { BenchBackend.postgres(try PostgresURL($0)) } ?? .sqlite
        let payers = payers ?? shares
        let perPayer = payments / payers
        print(
            "splits benchmark on \(backend): K = \(payers) payers at once, \(shares)-way splits, "
                + "\(payers * perPayer) payments per measurement, \(rounds) round(s); latency p50/p99 per payment"
        )
        var transports: [SplitBenchTransport] = [.direct]
        if http { transports.append(.http) }
        var ratios: [SplitBenchTransport: [SplitBenchRatio]] = [:]
        for round in 1...rounds {
            print("\nround \(round)")
            for transport in transports {
                // Alternate which goes first, so a drift of the machine within a round does not favour either.
                var single: SplitBenchRun?
                var split: SplitBenchRun?
                for measuringSplit in round.isMultiple(of: 2) ? [true, false] : [false, true] {
                    if measuringSplit {
                        split = try await Self.measure(
                            backend: backend,
                            transport: transport,
                            payers: payers,
                            shares: shares,
                            perPayer: perPayer
                        )
                    } else {
                        single = try await Self.measure(
                            backend: backend,
                            transport: transport,
                            payers: payers,
                            shares: 1,
                            perPayer: perPayer
                        )
                    }
                }
                guard let single, let split else { continue }
                single.print("single payer, \(transport)")
                split.print("\(shares)-way split, \(transport)")
                let ratio = SplitBenchRatio(split: split, single: single)
                print("    split / single: " + ratio.description)
                ratios[transport, default: []].append(ratio)
            }
        }
        print("\nmedian of \(rounds) round(s), split / single:")
        for transport in transports {
            let measured = ratios[transport] ?? []
            let median = SplitBenchRatio(
                payments: Self.median(measured.map(\.payments)),
                sessions: Self.median(measured.map(\.sessions)),
                cpu: Self.median(measured.map(\.cpu))
            )
            print(
                "  \(transport): \(median)"
                    + String(
                        format: "   (payments/s from %.2f to %.2f)",
                        measured.map(\.payments).min() ?? .nan,
                        measured.map(\.payments).max() ?? .nan
                    )
            )
        }
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
    }

    /// One measurement on a fresh database: `payers` payers paying `perPayer` payments each, sessions of one share
    /// (a payee per payer) or of `shares` shares (a payee per `shares` payers).
    static func measure(
        backend: BenchBackend,
        transport: SplitBenchTransport,
        payers: Int,
        shares: Int,
        perPayer: Int
    ) async throws -> SplitBenchRun {
        var sessions: [Duration] = []
        let figure = try await backend.measureFigure { stores, tokens in
            let store = stores[0]
            let payees = payers / shares
            var payeeIDs: [String] = []
            var payerIDs: [String] = []
            for index in 0..<payees { payeeIDs.append(try await store.login(email: "payee\(index)@bench.example").id) }
            for index in 0..<payers {
                let payer = try await store.login(email: "payer\(index)@bench.example")
                _ = try await store.fund(userID: payer.id, amountCents: Cents(perPayer) * 100)
                payerIDs.append(payer.id)
            }
            let measured: (BenchFigure, [Duration])
            switch transport {
            case .direct:
                measured = try await drive(
                    SplitBenchLedger(store: store, payees: payeeIDs, payers: payerIDs),
                    payers: payers,
                    shares: shares,
                    perPayer: perPayer
                )
            case .http:
                var payeeTokens: [String] = []
                var payerTokens: [String] = []
                for id in payeeIDs { payeeTokens.append(try await tokens.issue(userID: id)) }
                for id in payerIDs { payerTokens.append(try await tokens.issue(userID: id)) }
                // The store's pool is run by the caller, so the server gets none of its own.
                measured = try await LedgerServer.withRunning(
                    [LedgerServer.Replica(store: store)],
                    .inProcess(tokens: tokens) { $0.developmentMode = false }
                ) { [payeeTokens, payerTokens] urls in
                    let connections = payeeTokens.count + payerTokens.count
                    func client(_ token: String) -> LedgerClient {
                        LedgerClient(baseURL: urls[0], token: token, maximumConnections: connections)
                    }
                    return try await drive(
                        SplitBenchLedger(payees: payeeTokens.map(client), payers: payerTokens.map(client)),
                        payers: payers,
                        shares: shares,
                        perPayer: perPayer
                    )
                }
            }
            sessions = measured.1
            return measured.0
        }
        return SplitBenchRun(
            figure: figure,
            sessionsPaid: shares > 1 ? sessions.count : figure.payments,
            sessions: shares > 1
                ? BenchFigure(payments: sessions.count, elapsed: figure.elapsed, latencies: sessions) : nil
        )
    }

    /// Runs the payers at once; returns the payments' figure and, of splits, each session's time from its creation to
    /// its last share paid.
    private static func drive(
        _ ledger: SplitBenchLedger,
        payers: Int,
        shares: Int,
        perPayer: Int
    ) async throws -> (BenchFigure, [Duration]) {
        let feeds = (0..<(shares > 1 ? payers / shares : 0)).map {
            SplitBenchFeed(ledger: ledger, payee: $0, shares: shares)
        }
        let cpu = BenchCPU.now()
        let start = ContinuousClock.now
        let results = try await withThrowingTaskGroup(of: SplitBenchPayer.self) { group in
            for payer in 0..<payers {
                group.addTask {
                    var result = SplitBenchPayer(group: payer / shares)
                    result.latencies.reserveCapacity(perPayer)
                    result.paidAt.reserveCapacity(perPayer)
                    for index in 0..<perPayer {
                        let eid: EID
                        let began: ContinuousClock.Instant
                        if shares == 1 {
                            // A single payer's payment includes its session's creation, as in `ledger`.
                            began = ContinuousClock.now
                            eid = try await ledger.create(payee: payer, amount: 100, shares: 1)
                        } else {
                            eid = try await feeds[payer / shares].session(index)
                            began = ContinuousClock.now
                        }
                        try await ledger.pay(payer: payer, eid: eid, key: "\(index)")
                        let paid = ContinuousClock.now
                        result.latencies.append(paid - began)
                        result.paidAt.append(paid)
                    }
                    return result
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - start
        let ownCPU = BenchCPU.since(cpu).own
        let latencies = results.flatMap(\.latencies)
        var sessions: [Duration] = []
        if shares > 1 {
            for (groupIndex, feed) in feeds.enumerated() {
                let members = results.filter { $0.group == groupIndex }
                for (index, created) in await feed.createdAt().enumerated() {
                    guard let last = members.map({ $0.paidAt[index] }).max() else { continue }
                    sessions.append(last - created)
                }
            }
        }
        return (
            BenchFigure(payments: latencies.count, elapsed: elapsed, latencies: latencies).with(cpu: ownCPU),
            sessions
        )
    }
}

/// The way a measurement reaches the ledger.
enum SplitBenchTransport: String, Hashable, CustomStringConvertible {
    /// The store's calls, in this process.
    case direct
    /// HTTP requests through our client to a server in this process.
    case http = "HTTP"

    var description: String { rawValue }
}

/// A split's figures over the single payers' of the same round.
struct SplitBenchRatio: CustomStringConvertible {
    var payments: Double
    var sessions: Double
    /// CPU per payment.
    var cpu: Double

    init(payments: Double, sessions: Double, cpu: Double) {
        self.payments = payments
        self.sessions = sessions
        self.cpu = cpu
    }

    init(split: SplitBenchRun, single: SplitBenchRun) {
        payments = split.figure.rate / single.figure.rate
        sessions = split.sessionRate / single.sessionRate
        cpu = split.cpuPerPayment / single.cpuPerPayment
    }

    var description: String {
        String(format: "payments/s %.2f, sessions/s %.3f, cpu per payment %.2f", payments, sessions, cpu)
    }
}

/// What one measurement found.
struct SplitBenchRun {
    /// The payments: shares of splits, or single sessions.
    var figure: BenchFigure
    /// Sessions paid in full.
    var sessionsPaid: Int
    /// Of splits: each session's time from its creation to its last share paid.
    var sessions: BenchFigure?

    /// This process's CPU per payment, in microseconds.
    var cpuPerPayment: Double {
        guard let cpu = figure.cpu, figure.payments > 0 else { return .nan }
        return cpu / .microseconds(1) / Double(figure.payments)
    }

    /// Sessions paid in full per second.
    var sessionRate: Double { Double(sessionsPaid) / (figure.elapsed / .seconds(1)) }

    func print(_ name: String) {
        let label = "  " + name.padding(toLength: 24, withPad: " ", startingAt: 0)
        var line =
            label
            + String(
                format: "%8.1f payments/s %8.1f sessions/s   p50 %7.2f ms   p99 %7.2f ms",
                figure.rate,
                sessionRate,
                figure.latency(50),
                figure.latency(99)
            )
        if figure.cpu != nil, figure.payments > 0 { line += String(format: "   cpu %5.0f µs/payment", cpuPerPayment) }
        if let commits = figure.commits { line += String(format: "   %.1f transactions/commit", commits) }
        Swift.print(line)
        if let sessions {
            Swift.print(
                String(
                    format: "    whole session, created to last share paid: p50 %7.2f ms   p99 %7.2f ms",
                    sessions.latency(50),
                    sessions.latency(99)
                )
            )
        }
    }
}

/// What one payer's task measured: per payment, its latency and when it was paid.
private struct SplitBenchPayer: Sendable {
    var group: Int
    var latencies: [Duration] = []
    var paidAt: [ContinuousClock.Instant] = []
}

/// The calls a measurement makes, on the store or over HTTP: users are numbered, payees and payers apart.
private struct SplitBenchLedger: Sendable {
    /// Creates a session of `amount` cents for payee `payee`, in `shares` shares; returns its EID.
    let create: @Sendable (_ payee: Int, _ amount: Cents, _ shares: Int) async throws -> EID
    /// Resolves `eid`, locks one share (or the whole session) and pays it, as payer `payer`.
    let pay: @Sendable (_ payer: Int, _ eid: EID, _ key: String) async throws -> Void

    func create(payee: Int, amount: Cents, shares: Int) async throws -> EID {
        try await create(payee, amount, shares)
    }

    func pay(payer: Int, eid: EID, key: String) async throws {
        try await pay(payer, eid, key)
    }

    /// The store's calls.
    init(store: any LedgerStore, payees: [String], payers: [String]) {
        create = { payee, amount, shares in
            try await store.createSession(
                payeeID: payees[payee],
                amountCents: amount,
                shares: shares,
                idempotencyKey: nil
            ).session.eid
        }
        pay = { payer, eid, key in
            let resolved = try await store.resolve(eid: eid)
            _ = try await store.lock(sid: resolved.sid, payerID: payers[payer], shares: 1)
            let (outcome, _) = try await store.send(
                sid: resolved.sid,
                payerID: payers[payer],
                idempotencyKey: key,
                tipCents: 0
            )
            guard case .paid = outcome else { throw CLIError("payment refused: \(outcome)") }
        }
    }

    /// HTTP requests, a client per user.
    init(payees: [LedgerClient], payers: [LedgerClient]) {
        create = { payee, amount, shares in
            try await payees[payee].createSession(amountCents: amount, shares: shares > 1 ? shares : nil).eid
        }
        pay = { payer, eid, key in
            let resolved = try await payers[payer].resolve(eid: eid)
            try await payers[payer].lock(sid: resolved.sid)
            _ = try await payers[payer].send(sid: resolved.sid, idempotencyKey: key)
        }
    }
}

/// One payee's split sessions, in order: each is created by whichever of the group's payers asks for it first, and
/// handed to the others as they come to it.
private actor SplitBenchFeed {
    private let ledger: SplitBenchLedger
    private let payee: Int
    private let shares: Int
    private var sessions: [Task<EID, any Error>] = []
    private var created: [ContinuousClock.Instant] = []

    init(ledger: SplitBenchLedger, payee: Int, shares: Int) {
        self.ledger = ledger
        self.payee = payee
        self.shares = shares
    }

    /// The EID of the group's session `index`, created now if no payer came to it before.
    func session(_ index: Int) async throws -> EID {
        while sessions.count <= index {
            created.append(ContinuousClock.now)
            let (ledger, payee, shares) = (ledger, payee, shares)
            sessions.append(Task { try await ledger.create(payee: payee, amount: 100 * Cents(shares), shares: shares) })
        }
        return try await sessions[index].value
    }

    /// When each session's creation began.
    func createdAt() -> [ContinuousClock.Instant] { created }
}
