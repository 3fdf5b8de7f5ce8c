import Foundation
import GotchuBlueZ
import GotchuCore
import GotchuDBus
import Synchronization
import Testing

/// The real bluetoothd (BlueZ 5.66) with two virtual LE controllers, hci0 and hci1, in the VM that
/// `scripts/bluez-vm-tests` boots: the terminal advertises and serves GATT on hci0, the payer scans, connects and
/// reads, writes and subscribes on hci1, over the system bus, as on a Raspberry Pi.
@Suite(
    "The real bluetoothd, in a VM",
    .serialized,
    .timeLimit(.minutes(10)),
    .enabled(
        if: ProcessInfo.processInfo.environment["GOTCHU_BLUEZ_VM"] == "1",
        "runs in the BlueZ VM only (scripts/bluez-vm-tests)"
    )
)
struct BlueZVMTests {
    @Test(
        "a terminal on hci0 advertises and serves GATT; a payer on hci1 finds it, connects, reads a long value, writes a chunked message and is notified"
    )
    func gattBetweenTwoControllers() async throws {
        let terminal = try await BlueZRadio.connect(configuration: .init(adapter: "hci0", advertisingType: .peripheral))
        let payer = try await BlueZRadio.connect(configuration: .init(adapter: "hci1"))
        defer {
            Task {
                await terminal.close()
                await payer.close()
            }
        }
        let received = GattTests.Received()
        let eid = EID(rawValue: "0ff11e0001")!
        try await terminal.withAdvertisement(Advertisement(eid: eid)) { _ in
            try await terminal.withGattService(GattTests.served(received)) { serving in
                received.serving.withLock { $0 = serving }
                let sightings = try await payer.scan(ScanFilter())
                var sighting: Sighting?
                for try await seen in sightings where seen.eid == eid {
                    sighting = seen
                    break
                }
                let found = try #require(sighting)
                let started = ContinuousClock.now
                let link = try await payer.connect(to: found, service: GattTests.service, timeout: .seconds(30))
                let connected = ContinuousClock.now - started
                let mtu = await link.mtu()
                #expect(mtu >= GattTransfer.minimumMTU)
                #expect(try await link.read(GattTests.readable) == GattTests.value)
                let notifications = try await link.notifications(GattTests.notifying)
                let message: [UInt8] = (0..<700).map { UInt8(truncatingIfNeeded: $0 * 13 + 1) }
                let chunks = GattTransfer.chunks(of: message, mtu: mtu)
                for chunk in chunks { try await link.write(chunk, to: GattTests.writable) }
                var iterator = notifications.makeAsyncIterator()
                #expect(try await iterator.next() == [0x02, 0xBC])
                #expect(received.messages.withLock { $0 } == [message])
                // A write the terminal refuses reaches the payer as a refusal, and the link stays up.
                await #expect(throws: GattError.self) { try await link.write([0x01, 1], to: GattTests.writable) }
                #expect(try await link.read(GattTests.readable) == GattTests.value)
                await link.disconnect()
                print("bluez-vm: connected and resolved in \(connected), MTU \(mtu), \(chunks.count) writes")
            }
        }
    }
}
