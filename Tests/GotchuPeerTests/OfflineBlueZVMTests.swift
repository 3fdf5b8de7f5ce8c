import Foundation
import GotchuAPI
import GotchuBlueZ
import GotchuCore
import GotchuLedgerClient
import GotchuPeer
import GotchuReceipts
import GotchuTesting
import Testing

/// A whole offline payment through the real bluetoothd, in the VM `scripts/bluez-vm-tests` boots: the terminal on
/// hci0 advertises and serves its signed charge over GATT, the payer's device on hci1 finds it, pays it on a real
/// ledger server, and writes the receipt back; the terminal says Paid on the receipt it checks offline.
@Suite(
    "An offline payment through the real bluetoothd, in a VM",
    .serialized,
    .timeLimit(.minutes(10)),
    .enabled(
        if: ProcessInfo.processInfo.environment["GOTCHU_BLUEZ_VM"] == "1",
        "runs in the BlueZ VM only (scripts/bluez-vm-tests)"
    )
)
struct OfflineBlueZVMTests {
    @Test("A terminal without a network is paid over GATT through BlueZ, and takes the ledger's receipt")
    func offlinePayment() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let fixture = try await OfflineCounterFixture.start(processes)
        defer { _ = try? fixture.server.stopNow() }
        let (payer, payee) = (fixture.payer, fixture.payee)
        let counter = try fixture.counter()

        let terminal = try await BlueZRadio.connect(configuration: .init(adapter: "hci0", advertisingType: .peripheral))
        let phone = try await BlueZRadio.connect(configuration: .init(adapter: "hci1"))
        let eid = EID(rawValue: "0ff11e0002")!
        let started = ContinuousClock.now
        let outcome = try await terminal.withAdvertisement(Advertisement(eid: eid, offline: true)) { _ in
            try await terminal.withGattService(counter.service) { serving in
                counter.served(by: serving)
                var found: Sighting?
                for try await sighting in try await phone.scan(ScanFilter()) where sighting.eid == eid {
                    found = sighting
                    break
                }
                // The marker after the EID reached the phone through both bluetoothd's.
                #expect(found?.offline == true)
                let link = try await phone.connect(
                    to: try #require(found),
                    service: OfflineCounter.Characteristic.service,
                    timeout: .seconds(30)
                )
                defer { Task { await link.disconnect() } }
                return try await OfflinePayment.pay(over: link, ledger: payer, idempotencyKey: "vm-1") { _, _ in true }
            }
        }
        let elapsed = ContinuousClock.now - started
        guard case .paid(let receipt, let balance) = outcome else {
            Issue.record("not paid: \(outcome)")
            return
        }
        #expect(balance == 3_750)
        #expect(counter.receipt == receipt && receipt.sessionID == counter.charge.sessionID)
        #expect(try await payee.wallet().availableCents == 1_250)
        print("bluez-vm: offline payment, advertisement to Paid on the terminal, in \(elapsed)")
        await terminal.close()
        await phone.close()
    }
}
