import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuPeer
import GotchuSimulatedRadio
import GotchuTesting
import Testing

/// The payer's flow answers every question itself and records what it saw.
private final class ScriptedPayer: PayerInteraction, @unchecked Sendable {
    // Unchecked: `seen` is guarded by `lock`.
    private let lock = NSLock()
    private var seen: [Payer.Progress] = []

    func choose(from candidates: [ProximityCandidate]) async -> EID? { nil }
    func confirm(_ offer: PaymentOffer) async -> Bool { true }
    func progress(_ progress: Payer.Progress) { lock.withLock { seen.append(progress) } }
    var progressSeen: [Payer.Progress] { lock.withLock { seen } }
}

@Suite("Receiver and payer end to end, over the simulated air and a real ledger server", .timeLimit(.minutes(10)))
struct EndToEndTests {
    @Test("A receiver and a payer on one air: PAID, balances right, junk on the air ignored and counted")
    func inProcess() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let bob = try await loggedIn(url, "bob@example.com")
        let alice = try await loggedIn(url, "alice@example.com", funded: 5_000)

        let air = SimulatedAir(seed: 7, clock: .realTime)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: Position(x: 0, y: 0)))
        let phone = await air.addPeer(SimulatedPeer(name: "phone", at: Position(x: 0.2, y: 0)))
        // Someone else's malformed advertisements nearby: wrong length, non-hex, data under another UUID.
        for (index, data) in [Array("abc".utf8), Array("zzzzzzzzzz".utf8), Array("A1B2C3D4E5".utf8)].enumerated() {
            await air.addBroadcaster(
                SimulatedPeer(name: "junk \(index)", at: Position(x: 0.1, y: 0.1)),
                payload: AirPayload(serviceUUIDs: [.gotchu], serviceData: [.gotchu: data])
            )
        }

        // The payer steps up once the terminal is on the air, however long the receiver took to get there.
        let (progress, report) = AsyncStream.makeStream(of: Receiver.Progress.self)
        let receiver = Task {
            defer { report.finish() }
            return await Receiver(radio: terminal, ledger: bob).run(Receiver.Options(amountCents: 1_250)) {
                report.yield($0)
            }
        }
        defer { receiver.cancel() }
        var advertising = false
        for await step in progress {
            if case .advertising = step {
                advertising = true
                break
            }
        }
        try #require(advertising)
        var flow = PayerStateMachine.Configuration()
        flow.preApproved = true
        // The air runs on the wall clock: these only bound a hang, however long a busy machine takes to deliver.
        flow.scanTimeout = .seconds(60)
        flow.selectionTimeout = .seconds(60)
        let journal = try PaymentJournal(path: processes.directory.url.appendingPathComponent("journal.sqlite").path)
        let interaction = ScriptedPayer()
        let outcome = try await Payer(radio: phone, ledger: alice, journal: journal)
            .run(Payer.Options(flow: flow), interaction: interaction)

        guard case .paid(let offer, let balance) = outcome else {
            Issue.record("payer did not pay: \(outcome)")
            return
        }
        #expect(offer.payeeName == "bob" && offer.amountCents == 1_250 && balance == 3_750)
        guard case .paid(let session) = await receiver.value else {
            Issue.record("receiver did not see the payment")
            return
        }
        #expect(session.sessionID == offer.sessionID)
        #expect(try await bob.wallet().availableCents == 1_250)
        #expect(try await alice.wallet().availableCents == 3_750)
        #expect(try journal.unfinished().isEmpty)
        #expect(try journal.recent().first?.state == .paid)
        #expect(await phone.statistics().malformed > 0)
        #expect(interaction.progressSeen.contains { if case .locked = $0 { true } else { false } })
    }
}

/// Chooses nothing, and keeps the list it was shown.
private final class ListingPayer: PayerInteraction, @unchecked Sendable {
    // Unchecked: `shown` is guarded by `lock`.
    private let lock = NSLock()
    private var shown: ([ProximityCandidate], [EID: PaymentOffer])?

    func choose(from candidates: [ProximityCandidate]) async -> EID? { nil }
    func choose(from candidates: [ProximityCandidate], offers: [EID: PaymentOffer]) async -> EID? {
        lock.withLock { shown = (candidates, offers) }
        return nil
    }
    func confirm(_ offer: PaymentOffer) async -> Bool { false }
    func progress(_ progress: Payer.Progress) {}
    var list: ([ProximityCandidate], [EID: PaymentOffer])? { lock.withLock { shown } }
}

@Suite("The payer's list of candidates", .timeLimit(.minutes(10)))
struct CandidateListTests {
    @Test("every candidate is listed with its payee, amount and confirmation code from the ledger")
    func candidatesAreDescribed() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let bob = try await loggedIn(url, "bob@example.com")
        let carol = try await loggedIn(url, "carol@example.com")
        let alice = try await loggedIn(url, "alice@example.com", funded: 5_000)
        let bobs = try await bob.createSession(amountCents: 1_250)
        let carols = try await carol.createSession(amountCents: 700)

        let air = SimulatedAir(seed: 3, clock: .virtual)
        let phone = await air.addPeer(SimulatedPeer(name: "phone", at: Position(x: 0, y: 0)))
        for (index, eid) in [bobs.eid, carols.eid].enumerated() {
            _ = await air.addBroadcaster(
                SimulatedPeer(name: "terminal \(index)", at: Position(x: 0.3, y: Double(index))),
                payload: AirPayload(Advertisement(eid: eid), txPower: 0)
            )
        }
        // A terminal heard that the ledger does not know is listed without a description.
        let unknown = EID(rawValue: "0000000000")!
        _ = await air.addBroadcaster(
            SimulatedPeer(name: "stranger", at: Position(x: -0.5, y: 0)),
            payload: AirPayload(Advertisement(eid: unknown), txPower: 0)
        )
        var flow = PayerStateMachine.Configuration()
        flow.alwaysChoose = true
        // Virtual time may run ahead of the payer's reading of the scan: nothing heard in this test goes stale.
        flow.selector.window = .seconds(30)
        flow.selector.staleAfter = .seconds(30)
        let journal = try PaymentJournal(path: processes.directory.url.appendingPathComponent("journal.sqlite").path)
        let interaction = ListingPayer()
        let paying = Task {
            try await Payer(radio: phone, ledger: alice, journal: journal)
                .run(Payer.Options(flow: flow), interaction: interaction)
        }
        // The scan starts, then two seconds of the air's time pass: the list is due after one. Describing it takes
        // real requests to the ledger, which no virtual time waits for.
        while await air.sleeperCount == 0 { await Task.yield() }
        for _ in 0..<200 { await air.advance(by: .milliseconds(10)) }
        let outcome = try await paying.value
        guard case .failed(.cancelled) = outcome else {
            Issue.record("the payer did not stop at the list: \(outcome)")
            return
        }
        let (candidates, offers) = try #require(interaction.list)
        #expect(Set(candidates.map(\.eid)) == [bobs.eid, carols.eid, unknown])
        #expect(offers[bobs.eid]?.payeeName == "bob" && offers[bobs.eid]?.amountCents == 1_250)
        #expect(offers[bobs.eid]?.confirmationCode == ConfirmationCode.of(sessionID: bobs.sid))
        #expect(offers[carols.eid]?.payeeName == "carol" && offers[carols.eid]?.amountCents == 700)
        #expect(offers[unknown] == nil)
        #expect(try await alice.wallet().availableCents == 5_000)
    }
}
