import Foundation
import GotchuAPI
import GotchuCore
import GotchuKiosk
import GotchuLedgerClient
import GotchuPeer
import GotchuSimulatedRadio
import GotchuTesting
import Logging
import Testing

/// A kiosk in this process over a real ledger server (a `gotchu server` process) and the simulated air.
struct KioskHarness {
    let processes: GotchuProcesses
    let server: RunningCommand
    let url: String
    let air: SimulatedAir

    static func start(serverOptions: [String] = []) async throws -> KioskHarness {
        let processes = try GotchuProcesses()
        let (server, url) = try await processes.startServer(serverOptions)
        return KioskHarness(
            processes: processes,
            server: server,
            url: url,
            air: SimulatedAir(seed: 11, clock: .realTime)
        )
    }

    func stop() {
        _ = try? server.stopNow()
        processes.remove()
    }

    var stateDirectory: URL { processes.directory.url.appendingPathComponent("kiosk-state") }

    func makeKiosk(
        options: Kiosk.Options = Kiosk.Options(payeeName: "Corner Shop", statusInterval: .milliseconds(100)),
        ledgerURL: String? = nil,
        credentials: KioskLedger.Credentials = .email("shop@example.com"),
        at position: Position = Position(x: 0, y: 0)
    ) async throws -> Kiosk {
        var options = options
        options.retry = Backoff(initial: .milliseconds(100), maximum: .milliseconds(400))
        return try Kiosk(
            store: try KioskStore(directory: stateDirectory),
            ledger: KioskLedger(baseURL: URL(string: ledgerURL ?? url)!, credentials: credentials),
            radio: await air.addPeer(SimulatedPeer(name: "kiosk", at: position)),
            options: options,
            logger: Logger(label: "test.kiosk") { _ in SwiftLogNoOpLogHandler() }
        )
    }

    /// A second ledger server on a fixed `port` (one the kiosk was pointed at before it listened), with its own
    /// database.
    func startLedger(port: Int, database: String = "late.sqlite", options: [String] = []) async throws -> RunningCommand
    {
        let server = try processes.start(
            [
                "server", "--dev", "--port", "\(port)", "--database",
                processes.directory.url.appendingPathComponent(database).path,
            ] + options,
            user: "late-server"
        )
        _ = try await server.waitForLine { $0.hasPrefix("listening on ") }
        return server
    }

    func client(_ email: String, funded: Cents = 0) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: URL(string: url)!)
        client.token = try await client.devLogin(email: email).token
        if funded > 0 { _ = try await client.fund(amountCents: funded) }
        return client
    }

    /// A payer standing 20 cm from the kiosk pays whatever it finds.
    func pay(as email: String, funded: Cents) async throws -> PayerStateMachine.Outcome {
        let ledger = try await client(email, funded: funded)
        let phone = await air.addPeer(SimulatedPeer(name: email, at: Position(x: 0.2, y: 0)))
        var flow = PayerStateMachine.Configuration()
        flow.preApproved = true
        // The air runs on the wall clock: these only bound a hang, however long a busy machine takes to deliver.
        flow.scanTimeout = .seconds(60)
        flow.selectionTimeout = .seconds(60)
        let journal = try PaymentJournal(path: processes.directory.url.appendingPathComponent("\(email).sqlite").path)
        return try await Payer(radio: phone, ledger: ledger, journal: journal)
            .run(Payer.Options(flow: flow), interaction: AcceptingPayer())
    }
}

/// A payer that accepts every offer and picks nothing by hand.
struct AcceptingPayer: PayerInteraction {
    func choose(from candidates: [ProximityCandidate]) async -> EID? { nil }
    func confirm(_ offer: PaymentOffer) async -> Bool { true }
    func progress(_ progress: Payer.Progress) {}
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

/// Waits until the kiosk's status satisfies `predicate`; the timeout only bounds a hang.
@discardableResult
func waitForStatus(
    _ kiosk: Kiosk,
    timeout: Duration = .seconds(60),
    _ predicate: @escaping @Sendable (KioskStatus) -> Bool
) async throws -> KioskStatus {
    let updates = await kiosk.statusUpdates()
    return try await withThrowingTaskGroup(of: KioskStatus?.self) { group in
        group.addTask {
            for await status in updates where predicate(status) { return status }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        let found = try await group.next() ?? nil
        group.cancelAll()
        guard let found else {
            throw TestingError("timed out; the kiosk is \(await kiosk.status())")
        }
        return found
    }
}

@Suite("The kiosk drives charges over a real ledger and the simulated air", .serialized, .timeLimit(.minutes(3)))
struct KioskTests {
    @Test("A charge is advertised, paid by a nearby payer, and reported in order; the ledger agrees")
    func chargePaid() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        let kiosk = try await harness.makeKiosk()
        let events = await kiosk.events()
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 1_250, reference: "order 17")
            #expect(charge.state == .creating && charge.expiresAt != nil)
            let advertising = try await waitForStatus(kiosk) { $0.state == .advertising }
            #expect(advertising.payeeName == "Corner Shop" && advertising.charge?.eid != nil)
            let outcome = try await harness.pay(as: "alice@example.com", funded: 5_000)
            guard case .paid(let offer, let balance) = outcome else {
                Issue.record("payer did not pay: \(outcome)")
                return
            }
            #expect(offer.amountCents == 1_250 && balance == 3_750)
            let paid = try await waitForStatus(kiosk) { $0.state == .paid }
            #expect(paid.charge?.id == charge.id && paid.charge?.sessionID == offer.sessionID)
            #expect(try await kiosk.charge(id: charge.id).state == .paid)
            #expect(try await harness.client("shop@example.com").wallet().availableCents == 1_250)
        }
        var kinds: [KioskEvent.Kind] = []
        for await event in events { kinds.append(event.kind) }
        #expect(kinds.first == .advertising && kinds.last == .paid)
        // Reopening the store shows the charge as it ended.
        #expect(try KioskStore(directory: harness.stateDirectory).latest()?.charge.state == .paid)
    }

    @Test("One charge at a time; bad amounts and references are refused without storing anything")
    func refusals() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
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
            let first = try await kiosk.charge(amountCents: 100, reference: "")
            await #expect(throws: KioskError.busy(activeID: first.id)) {
                try await kiosk.charge(amountCents: 200, reference: "")
            }
            await #expect(throws: KioskError.notFound(id: "nope")) { try await kiosk.charge(id: "nope") }
        }
    }

    @Test("The ledger refusing an amount fails the charge with its reason, and frees the kiosk")
    func ledgerRefusal() async throws {
        let harness = try await KioskHarness.start(serverOptions: ["--max-amount", "1000"])
        defer { harness.stop() }
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 5_000, reference: "")
            let failed = try await waitForStatus(kiosk) { $0.state == .failed }
            #expect(failed.problem?.contains("refused") == true)
            _ = try await kiosk.charge(amountCents: 500, reference: "")
            try await waitForStatus(kiosk) { $0.state == .advertising }
        }
    }

    @Test("Cancel stops the advertisement and cancels the session on the ledger; a final charge cannot be cancelled")
    func cancel() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 700, reference: "")
            let advertising = try await waitForStatus(kiosk) { $0.state == .advertising }
            let cancelled = try await kiosk.cancel(id: charge.id)
            #expect(cancelled.state == .cancelled)
            let sid = try #require(advertising.charge?.sessionID)
            #expect(try await harness.client("shop@example.com").session(sid: sid).status == .cancelled)
            await #expect(throws: KioskError.alreadyFinal(cancelled)) { try await kiosk.cancel(id: charge.id) }
            // Nothing of the kiosk's is on the air any more. A beacon put on the air beside the scanner marks how
            // far the scan has got: the air delivers in the order of its own time, so once the beacon has been heard
            // 700 ms after it started, the kiosk would have been heard too had it still been advertising.
            let scanner = await harness.air.addPeer(SimulatedPeer(name: "scanner", at: Position(x: 0.1, y: 0)))
            let sightings = try await scanner.scan(ScanFilter())
            let beacon = EID(rawValue: "00000beac0")!
            let beaconStart = await harness.air.now
            await harness.air.addBroadcaster(
                SimulatedPeer(name: "beacon", at: Position(x: 0.1, y: 0.1)),
                payload: AirPayload(Advertisement(eid: beacon), txPower: 0)
            )
            let heard = try await withThrowingTaskGroup(of: [Sighting]?.self) { group in
                group.addTask {
                    var others: [Sighting] = []
                    for try await sighting in sightings {
                        if sighting.eid != beacon {
                            others.append(sighting)
                        } else if sighting.time >= beaconStart + .milliseconds(700) {
                            return others
                        }
                    }
                    return nil
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(60))
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first
            }
            #expect(heard?.isEmpty == true, "heard: \(String(describing: heard))")
        }
    }

    @Test("The end of a charge is shown for a while, then the kiosk reads idle again for the next customer")
    func backToIdle() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        // Far longer than the few calls between the cancel and the first look at the status, however busy the
        // machine; the wait for idle then checks the status's own time against it.
        let idleAfter: TimeInterval = 3
        var options = Kiosk.Options(statusInterval: .milliseconds(100))
        options.idleAfter = .seconds(idleAfter)
        let kiosk = try await harness.makeKiosk(options: options)
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 300, reference: "")
            try await waitForStatus(kiosk) { $0.state == .advertising }
            let ended = try await kiosk.cancel(id: charge.id)
            let shown = await kiosk.status()
            #expect(shown.state == .cancelled)
            #expect(shown.now < ended.updatedAt.addingTimeInterval(idleAfter))
            let idle = try await waitForStatus(kiosk) { $0.state == .idle }
            #expect(idle.charge?.id == charge.id && idle.charge?.state == .cancelled)
            // Idle only once the end had been shown for its time.
            #expect(idle.now >= ended.updatedAt.addingTimeInterval(idleAfter))
        }
    }

    @Test("Cancelling a charge a payer already paid reports it paid, not cancelled")
    func cancelAfterPayment() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        // Polling once, when advertising starts, and not again within the test: the kiosk has not yet seen the
        // payment when the point-of-sale cancels, however long the payment takes.
        let kiosk = try await harness.makeKiosk(options: Kiosk.Options(statusInterval: .seconds(3_600)))
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 2_000, reference: "")
            try await waitForStatus(kiosk) { $0.state == .advertising }
            guard case .paid = try await harness.pay(as: "carol@example.com", funded: 2_000) else {
                Issue.record("payer did not pay")
                return
            }
            #expect(await kiosk.status().state == .advertising)
            let ended = try await kiosk.cancel(id: charge.id)
            #expect(ended.state == .paid)
            #expect(try await harness.client("shop@example.com").wallet().availableCents == 2_000)
        }
    }

    @Test("A kiosk started again continues the same session, which is then paid")
    func restartContinuesSession() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        let first = try await harness.makeKiosk()
        let before = try await withRunning(first) {
            _ = try await first.charge(amountCents: 990, reference: "table 4")
            return try await waitForStatus(first) { $0.state == .advertising }
        }
        let second = try await harness.makeKiosk()
        #expect(await second.currentCharge?.sessionID == before.charge?.sessionID)
        try await withRunning(second) {
            let advertising = try await waitForStatus(second) { $0.state == .advertising }
            #expect(advertising.charge?.eid == before.charge?.eid)
            guard case .paid(let offer, _) = try await harness.pay(as: "bob@example.com", funded: 2_000) else {
                Issue.record("payer did not pay")
                return
            }
            #expect(offer.sessionID == before.charge?.sessionID)
            try await waitForStatus(second) { $0.state == .paid && $0.charge?.reference == "table 4" }
        }
    }

    @Test("A session created just before a crash, its answer lost, is the one advertised after the restart")
    func lostCreateAnswer() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        let kiosk = try await harness.makeKiosk()
        // The charge is stored, then the ledger creates its session, then the kiosk dies before storing the answer.
        let charge = try await kiosk.charge(amountCents: 1_500, reference: "")
        let shop = try await harness.client("shop@example.com")
        let lost = try await shop.createSession(amountCents: 1_500, idempotencyKey: "kiosk-\(charge.id)-1")
        let restarted = try await harness.makeKiosk()
        try await withRunning(restarted) {
            let advertising = try await waitForStatus(restarted) { $0.state == .advertising }
            #expect(advertising.charge?.sessionID == lost.sid && advertising.charge?.eid == lost.eid)
        }
    }

    @Test("An unreachable ledger shows as an error and the charge goes on once the ledger is back")
    func ledgerUnreachable() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        // A port nothing listens on, then a ledger started on it.
        let port = try freeLoopbackPort()
        let kiosk = try await harness.makeKiosk(ledgerURL: "http://127.0.0.1:\(port)")
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 300, reference: "")
            let error = try await waitForStatus(kiosk) { $0.state == .error }
            #expect(error.problem?.contains("cannot reach the ledger") == true)
            let late = try await harness.startLedger(port: port)
            defer { _ = try? late.stopNow() }
            let advertising = try await waitForStatus(kiosk) { $0.state == .advertising }
            #expect(advertising.problem == nil)
        }
    }

    @Test("A token the ledger stops accepting (its secret changed) is renewed by logging in again")
    func reLoginAfterRejectedToken() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        let port = try freeLoopbackPort()
        func startLedger(secret: Character) async throws -> RunningCommand {
            try await harness.startLedger(
                port: port,
                database: "rotating.sqlite",
                options: ["--jwt-secret", String(repeating: secret, count: 40)]
            )
        }
        let first = try await startLedger(secret: "a")
        let kiosk = try await harness.makeKiosk(ledgerURL: "http://127.0.0.1:\(port)")
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 600, reference: "")
            let before = try await waitForStatus(kiosk) { $0.state == .advertising }
            _ = try await first.stop()
            // The same ledger comes back signing with another secret: the kiosk's token is now forged to it.
            let second = try await startLedger(secret: "b")
            defer { _ = try? second.stopNow() }
            var payer = LedgerClient(baseURL: URL(string: "http://127.0.0.1:\(port)")!)
            payer.token = try await payer.devLogin(email: "dave@example.com").token
            _ = try await payer.fund(amountCents: 600)
            let sid = try #require(before.charge?.sessionID)
            try await payer.lock(sid: sid)
            _ = try await payer.send(sid: sid, idempotencyKey: UUID().uuidString)
            let paid = try await waitForStatus(kiosk) { $0.state == .paid }
            #expect(paid.charge?.sessionID == sid && paid.problem == nil)
        }
    }

    @Test(
        "A cancel while the ledger is unreachable is pending, survives, and ends with no live session once it is back"
    )
    func cancelWhileLedgerUnreachable() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        let port = try freeLoopbackPort()
        let kiosk = try await harness.makeKiosk(ledgerURL: "http://127.0.0.1:\(port)")
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 800, reference: "")
            try await waitForStatus(kiosk) { $0.state == .error }
            do {
                _ = try await kiosk.cancel(id: charge.id)
                Issue.record("a cancel the ledger could not confirm returned as done")
            } catch KioskError.cancelPending {}
            // The request is kept: the ledger coming back ends the charge cancelled, not advertised.
            let ledger = try await harness.startLedger(port: port)
            defer { _ = try? ledger.stopNow() }
            let ended = try await waitForStatus(kiosk) { $0.charge?.state.isFinal == true }
            #expect(ended.state == .cancelled)
            // The session the cancel had to create (a lost creation might have made one) is cancelled on the ledger.
            let sid = try #require(ended.charge?.sessionID)
            var shop = LedgerClient(baseURL: URL(string: "http://127.0.0.1:\(port)")!)
            shop.token = try await shop.devLogin(email: "shop@example.com").token
            #expect(try await shop.session(sid: sid).status == .cancelled)
        }
    }

    @Test("A rejected token is shown as an error; a new token in the token file is picked up")
    func tokenFileRotation() async throws {
        let harness = try await KioskHarness.start()
        defer { harness.stop() }
        let tokenFile = harness.processes.directory.url.appendingPathComponent("token")
        try "not-a-token".write(to: tokenFile, atomically: true, encoding: .utf8)
        let kiosk = try await harness.makeKiosk(credentials: .tokenFile(tokenFile))
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 400, reference: "")
            let error = try await waitForStatus(kiosk) { $0.state == .error }
            #expect(error.problem?.contains("token") == true)
            let token = try #require(try await harness.client("shop@example.com").token)
            try token.write(to: tokenFile, atomically: true, encoding: .utf8)
            try await waitForStatus(kiosk) { $0.state == .advertising }
        }
    }

    @Test("A charge whose lifetime ends unpaid is expired, after renewing its ledger sessions, and none stays live")
    func lifetimeOver() async throws {
        let harness = try await KioskHarness.start(serverOptions: ["--session-lifetime", "1"])
        defer { harness.stop() }
        // The first 1 s session is created, expires and is seen expired long before the charge's 6 s are over, even
        // on a busy machine: at least one renewal is certain.
        var options = Kiosk.Options(statusInterval: .milliseconds(100))
        options.sessionLifetime = .seconds(6)
        let kiosk = try await harness.makeKiosk(options: options)
        // Events, not statuses: their larger buffer keeps every session even when this task falls behind.
        let events = await kiosk.events()
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 100, reference: "")
            var sessions: Set<String> = []
            for await event in events {
                if let sid = event.charge.sessionID { sessions.insert(sid) }
                if event.kind == .expired { break }
            }
            // The 1 s ledger sessions were renewed until the kiosk's 6 s were over, and none stays live.
            #expect(sessions.count >= 2)
            let ended = try await kiosk.charge(id: charge.id)
            #expect(ended.state == .expired)
            let shop = try await harness.client("shop@example.com")
            for sid in sessions {
                let status = try await shop.session(sid: sid).status
                #expect(status == .expired || status == .cancelled)
            }
        }
    }
}

/// A loopback port free right now.
func freeLoopbackPort() throws -> Int {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { throw TestingError("socket failed") }
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
        }
    }
    guard bound else { throw TestingError("bind failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}
