import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuPeer
import GotchuSimulatedRadio
import GotchuTesting
import Testing

@Suite("The receiver learns its session's status from the event stream", .timeLimit(.minutes(2)))
struct LiveStatusTests {
    @Test("Locked and paid reach a receiver that never polls")
    func paidWithoutPolling() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let bob = try await loggedIn(url, "bob@example.com")
        let alice = try await loggedIn(url, "alice@example.com", funded: 5_000)
        let air = SimulatedAir(seed: 7, clock: .realTime)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: Position(x: 0, y: 0)))

        // Neither a poll nor a safety read falls within the test: only the stream can tell the receiver.
        let options = Receiver.Options(
            amountCents: 800,
            statusInterval: .seconds(3_600),
            safetyInterval: .seconds(3_600)
        )
        let (progress, report) = AsyncStream.makeStream(of: Receiver.Progress.self)
        let receiver = Task {
            defer { report.finish() }
            return await Receiver(radio: terminal, ledger: bob).run(options) { report.yield($0) }
        }
        defer { receiver.cancel() }
        var iterator = progress.makeAsyncIterator()
        var eid: EID?
        while eid == nil, let step = await iterator.next() {
            if case .advertising(let advertised) = step { eid = advertised }
        }
        let resolved = try await alice.resolve(eid: try #require(eid))
        try await alice.lock(sid: resolved.sid)
        var sawLocked = false
        while !sawLocked, let step = await iterator.next() {
            if case .locked = step { sawLocked = true }
        }
        #expect(sawLocked)
        _ = try await alice.send(sid: resolved.sid, idempotencyKey: UUID().uuidString)
        guard case .paid(let session) = await receiver.value else {
            Issue.record("the receiver did not see the payment")
            return
        }
        #expect(session.sessionID == resolved.sid)
    }
}
