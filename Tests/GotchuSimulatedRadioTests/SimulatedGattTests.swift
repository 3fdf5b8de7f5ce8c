import GotchuCore
import GotchuSimulatedRadio
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(10))) struct SimulatedGattTests {
    static let service = BluetoothUUID("3a8bd285-a448-4731-93c7-3ea4cc233b00")!
    static let readable = BluetoothUUID("3a8bd285-a448-4731-93c7-3ea4cc233b01")!
    static let writable = BluetoothUUID("3a8bd285-a448-4731-93c7-3ea4cc233b02")!
    static let notifying = BluetoothUUID("3a8bd285-a448-4731-93c7-3ea4cc233b03")!

    /// Runs `body` while virtual time moves whenever a task sleeps on the air (the driver only yields meanwhile:
    /// nothing here waits on the wall clock).
    func driven<T: Sendable>(_ air: SimulatedAir, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                while !Task.isCancelled {
                    if await air.sleeperCount > 0 {
                        await air.advance(by: .milliseconds(10))
                    } else {
                        await Task.yield()
                    }
                }
                return nil
            }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let next { return next }
            }
            throw CancellationError()
        }
    }

    @Test func aPayerConnectsReadsWritesInChunksAndIsNotifiedOnTheAirsClock() async throws {
        let air = SimulatedAir(seed: 7, gattTiming: GattTiming(mtu: 23, connectionInterval: .milliseconds(30)))
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: Position(x: 0.5, y: 0)))
        let messages = Mutex<[[UInt8]]>([])
        let peers = Mutex<Set<String>>([])
        let receiver = Mutex(GattTransfer.Receiver(maximumLength: 1_000))
        let serving = Mutex<(any GattServing)?>(nil)
        let value = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let service = GattService(
            uuid: Self.service,
            characteristics: [
                GattCharacteristic(uuid: Self.readable, read: { _ in value }),
                GattCharacteristic(
                    uuid: Self.writable,
                    write: { chunk, peer throws(GattRefusal) in
                        peers.withLock { _ = $0.insert(peer.id) }
                        let message = try receiver.withLock { receiver throws(GattRefusal) in
                            try receiver.receive(chunk)
                        }
                        guard let message else { return }
                        messages.withLock { $0.append(message) }
                        try? await serving.withLock { $0 }?.notify(Self.notifying, [UInt8(message.count % 256)])
                    }
                ),
                GattCharacteristic(uuid: Self.notifying, notifies: true),
            ]
        )
        let sighting = Sighting(
            eid: EID(rawValue: "a1b2c3d4e5")!,
            rssi: -50,
            txPower: 0,
            time: .zero,
            source: "terminal"
        )
        try await driven(air) {
            try await terminal.withGattService(service) { served in
                serving.withLock { $0 = served }
                let start = await payer.now()
                let link = try await payer.connect(to: sighting, service: Self.service, timeout: .seconds(5))
                // Six connection intervals to connect and find the service.
                #expect(await payer.now() - start >= .milliseconds(180))
                #expect(await link.mtu() == 23)
                #expect(try await link.read(Self.readable) == value)
                let notifications = try await link.notifications(Self.notifying)
                let message = (0..<100).map { UInt8($0) }
                for chunk in GattTransfer.chunks(of: message, mtu: 23) {
                    try await link.write(chunk, to: Self.writable)
                }
                var iterator = notifications.makeAsyncIterator()
                #expect(try await iterator.next() == [100])
                // One write longer than the link carries, and a malformed one, are refused.
                await #expect(throws: GattError.self) {
                    try await link.write([UInt8](repeating: 0, count: 21), to: Self.writable)
                }
                await #expect(throws: GattError.self) { try await link.write([0x05], to: Self.writable) }
                await link.disconnect()
                await #expect(throws: GattError.disconnected) { try await link.read(Self.readable) }
            }
            #expect(messages.withLock { $0 } == [(0..<100).map { UInt8($0) }])
            #expect(peers.withLock { $0 } == ["payer"])
            // Once the terminal stops serving, nothing connects.
            await #expect(throws: GattError.self) {
                _ = try await payer.connect(to: sighting, service: Self.service, timeout: .seconds(5))
            }
        }
    }

    @Test func aLinkEndsWhenTheTerminalStopsServing() async throws {
        let air = SimulatedAir(seed: 8)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: Position(x: 0.5, y: 0)))
        let service = GattService(
            uuid: Self.service,
            characteristics: [GattCharacteristic(uuid: Self.notifying, notifies: true)]
        )
        let sighting = Sighting(
            eid: EID(rawValue: "a1b2c3d4e5")!,
            rssi: -50,
            txPower: 0,
            time: .zero,
            source: "terminal"
        )
        let notifications = try await driven(air) {
            try await terminal.withGattService(service) { _ in
                let link = try await payer.connect(to: sighting, service: Self.service, timeout: .seconds(5))
                return try await link.notifications(Self.notifying)
            }
        }
        await #expect(throws: GattError.disconnected) {
            for try await _ in notifications {}
        }
    }
}

@Suite(.timeLimit(.minutes(10))) struct OfflineAdvertisementTests {
    @Test func anOfflineTerminalsEIDCarriesTheMarkerAndScannersSayItIsOffline() async throws {
        let eid = EID(rawValue: "a1b2c3d4e5")!
        #expect(eid.serviceData(offline: true) == Array("a1b2c3d4e5".utf8) + [0x01])
        #expect(EID.sighted(serviceData: eid.serviceData(offline: true))! == (eid, true))
        #expect(EID.sighted(serviceData: eid.serviceData)! == (eid, false))
        // Another byte after the EID, or the marker after too short an EID, is no EID.
        #expect(EID.sighted(serviceData: eid.serviceData + [0x02]) == nil)
        #expect(EID.sighted(serviceData: Array("a1b2c3d4e".utf8) + [0x01]) == nil)
        #expect(EID(serviceData: eid.serviceData(offline: true)) == nil)

        let air = SimulatedAir(seed: 3)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: Position(x: 1, y: 0)))
        let sightings = try await payer.scan(ScanFilter())
        try await terminal.withAdvertisement(Advertisement(eid: eid, offline: true)) { _ in
            await air.advance(by: .seconds(1))
        }
        var iterator = sightings.makeAsyncIterator()
        let sighting = try #require(try await iterator.next())
        #expect(sighting.eid == eid && sighting.offline && sighting.source == "terminal")
    }
}
