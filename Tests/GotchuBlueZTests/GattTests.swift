import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuTesting
import Synchronization
import Testing

@Suite("GATT against a fake bluetoothd", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct GattTests {
    static let service = BluetoothUUID("3a8bd285-a448-4731-93c7-3ea4cc233b00")!
    static let readable = BluetoothUUID("3a8bd285-a448-4731-93c7-3ea4cc233b01")!
    static let writable = BluetoothUUID("3a8bd285-a448-4731-93c7-3ea4cc233b02")!
    static let notifying = BluetoothUUID("3a8bd285-a448-4731-93c7-3ea4cc233b03")!
    static let value: [UInt8] = (0..<300).map { UInt8(truncatingIfNeeded: $0 * 7) }

    /// What the served service received: whole messages, and the peers they came from.
    final class Received: Sendable {
        let messages = Mutex<[[UInt8]]>([])
        let peers = Mutex<Set<GattPeer>>([])
        let receivers = Mutex<[String: GattTransfer.Receiver]>([:])
        /// The service as served, to notify through.
        let serving = Mutex<(any GattServing)?>(nil)
    }

    /// The service: a 300-byte readable value, a characteristic taking chunked messages of at most 1,000 bytes, and
    /// one that notifies each message's length once it arrived whole.
    static func served(_ received: Received) -> GattService {
        GattService(
            uuid: service,
            characteristics: [
                GattCharacteristic(
                    uuid: readable,
                    read: { peer in
                        received.peers.withLock { _ = $0.insert(peer) }
                        return value
                    }
                ),
                GattCharacteristic(
                    uuid: writable,
                    write: { chunk, peer throws(GattRefusal) in
                        let message = try received.receivers.withLock { receivers throws(GattRefusal) in
                            var receiver = receivers[peer.id] ?? GattTransfer.Receiver(maximumLength: 1_000)
                            defer { receivers[peer.id] = receiver }
                            return try receiver.receive(chunk)
                        }
                        guard let message else { return }
                        received.messages.withLock { $0.append(message) }
                        let length = UInt16(message.count)
                        try? await received.serving.withLock { $0 }?.notify(
                            notifying,
                            [UInt8(length >> 8), UInt8(length & 0xFF)]
                        )
                    }
                ),
                GattCharacteristic(uuid: notifying, notifies: true),
            ]
        )
    }

    /// Serves the service from the fixture's radio while a second radio on the same bus, the payer's, runs `body`
    /// with a sighting of the terminal as a peer device.
    func withTerminal(
        mtu: UInt16 = 23,
        _ body: @Sendable (FakeBlueZ, BlueZRadio, Sighting, Received) async throws -> Void
    ) async throws {
        try await withFakeBlueZ { bus, fake, terminal in
            let received = Received()
            let payerConnection = try await DBusConnection.connect(to: .address(bus.address))
            let payer = BlueZRadio(connection: payerConnection)
            try await fake.gatt.addPeer("terminal", mtu: mtu)
            let sighting = Sighting(
                eid: sampleEID,
                rssi: -50,
                txPower: nil,
                time: .zero,
                source: await fake.gatt.devicePath("terminal").rawValue
            )
            do {
                try await terminal.withGattService(Self.served(received)) { serving in
                    received.serving.withLock { $0 = serving }
                    try await body(fake, payer, sighting, received)
                }
            } catch {
                await payerConnection.close()
                throw error
            }
            await payerConnection.close()
            // Unregistered and unexported at the end.
            #expect(await fake.gatt.applications.isEmpty)
            #expect(await terminal.connection.exportedPaths.isEmpty)
        }
    }

    @Test(
        "a payer connects, reads a value longer than one packet whole, writes a message in chunks the terminal puts together, and is notified"
    )
    func readWriteNotify() async throws {
        try await withTerminal { fake, payer, sighting, received in
            let application = try #require(await fake.gatt.applications.first)
            #expect(application.path.rawValue.hasPrefix("/io/gotchu/gatt"))
            let link = try await payer.connect(to: sighting, service: Self.service, timeout: .seconds(10))
            #expect(await link.mtu() == 23)
            #expect(try await link.read(Self.readable) == Self.value)
            // 300 bytes in parts of 22: a long read from 14 offsets.
            let reads = await fake.gatt.forwarded.filter { $0.method == "ReadValue" }
            #expect(reads.map { $0.options["offset", as: UInt16.self] } == (0..<14).map { UInt16($0 * 22) })
            #expect(received.peers.withLock { $0.map(\.mtu) } == [23])

            let notifications = try await link.notifications(Self.notifying)
            let message: [UInt8] = (0..<700).map { UInt8(truncatingIfNeeded: $0 * 13 + 1) }
            for chunk in GattTransfer.chunks(of: message, mtu: await link.mtu()) {
                try await link.write(chunk, to: Self.writable)
            }
            #expect(received.messages.withLock { $0 } == [message])
            var iterator = notifications.makeAsyncIterator()
            #expect(try await iterator.next() == [0x02, 0xBC])
            await link.disconnect()
        }
    }

    @Test(
        "bad writes are refused with the ATT error bluetoothd sends, a long write is refused, and a device without the service is unreachable"
    )
    func refusals() async throws {
        try await withTerminal { fake, payer, sighting, received in
            let link = try await payer.connect(to: sighting, service: Self.service, timeout: .seconds(10))
            // A chunk without its first, and an empty write: invalid values, as ATT's 0x0d.
            for bad in [[0x01, 1, 2], []] as [[UInt8]] {
                await #expect {
                    try await link.write(bad, to: Self.writable)
                } throws: { error in
                    error as? GattError == .refused("Operation failed with ATT error: 0x0d")
                }
            }
            // 40 bytes in one write: more than one packet carries, so a long write from offsets, which is refused.
            await #expect(throws: GattError.self) {
                try await link.write([UInt8](repeating: 0x80, count: 40), to: Self.writable)
            }
            // Not readable, and not served at all.
            await #expect(throws: GattError.self) { try await link.read(Self.writable) }
            await #expect(throws: GattError.self) { try await link.read(BluetoothUUID("fffe")!) }
            #expect(received.messages.withLock { $0 }.isEmpty)
            await link.disconnect()
            // After the disconnect, the characteristics are gone with the connection.
            await #expect(throws: GattError.self) { try await link.read(Self.readable) }

            // A device whose server lacks the service, and a sighting that names no device.
            await #expect(throws: GattError.self) {
                _ = try await payer.connect(to: sighting, service: BluetoothUUID("fffe")!, timeout: .seconds(2))
            }
            var nowhere = sighting
            nowhere.source = "simulated peer"
            await #expect(throws: GattError.self) {
                _ = try await payer.connect(to: nowhere, service: Self.service, timeout: .seconds(2))
            }
        }
    }
}
