import Foundation
import GotchuAPI
import GotchuCore
import GotchuKiosk
import GotchuLedgerClient
import GotchuSimulatedRadio
import GotchuTesting
import Logging
import Testing

@Suite("The kiosk learns its sessions' status from the event stream", .timeLimit(.minutes(2)))
struct KioskLiveStatusTests {
    @Test("A charge is paid, and the kiosk knows it, with no poll falling within the test")
    func paidWithoutPolling() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        var payer = LedgerClient(baseURL: URL(string: url)!)
        payer.token = try await payer.devLogin(email: "payer@example.com").token
        _ = try await payer.fund(amountCents: 5_000)

        let air = SimulatedAir(seed: 3, clock: .realTime)
        let charges = KioskChargeMachine.Configuration(statusInterval: .seconds(3_600), safetyInterval: .seconds(3_600))
        let kiosk = try Kiosk(
            store: try KioskStore(directory: processes.directory.url.appendingPathComponent("kiosk-state")),
            ledger: KioskLedger(baseURL: URL(string: url)!, credentials: .email("shop@example.com")),
            radio: await air.addPeer(SimulatedPeer(name: "kiosk", at: Position(x: 0, y: 0))),
            options: Kiosk.Options(payeeName: "Corner Shop", charges: charges),
            logger: Logger(label: "test.kiosk") { _ in SwiftLogNoOpLogHandler() }
        )
        let updates = await kiosk.statusUpdates()
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 1_500, reference: "table 4")
            var iterator = updates.makeAsyncIterator()
            var eid: EID?
            while eid == nil, let status = await iterator.next() {
                if status.state == .advertising { eid = status.charge?.eid }
            }
            let resolved = try await payer.resolve(eid: try #require(eid))
            try await payer.lock(sid: resolved.sid)
            var locked = false
            while !locked, let status = await iterator.next() { locked = status.state == .locked }
            #expect(locked)
            _ = try await payer.send(sid: resolved.sid, idempotencyKey: UUID().uuidString)
            var paid = false
            while !paid, let status = await iterator.next() { paid = status.state == .paid }
            #expect(paid)
        }
    }
}
