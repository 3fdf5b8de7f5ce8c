import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuTesting
import Testing

@Suite("A rogue org.bluez cannot crash the radio", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct RogueBlueZTests {
    @Test("wrong types, huge arrays and deep nesting are ignored; good data still arrives")
    func rogueSignals() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            let connection = await fake.connection
            let device = await fake.devicePath("dev_rogue")
            let properties = "org.freedesktop.DBus.Properties"

            // PropertiesChanged whose changed-properties argument is a string.
            try await connection.emitSignal(
                path: device,
                interface: properties,
                member: "PropertiesChanged",
                [.string("org.bluez.Device1"), .string("not a dictionary"), .strings([])]
            )
            // ServiceData of one megabyte.
            try await connection.emitSignal(
                path: device,
                interface: properties,
                member: "PropertiesChanged",
                [
                    .string("org.bluez.Device1"),
                    [
                        "ServiceData": DBusVariant(
                            [feedKey: DBusVariant(.bytes(Array(repeating: 0x61, count: 1 << 20)))].dbusValue
                        )
                    ]
                    .dbusValue,
                    .strings([]),
                ]
            )
            // A dictionary with 20 000 entries, none of them ours.
            var many: [String: DBusVariant] = [:]
            for index in 0..<20_000 {
                many["0000\(String(index % 10_000, radix: 16).leftPad(4))-0000-1000-8000-00805f9b34fb-\(index)"] =
                    DBusVariant(.bytes([1]))
            }
            try await connection.emitSignal(
                path: device,
                interface: properties,
                member: "PropertiesChanged",
                [.string("org.bluez.Device1"), ["ServiceData": DBusVariant(many.dbusValue)].dbusValue, .strings([])]
            )
            // RSSI as a string and a variant nested 30 deep.
            var deep = DBusValue.int16(-1)
            for _ in 0..<30 { deep = .variant(DBusVariant(deep)) }
            try await connection.emitSignal(
                path: device,
                interface: properties,
                member: "PropertiesChanged",
                [
                    .string("org.bluez.Device1"),
                    ["RSSI": DBusVariant("loud"), "TxPower": DBusVariant(deep)].dbusValue, .strings([]),
                ]
            )
            // InterfacesAdded with the wrong signature, and with no arguments.
            try await connection.emitSignal(
                path: .root,
                interface: "org.freedesktop.DBus.ObjectManager",
                member: "InterfacesAdded",
                [.objectPath(device), .strings(["org.bluez.Device1"])]
            )
            try await connection.emitSignal(
                path: .root,
                interface: "org.freedesktop.DBus.ObjectManager",
                member: "InterfacesAdded"
            )
            // Then a well-formed device.
            try await fake.addDevice(
                "dev_good",
                properties: ["RSSI": .int16(-42), "ServiceData": serviceData("a1b2c3d4e5")]
            )
            let sighting = try #require(try await iterator.next())
            #expect(sighting.eid == sampleEID)
            #expect(sighting.rssi == -42)
            let statistics = await radio.statistics()
            #expect(statistics.malformed == 3)
            #expect(statistics.sightings == 1)
        }
    }

    @Test("a GetManagedObjects reply of the wrong type is an error")
    func wrongManagedObjects() async throws {
        try await PrivateBus.with { bus in
            let rogue = try await DBusConnection.connect(to: .address(bus.address))
            try await rogue.export(
                DBusObject(interfaces: [
                    DBusInterface(
                        "org.freedesktop.DBus.ObjectManager",
                        methods: [DBusMethod("GetManagedObjects", outputs: [.string]) { _ in [.string("surprise")] }]
                    )
                ]),
                at: .root
            )
            try await rogue.requestName("org.bluez")
            try await DBusConnection.withConnection(to: .address(bus.address)) { connection in
                let radio = BlueZRadio(connection: connection)
                do {
                    _ = try await radio.adapter()
                    Issue.record("accepted a malformed reply")
                } catch let error as BlueZError {
                    #expect(error.kind == .malformedReply)
                }
                let report = await BlueZDoctor.examine(connection: connection)
                #expect(report.bluetoothdRunning)
                #expect(report.adapters.isEmpty)
            }
            await rogue.close()
        }
    }
}

extension String {
    fileprivate func leftPad(_ width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
