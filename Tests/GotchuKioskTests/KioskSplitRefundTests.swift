import Foundation
import GotchuAPI
import GotchuCore
import GotchuDBus
import GotchuKiosk
import GotchuKioskClient
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerTesting
import GotchuSimulatedRadio
import GotchuTesting
import Logging
import Testing

/// Where the ledger server of a test keeps its books.
enum LedgerBooks: String, Sendable, CustomTestStringConvertible {
    case sqlite, postgres

    var testDescription: String { rawValue }

    /// SQLite always; PostgreSQL when `GOTCHU_TEST_POSTGRES_URL` names a server.
    static var available: [LedgerBooks] { TestPostgres.server != nil ? [.sqlite, .postgres] : [.sqlite] }

    /// Runs `body` with the options of `gotchu server` that keep its books here: none for SQLite (the server's file),
    /// a fresh PostgreSQL database (dropped afterwards) with a small pool.
    func withServerOptions<T: Sendable>(_ body: @Sendable ([String]) async throws -> T) async throws -> T {
        switch self {
        case .sqlite: try await body([])
        case .postgres:
            try await TestPostgres.withDatabase { database in
                try await body(["--database", database.redacted, "--max-connections", "4"])
            }
        }
    }
}

/// A ledger whose refund calls fail as told, one fault per call in order: the kiosk's view of a crash or an outage.
actor FaultyRefundLedger: KioskLedgerService {
    enum Fault: Sendable {
        /// The ledger makes the refund; its answer never arrives.
        case answerLost
        /// Nothing reaches the ledger.
        case unreachable
        /// All is well.
        case none
    }

    let base: KioskLedger
    private var faults: [Fault]

    init(_ base: KioskLedger, faults: [Fault]) {
        self.base = base
        self.faults = faults
    }

    func createSession(
        amountCents: Cents,
        shares: Int,
        tipPercents: [Int],
        reference: String?,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> CreateSessionResponse {
        try await base.createSession(
            amountCents: amountCents,
            shares: shares,
            tipPercents: tipPercents,
            reference: reference,
            idempotencyKey: idempotencyKey
        )
    }

    func sessionState(sid: String) async throws(LedgerClientError) -> KioskChargeMachine.SessionState {
        try await base.sessionState(sid: sid)
    }

    func cancelSession(sid: String) async throws(LedgerClientError) { try await base.cancelSession(sid: sid) }

    func refund(
        sid: String,
        paymentID: String?,
        amountCents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse {
        let fault = faults.isEmpty ? .none : faults.removeFirst()
        switch fault {
        case .unreachable: throw .transport("connection refused")
        case .answerLost:
            _ = try await base.refund(
                sid: sid,
                paymentID: paymentID,
                amountCents: amountCents,
                idempotencyKey: idempotencyKey
            )
            throw .transport("connection reset by peer")
        case .none:
            return try await base.refund(
                sid: sid,
                paymentID: paymentID,
                amountCents: amountCents,
                idempotencyKey: idempotencyKey
            )
        }
    }
}

@Suite("Refunds of split charges through the kiosk, on a real ledger", .serialized, .timeLimit(.minutes(4)))
struct KioskSplitRefundTests {
    typealias Key = KioskInterface.ChargeKey
    typealias PaymentKey = KioskInterface.PaymentKey

    @Test(
        "Three payers: one payment refunded with gotchu charge --payment, part of another over D-Bus, then all the rest; bad payment ids are refused clearly",
        arguments: LedgerBooks.available
    )
    func refundPaymentsOverDBus(books: LedgerBooks) async throws {
        try await books.withServerOptions { serverOptions in
            let daemon = try await KioskDaemon.start(serverOptions: serverOptions)
            defer { daemon.stop() }
            let (kiosk, _) = try await daemon.startKiosk()
            defer { _ = try? kiosk.stopNow() }
            let connection = try await daemon.connect()
            let signals = try await connection.kiosk.events()
            let bus = ["--bus", daemon.bus.address]

            let pos = try daemon.processes.start(["charge", "30.00", "--split", "3"] + bus, user: "pos")
            let accepted = try await pos.waitForLine { $0.hasPrefix("charge ") }
            let id = String(accepted.dropFirst("charge ".count).prefix { $0 != ":" })
            let waiting = try await pos.waitForLine { $0.hasPrefix("waiting for a payer (EID ") }
            let eid = try #require(
                EID(rawValue: String(waiting.dropFirst("waiting for a payer (EID ".count).dropLast()))
            )
            let alice = try await SplitPayer.funded("alice@example.com", cents: 5_000, url: daemon.url)
            let bob = try await SplitPayer.funded("bob@example.com", cents: 5_000, url: daemon.url)
            let carol = try await SplitPayer.funded("carol@example.com", cents: 5_000, url: daemon.url)
            let alicePaid = try await alice.pay(eid: eid, tipCents: 100)
            try await bob.pay(eid: eid)
            try await carol.pay(eid: eid)
            #expect(try await pos.waitForExit() == 0)

            // The charge lists its payments, as the ledger reported them.
            let payments = try #require(
                try await connection.kiosk.charge(id)[Key.payments.rawValue, as: [[String: DBusVariant]].self]
            )
            let ids = payments.compactMap { $0[PaymentKey.paymentID.rawValue, as: String.self] }
            #expect(ids.count == 3 && Set(ids).count == 3)
            #expect(ids.first == alicePaid.paymentID)
            #expect(payments.map { $0[PaymentKey.shareNumbers.rawValue, as: [Int32].self] } == [[1], [2], [3]])
            #expect(payments.map { $0[PaymentKey.amountCents.rawValue, as: Int64.self] } == [1_000, 1_000, 1_000])
            #expect(payments.map { $0[PaymentKey.tipCents.rawValue, as: Int64.self] } == [100, 0, 0])
            #expect(payments.map { $0[PaymentKey.refundedCents.rawValue, as: Int64.self] } == [0, 0, 0])
            let shown = try await daemon.processes.run(["charge", "--show", id] + bus, user: "pos")
            #expect(shown.contains("  payment \(ids[1])  share 2  $10.00"), "\(shown)")
            #expect(shown.contains("  payment \(ids[0])  share 1  $10.00  tip $1.00"), "\(shown)")

            // Bob's payment, whole, through the point-of-sale's command.
            let bobs = try await daemon.processes.run(
                ["charge", "--refund", id, "--payment", ids[1]] + bus,
                user: "pos"
            )
            #expect(bobs.contains { $0.hasPrefix("refunded $10.00 of charge \(id): refund ") }, "\(bobs)")
            #expect(try await bob.balance == 5_000)
            // Part of Alice's, over D-Bus.
            let part = try await connection.kiosk.refund(id, paymentID: ids[0], amountCents: 300)
            #expect(try await alice.balance == 5_000 - 1_100 + 300)

            // A payment the charge does not have: a clear refusal naming those it has; nothing moves.
            await #expect {
                _ = try await connection.kiosk.refund(id, paymentID: "no-such-payment", amountCents: 0)
            } throws: { error in
                let error = error as? DBusError
                return error?.name == KioskInterface.ErrorName.unknownPayment
                    && error?.message.contains("no payment \"no-such-payment\"") == true
                    && ids.allSatisfy { error?.message.contains($0) == true }
            }
            let refused = try daemon.processes.start(
                ["charge", "--refund", id, "--payment", "no-such-payment"] + bus,
                user: "pos"
            )
            #expect(try await refused.waitForExit() == 1)
            #expect(
                refused.lines.contains { $0.hasPrefix("not refunded: charge \(id) has no payment") },
                "\(refused.lines)"
            )
            // An amount of a split names its payment.
            await #expect {
                _ = try await connection.kiosk.refund(id, amountCents: 100)
            } throws: { error in
                (error as? DBusError)?.name == .invalidArgs && "\(error)".contains("is split")
            }
            #expect(try await carol.balance == 4_000)

            // All that is left: the rest of Alice's and all of Carol's, a refund each.
            let rest = try await connection.kiosk.refund(id, amountCents: 0).split(separator: ",").map(String.init)
            #expect(rest.count == 2)
            #expect(try await alice.balance == 5_000)
            #expect(try await carol.balance == 5_000)
            // Nothing is left now.
            await #expect {
                _ = try await connection.kiosk.refund(id, amountCents: 0)
            } throws: { error in
                let error = error as? DBusError
                return error?.name == KioskInterface.ErrorName.refundFailed
                    && error?.message.contains("refund-exceeds-payment") == true
            }

            // Each refund was signalled once, with its amount.
            var refunded: [(refundID: String, cents: Int64)] = []
            for await case .refunded(id, let refundID, let cents) in signals {
                refunded.append((refundID, cents))
                if refunded.count == 4 { break }
            }
            #expect(refunded.map(\.cents) == [1_000, 300, 800, 1_000])
            #expect(refunded[1].refundID == part && Array(refunded.suffix(2).map(\.refundID)) == rest)
            let after = try await connection.kiosk.charge(id)[Key.payments.rawValue, as: [[String: DBusVariant]].self]
            #expect(after?.map { $0[PaymentKey.refundedCents.rawValue, as: Int64.self] } == [1_100, 1_000, 1_000])
            // The charge says what was refunded of it in all, as the ledger confirmed it.
            let charge = try await connection.kiosk.charge(id)
            #expect(charge[Key.refundedCents.rawValue, as: Int64.self] == 3_100)
            await connection.close()
        }
    }

    @Test(
        "Refunds whose answers were lost, or that never left, are made exactly once by the kiosk after a restart",
        arguments: LedgerBooks.available
    )
    func refundsResumeAfterRestart(books: LedgerBooks) async throws {
        try await books.withServerOptions { serverOptions in
            let processes = try GotchuProcesses()
            defer { processes.remove() }
            let (server, url) = try await processes.startServer(serverOptions)
            defer { _ = try? server.stopNow() }
            let base = try #require(URL(string: url))
            func shop() -> KioskLedger { KioskLedger(baseURL: base, credentials: .email("shop@example.com")) }

            // A split of 30.00 among three payers, paid, as the kiosk recorded it.
            let created = try await shop().createSession(amountCents: 3_000, shares: 3, idempotencyKey: "split-1")
            let alice = try await SplitPayer.funded("alice@example.com", cents: 5_000, url: url)
            let bob = try await SplitPayer.funded("bob@example.com", cents: 5_000, url: url)
            let carol = try await SplitPayer.funded("carol@example.com", cents: 5_000, url: url)
            let alicePaid = try #require(try await alice.pay(eid: created.eid, tipCents: 100).paymentID)
            try await bob.pay(eid: created.eid)
            try await carol.pay(eid: created.eid)
            let directory = try TemporaryDirectory(prefix: "gotchu-kiosk-refunds")
            defer { directory.remove() }
            var charge = KioskCharge(
                id: "c-1",
                amountCents: 3_000,
                shares: 3,
                reference: "table 3",
                state: .paid,
                sessionID: created.sid,
                eid: created.eid,
                createdAt: .now,
                updatedAt: .now
            )
            charge.sharesPaid = 3
            charge.paidCents = 3_000
            try KioskStore(directory: directory.url).insert(KioskStore.Record(charge: charge))
            let air = SimulatedAir(seed: 5, clock: .virtual)
            func kiosk(_ ledger: any KioskLedgerService) async throws -> Kiosk {
                try Kiosk(
                    store: try KioskStore(directory: directory.url),
                    ledger: ledger,
                    radio: await air.addPeer(SimulatedPeer(name: "kiosk", at: Position(x: 0, y: 0))),
                    options: Kiosk.Options(),
                    logger: Logger(label: "test.kiosk") { _ in SwiftLogNoOpLogHandler() }
                )
            }

            // 4.00 of Alice's payment: the ledger makes it, the kiosk never hears so, and goes down.
            let first = try await kiosk(FaultyRefundLedger(shop(), faults: [.answerLost]))
            await #expect(throws: KioskError.self) {
                _ = try await first.refund(id: "c-1", paymentID: alicePaid, amountCents: 400)
            }
            #expect(try KioskStore(directory: directory.url).pendingRefunds().map(\.amountCents) == [400])
            #expect(try await alice.balance == 5_000 - 1_100 + 400)

            // Up again, asked for all that is left: the 4.00 goes first under its key (the ledger replays it), so
            // Alice's rest is 7.00; then, one refund each, Alice's rest (its answer lost too), Bob's (the ledger
            // unreachable by then) and Carol's.
            let second = try await kiosk(FaultyRefundLedger(shop(), faults: [.none, .answerLost, .unreachable, .none]))
            do {
                _ = try await second.refund(id: "c-1", amountCents: nil)
                Issue.record("a refund whose answer was lost was reported made")
            } catch {
                #expect("\(error)".contains("1 of 3 payments refunded"), "\(error)")
            }
            let pending = try KioskStore(directory: directory.url).pendingRefunds()
            #expect(pending.map(\.amountCents) == [700, 1_000])
            #expect(try await alice.balance == 5_000)
            #expect(try await bob.balance == 4_000)
            #expect(try await carol.balance == 5_000)

            // Restarted with the ledger reachable: the pending refunds are sent again with their keys, each made once.
            let third = try await kiosk(shop())
            let events = await third.events()
            try await withRunning(third) {
                let done = try await eventually(timeout: .seconds(60)) {
                    (try? KioskStore(directory: directory.url).pendingRefunds().isEmpty) == true
                }
                #expect(done)
            }
            var resumed: [Cents] = []
            for await event in events {
                if case .refunded(_, let cents) = event.kind { resumed.append(cents) }
                if resumed.count == 2 { break }
            }
            #expect(resumed == [700, 1_000])
            #expect(try await alice.balance == 5_000)
            #expect(try await bob.balance == 5_000)
            #expect(try await carol.balance == 5_000)
            let refunds = try KioskStore(directory: directory.url).refunds(chargeID: "c-1")
            #expect(refunds.map(\.amountCents) == [400, 700, 1_000, 1_000])
            #expect(refunds.allSatisfy { $0.state == .done && $0.refundID != nil })
            #expect(Set(refunds.compactMap(\.refundID)).count == 4)
            let state = try await shop().sessionState(sid: created.sid)
            #expect(state.refundedCents == 3_100)
            #expect(state.payments.map(\.refundedCents) == [1_100, 1_000, 1_000])

            // Nothing is left, and the kiosk says so.
            let last = try await kiosk(shop())
            do {
                _ = try await last.refund(id: "c-1", amountCents: nil)
                Issue.record("a refund was made of a charge refunded in full")
            } catch {
                #expect("\(error)".contains("refund-exceeds-payment"), "\(error)")
            }
            #expect(try await last.charge(id: "c-1").payments.map(\.refundedCents) == [1_100, 1_000, 1_000])
        }
    }

    @Test("A charge that is not split is refunded without naming a payment")
    func notSplitNamesNoPayment() throws {
        #expect(throws: KioskRefundPlan.Refusal.notSplit) {
            try KioskRefundPlan.refunds(
                paymentID: "p-1",
                amountCents: nil,
                split: false,
                payments: [],
                refundableCents: 500
            )
        }
        let whole = try KioskRefundPlan.refunds(
            paymentID: nil,
            amountCents: nil,
            split: false,
            payments: [],
            refundableCents: 500
        )
        #expect(whole.map(\.cents) == [500] && whole.map(\.paymentID) == [nil])
    }

    @Test("All of a split is every payment's rest; an amount names its payment; an unknown payment is named")
    func splitPlans() throws {
        let paid = Date(timeIntervalSince1970: 1_000)
        let payments = [
            KioskPayment(paymentID: "a", shareNumbers: [1], amountCents: 1_000, tipCents: 100, paidAt: paid),
            KioskPayment(paymentID: "b", shareNumbers: [2, 3], amountCents: 2_000, refundedCents: 2_000, paidAt: paid),
            KioskPayment(paymentID: "c", shareNumbers: [4], amountCents: 1_000, refundedCents: 250, paidAt: paid),
        ]
        func plan(_ payment: String?, _ cents: Cents?) throws(KioskRefundPlan.Refusal) -> [String] {
            try KioskRefundPlan.refunds(
                paymentID: payment,
                amountCents: cents,
                split: true,
                payments: payments,
                refundableCents: 0
            ).map { "\($0.paymentID ?? "-"):\($0.cents)" }
        }
        #expect(try plan(nil, nil) == ["a:1100", "c:750"])
        #expect(try plan("c", nil) == ["c:750"])
        #expect(try plan("a", 300) == ["a:300"])
        #expect(throws: KioskRefundPlan.Refusal.nothingLeft(paymentID: "b")) { try plan("b", nil) }
        #expect(throws: KioskRefundPlan.Refusal.paymentRequired(known: ["a", "b", "c"])) { try plan(nil, 100) }
        #expect(throws: KioskRefundPlan.Refusal.unknownPayment("z", known: ["a", "b", "c"])) { try plan("z", nil) }
    }
}

@Suite("The kiosk records a split's payments from the ledger's status, on synthetic time", .timeLimit(.minutes(10)))
struct KioskPaymentsMachineTests {
    typealias State = KioskChargeMachine.SessionState

    @Test("Each status's payments replace those recorded; a status without payments keeps them; paid keeps the last")
    func paymentsRecorded() throws {
        let paid = Bench.start
        let first = KioskPayment(paymentID: "p-1", shareNumbers: [1], amountCents: 251, tipCents: 40, paidAt: paid)
        let second = KioskPayment(paymentID: "p-2", shareNumbers: [2, 3], amountCents: 500, paidAt: paid)
        let third = KioskPayment(paymentID: "p-3", shareNumbers: [4], amountCents: 250, paidAt: paid)
        var bench = Bench.splitAdvertising()
        _ = try bench.poll(State(.advertising))
        let one = try bench.poll(State(.partiallyPaid, sharesPaid: 1, paidCents: 251, tipCents: 40, payments: [first]))
        #expect(written(one)?.charge.payments == [first])
        // A status that says nothing of payments (a ledger that predates them) leaves the record as it is.
        _ = try bench.poll(State(.locked, sharesPaid: 1, paidCents: 251, tipCents: 40))
        #expect(bench.charge.payments == [first])
        let all = bench.send(
            .statusSeen(
                State(.paid, sharesPaid: 4, paidCents: 1_001, tipCents: 40, payments: [first, second, third])
            )
        )
        let record = try #require(written(all))
        #expect(record.charge.state == .paid && record.charge.payments == [first, second, third])
        #expect(record.charge.payments.map(\.refundableCents) == [291, 500, 250])
    }
}

@Suite("gotchu charge shows the web checkout of the charge", .serialized, .timeLimit(.minutes(3)))
struct ChargeCheckoutTests {
    @Test("With a public URL: the checkout address of the charge's session is printed, and drawn with --qr")
    func printsAndDrawsCheckout() async throws {
        let daemon = try await KioskDaemon.start(serverOptions: ["--public-url", "https://Pay.Example.com/shop"])
        defer { daemon.stop() }
        let (kiosk, _) = try await daemon.startKiosk()
        defer { _ = try? kiosk.stopNow() }
        let pos = try daemon.processes.start(["charge", "12.50", "--qr", "--bus", daemon.bus.address], user: "pos")
        _ = try await pos.waitForLine { $0.hasPrefix("waiting for a payer (EID ") }
        // The session's own checkout link, not its EID.
        let line = try await pos.waitForLine { $0.hasPrefix("pay on a phone: https://pay.example.com/shop/p/") }
        let address = String(line.dropFirst("pay on a phone: ".count))
        #expect(address.count == "https://pay.example.com/shop/p/".count + 22, "\(address)")
        // Read back once it is drawn whole.
        let drawn = try await eventually(timeout: .seconds(60)) {
            (try? QRCodeReader.texts(inHalfBlocks: HalfBlockCode.qrCode(after: address, in: pos.lines))) == [address]
        }
        #expect(drawn, "\(pos.lines)")
        #expect(!pos.lines.joined().contains("\u{1B}"))
        #expect(try await pos.stop(signal: SIGINT) == 3)
        #expect(pos.lines.filter { $0.hasPrefix("pay on a phone: ") }.count == 1, "\(pos.lines)")
    }

    @Test("Without a public URL: no address; --qr says why there is no QR code")
    func noPublicURL() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, _) = try await daemon.startKiosk()
        defer { _ = try? kiosk.stopNow() }
        let pos = try daemon.processes.start(["charge", "12.50", "--qr", "--bus", daemon.bus.address], user: "pos")
        _ = try await pos.waitForLine { $0.hasPrefix("waiting for a payer (EID ") }
        let warned = try await eventually(timeout: .seconds(60)) {
            pos.standardError.contains("warning: no QR code: the ledger has no public URL")
        }
        #expect(warned, "\(pos.standardError)")
        #expect(try await pos.stop(signal: SIGINT) == 3)
        #expect(!pos.lines.contains { $0.hasPrefix("pay on a phone") }, "\(pos.lines)")
    }
}

/// The lines of a QR code drawn in half blocks after the line `pay on a phone: URL`.
enum HalfBlockCode {
    static func qrCode(after url: String, in lines: [String]) -> [String] {
        guard let start = lines.firstIndex(of: "pay on a phone: \(url)") else { return [] }
        return Array(lines[(start + 1)...].prefix { !$0.isEmpty && $0.allSatisfy { "█▀▄ ".contains($0) } })
    }
}
