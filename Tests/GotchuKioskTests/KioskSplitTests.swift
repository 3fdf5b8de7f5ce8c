import Foundation
import GotchuAPI
import GotchuCore
import GotchuDBus
import GotchuKiosk
import GotchuKioskClient
import GotchuTesting
import Testing

@Suite("Split charges: shares paid one by one, refunds when it ends unpaid, on virtual time", .timeLimit(.minutes(3)))
struct KioskSplitTests {
    @Test("A split charge stays on the air while its shares are paid, counts them, and is paid with the last")
    func paidShareByShare() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk()
        let events = await kiosk.events()
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 1_001, reference: "table 9", shares: 4)
            #expect(charge.shares == 4 && charge.sharesPaid == 0 && charge.isSplit)
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            let sid = try #require(advertising.charge?.sessionID)
            #expect(await harness.ledger.session(sid)?.shares == 4)

            try await harness.ledger.pay(sid, tipCents: 40)
            let one = try await harness.advance(kiosk) { $0.charge?.sharesPaid == 1 }
            #expect(one.state == .advertising && one.charge?.paidCents == 251 && one.charge?.tipCents == 40)
            try await harness.ledger.lock(sid)
            try await harness.advance(kiosk) { $0.state == .locked }
            // One payer pays for a friend too.
            try await harness.ledger.pay(sid, shares: 2)
            let three = try await harness.advance(kiosk) { $0.charge?.sharesPaid == 3 }
            #expect(three.state == .advertising && three.charge?.paidCents == 751)
            try await harness.ledger.pay(sid)
            let paid = try await harness.advance(kiosk) { $0.state == .paid }
            #expect(paid.charge?.sharesPaid == 4 && paid.charge?.paidCents == 1_001 && paid.charge?.tipCents == 40)
            #expect(try await kiosk.charge(id: charge.id).sharesPaid == 4)
            #expect(await harness.ledger.created == [sid])
        }
        var kinds: [KioskEvent.Kind] = []
        var counts: [Int] = []
        for await event in events {
            kinds.append(event.kind)
            if event.kind == .sharePaid { counts.append(event.charge.sharesPaid) }
        }
        #expect(kinds == [.advertising, .sharePaid, .locked, .sharePaid, .advertising, .paid])
        #expect(counts == [1, 3])
        let stored = try #require(try KioskStore(directory: harness.stateDirectory).latest()?.charge)
        #expect(stored.state == .paid && stored.shares == 4 && stored.sharesPaid == 4 && stored.tipCents == 40)
    }

    @Test("Cancelled with shares paid: the ledger refunds them, and the charge says how much")
    func cancelRefunds() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 2_000, reference: "", shares: 4)
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            let sid = try #require(advertising.charge?.sessionID)
            try await harness.ledger.pay(sid, tipCents: 100)
            try await harness.advance(kiosk) { $0.charge?.sharesPaid == 1 }
            // A share paid after the kiosk's last look is counted too: the cancel reads the status.
            try await harness.ledger.pay(sid)
            let cancelled = try await kiosk.cancel(id: charge.id)
            #expect(cancelled.state == .cancelled && cancelled.sharesPaid == 2)
            #expect(cancelled.paidCents == 1_000 && cancelled.tipCents == 100 && cancelled.refundedCents == 1_100)
            #expect(await harness.ledger.session(sid)?.refundedCents == 1_100)
            #expect(await kiosk.status().state == .cancelled)
        }
    }

    @Test("Expired on the ledger with shares paid: not renewed; the charge expires once the refunds show")
    func expiryRefunds() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        await harness.ledger.setSessionLifetime(.seconds(5))
        await harness.ledger.setExpiryRefundDelay(.seconds(2))
        var options = Kiosk.Options(charges: .init(statusInterval: .milliseconds(100)))
        options.charges.sessionLifetime = .seconds(60)
        let kiosk = try await harness.makeKiosk(options: options)
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 900, reference: "", shares: 3)
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            let sid = try #require(advertising.charge?.sessionID)
            try await harness.ledger.pay(sid, tipCents: 30)
            try await harness.advance(kiosk) { $0.charge?.sharesPaid == 1 }
            let expired = try await harness.advance(kiosk) { $0.state == .expired }
            #expect(expired.charge?.refundedCents == 330 && expired.charge?.sharesPaid == 1)
            // Over once the sweep refunded, 2 s after the session expired; no second session was made.
            #expect(await harness.ledger.session(sid)?.refundedCents == 330)
            #expect(await harness.ledger.created == [sid])
        }
    }

    @Test("A ledger that does not split fails the split charge, leaving no live session")
    func ledgerWithoutSplits() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        await harness.ledger.ignoreShares()
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 1_000, reference: "", shares: 2)
            let failed = try await harness.advance(kiosk) { $0.state == .failed }
            #expect(failed.problem?.contains("does it split?") == true)
            let sid = try #require(failed.charge?.sessionID)
            #expect(try await harness.ledger.status(sid) == .cancelled)
            // A charge of one share works on it as always.
            _ = try await kiosk.charge(amountCents: 500, reference: "")
            try await harness.advance(kiosk) { $0.state == .advertising }
        }
    }
}

@Suite(
    "The kiosk's store keeps a split's counts, and reads charges stored before splits as one share",
    .timeLimit(.minutes(10))
)
struct KioskStoreSplitTests {
    @Test("A split charge's counts are written and read back")
    func roundTrip() throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-kiosk-store")
        defer { directory.remove() }
        let store = try KioskStore(directory: directory.url)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var record = KioskStore.Record(
            charge: KioskCharge(id: "c-1", amountCents: 1_001, shares: 4, reference: "", createdAt: now, updatedAt: now)
        )
        try store.insert(record)
        record.charge.state = .cancelled
        record.charge.sharesPaid = 2
        record.charge.paidCents = 501
        record.charge.tipCents = 60
        record.charge.refundedCents = 561
        try store.update(record)
        #expect(try KioskStore(directory: directory.url).record(id: "c-1") == record)
    }

    @Test("Opened over a store that predates splits, a paid charge had its one share paid")
    func migratesAStoreBeforeSplits() throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-kiosk-store")
        defer { directory.remove() }
        let database = directory.url.appendingPathComponent("kiosk.sqlite").path
        // The first version's schema and rows, as GRDB's migrator left them.
        let schema = [
            "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)",
            "INSERT INTO grdb_migrations VALUES ('v1: charges')",
            """
            CREATE TABLE charges (id TEXT PRIMARY KEY, amount_cents INTEGER NOT NULL CHECK (amount_cents > 0), \
            reference TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('creating', 'advertising', 'locked', \
            'paid', 'expired', 'cancelled', 'failed')), active INTEGER CHECK (active = 1), session_id TEXT, \
            eid TEXT, expires_at REAL, problem TEXT, session_number INTEGER NOT NULL DEFAULT 0, \
            cancel_requested INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL)
            """,
            "CREATE UNIQUE INDEX charges_one_active ON charges (active)",
            "CREATE INDEX charges_created_at ON charges (created_at)",
            """
            INSERT INTO charges (id, amount_cents, reference, state, active, session_id, created_at, updated_at) \
            VALUES ('old', 990, 'table 4', 'paid', NULL, 's-1', strftime('%s') - 60, strftime('%s') - 60)
            """,
            """
            INSERT INTO charges (id, amount_cents, reference, state, active, session_id, created_at, updated_at) \
            VALUES ('live', 500, '', 'advertising', 1, 's-2', strftime('%s'), strftime('%s'))
            """,
        ]
        let statements = schema.map { String(reflecting: $0) }.joined(separator: ", ")
        let made = TestPython.succeeds(
            "import sqlite3\ndb = sqlite3.connect(\(String(reflecting: database)))\n"
                + "for statement in [\(statements)]: db.execute(statement)\ndb.commit()"
        )
        try #require(made, "python could not write the old store")
        let store = try KioskStore(directory: directory.url)
        let old = try #require(try store.record(id: "old")?.charge)
        #expect(old.state == .paid && old.shares == 1 && old.sharesPaid == 1 && old.paidCents == 990)
        #expect(old.tipCents == 0 && old.refundedCents == 0 && old.reference == "table 4")
        let live = try #require(try store.active()?.charge)
        #expect(live.id == "live" && live.shares == 1 && live.sharesPaid == 0 && live.paidCents == 0)
    }
}

/// The kiosk's D-Bus interface served in this process on a private `dbus-daemon`, over a ``KioskHarness``.
struct ServedKiosk {
    let harness: KioskHarness
    let bus: PrivateBus
    let kiosk: Kiosk
    let client: DBusConnection
    private let server: DBusConnection
    private let serving: Task<Void, any Error>
    private let running: Task<Void, Never>

    static func start(options: Kiosk.Options? = nil) async throws -> ServedKiosk {
        let harness = try KioskHarness()
        let bus = try await PrivateBus.start()
        let kiosk =
            if let options { try await harness.makeKiosk(options: options) } else { try await harness.makeKiosk() }
        let server = try await DBusConnection.connect(to: .address(bus.address))
        let (owned, continuation) = AsyncStream.makeStream(of: Void.self)
        let serving = Task {
            defer { continuation.finish() }
            try await KioskControl.serve(kiosk, on: server) { continuation.finish() }
        }
        // Ends once the name is owned, or serving failed.
        for await _ in owned {}
        let running = Task { await kiosk.run() }
        return ServedKiosk(
            harness: harness,
            bus: bus,
            kiosk: kiosk,
            client: try await DBusConnection.connect(to: .address(bus.address)),
            server: server,
            serving: serving,
            running: running
        )
    }

    var pos: KioskClient { KioskClient(connection: client) }

    func stop() async {
        running.cancel()
        await running.value
        serving.cancel()
        _ = await serving.result
        await client.close()
        await server.close()
        bus.stop()
        harness.remove()
    }

    /// The changes of the kiosk's `CurrentCharge` property, from now on.
    func currentChargeChanges() async throws -> AsyncStream<[String: DBusVariant]> {
        let messages = try await client.signals(
            matching: DBusMatchRule(
                sender: KioskInterface.busName,
                interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                path: KioskInterface.path
            )
        )
        return AsyncStream { continuation in
            let task = Task {
                for await message in messages {
                    let changed = message.argument(1, as: [String: DBusVariant].self)
                    if let charge = changed?[KioskInterface.Property.currentCharge.rawValue]?.value
                        .decode(as: [String: DBusVariant].self)
                    {
                        continuation.yield(charge)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

@Suite("Split charges over D-Bus: ChargeSplit, SharePaid, the charge's counts", .serialized, .timeLimit(.minutes(3)))
struct KioskSplitDBusTests {
    typealias Key = KioskInterface.ChargeKey

    @Test("ChargeSplit starts a split; SharePaid counts the shares, PaymentSucceeded ends it; CurrentCharge follows")
    func chargeSplitOverDBus() async throws {
        let served = try await ServedKiosk.start()
        let signals = try await served.pos.events()
        let changes = try await served.currentChargeChanges()
        let id = try await served.pos.charge(amountCents: 1_001, reference: "table 9", shares: 4)
        let asked = try await served.pos.charge(id)
        #expect(asked[Key.shares.rawValue, as: Int32.self] == 4 && asked[Key.sharesPaid.rawValue, as: Int32.self] == 0)
        #expect(asked[Key.amountCents.rawValue, as: Int64.self] == 1_001)

        let advertising = try await served.harness.advance(served.kiosk) { $0.state == .advertising }
        let sid = try #require(advertising.charge?.sessionID)
        try await served.harness.ledger.pay(sid, tipCents: 25)
        try await served.harness.advance(served.kiosk) { $0.charge?.sharesPaid == 1 }
        try await served.harness.ledger.pay(sid, shares: 3)
        try await served.harness.advance(served.kiosk) { $0.state == .paid }

        var seen: [KioskSignal] = []
        for await signal in signals where signal.chargeID == id {
            seen.append(signal)
            if signal.endsCharge { break }
        }
        #expect(
            seen == [
                .advertising(chargeID: id, eid: try #require(advertising.charge?.eid?.rawValue)),
                .sharePaid(chargeID: id, sharesPaid: 1, shares: 4),
                .paymentSucceeded(chargeID: id, amountCents: 1_001, sessionID: sid),
            ]
        )
        // The property reaches the last charge as it ended, every count on it.
        var last: [String: DBusVariant] = [:]
        for await charge in changes {
            last = charge
            if charge[Key.state.rawValue, as: String.self] == "paid" { break }
        }
        #expect(last[Key.id.rawValue, as: String.self] == id)
        #expect(last[Key.sharesPaid.rawValue, as: Int32.self] == 4 && last[Key.shares.rawValue, as: Int32.self] == 4)
        #expect(
            last[Key.paidCents.rawValue, as: Int64.self] == 1_001 && last[Key.tipCents.rawValue, as: Int64.self] == 25
        )
        #expect(last[Key.refundedCents.rawValue, as: Int64.self] == 0)
        #expect(try await served.pos.state() == "paid")
        await served.stop()
    }

    @Test("Charge keeps its signature (one share); ChargeSplit refuses bad share counts as InvalidArgs")
    func chargeAndRefusals() async throws {
        let served = try await ServedKiosk.start()
        for (cents, shares) in [(1_000, 0), (1_000, 51), (3, 4), (1_000, -2)] as [(Int64, Int)] {
            await #expect {
                _ = try await served.pos.charge(amountCents: cents, shares: shares)
            } throws: { error in
                (error as? DBusError)?.name == .invalidArgs
            }
        }
        // By hand, as another language's point-of-sale calls it.
        let reply = try await served.client.call(
            destination: KioskInterface.busName,
            path: KioskInterface.path,
            interface: KioskInterface.name,
            method: KioskInterface.Method.charge.rawValue,
            [.int64(700), .string("order 3")]
        )
        let id = try #require(reply.first.flatMap { String(dbusValue: $0) })
        let charge = try await served.pos.charge(id)
        #expect(
            charge[Key.shares.rawValue, as: Int32.self] == 1 && charge[Key.sharesPaid.rawValue, as: Int32.self] == 0
        )
        await #expect {
            _ = try await served.pos.charge(amountCents: 1_000, shares: 2)
        } throws: { error in
            (error as? DBusError)?.name == KioskInterface.ErrorName.busy
        }
        await served.stop()
    }

    @Test("Cancel of a split with shares paid answers once cancelled; the charge tells what was refunded")
    func cancelWithRefunds() async throws {
        let served = try await ServedKiosk.start()
        let signals = try await served.pos.events()
        let id = try await served.pos.charge(amountCents: 3_000, reference: "", shares: 3)
        let advertising = try await served.harness.advance(served.kiosk) { $0.state == .advertising }
        let sid = try #require(advertising.charge?.sessionID)
        try await served.harness.ledger.pay(sid, tipCents: 150)
        try await served.harness.advance(served.kiosk) { $0.charge?.sharesPaid == 1 }
        try await served.pos.cancel(id)
        let charge = try await served.pos.charge(id)
        #expect(charge[Key.state.rawValue, as: String.self] == "cancelled")
        #expect(charge[Key.sharesPaid.rawValue, as: Int32.self] == 1)
        #expect(charge[Key.refundedCents.rawValue, as: Int64.self] == 1_150)
        var ended: KioskSignal?
        for await signal in signals where signal.chargeID == id && signal.endsCharge {
            ended = signal
            break
        }
        #expect(ended == .cancelled(chargeID: id))
        await served.stop()
    }
}
