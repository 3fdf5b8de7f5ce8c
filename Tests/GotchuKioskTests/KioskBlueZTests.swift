import Foundation
import GotchuDBus
import GotchuKiosk
import GotchuKioskClient
import GotchuTesting
import Testing

@Suite("gotchu kiosk over BlueZ: python-dbusmock's bluetoothd on a private bus", .serialized, .timeLimit(.minutes(3)))
struct KioskBlueZTests {
    @Test(
        "bluetoothd starting late gets the advertisement on the air; a restart gets it back without the charge noticing; a removed adapter shows as an error until it returns"
    )
    func bluetoothdRestartAndAdapterRemoval() async throws {
        guard let python = TestPython.executable, TestPython.hasDBusMock(atLeast: 0, 38) else {
            Issue.record("python-dbusmock ≥ 0.38 is needed: \(TestPython.installHint)")
            return
        }
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let fake = FakeSlot()
        let connection = try await daemon.connect()
        do {
            try await exercise(daemon, python, fake, connection)
        } catch {
            await fake.replace(with: nil)
            await connection.close()
            throw error
        }
        await fake.replace(with: nil)
        await connection.close()
    }

    @Test("advertise_as = \"peripheral\" makes the kiosk register a peripheral advertisement, and say so in its log")
    func peripheralByConfiguration() async throws {
        guard let python = TestPython.executable, TestPython.hasDBusMock(atLeast: 0, 38) else {
            Issue.record("python-dbusmock ≥ 0.38 is needed: \(TestPython.installHint)")
            return
        }
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let fake = FakeSlot()
        let connection = try await daemon.connect()
        do {
            await fake.replace(with: try daemon.bus.launch(python, dbusmockArguments, name: "bluetoothd"))
            #expect(try await eventually { try await connection.nameOwner(of: "org.bluez") != nil })
            _ = try await connection.mock("AddAdapter", at: mockRoot, [.string("hci0"), .string("kiosk")])
            let (kiosk, _, _) = try await daemon.startKiosk(
                ["--radio", "bluez", "--bluez-bus", daemon.bus.address],
                environment: ["GOTCHU_KIOSK_ADVERTISE_AS": "peripheral"],
                display: false
            )
            defer { _ = try? kiosk.stopNow() }
            _ = try await connection.kiosk.charge(amountCents: 450, reference: "counter")
            #expect(
                try await eventually {
                    try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter).count == 1
                }
            )
            let registered = try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter)
            let path = try #require(registered.first?.first.flatMap { DBusObjectPath(dbusValue: $0) })
            let properties = try await connection.advertisementProperties(at: path)
            #expect(properties?["Type"] == DBusVariant("peripheral"))
            #expect(properties?["Discoverable"] == DBusVariant(true))
            // Logged before it said it was ready.
            let log = kiosk.standardError + kiosk.lines.joined(separator: "\n")
            #expect(log.contains("advertise_as = \"peripheral\""), "\(log)")
        } catch {
            await fake.replace(with: nil)
            await connection.close()
            throw error
        }
        await fake.replace(with: nil)
        await connection.close()
    }

    private func exercise(
        _ daemon: KioskDaemon,
        _ python: String,
        _ fake: FakeSlot,
        _ connection: DBusConnection
    ) async throws {
        @Sendable func startBluetoothd(_ name: String) async throws {
            await fake.replace(with: try daemon.bus.launch(python, dbusmockArguments, name: name))
            #expect(
                try await eventually { try await connection.nameOwner(of: "org.bluez") != nil }
            )
            _ = try await connection.mock("AddAdapter", at: mockRoot, [.string("hci0"), .string("kiosk")])
        }
        func registrations() async throws -> Int {
            try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter).count
        }
        func state() async throws -> String { try await connection.kiosk.state() }

        // The kiosk starts before bluetoothd: a charge waits in the error state until it comes.
        let (kiosk, _, metricsPort) = try await daemon.startKiosk(
            ["--radio", "bluez", "--bluez-bus", daemon.bus.address],
            display: true,
            metrics: true
        )
        let metrics = try #require(metricsPort)
        defer { _ = try? kiosk.stopNow() }
        let id = try await connection.kiosk.charge(amountCents: 450, reference: "restart")
        #expect(try await eventually { try await state() == "error" })
        try await startBluetoothd("bluetoothd-1")
        #expect(try await eventually { try await registrations() == 1 })
        #expect(try await eventually { try await state() == "advertising" })
        // By default a kiosk advertises as a broadcast, from a private address, without Discoverable.
        let registered = try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter)
        let path = try #require(registered.first?.first.flatMap { DBusObjectPath(dbusValue: $0) })
        let properties = try await connection.advertisementProperties(at: path)
        #expect(properties?["Type"] == DBusVariant("broadcast"))
        #expect(properties.map { $0["Discoverable"] == nil } == true)

        // The radio registers again on the restarted bluetoothd by itself. Had the advertisement failed instead, the
        // kiosk would have written a problem into the charge before retrying: the charge stays as it was.
        let before = try await connection.kiosk.charge(id)
        try await startBluetoothd("bluetoothd-2")
        #expect(try await eventually { try await registrations() == 1 })
        let after = try await connection.kiosk.charge(id)
        #expect(after["updated_at", as: String.self] == before["updated_at", as: String.self])
        #expect(after["state", as: String.self] == "advertising" && after["problem", as: String.self] == nil)
        #expect(try await eventually { try await state() == "advertising" })
        // The registration again is counted, beside the calls that made it.
        let scrape = try await daemon.scrape(port: metrics)
        #expect(scrape.value("gotchu_kiosk_bluez_reregistrations_total", ["reason": "restart"]) == 1)
        #expect(scrape.value("gotchu_kiosk_bluez_reregistrations_total", ["reason": "rotation"]) == 0)
        #expect(
            (scrape.value("gotchu_kiosk_bluez_calls_total", ["method": "RegisterAdvertisement", "outcome": "ok"]) ?? 0)
                >= 2
        )
        #expect(
            (scrape.value("gotchu_kiosk_bluez_calls_total", ["method": "GetManagedObjects", "outcome": "ok"]) ?? 0) >= 2
        )
        #expect(scrape.value("gotchu_kiosk_dbus_calls_total", ["method": "Charge", "outcome": "ok"]) == 1)

        _ = try await connection.mock("RemoveAdapter", at: mockRoot, [.string("hci0")])
        #expect(try await eventually { try await state() == "error" })
        let charge = try await connection.kiosk.currentCharge()
        #expect(charge["problem", as: String.self]?.contains("Bluetooth") == true)
        _ = try await connection.mock("AddAdapter", at: mockRoot, [.string("hci0"), .string("kiosk")])
        #expect(try await eventually { try await state() == "advertising" })
        #expect(try await registrations() >= 1)
    }
}

extension DBusConnection {
    /// The `LEAdvertisement1` properties of the object at `path`, asked of every connection on the bus but this one:
    /// the kiosk's registration names only the path, and bluetoothd reads the object from whoever registered it.
    fileprivate func advertisementProperties(at path: DBusObjectPath) async throws -> [String: DBusVariant]? {
        let reply = try await call(
            destination: "org.freedesktop.DBus",
            path: DBusObjectPath(rawValue: "/org/freedesktop/DBus")!,
            interface: "org.freedesktop.DBus",
            method: "ListNames"
        )
        let own = uniqueName
        for name in reply.first.flatMap({ [String](dbusValue: $0) }) ?? [] where name.hasPrefix(":") && name != own {
            let answer = try? await call(
                destination: name,
                path: path,
                interface: "org.freedesktop.DBus.Properties",
                method: "GetAll",
                [.string("org.bluez.LEAdvertisement1")],
                timeout: .seconds(5)
            )
            if let properties = answer?.first.flatMap({ [String: DBusVariant](dbusValue: $0) }) { return properties }
        }
        return nil
    }
}
