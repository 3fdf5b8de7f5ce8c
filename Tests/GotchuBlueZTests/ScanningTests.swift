import Foundation
import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuTesting
import Testing

@Suite("Scanning against a fake bluetoothd", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct ScanningTests {
    @Test("a terminal BlueZ reports without RSSI reaches the payer's list under --choose, after the ranged one")
    func unrangedTerminalsAreListed() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            // A virtual controller: no RSSI at all, and bluetoothd reports the unchanged advertisement once.
            try await fake.addDevice("dev_unranged", properties: ["ServiceData": serviceData("00000000ff")])
            try await fake.addDevice(
                "dev_ranged",
                properties: ["RSSI": .int16(-40), "TxPower": .int16(0), "ServiceData": serviceData("a1b2c3d4e5")]
            )
            // Listed while the ranged terminal is still fresh (heard within 600 ms).
            var machine = PayerStateMachine(configuration: .init(alwaysChoose: true, chooseAfter: .milliseconds(500)))
            _ = machine.receive(.start, now: .zero)
            for _ in 0..<2 {
                var sighting = try #require(try await iterator.next())
                sighting.time = .zero
                #expect(machine.receive(.sighting(sighting), now: .zero) == .none)
            }
            let listed = machine.receive(.tick, now: .milliseconds(500))
            guard case .stopScanAndPresentCandidates(let candidates) = listed else {
                Issue.record("expected the list")
                return
            }
            #expect(candidates.map(\.eid.rawValue) == ["a1b2c3d4e5", "00000000ff"])
            #expect(candidates.map(\.rssi) == [-40, nil])
        }
    }

    @Test("an EID followed by the offline marker is a sighting of an offline terminal; another byte is malformed")
    func offlineTerminals() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            let marked = [feedKey: DBusVariant(.bytes(Array("a1b2c3d4e5".utf8) + [0x01]))].dbusValue
            let other = [feedKey: DBusVariant(.bytes(Array("b1b2c3d4e5".utf8) + [0x02]))].dbusValue
            try await fake.addDevice("dev_other", properties: ["RSSI": .int16(-40), "ServiceData": other])
            try await fake.addDevice("dev_offline", properties: ["RSSI": .int16(-41), "ServiceData": marked])
            try await fake.addDevice(
                "dev_online",
                properties: ["RSSI": .int16(-42), "ServiceData": serviceData("c1b2c3d4e5")]
            )
            let offline = try #require(try await iterator.next())
            #expect(offline.eid.rawValue == "a1b2c3d4e5" && offline.offline && offline.source.hasSuffix("dev_offline"))
            let online = try #require(try await iterator.next())
            #expect(online.eid.rawValue == "c1b2c3d4e5" && !online.offline)
            #expect(await radio.statistics().malformed == 1)
        }
    }

    @Test("discovery filter has exact types and no RSSI by default; StopDiscovery when the stream ends")
    func discoveryFilter() async throws {
        try await withFakeBlueZ { _, fake, radio in
            do {
                let stream = try await radio.scan(ScanFilter())
                let call = try #require(await fake.calls(named: "SetDiscoveryFilter").first)
                #expect(call.arguments.map(\.type.signature) == ["a{sv}"])
                let filter = try #require(call.arguments.first.flatMap { [String: DBusVariant](dbusValue: $0) })
                #expect(filter["Transport"] == DBusVariant("le"))
                #expect(filter["DuplicateData"] == DBusVariant(true))
                #expect(filter["UUIDs"] == DBusVariant([feedKey]))
                #expect(filter["RSSI"] == nil)
                #expect(filter.count == 3)
                #expect(await fake.calls(named: "StartDiscovery").count == 1)
                _ = stream
            }
            let stopped = try await eventually { await fake.calls(named: "StopDiscovery").count == 1 }
            #expect(stopped)
        }
    }

    @Test("an explicit controller threshold is sent as int16")
    func controllerThreshold() async throws {
        try await withFakeBlueZ(configuration: .init(controllerRSSIThreshold: -70)) { _, fake, radio in
            _ = try await radio.scan(ScanFilter())
            let call = try #require(await fake.calls(named: "SetDiscoveryFilter").first)
            let filter = try #require(call.arguments.first.flatMap { [String: DBusVariant](dbusValue: $0) })
            #expect(filter["RSSI"] == DBusVariant(Int16(-70)))
        }
    }

    @Test(
        "sightings from known devices, InterfacesAdded and PropertiesChanged; removal forgets the device",
        arguments: [BlueZRadio.SignalReading.ownSocket, .connection]
    )
    func sightings(reading: BlueZRadio.SignalReading) async throws {
        try await withFakeBlueZ(configuration: .init(signalReading: reading)) { _, fake, radio in
            try await fake.addDevice(
                "dev_00_00_00_00_00_01",
                properties: ["RSSI": .int16(-70), "TxPower": .int16(0), "ServiceData": serviceData("0000000001")]
            )
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            let known = try #require(try await iterator.next())
            #expect(known.eid == EID(rawValue: "0000000001"))
            #expect(known.rssi == -70)
            #expect(known.attenuation == 70)

            try await fake.addDevice(
                "dev_00_00_00_00_00_02",
                properties: ["RSSI": .int16(-50), "TxPower": .int16(4), "ServiceData": serviceData("a1b2c3d4e5")]
            )
            let added = try #require(try await iterator.next())
            #expect(added.eid == sampleEID)
            #expect(added.rssi == -50)
            #expect(added.txPower == 4)
            #expect(added.source.hasSuffix("dev_00_00_00_00_00_02"))

            try await fake.updateDevice("dev_00_00_00_00_00_02", "RSSI", .int16(127))
            let unknown = try #require(try await iterator.next())
            #expect(unknown.eid == sampleEID)
            #expect(unknown.rssi == nil)

            try await fake.updateDevice("dev_00_00_00_00_00_02", "ServiceData", serviceData("bbbbbbbbbb"))
            let rotated = try #require(try await iterator.next())
            #expect(rotated.eid == EID(rawValue: "bbbbbbbbbb"))

            await fake.removeDevice("dev_00_00_00_00_00_02")
            try await fake.updateDevice("dev_00_00_00_00_00_01", "RSSI", .int16(-71))
            let after = try #require(try await iterator.next())
            #expect(after.eid == EID(rawValue: "0000000001"))
            #expect(await radio.statistics().sightings == 5)
        }
    }

    @Test("a calibration in its own service data reaches the sighting, from InterfacesAdded and PropertiesChanged")
    func calibration() async throws {
        func withCalibration(_ eid: String, _ calibration: [UInt8]) -> DBusValue {
            [
                "0000feed-0000-1000-8000-00805f9b34fb": DBusVariant(.bytes(Array(eid.utf8))),
                "0000fedc-0000-1000-8000-00805f9b34fb": DBusVariant(.bytes(calibration)),
            ].dbusValue
        }
        try await withFakeBlueZ { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            try await fake.addDevice(
                "dev_00_00_00_00_00_03",
                properties: [
                    "RSSI": .int16(-50), "TxPower": .int16(0),
                    "ServiceData": withCalibration("a1b2c3d4e5", [UInt8(bitPattern: -61)]),
                ]
            )
            let added = try #require(try await iterator.next())
            #expect(added.eid == sampleEID && added.calibratedRSSI == -61)
            // −61 + 41 = −20 dBm of reference, 30 dB above the −50 dBm heard.
            let expected: Int16 = 30
            #expect(added.attenuation == expected)
            // Read in place from the signal: a new calibration, then one that is not one byte.
            try await fake.updateDevice(
                "dev_00_00_00_00_00_03",
                "ServiceData",
                withCalibration("a1b2c3d4e5", [UInt8(bitPattern: -58)])
            )
            let changed = try #require(try await iterator.next())
            #expect(changed.calibratedRSSI == -58)
            try await fake.updateDevice("dev_00_00_00_00_00_03", "ServiceData", withCalibration("a1b2c3d4e5", [1, 2]))
            let garbled = try #require(try await iterator.next())
            #expect(garbled.eid == sampleEID && garbled.calibratedRSSI == nil)
            #expect(garbled.attenuation == 50)
        }
    }

    @Test("our own RSSI threshold drops weak and unknown-RSSI sightings and counts them")
    func threshold() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let stream = try await radio.scan(ScanFilter(minimumRSSI: -60))
            var iterator = stream.makeAsyncIterator()
            try await fake.addDevice(
                "dev_weak",
                properties: ["RSSI": .int16(-80), "ServiceData": serviceData("0000000001")]
            )
            try await fake.addDevice(
                "dev_none",
                properties: ["RSSI": .int16(127), "ServiceData": serviceData("0000000002")]
            )
            try await fake.addDevice(
                "dev_near",
                properties: ["RSSI": .int16(-40), "ServiceData": serviceData("0000000003")]
            )
            let sighting = try #require(try await iterator.next())
            #expect(sighting.eid == EID(rawValue: "0000000003"))
            let statistics = await radio.statistics()
            #expect(statistics.belowThreshold == 2)
            #expect(statistics.sightings == 1)
        }
    }

    @Test("PropertiesChanged read in place: other properties skipped, invalidations applied, other interfaces ignored")
    func propertiesChangedInPlace() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            let connection = await fake.connection
            let device = await fake.devicePath("dev_busy")
            func changed(_ interface: String, _ properties: [String: DBusVariant], invalidated: [String]) async throws {
                try await connection.emitSignal(
                    path: device,
                    interface: "org.freedesktop.DBus.Properties",
                    member: "PropertiesChanged",
                    [.string(interface), properties.dbusValue, .strings(invalidated)]
                )
            }
            // Properties a sighting does not need, of every shape, around the ones it does.
            let busy: [String: DBusVariant] = [
                "Connected": DBusVariant(false),
                "ManufacturerData": DBusVariant(
                    .dictionary(
                        DBusDictionary(
                            keyType: .uint16,
                            valueType: .variant,
                            entries: [.init(key: .uint16(76), value: .variant(DBusVariant(.bytes([1, 2, 3]))))]
                        )
                    )
                ),
                "UUIDs": DBusVariant([feedKey, "0000180f-0000-1000-8000-00805f9b34fb"]),
                "RSSI": DBusVariant(Int16(-33)),
                "TxPower": DBusVariant(Int16(7)),
                "ServiceData": DBusVariant(serviceData("a1b2c3d4e5")),
                "Name": DBusVariant("phone"),
            ]
            try await changed("org.bluez.Device1", busy, invalidated: [])
            let first = try #require(try await iterator.next())
            #expect(first.eid == sampleEID)
            #expect(first.rssi == -33)
            #expect(first.txPower == 7)
            #expect(first.source == device.rawValue)
            // Another interface of the same object carries the same names: it must change nothing.
            try await changed(
                "org.bluez.Battery1",
                ["RSSI": DBusVariant(Int16(-1)), "ServiceData": DBusVariant("garbage")],
                invalidated: ["TxPower"]
            )
            // Invalidated RSSI and TxPower, new service data.
            try await changed(
                "org.bluez.Device1",
                ["ServiceData": DBusVariant(serviceData("bbbbbbbbbb"))],
                invalidated: ["Paired", "RSSI", "TxPower"]
            )
            let second = try #require(try await iterator.next())
            #expect(second.eid == EID(rawValue: "bbbbbbbbbb"))
            #expect(second.rssi == nil)
            #expect(second.txPower == nil)
            // Invalidated service data: the device is no longer ours until it says so again.
            try await changed("org.bluez.Device1", ["RSSI": DBusVariant(Int16(-40))], invalidated: ["ServiceData"])
            try await changed(
                "org.bluez.Device1",
                ["ServiceData": DBusVariant(serviceData("cccccccccc"))],
                invalidated: []
            )
            let third = try #require(try await iterator.next())
            #expect(third.eid == EID(rawValue: "cccccccccc"))
            #expect(third.rssi == -40)
            let statistics = await radio.statistics()
            #expect(statistics.sightings == 3)
            #expect(statistics.malformed == 0)
        }
    }

    @Test(
        "a burst larger than one batch arrives whole and in order",
        arguments: [BlueZRadio.SignalReading.ownSocket, .connection]
    )
    func burst(reading: BlueZRadio.SignalReading) async throws {
        try await withFakeBlueZ(configuration: .init(signalReading: reading)) { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            let connection = await fake.connection
            let device = await fake.devicePath("dev_burst")
            // More than a batch (256) and fewer than the stream keeps (1024), sent without waiting in between.
            let count = 700
            for index in 0..<count {
                let properties: [String: DBusVariant] = [
                    "RSSI": DBusVariant(Int16(-(index % 100))),
                    "ServiceData": DBusVariant(serviceData(String(index).leftPadded(10))),
                ]
                try await connection.emitSignal(
                    path: device,
                    interface: "org.freedesktop.DBus.Properties",
                    member: "PropertiesChanged",
                    [.string("org.bluez.Device1"), properties.dbusValue, .strings([])]
                )
            }
            var eids: [String] = []
            for _ in 0..<count {
                let sighting = try #require(try await iterator.next())
                eids.append(sighting.eid.rawValue)
            }
            #expect(eids == (0..<count).map { String($0).leftPadded(10) })
        }
    }

    @Test("malformed service data is ignored and counted")
    func malformed() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            try await fake.addDevice(
                "dev_short",
                properties: ["RSSI": .int16(-50), "ServiceData": serviceData("a1b2")]
            )
            try await fake.addDevice(
                "dev_upper",
                properties: ["RSSI": .int16(-50), "ServiceData": serviceData("A1B2C3D4E5")]
            )
            try await fake.addDevice(
                "dev_string",
                properties: ["RSSI": .int16(-50), "ServiceData": [feedKey: DBusVariant("a1b2c3d4e5")].dbusValue]
            )
            try await fake.addDevice("dev_type", properties: ["RSSI": .int16(-50), "ServiceData": .strings(["x"])])
            try await fake.addDevice(
                "dev_other",
                properties: ["RSSI": .int16(-50), "ServiceData": serviceData("a1b2c3d4e5", key: "180f")]
            )
            try await fake.addDevice(
                "dev_good",
                properties: ["RSSI": .int16(-50), "ServiceData": serviceData("a1b2c3d4e5")]
            )
            let sighting = try #require(try await iterator.next())
            #expect(sighting.eid == sampleEID)
            #expect(sighting.source.hasSuffix("dev_good"))
            #expect(await radio.statistics().malformed == 4)
        }
    }

    @Test("a bluetoothd restart ends the scan with serviceUnavailable instead of going silent")
    func restartEndsScan() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            try await fake.restart()
            do {
                for try await _ in stream {}
                Issue.record("the scan ended without an error")
            } catch let error as BlueZError {
                #expect(error.kind == .serviceUnavailable)
            }
        }
    }

    @Test(
        "closing the radio ends its scan with serviceUnavailable, wherever the scan reads its signals",
        arguments: [BlueZRadio.SignalReading.ownSocket, .connection]
    )
    func closingEndsScan(reading: BlueZRadio.SignalReading) async throws {
        try await withFakeBlueZ(configuration: .init(signalReading: reading)) { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            await radio.close()
            // bluetoothd goes on reporting; the scan ends all the same.
            try await fake.addDevice(
                "dev_late",
                properties: ["RSSI": .int16(-40), "ServiceData": serviceData("a1b2c3d4e5")]
            )
            do {
                for try await _ in stream {}
                Issue.record("the scan ended without an error")
            } catch let error as BlueZError {
                #expect(error.kind == .serviceUnavailable)
            }
        }
    }

    @Test("a bus reached over TCP, which has no socket a scan can open itself, is scanned through libdbus")
    func tcpBusFallsBack() async throws {
        // The private bus also listens on loopback TCP, where clients authenticate anonymously.
        let port = try freeLoopbackPort()
        let include = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-tcp-\(port).conf")
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <listen>tcp:host=127.0.0.1,port=\(port)</listen>
          <auth>ANONYMOUS</auth>
          <allow_anonymous/>
        </busconfig>
        """.write(to: include, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: include) }
        try await PrivateBus.with(includes: [include]) { bus in
            let fake = try await FakeBlueZ.start(on: bus)
            defer { Task { await fake.stop() } }
            let tcp = "tcp:host=127.0.0.1,port=\(port)"
            try await DBusConnection.withConnection(to: .address(tcp)) { connection in
                let radio = BlueZRadio(connection: connection)
                let stream = try await radio.scan(ScanFilter())
                try await fake.addDevice(
                    "dev_tcp",
                    properties: ["RSSI": .int16(-40), "ServiceData": serviceData("a1b2c3d4e5")]
                )
                var iterator = stream.makeAsyncIterator()
                let sighting = try #require(try await iterator.next())
                #expect(sighting.eid == sampleEID)
                // Asked for its own socket, the scan refuses such a bus instead.
                let strict = BlueZRadio(connection: connection, configuration: .init(signalReading: .ownSocket))
                do {
                    _ = try await strict.scan(ScanFilter())
                    Issue.record("a scan opened a socket of its own on a TCP bus")
                } catch let error as DBusError {
                    #expect(error.name == .notSupported)
                }
            }
        }
    }

    @Test("no org.bluez on the bus is a clear error")
    func noBlueZ() async throws {
        try await PrivateBus.with { bus in
            try await DBusConnection.withConnection(to: .address(bus.address)) { connection in
                let radio = BlueZRadio(connection: connection)
                do {
                    _ = try await radio.scan(ScanFilter())
                    Issue.record("scan started without bluetoothd")
                } catch let error as BlueZError {
                    #expect(error.kind == .serviceUnavailable)
                }
            }
        }
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
