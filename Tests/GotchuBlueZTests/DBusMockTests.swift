import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuTesting
import Testing

@Suite("Against python-dbusmock's bluez5 template", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct DBusMockTests {
    static let modules = ["dbusmock", "dbus", "gi"]

    @Test("the discovery filter arrives with exact D-Bus types; UpdateProperties drives sightings; removal forgets")
    func scanning() async throws {
        try await withPythonBlueZ(modules: Self.modules, arguments: dbusmockArguments) { _, connection in
            _ = try await connection.mock("AddAdapter", at: mockRoot, [.string("hci0"), .string("gotchu-test")])
            let radio = BlueZRadio(connection: connection)
            let stream = try await radio.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()

            let filterCalls = try await connection.mockCalls("SetDiscoveryFilter", at: mockAdapter)
            let filter = try #require(filterCalls.first?.first)
            #expect(filter.type.signature == "a{sv}")
            let entries = try #require([String: DBusVariant](dbusValue: filter))
            #expect(entries["Transport"] == DBusVariant("le"))
            #expect(entries["DuplicateData"] == DBusVariant(true))
            #expect(entries["UUIDs"] == DBusVariant(["0000feed-0000-1000-8000-00805f9b34fb"]))
            #expect(entries["RSSI"] == nil)
            #expect(try await connection.mockCalls("StartDiscovery", at: mockAdapter).count == 1)

            let added = try await connection.mock(
                "AddDevice",
                at: mockRoot,
                [.string("hci0"), .string("11:22:33:44:55:66"), .string("terminal")]
            )
            // The template answers with the new path as a string.
            let device = try #require(
                added.first.flatMap { String(dbusValue: $0) }.flatMap(DBusObjectPath.init(rawValue:))
            )
            let data = ["0000feed-0000-1000-8000-00805f9b34fb": DBusVariant(.bytes(Array("a1b2c3d4e5".utf8)))]
            func update(_ properties: [String: DBusVariant]) async throws {
                _ = try await connection.mock(
                    "UpdateProperties",
                    at: device,
                    interface: "org.freedesktop.DBus.Mock",
                    [.string("org.bluez.Device1"), properties.dbusValue]
                )
            }
            try await update(["ServiceData": DBusVariant(data.dbusValue), "RSSI": DBusVariant(Int16(-55))])
            let first = try #require(try await iterator.next())
            #expect(first.eid == EID(rawValue: "a1b2c3d4e5"))
            #expect(first.rssi == -55)
            #expect(first.source == device.rawValue)

            try await update(["RSSI": DBusVariant(Int16(-41))])
            let closer = try #require(try await iterator.next())
            #expect(closer.eid == EID(rawValue: "a1b2c3d4e5"))
            #expect(closer.rssi == -41)

            // InterfacesRemoved makes the scanner forget the device's EID: a later RSSI-only update is no sighting.
            _ = try await connection.call(
                destination: "org.bluez",
                path: mockAdapter,
                interface: "org.bluez.Adapter1",
                method: "RemoveDevice",
                [.objectPath(device)]
            )
            _ = try await connection.mock(
                "AddDevice",
                at: mockRoot,
                [.string("hci0"), .string("11:22:33:44:55:66"), .string("terminal")]
            )
            try await update(["RSSI": DBusVariant(Int16(-30))])
            try await update(["ServiceData": DBusVariant(data.dbusValue)])
            let again = try #require(try await iterator.next())
            #expect(again.rssi == -30)
            #expect(await radio.statistics().sightings == 3)
        }
    }

    @Test("a broadcast by default; a rotation unregisters it and registers a new object carrying the new service data")
    func rotation() async throws {
        try await withPythonBlueZ(modules: Self.modules, arguments: dbusmockArguments) { _, connection in
            _ = try await connection.mock("AddAdapter", at: mockRoot, [.string("hci0"), .string("gotchu-test")])
            let radio = BlueZRadio(connection: connection)
            try await radio.withAdvertisement(Advertisement(eid: EID(rawValue: "a1b2c3d4e5")!)) { handle in
                let before = try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter)
                let first = try #require(before.first?.first.flatMap { DBusObjectPath(dbusValue: $0) })
                let type = await connection.property("Type", of: "org.bluez.LEAdvertisement1", at: first)
                #expect(type == .string("broadcast"))
                #expect(await connection.property("Discoverable", of: "org.bluez.LEAdvertisement1", at: first) == nil)

                try await handle.update(Advertisement(eid: EID(rawValue: "0000000001")!))
                let registrations = try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter)
                #expect(registrations.count == 2)
                let unregistrations = try await connection.mockCalls("UnregisterAdvertisement", at: mockAdapter)
                #expect(unregistrations.count == 1)
                // The object on the air is unregistered; a new one, whose data bluetoothd reads, is registered.
                #expect(unregistrations.first?.first.flatMap { DBusObjectPath(dbusValue: $0) } == first)
                let path = try #require(registrations.last?.first.flatMap { DBusObjectPath(dbusValue: $0) })
                #expect(path != first)
                let data = await connection.property("ServiceData", of: "org.bluez.LEAdvertisement1", at: path)
                let entries = try #require(data.flatMap { [String: DBusVariant](dbusValue: $0) })
                #expect(entries["feed"] == DBusVariant(.bytes(Array("0000000001".utf8))))
                #expect(await connection.exportedPaths == [path])
            }
            #expect(try await connection.mockCalls("UnregisterAdvertisement", at: mockAdapter).count == 2)
        }
    }

    @Test("an advertisement is registered again after org.bluez restarts")
    func restart() async throws {
        guard let python = TestPython.executable, TestPython.canImport(Self.modules),
            TestPython.hasDBusMock(atLeast: 0, 38)
        else {
            Issue.record("python-dbusmock ≥ 0.38 with dbus-python and PyGObject is needed: \(TestPython.installHint)")
            return
        }
        try await PrivateBus.with { bus in
            let fake = FakeSlot()
            await fake.replace(with: try bus.launch(python, dbusmockArguments, name: "dbusmock-1"))
            let connection = try await DBusConnection.connect(to: .address(bus.address))
            @Sendable func startAdapter() async throws {
                let up = try await eventually {
                    try await connection.nameOwner(of: "org.bluez") != nil
                }
                #expect(up)
                _ = try await connection.mock("AddAdapter", at: mockRoot, [.string("hci0"), .string("gotchu-test")])
            }
            try await startAdapter()
            let radio = BlueZRadio(connection: connection, configuration: .init(reregistrationTimeout: .seconds(120)))
            try await radio.withAdvertisement(Advertisement(eid: EID(rawValue: "a1b2c3d4e5")!)) { _ in
                let first = try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter)
                #expect(first.count == 1)
                #expect(first.first?.map(\.type.signature) == ["o", "a{sv}"])
                await fake.replace(with: try bus.launch(python, dbusmockArguments, name: "dbusmock-2"))
                try await startAdapter()
                let registered = try await eventually {
                    try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter).count == 1
                }
                #expect(registered)
            }
            await fake.replace(with: nil)
            await connection.close()
        }
    }
}
