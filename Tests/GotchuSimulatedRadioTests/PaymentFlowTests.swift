import GotchuCore
import GotchuSimulatedRadio
import Testing

/// A ledger in memory: just enough of resolve, lock, send and status for both flows to run against.
private actor FakeLedger {
    struct Session {
        var eid: EID
        var amountCents: Int64
        var payee: String
        var lockedBy: String?
        var paid = false
    }

    var sessions: [String: Session] = [:]
    var balanceCents: Int64 = 10_000
    private(set) var idempotencyKeys: [String] = []

    func create(eid: EID, amountCents: Int64, payee: String) -> String {
        let sid = "session-\(sessions.count + 1)"
        sessions[sid] = Session(eid: eid, amountCents: amountCents, payee: payee)
        return sid
    }

    func resolve(_ eid: EID) -> PayerStateMachine.Event {
        guard let (sid, session) = sessions.first(where: { $0.value.eid == eid && !$0.value.paid }) else {
            return .resolveFailed(.notFound)
        }
        return .resolved(sessionID: sid, amountCents: session.amountCents, payeeName: session.payee)
    }

    func lock(_ sid: String, by payer: String) -> PayerStateMachine.Event {
        guard sessions[sid]?.lockedBy == nil else { return .lockFailed(reason: "session-locked") }
        sessions[sid]?.lockedBy = payer
        return .locked
    }

    func send(_ sid: String, key: String) -> PayerStateMachine.Event {
        idempotencyKeys.append(key)
        guard let session = sessions[sid], !session.paid else { return .sendFailed(reason: "conflict") }
        balanceCents -= session.amountCents
        sessions[sid]?.paid = true
        return .sent(newBalanceCents: balanceCents)
    }

    func status(_ sid: String) -> ReceiverStateMachine.SessionStatus {
        sessions[sid]?.paid == true ? .paid : .pending
    }
}

/// Runs the receiver flow on `radio`: the shape of a real driver, with the ledger and the clock injected.
private func runReceiver(
    radio: SimulatedRadio,
    ledger: FakeLedger,
    eid: EID
) async throws
    -> ReceiverStateMachine.Outcome
{
    var machine = ReceiverStateMachine()
    var action = machine.receive(.start, now: await radio.now())
    while true {
        switch action {
        case .createSession:
            let sid = await ledger.create(eid: eid, amountCents: 1250, payee: "Corner Café")
            let session = ReceiverSession(sessionID: sid, eid: eid, expiresAt: await radio.now() + .seconds(60))
            action = machine.receive(.created(session), now: await radio.now())
        case .startAdvertising(let eid):
            guard case .advertising(let session) = machine.state else { return .cancelled }
            // Advertise while polling the status; the scope, and the advertisement with it, ends at the first final
            // status, which the machine then turns into the next action.
            let status = try await radio.withAdvertisement(Advertisement(eid: eid)) { _ in
                while true {
                    try await radio.sleep(for: .milliseconds(200))
                    let status = await ledger.status(session.sessionID)
                    if status != .pending { return status }
                }
            }
            action = machine.receive(.status(sessionID: session.sessionID, status), now: await radio.now())
        case .stopAdvertisingAndReport(let outcome), .report(let outcome):
            return outcome
        case .stopAdvertisingAndCancel:
            return .cancelled
        case .stopAdvertisingAndCreateSession, .none:
            Issue.record("unexpected action \(action)")
            return .cancelled
        }
    }
}

/// Runs the payer flow on `radio`: sightings and ticks are merged into one event stream the machine consumes.
private func runPayer(radio: SimulatedRadio, ledger: FakeLedger) async throws -> PayerStateMachine.Outcome {
    var machine = PayerStateMachine(configuration: .init(preApproved: true))
    let (events, sink) = AsyncStream.makeStream(of: PayerStateMachine.Event.self)
    var scanTasks: [Task<Void, Never>] = []
    defer { scanTasks.forEach { $0.cancel() } }
    var action = machine.receive(.start, now: await radio.now())
    var iterator = events.makeAsyncIterator()
    while true {
        switch action {
        case .startScan:
            let sightings = try await radio.scan(ScanFilter())
            scanTasks.append(
                Task {
                    do { for try await sighting in sightings { sink.yield(.sighting(sighting)) } } catch {}
                }
            )
            scanTasks.append(
                Task {
                    while (try? await radio.sleep(for: .milliseconds(100))) != nil { sink.yield(.tick) }
                }
            )
            action = .none
        case .none:
            guard let event = await iterator.next() else { return .failed(.cancelled) }
            action = machine.receive(event, now: await radio.now())
        case .stopScanAndResolve(let eid):
            scanTasks.forEach { $0.cancel() }
            action = machine.receive(await ledger.resolve(eid), now: await radio.now())
        case .resolve(let eid):
            action = machine.receive(await ledger.resolve(eid), now: await radio.now())
        case .lock(let sid):
            action = machine.receive(await ledger.lock(sid, by: "payer"), now: await radio.now())
        case .send(let sid):
            // A real driver persists the key in its journal before sending.
            action = machine.receive(await ledger.send(sid, key: "key-for-\(sid)"), now: await radio.now())
        case .report(let outcome), .stopScanAndReport(let outcome):
            return outcome
        case .stopScanAndPresentCandidates, .askConfirmation:
            Issue.record("unexpected action \(action)")
            return .failed(.cancelled)
        }
    }
}

private actor Finished {
    var count = 0
    func done() { count += 1 }
}

@Suite struct PaymentFlowTests {
    @Test func payerPaysTheNearestTerminalOverTheSimulatedAir() async throws {
        let air = SimulatedAir(model: AirModel(shadowingSigma: 1, fastFadingSigma: 2, packetLoss: 0.1), seed: 21)
        let near = await air.addPeer(SimulatedPeer(name: "near", at: Position(x: 0.2, y: 0)))
        let far = await air.addPeer(SimulatedPeer(name: "far", at: Position(x: -2, y: 1)))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: .origin))
        let ledger = FakeLedger()
        let finished = Finished()
        let nearEID = EID(rawValue: "0000000aaa")!

        let nearReceiver = Task {
            defer { Task { await finished.done() } }
            return try await runReceiver(radio: near, ledger: ledger, eid: nearEID)
        }
        let farReceiver = Task {
            try await runReceiver(radio: far, ledger: ledger, eid: EID(rawValue: "0000000bbb")!)
        }
        // Let both terminals start advertising before the payer arrives.
        await air.advance(by: .milliseconds(500))
        let payment = Task {
            defer { Task { await finished.done() } }
            return try await runPayer(radio: payer, ledger: ledger)
        }
        var elapsed = Duration.zero
        while await finished.count < 2, elapsed < .seconds(20) {
            await air.advance(by: .milliseconds(100))
            elapsed += .milliseconds(100)
        }
        farReceiver.cancel()

        guard case .paid(let offer, let balance) = try await payment.value else {
            Issue.record("the payment did not go through")
            return
        }
        #expect(offer.eid == nearEID)
        #expect(offer.payeeName == "Corner Café")
        #expect(balance == 8750)
        guard case .paid(let session) = try await nearReceiver.value else {
            Issue.record("the receiver did not see the payment")
            return
        }
        #expect(session.eid == nearEID)
        #expect(await ledger.idempotencyKeys.count == 1)
    }
}
