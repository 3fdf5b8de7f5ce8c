import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuTesting
import Testing

@Suite("Against bluezoo's linked virtual adapters", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct BlueZooTests {
    static let arguments = [
        "-c", "import sys; from bluezoo import bluezoo; sys.argv[0] = 'bluezoo'; sys.exit(bluezoo.main())",
        "--auto-enable", "--scan-interval", "1", "-a", "00:11:22:33:44:55", "-a", "00:11:22:33:44:66",
    ]

    @Test("an advertisement on one adapter is seen by our scanner on the other, with the exact service data")
    func advertiseAndScan() async throws {
        try await withPythonBlueZ(modules: ["bluezoo"], arguments: Self.arguments) { bus, connection in
            let adapters = try await eventually {
                let objects = try await BlueZ.managedObjects(on: connection)
                return BlueZ.adapters(in: objects).filter { $0.powered == true }.count == 2
            }
            try #require(adapters)
            let names = BlueZ.adapters(in: try await BlueZ.managedObjects(on: connection)).map(\.name)
            let advertiserConnection = try await DBusConnection.connect(to: .address(bus.address))
            // bluezoo relays a broadcast (the default type) only from a discoverable adapter; a real one sends it
            // regardless, and discoverable would make it connectable, from the adapter's own address.
            _ = try await connection.call(
                destination: "org.bluez",
                path: DBusObjectPath(rawValue: "/org/bluez/\(names[0])")!,
                interface: "org.freedesktop.DBus.Properties",
                method: "Set",
                [.string("org.bluez.Adapter1"), .string("Discoverable"), .variant(DBusVariant(true))]
            )
            let advertiser = BlueZRadio(connection: advertiserConnection, configuration: .init(adapter: names[0]))
            let scanner = BlueZRadio(connection: connection, configuration: .init(adapter: names[1]))
            let eid = EID(rawValue: "0a1b2c3d4e")!
            try await advertiser.withAdvertisement(Advertisement(eid: eid)) { _ in
                let stream = try await scanner.scan(ScanFilter())
                let found = try await withThrowingTaskGroup(of: Sighting?.self) { group in
                    group.addTask {
                        for try await sighting in stream where sighting.eid == eid { return sighting }
                        return nil
                    }
                    group.addTask {
                        try await Task.sleep(for: .seconds(60))  // only bounds a hang
                        return nil
                    }
                    let first = try await group.next() ?? nil
                    group.cancelAll()
                    return first
                }
                let sighting = try #require(found, "no sighting of \(eid) within 60 s:\n\(bus.log(of: "fake-bluez"))")
                #expect(sighting.eid == eid)
                #expect(sighting.source.hasPrefix("/org/bluez/\(names[1])/"))
            }
            await advertiserConnection.close()
        }
    }
}
