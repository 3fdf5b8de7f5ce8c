import GotchuBlueZ
import GotchuDBus
import GotchuTesting
import Testing

@Suite("Doctor", requiresDBusDaemon)
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
