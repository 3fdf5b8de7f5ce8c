import Foundation
import GotchuAPI
import GotchuCore
import GotchuKiosk
import GotchuLedgerClient
import GotchuReceipts
import GotchuSimulatedRadio
import GotchuTesting
import Logging
import Testing

/// A ledger in memory that judges expiry on the air's virtual clock, as the kiosk's ``KioskLedgerService``: the
/// kiosk's own rules are tested here; ``KioskLedgerTests`` and the process tests cover the HTTP ledger.
actor MemoryLedger: KioskLedgerService {
    struct Session {
        var amountCents: Cents
        var eid: EID
        var status: SessionStatus
        var expiresAt: Duration
        var shares = 1
        var sharesPaid = 0
        var paidCents: Cents = 0
        var tipCents: Cents = 0
        var refundedCents: Cents = 0

        /// The ledger's rule: equal shares, the remainder one cent each to the first.
        func cents(ofShare number: Int) -> Cents {
            let (base, remainder) = amountCents.quotientAndRemainder(dividingBy: Cents(shares))
            return base + (Cents(number) <= remainder ? 1 : 0)
        }
    }

    let air: SimulatedAir
    /// How long a session lives.
    var sessionLifetime: Duration = .seconds(300)
    /// Larger amounts are refused.
    var maximumAmountCents: Cents?
    /// While set, every call fails with it.
    var failure: LedgerClientError?
    private(set) var sessions: [String: Session] = [:]
    /// Session ids in the order they were created.
    private(set) var created: [String] = []
    private var keys: [String: String] = [:]
    /// How many EIDs rotations handed out.
    private(set) var rotations = 0
    /// How long after a split session with shares paid expires its payments are refunded (the ledger's sweep).
    var expiryRefundDelay: Duration = .seconds(3)
    /// While set, sessions are made of one share whatever was asked, as a ledger that predates splits does.
    var ignoresShares = false
    /// While set, the public URL (ending in `/`) of the web checkout each EID comes with.
    var checkoutBase: String?

    init(air: SimulatedAir) {
        self.air = air
    }

    func fail(with failure: LedgerClientError?) { self.failure = failure }
    func setSessionLifetime(_ lifetime: Duration) { sessionLifetime = lifetime }
    func setMaximumAmount(_ cents: Cents) { maximumAmountCents = cents }
    func setExpiryRefundDelay(_ delay: Duration) { expiryRefundDelay = delay }
    func ignoreShares() { ignoresShares = true }
    func setCheckoutBase(_ base: String?) { checkoutBase = base }

    func createSession(
        amountCents: Cents,
        shares: Int,
        tipPercents: [Int],
        reference: String?,
        idempotencyKey: String
    ) async throws(LedgerClientError)
        -> CreateSessionResponse
    {
        if let failure { throw failure }
        if let sid = keys[idempotencyKey] { return response(sid) }
        if let maximumAmountCents, amountCents > maximumAmountCents {
            throw .problem(Problem(.invalidAmount, detail: "at most \(maximumAmountCents) cents"))
        }
        let sid = "s-\(created.count + 1)"
        let eid = EID(rawValue: String(format: "%010x", created.count + 1))!
        guard (1...50).contains(shares), amountCents >= Cents(shares) else {
            throw .problem(Problem(.invalidShares, detail: "\(shares) shares of \(amountCents) cents"))
        }
        sessions[sid] = Session(
            amountCents: amountCents,
            eid: eid,
            status: .created,
            expiresAt: await air.now + sessionLifetime,
            shares: ignoresShares ? 1 : shares
        )
        keys[idempotencyKey] = sid
        created.append(sid)
        return response(sid)
    }

    func sessionState(sid: String) async throws(LedgerClientError) -> KioskChargeMachine.SessionState {
        if let failure { throw failure }
        let status = try await status(sid)
        let session = sessions[sid]!
        return KioskChargeMachine.SessionState(
            status,
            sharesPaid: session.sharesPaid,
            paidCents: session.paidCents,
            tipCents: session.tipCents,
            refundedCents: session.refundedCents
        )
    }

    func cancelSession(sid: String) async throws(LedgerClientError) {
        if let failure { throw failure }
        switch try await status(sid) {
        case .paid: throw .problem(Problem(.sessionAlreadyPaid))
        case .expired: throw .problem(Problem(.sessionExpired))
        case .cancelled: throw .problem(Problem(.sessionCancelled))
        case .created, .advertising, .locked, .partiallyPaid:
            // The shares paid go back to their payers with the cancel, tips too.
            sessions[sid]?.status = .cancelled
            if let session = sessions[sid] { sessions[sid]?.refundedCents = session.paidCents + session.tipCents }
        }
    }

    func rotateEID(sid: String) async throws(LedgerClientError) -> EIDRotationResponse {
        if let failure { throw failure }
        guard try await status(sid).isLive else { throw .problem(Problem(.sessionExpired)) }
        rotations += 1
        let eid = EID(rawValue: String(format: "%010x", 0xF000 + rotations))!
        sessions[sid]?.eid = eid
        return EIDRotationResponse(
            sid: sid,
            eid: eid,
            previousValidUntil: Date(),
            expiresAt: Date(),
            checkoutURL: checkoutBase.map { $0 + "p/" + eid.rawValue }
        )
    }

    /// A payer locks the session.
    func lock(_ sid: String) async throws(LedgerClientError) {
        guard try await status(sid).isLive else { throw .problem(Problem(.sessionExpired)) }
        sessions[sid]?.status = .locked
    }

    /// A payer pays the session: of a split, the next `shares` shares, with `tipCents` on top.
    func pay(_ sid: String, shares: Int = 1, tipCents: Cents = 0) async throws(LedgerClientError) {
        guard try await status(sid).isLive, var session = sessions[sid] else {
            throw .problem(Problem(.sessionExpired))
        }
        guard session.sharesPaid + shares <= session.shares else { throw .problem(Problem(.noFreeShare)) }
        for number in session.sharesPaid + 1...session.sharesPaid + shares {
            session.paidCents += session.cents(ofShare: number)
        }
        session.sharesPaid += shares
        session.tipCents += tipCents
        session.status = session.sharesPaid == session.shares ? .paid : .partiallyPaid
        sessions[sid] = session
    }

    func status(_ sid: String) async throws(LedgerClientError) -> SessionStatus {
        guard var session = sessions[sid] else { throw .problem(Problem(.sessionNotFound)) }
        let now = await air.now
        if session.status.isLive, now >= session.expiresAt {
            session.status = .expired
        }
        // A split's shares paid are refunded a while after it expires, as the ledger's sweep does.
        if session.status == .expired, session.sharesPaid > 0, now >= session.expiresAt + expiryRefundDelay {
            session.refundedCents = session.paidCents + session.tipCents
        }
        sessions[sid] = session
        return session.status
    }

    /// The session's record as it stands.
    func session(_ sid: String) -> Session? { sessions[sid] }

    private func response(_ sid: String) -> CreateSessionResponse {
        let session = sessions[sid]!
        let seconds = Double(session.expiresAt.components.seconds)
        return CreateSessionResponse(
            sid: sid,
            eid: session.eid,
            expiresAt: Date(timeIntervalSince1970: seconds),
            shareCents: session.shares > 1 ? (1...session.shares).map(session.cents(ofShare:)) : [],
            checkoutURL: checkoutBase.map { $0 + "p/" + session.eid.rawValue }
        )
    }
}

/// A kiosk in this process over a ``MemoryLedger`` and a simulated air on virtual time.
struct KioskHarness {
    let directory: TemporaryDirectory
    let air: SimulatedAir
    let ledger: MemoryLedger

    init() throws {
        directory = try TemporaryDirectory(prefix: "gotchu-kiosk")
        air = SimulatedAir(seed: 11, clock: .virtual)
        ledger = MemoryLedger(air: air)
    }

    var stateDirectory: URL { directory.url.appendingPathComponent("kiosk-state") }

    func remove() { directory.remove() }

    func makeKiosk(
        options: Kiosk.Options = Kiosk.Options(
            payeeName: "Corner Shop",
            charges: .init(statusInterval: .milliseconds(100))
        )
    ) async throws -> Kiosk {
        var options = options
        options.charges.retry = Backoff(initial: .milliseconds(100), maximum: .milliseconds(400))
        return try Kiosk(
            store: try KioskStore(directory: stateDirectory),
            ledger: ledger,
            radio: await air.addPeer(SimulatedPeer(name: "kiosk", at: Position(x: 0, y: 0))),
            options: options,
            logger: Logger(label: "test.kiosk") { _ in SwiftLogNoOpLogHandler() }
        )
    }

    /// Moves virtual time on until the kiosk's status satisfies `predicate`; `within` (virtual time) only bounds a
    /// hang. With `whenAsleep`, each step waits until something sleeps on the air's clock (the kiosk's timer), so
    /// time moves only while the kiosk waits on it, never while a ledger call is under way: a kiosk that a busy
    /// machine slows down sees the same sequence of events, only later.
    @discardableResult
    func advance(
        _ kiosk: Kiosk,
        within: Duration = .seconds(600),
        whenAsleep: Bool = false,
        until predicate: (KioskStatus) async -> Bool
    ) async throws -> KioskStatus {
        let deadline = await air.now + within
        while true {
            let status = await kiosk.status()
            if await predicate(status) { return status }
            guard await air.now < deadline else { throw TestingError("the kiosk stayed \(status)") }
            if whenAsleep {
                guard try await eventually({ await air.sleeperCount > 0 }) else {
                    throw TestingError("the kiosk never waited on the clock; it is \(await kiosk.status())")
                }
            }
            await air.advance(by: .milliseconds(10))
        }
    }
}

/// What a scanner beside the kiosk hears.
actor Heard {
    private(set) var sightings: [Sighting] = []

    func append(_ sighting: Sighting) { sightings.append(sighting) }

    /// Listens on `radio` until the returned task is cancelled.
    static func listen(_ radio: SimulatedRadio, into heard: Heard) async throws -> Task<Void, Never> {
        let stream = try await radio.scan(ScanFilter())
        return Task {
            do {
                for try await sighting in stream { await heard.append(sighting) }
            } catch {}
        }
    }
}

/// The statuses a kiosk published.
actor Published {
    private(set) var states: [KioskStatus.State] = []

    func append(_ status: KioskStatus) { states.append(status.state) }

    /// Records `updates` until they end.
    static func record(_ updates: AsyncStream<KioskStatus>, into published: Published) -> Task<Void, Never> {
        Task { for await status in updates { await published.append(status) } }
    }
}

/// Runs the kiosk while `body` runs, then shuts it down as SIGTERM would.
func withRunning<Result: Sendable>(_ kiosk: Kiosk, _ body: () async throws -> Result) async throws -> Result {
    let task = Task { await kiosk.run() }
    do {
        let result = try await body()
        task.cancel()
        await task.value
        return result
    } catch {
        task.cancel()
        await task.value
        throw error
    }
}

@Suite("The kiosk drives charges over a ledger and the simulated air, on virtual time", .timeLimit(.minutes(3)))
struct KioskTests {
    @Test("A charge is advertised where a payer hears it, paid, and reported in order")
    func chargePaid() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk()
        let events = await kiosk.events()
        let heard = Heard()
        let phone = await harness.air.addPeer(SimulatedPeer(name: "phone", at: Position(x: 0.2, y: 0)))
        let listening = try await Heard.listen(phone, into: heard)
        defer { listening.cancel() }
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 1_250, reference: "order 17")
            #expect(charge.state == .creating && charge.expiresAt != nil)
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            #expect(advertising.payeeName == "Corner Shop")
            let eid = try #require(advertising.charge?.eid)
            let sid = try #require(advertising.charge?.sessionID)
            try await harness.advance(kiosk) { _ in await heard.sightings.contains { $0.eid == eid } }
            try await harness.ledger.lock(sid)
            try await harness.advance(kiosk) { $0.state == .locked }
            try await harness.ledger.pay(sid)
            let paid = try await harness.advance(kiosk) { $0.state == .paid }
            #expect(paid.charge?.id == charge.id && paid.charge?.sessionID == sid)
            #expect(try await kiosk.charge(id: charge.id).state == .paid)
            #expect(await harness.ledger.created == [sid])
        }
        var kinds: [KioskEvent.Kind] = []
        for await event in events { kinds.append(event.kind) }
        #expect(kinds == [.advertising, .locked, .paid])
        // Reopening the store shows the charge as it ended.
        #expect(try KioskStore(directory: harness.stateDirectory).latest()?.charge.state == .paid)
    }

    @Test("Every rotate_every the session gets a new EID, recorded, then on the air in place of the last one")
    func rotation() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk(
            options: Kiosk.Options(
                payeeName: "Corner Shop",
                charges: .init(statusInterval: .milliseconds(100), rotateEvery: .seconds(5))
            )
        )
        let heard = Heard()
        let phone = await harness.air.addPeer(SimulatedPeer(name: "phone", at: Position(x: 0.2, y: 0)))
        let listening = try await Heard.listen(phone, into: heard)
        defer { listening.cancel() }
        try await withRunning(kiosk) {
            // The first EID is recorded after this and before the kiosk shows it; under load the kiosk can show it
            // several virtual steps late, so its rotation is measured from here.
            let charged = await harness.air.now
            let charge = try await kiosk.charge(amountCents: 1_250, reference: "")
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            let first = try #require(advertising.charge?.eid)
            let sid = try #require(advertising.charge?.sessionID)
            try await harness.advance(kiosk) { _ in await heard.sightings.contains { $0.eid == first } }

            // Between the new EID's record and its advertisement the kiosk may show another state for a moment.
            let rotated = try await harness.advance(kiosk) {
                $0.charge?.eid.map { $0 != first } == true && $0.state == .advertising
            }
            let second = try #require(rotated.charge?.eid)
            #expect(rotated.charge?.sessionID == sid)
            #expect(await harness.air.now - charged >= .seconds(5))
            #expect(await harness.ledger.rotations == 1)
            #expect(try await kiosk.charge(id: charge.id).eid == second)
            // The new EID replaces the old on the air: once it has been heard a while, the old one is not.
            try await harness.advance(kiosk) { _ in await heard.sightings.filter { $0.eid == second }.count >= 20 }
            let recent = await heard.sightings.suffix(10)
            #expect(recent.allSatisfy { $0.eid == second }, "\(recent.map(\.eid))")

            try await harness.ledger.pay(sid)
            let paid = try await harness.advance(kiosk) { $0.state == .paid }
            #expect(paid.charge?.sessionID == sid)
        }
    }

    @Test("One charge at a time; bad amounts and references are refused without storing anything")
    func refusals() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            for amount: Cents in [0, -5, .min] {
                await #expect(throws: KioskError.invalidAmount(amount)) {
                    try await kiosk.charge(amountCents: amount, reference: "")
                }
            }
            await #expect(throws: KioskError.self) { try await kiosk.charge(amountCents: 100, reference: "a\u{7}b") }
            await #expect(throws: KioskError.self) {
                try await kiosk.charge(amountCents: 100, reference: String(repeating: "x", count: 201))
            }
            #expect(await kiosk.currentCharge == nil)
            #expect(try KioskStore(directory: harness.stateDirectory).latest() == nil)
            let first = try await kiosk.charge(amountCents: 100, reference: "")
            await #expect(throws: KioskError.busy(activeID: first.id)) {
                try await kiosk.charge(amountCents: 200, reference: "")
            }
            await #expect(throws: KioskError.notFound(id: "nope")) { try await kiosk.charge(id: "nope") }
            await #expect(throws: KioskError.notFound(id: "nope")) { try await kiosk.cancel(id: "nope") }
        }
    }

    @Test("The ledger refusing an amount fails the charge with its reason, and frees the kiosk")
    func ledgerRefusal() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        await harness.ledger.setMaximumAmount(1_000)
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 5_000, reference: "")
            let failed = try await harness.advance(kiosk) { $0.state == .failed }
            #expect(failed.problem?.hasPrefix("the ledger refused the charge: ") == true)
            _ = try await kiosk.charge(amountCents: 500, reference: "")
            try await harness.advance(kiosk) { $0.state == .advertising }
        }
    }

    @Test("Cancel stops the advertisement and cancels the session on the ledger; a final charge cannot be cancelled")
    func cancel() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk()
        // A beacon beside the scanner marks how far the scan has got: once it has been heard 700 ms after the cancel,
        // the kiosk would have been heard too had it still been advertising.
        let beacon = EID(rawValue: "00000beac0")!
        await harness.air.addBroadcaster(
            SimulatedPeer(name: "beacon", at: Position(x: 0.1, y: 0.1)),
            payload: AirPayload(Advertisement(eid: beacon), txPower: 0)
        )
        let heard = Heard()
        let scanner = await harness.air.addPeer(SimulatedPeer(name: "scanner", at: Position(x: 0.1, y: 0)))
        let listening = try await Heard.listen(scanner, into: heard)
        defer { listening.cancel() }
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 700, reference: "")
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            let eid = try #require(advertising.charge?.eid)
            try await harness.advance(kiosk) { _ in await heard.sightings.contains { $0.eid == eid } }
            let cancelled = try await kiosk.cancel(id: charge.id)
            let stoppedAt = await harness.air.now
            #expect(cancelled.state == .cancelled)
            let sid = try #require(advertising.charge?.sessionID)
            #expect(try await harness.ledger.status(sid) == .cancelled)
            await #expect(throws: KioskError.alreadyFinal(cancelled)) { try await kiosk.cancel(id: charge.id) }
            try await harness.advance(kiosk) { _ in
                await heard.sightings.contains { $0.eid == beacon && $0.time >= stoppedAt + .milliseconds(700) }
            }
            let late = await heard.sightings.filter { $0.eid == eid && $0.time > stoppedAt }
            #expect(late.isEmpty, "heard: \(late)")
        }
    }

    @Test("The end of a charge is shown for a while, then the kiosk reads idle again for the next customer")
    func backToIdle() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        var options = Kiosk.Options(charges: .init(statusInterval: .milliseconds(100)))
        options.charges.idleAfter = .seconds(3)
        let kiosk = try await harness.makeKiosk(options: options)
        let published = Published()
        let recording = Published.record(await kiosk.statusUpdates(), into: published)
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 300, reference: "")
            try await harness.advance(kiosk) { $0.state == .advertising }
            let ended = try await kiosk.cancel(id: charge.id)
            let shown = await kiosk.status()
            #expect(shown.state == .cancelled && shown.now == ended.updatedAt)
            await harness.air.advance(by: .milliseconds(2_990))
            #expect(await kiosk.status().state == .cancelled)
            // The return to idle is published, not only found by asking.
            try await harness.advance(kiosk) { _ in await published.states.last == .idle }
            let idle = await kiosk.status()
            #expect(idle.state == .idle && idle.charge?.id == charge.id && idle.charge?.state == .cancelled)
            #expect(idle.now >= ended.updatedAt.addingTimeInterval(3))
            #expect(idle.now < ended.updatedAt.addingTimeInterval(3.1))
        }
        await recording.value
    }

    @Test("Cancelling a charge a payer already paid reports it paid, not cancelled")
    func cancelAfterPayment() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        // Polling once, when advertising starts, and not again within the test.
        let kiosk = try await harness.makeKiosk(options: Kiosk.Options(charges: .init(statusInterval: .seconds(3_600))))
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 2_000, reference: "")
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            try await harness.ledger.pay(try #require(advertising.charge?.sessionID))
            await harness.air.advance(by: .seconds(1))
            #expect(await kiosk.status().state == .advertising)
            let ended = try await kiosk.cancel(id: charge.id)
            #expect(ended.state == .paid)
        }
    }

    @Test("A kiosk started again continues the same session, which is then paid")
    func restartContinuesSession() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let first = try await harness.makeKiosk()
        let before = try await withRunning(first) {
            _ = try await first.charge(amountCents: 990, reference: "table 4")
            return try await harness.advance(first) { $0.state == .advertising }
        }
        let second = try await harness.makeKiosk()
        #expect(await second.currentCharge?.sessionID == before.charge?.sessionID)
        try await withRunning(second) {
            let advertising = try await harness.advance(second) { $0.state == .advertising }
            #expect(advertising.charge?.eid == before.charge?.eid)
            try await harness.ledger.pay(try #require(before.charge?.sessionID))
            try await harness.advance(second) { $0.state == .paid && $0.charge?.reference == "table 4" }
        }
        #expect(await harness.ledger.created.count == 1)
    }

    @Test("A session created just before a crash, its answer lost, is the one advertised after the restart")
    func lostCreateAnswer() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk()
        // The charge is stored, then the ledger creates its session, then the kiosk dies before storing the answer.
        let charge = try await kiosk.charge(amountCents: 1_500, reference: "")
        let lost = try await harness.ledger.createSession(amountCents: 1_500, idempotencyKey: "kiosk-\(charge.id)-1")
        let restarted = try await harness.makeKiosk()
        try await withRunning(restarted) {
            let advertising = try await harness.advance(restarted) { $0.state == .advertising }
            #expect(advertising.charge?.sessionID == lost.sid && advertising.charge?.eid == lost.eid)
        }
        #expect(await harness.ledger.created == [lost.sid])
    }

    @Test("An unreachable ledger shows as an error and the charge goes on once the ledger is back")
    func ledgerUnreachable() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        await harness.ledger.fail(with: .transport("cannot reach the server (connection refused)"))
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 300, reference: "")
            let error = try await harness.advance(kiosk) { $0.state == .error }
            #expect(error.problem == "cannot reach the ledger: cannot reach the server (connection refused)")
            await harness.ledger.fail(with: nil)
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            #expect(advertising.problem == nil)
        }
    }

    @Test("A token the ledger rejects shows as an error that names the credentials, and clears once accepted")
    func credentialsRejected() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 600, reference: "")
            try await harness.advance(kiosk) { $0.state == .advertising }
            await harness.ledger.fail(with: .problem(Problem(.unauthorized, detail: "the token file is empty")))
            let error = try await harness.advance(kiosk) { $0.state == .error }
            #expect(error.problem?.contains("token") == true && error.problem?.contains("credentials") == true)
            // Still advertised while the ledger cannot be asked: the session may still be paid.
            #expect(error.charge?.state == .advertising)
            await harness.ledger.fail(with: nil)
            try await harness.ledger.pay(try #require(error.charge?.sessionID))
            let paid = try await harness.advance(kiosk) { $0.state == .paid }
            #expect(paid.problem == nil)
        }
    }

    @Test(
        "A cancel while the ledger is unreachable is pending, survives, and ends with no live session once it is back"
    )
    func cancelWhileLedgerUnreachable() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        await harness.ledger.fail(with: .transport("the server did not answer in time"))
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 800, reference: "")
            try await harness.advance(kiosk) { $0.state == .error }
            do {
                _ = try await kiosk.cancel(id: charge.id)
                Issue.record("a cancel the ledger could not confirm returned as done")
            } catch KioskError.cancelPending(let reason) {
                #expect(reason.hasPrefix("cannot cancel the charge's session yet: cannot reach the ledger"))
            }
            // The request is kept: the ledger coming back ends the charge cancelled, not advertised.
            await harness.ledger.fail(with: nil)
            let ended = try await harness.advance(kiosk) { $0.charge?.state.isFinal == true }
            #expect(ended.state == .cancelled)
            // The session the cancel had to create (a lost creation might have made one) is cancelled on the ledger.
            let sid = try #require(ended.charge?.sessionID)
            #expect(try await harness.ledger.status(sid) == .cancelled)
        }
    }

    @Test("A charge whose lifetime ends unpaid is expired, after renewing its ledger sessions, and none stays live")
    func lifetimeOver() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        await harness.ledger.setSessionLifetime(.seconds(1))
        var options = Kiosk.Options(charges: .init(statusInterval: .milliseconds(100)))
        options.charges.sessionLifetime = .seconds(6)
        let kiosk = try await harness.makeKiosk(options: options)
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 100, reference: "")
            // Time moves only while the kiosk waits on it, so its 1 s sessions expire and are renewed in turn
            // however slowly it runs.
            let expired = try await harness.advance(kiosk, whenAsleep: true) { $0.state == .expired }
            // Over when the charge's 6 s were, not before.
            #expect(expired.now >= charge.createdAt.addingTimeInterval(6))
            #expect(try await kiosk.charge(id: charge.id).state == .expired)
            // The 1 s sessions were renewed until then, and none stays live.
            let sessions = await harness.ledger.created
            #expect(sessions.count >= 3)
            for sid in sessions {
                let status = try await harness.ledger.status(sid)
                #expect(status == .expired || status == .cancelled)
            }
        }
    }
}

/// The kiosk's HTTP ledger against a real `gotchu server`: logging in again, and the token file.
@Suite("The kiosk's ledger logs in again and re-reads its token file", .serialized, .timeLimit(.minutes(3)))
struct KioskLedgerTests {
    @Test("A token the ledger stops accepting (its secret changed) is renewed by logging in again")
    func reLoginAfterRejectedToken() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let port = try freeLoopbackPort()
        func startLedger(secret: Character) async throws -> RunningCommand {
            let server = try processes.start(
                [
                    "server", "--dev", "--port", "\(port)", "--database",
                    processes.directory.url.appendingPathComponent("rotating.sqlite").path,
                    "--jwt-secret", String(repeating: secret, count: 40),
                ],
                user: "rotating-server"
            )
            _ = try await server.waitForLine { $0.hasPrefix("listening on ") }
            return server
        }
        let first = try await startLedger(secret: "a")
        let ledger = KioskLedger(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!,
            credentials: .email("shop@example.com")
        )
        let created = try await ledger.createSession(amountCents: 600, idempotencyKey: "k-1")
        _ = try await first.stop()
        // The same ledger comes back signing with another secret: the kiosk's token is now forged to it.
        let second = try await startLedger(secret: "b")
        defer { _ = try? second.stopNow() }
        #expect(try await ledger.sessionStatus(sid: created.sid).isLive)
        try await ledger.cancelSession(sid: created.sid)
        #expect(try await ledger.sessionStatus(sid: created.sid) == .cancelled)
    }

    @Test("A rejected token is refused as unauthorized; a new token in the token file is picked up")
    func tokenFileRotation() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let tokenFile = processes.directory.url.appendingPathComponent("token")
        try "not-a-token".write(to: tokenFile, atomically: true, encoding: .utf8)
        let ledger = KioskLedger(baseURL: URL(string: url)!, credentials: .tokenFile(tokenFile))
        do {
            _ = try await ledger.createSession(amountCents: 400, idempotencyKey: "k-1")
            Issue.record("a forged token was accepted")
        } catch {
            #expect(error.problemKind == .unauthorized)
        }
        var shop = LedgerClient(baseURL: URL(string: url)!)
        let token = try await shop.devLogin(email: "shop@example.com").token
        shop.token = token
        try token.write(to: tokenFile, atomically: true, encoding: .utf8)
        let created = try await ledger.createSession(amountCents: 400, idempotencyKey: "k-1")
        #expect(try await shop.session(sid: created.sid).amountCents == 400)
    }

    @Test("A paid session counts as paid only once its receipt verifies against the trusted keys")
    func receiptChecked() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let base = URL(string: url)!
        var payer = LedgerClient(baseURL: base)
        payer.token = try await payer.devLogin(email: "payer@example.com").token
        _ = try await payer.fund(amountCents: 1_000)
        let pinned = processes.directory.url.appendingPathComponent("state/receipt-keys.json")
        let trusting = KioskLedger(
            baseURL: base,
            credentials: .email("shop@example.com"),
            receiptTrust: ReceiptTrust(.pinned(file: pinned))
        )
        let stranger = ReceiptSigner.generate().signer
        let misled = KioskLedger(
            baseURL: base,
            credentials: .email("shop@example.com"),
            receiptTrust: ReceiptTrust(.fixed(ReceiptKeySet(keys: [stranger.publicKey])))
        )
        let created = try await trusting.createSession(amountCents: 300, idempotencyKey: "k-1")
        #expect(try await misled.sessionStatus(sid: created.sid) == .advertising)
        try await payer.lock(sid: created.sid)
        _ = try await payer.send(sid: created.sid, idempotencyKey: "p-1")
        #expect(try await trusting.sessionStatus(sid: created.sid) == .paid)
        #expect(FileManager.default.fileExists(atPath: pinned.path))
        do {
            _ = try await misled.sessionStatus(sid: created.sid)
            Issue.record("a receipt signed by an untrusted key was believed")
        } catch {
            #expect("\(error)".contains("receipt does not verify"), "\(error)")
        }
    }

    @Test("A key from `gotchu admin key create` works; once revoked, the kiosk re-reads its key file for a new one")
    func apiKeyFileRotation() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let database = processes.directory.url.appendingPathComponent("ledger.sqlite").path
        var shop = LedgerClient(baseURL: URL(string: url)!)
        shop.token = try await shop.devLogin(email: "shop@example.com").token
        func createKey() async throws -> String {
            let lines = try await processes.run(
                [
                    "admin", "key", "create", "--database", database, "--user", "shop@example.com", "--scope",
                    "sessions:create", "--scope", "sessions:read", "--scope", "sessions:cancel",
                ],
                user: "operator"
            )
            return try #require(lines.last)
        }
        let keyFile = processes.directory.url.appendingPathComponent("api-key")
        try (try await createKey() + "\n").write(to: keyFile, atomically: true, encoding: .utf8)
        let ledger = KioskLedger(baseURL: URL(string: url)!, credentials: .apiKeyFile(keyFile))
        let first = try await ledger.createSession(amountCents: 400, idempotencyKey: "k-1")
        #expect(try await shop.session(sid: first.sid).amountCents == 400)
        #expect(try await ledger.sessionStatus(sid: first.sid).isLive)

        // Revoked: refused while the file holds the revoked key, working again once it holds a new one.
        let listed = try await processes.run(["admin", "key", "list", "--database", database], user: "operator")
        let id = try #require(listed.dropFirst().first?.split(separator: " ").first.map(String.init))
        try await processes.run(["admin", "key", "revoke", "--database", database, id], user: "operator")
        do {
            try await ledger.cancelSession(sid: first.sid)
            Issue.record("a revoked key was accepted")
        } catch {
            #expect(error.problemKind == .unauthorized)
        }
        try (try await createKey()).write(to: keyFile, atomically: true, encoding: .utf8)
        try await ledger.cancelSession(sid: first.sid)
        #expect(try await shop.session(sid: first.sid).status == .cancelled)

        // A file that holds something else than a key is refused before anything is sent.
        try "eyJhbGciOiJIUzI1NiJ9.e30.x".write(to: keyFile, atomically: true, encoding: .utf8)
        let other = KioskLedger(baseURL: URL(string: url)!, credentials: .apiKeyFile(keyFile))
        do {
            _ = try await other.sessionStatus(sid: first.sid)
            Issue.record("a token in the API key file was sent")
        } catch {
            #expect(error.problemKind == .unauthorized && "\(error)".contains("does not hold an API key"))
        }
    }

    @Test("An unreachable ledger is a transport error, not a refusal")
    func unreachable() async throws {
        let port = try freeLoopbackPort()
        let ledger = KioskLedger(baseURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .email("a@b.example"))
        do {
            _ = try await ledger.sessionStatus(sid: "x")
            Issue.record("nothing listens, yet the call returned")
        } catch {
            #expect(error.problemKind == nil)
        }
    }
}
