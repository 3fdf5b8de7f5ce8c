import GotchuBlueZ
import GotchuDBus
import GotchuTesting
import Testing

@Suite("Doctor", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct DoctorTests {
    @Test("reports adapters, advertising instances and an adapter that is off, with the command to fix it")
    func adapters() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let healthy = await BlueZDoctor.examine(connection: radio.connection)
            #expect(healthy.bluetoothdRunning)
            #expect(healthy.discoveryPossible)
            #expect(healthy.advertisingPossible)
            #expect(healthy.severity == .ok)
            let adapter = try #require(healthy.adapters.first)
            #expect(adapter.name == "hci0")
            #expect(adapter.address == "00:11:22:33:44:55")
            #expect(adapter.powered)
            #expect(adapter.activeAdvertisements == 0)
            #expect(adapter.freeAdvertisements == 5)

            try await fake.connection.setProperty(
                "Powered",
                of: "org.bluez.Adapter1",
                at: fake.adapterPath,
                to: .boolean(false)
            )
            let off = await BlueZDoctor.examine(connection: radio.connection)
            #expect(off.severity == .problem)
            #expect(!off.discoveryPossible)
            #expect(off.findings.contains { $0.text.contains("hci0") && $0.text.contains("bluetoothctl power on") })
        }
    }

    @Test(
        "judges the addresses: broadcast goes out from private ones; peripheral is a warning naming the adapter's own"
    )
    func addresses() async throws {
        try await withFakeBlueZ { _, fake, radio in
            let broadcast = await BlueZDoctor.examine(connection: radio.connection)
            #expect(broadcast.advertisingType == .broadcast)
            #expect(broadcast.addressesPrivate)
            #expect(broadcast.severity == .ok)
            #expect(broadcast.adapters.first?.addressType == "public")
            #expect(
                broadcast.findings.contains {
                    $0.severity == .ok && $0.text.contains("hci0 advertises as broadcast")
                        && $0.text.contains("new private address")
                }
            )

            let peripheral = await BlueZDoctor.examine(connection: radio.connection, advertisingType: .peripheral)
            #expect(!peripheral.addressesPrivate)
            #expect(peripheral.advertisingPossible)
            #expect(peripheral.severity == .warning)
            let warnings = peripheral.findings.filter { $0.severity == .warning }
            #expect(warnings.count == 1)
            let warning = try #require(warnings.first?.text)
            #expect(warning.contains("public address 00:11:22:33:44:55"))
            #expect(warning.contains("broadcast"))

            // A controller with only a static random identity address sends peripheral advertisements from it.
            try await fake.connection.setProperty(
                "AddressType",
                of: "org.bluez.Adapter1",
                at: fake.adapterPath,
                to: .string("random")
            )
            let random = await BlueZDoctor.examine(connection: radio.connection, advertisingType: .peripheral)
            #expect(random.findings.contains { $0.severity == .warning && $0.text.contains("static random address") })
            #expect(await BlueZDoctor.examine(connection: radio.connection).severity == .ok)
        }
    }

    @Test(
        "a discoverable adapter is a warning even for broadcast: bluetoothd makes it connectable, and so the advertisement"
    )
    func discoverable() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await fake.connection.setProperty(
                "Discoverable",
                of: "org.bluez.Adapter1",
                at: fake.adapterPath,
                to: .boolean(true)
            )
            let report = await BlueZDoctor.examine(connection: radio.connection)
            #expect(report.advertisingPossible)
            #expect(!report.addressesPrivate)
            #expect(report.severity == .warning)
            #expect(report.adapters.first?.addressType == "public")
            let warning = try #require(report.findings.first { $0.severity == .warning }?.text)
            #expect(warning.contains("hci0 is discoverable"))
            #expect(warning.contains("public address 00:11:22:33:44:55"))
            #expect(warning.contains("bluetoothctl discoverable off"))
            let finding = try await radio.addressPrivacy()
            #expect(finding.severity == .warning)
        }
    }

    @Test("the radio tells its receiver whether a listener could follow it by its address")
    func radioAddressPrivacy() async throws {
        try await withFakeBlueZ { _, _, radio in
            let finding = try await radio.addressPrivacy()
            #expect(finding.severity == .ok)
        }
        try await withFakeBlueZ(configuration: .init(advertisingType: .peripheral)) { _, _, radio in
            let finding = try await radio.addressPrivacy()
            #expect(finding.severity == .warning)
            #expect(finding.text.contains("00:11:22:33:44:55"))
        }
    }

    @Test("an adapter without an advertising manager cannot advertise, privately or not")
    func noAdvertisingManager() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await fake.removeAdvertisingManager()
            let report = await BlueZDoctor.examine(connection: radio.connection)
            #expect(!report.advertisingPossible)
            #expect(!report.addressesPrivate)
            #expect(report.severity == .warning)
            #expect(report.findings.contains { $0.severity == .warning && $0.text.contains("cannot advertise") })
            #expect(!report.findings.contains { $0.text.contains("advertises as") })
        }
    }

    @Test("says how to start bluetoothd when org.bluez is missing")
    func noBluetoothd() async throws {
        try await PrivateBus.with { bus in
            let report = await BlueZDoctor.examine(bus: .address(bus.address))
            #expect(report.busReachable)
            #expect(!report.bluetoothdRunning)
            #expect(report.findings.contains { $0.text.contains("sudo systemctl start bluetooth") })
        }
    }

    @Test("says so when the bus itself cannot be reached")
    func noBus() async {
        let report = await BlueZDoctor.examine(bus: .address("unix:path=/nonexistent/gotchu-bus"))
        #expect(!report.busReachable)
        #expect(report.severity == .problem)
    }
}
