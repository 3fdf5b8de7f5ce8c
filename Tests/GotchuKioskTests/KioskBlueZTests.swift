import Foundation
import GotchuDBus
import GotchuKiosk
import GotchuTesting
import Testing

@Suite("gotchu kiosk over BlueZ: python-dbusmock's bluetoothd on a private bus", .serialized, .timeLimit(.minutes(3)))
struct KioskBlueZTests {
    @Test(
        "bluetoothd starting late or restarting gets the advertisement back within 2 s; a removed adapter shows as an error until it returns"
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

    private func exercise(
        _ daemon: KioskDaemon,
        _ python: String,
        _ fake: FakeSlot,
        _ connection: DBusConnection
    ) async throws {
        @Sendable func startBluetoothd(_ name: String) async throws {
            await fake.replace(with: try daemon.bus.launch(python, dbusmockArguments, name: name))
            #expect(
                try await eventually(timeout: .seconds(20)) { try await connection.nameOwner(of: "org.bluez") != nil }
            )
            _ = try await connection.mock("AddAdapter", at: mockRoot, [.string("hci0"), .string("kiosk")])
        }
        func registrations() async throws -> Int {
            try await connection.mockCalls("RegisterAdvertisement", at: mockAdapter).count
        }
        func state() async throws -> String? { try await connection.kioskProperty("State", as: String.self) }

        // The kiosk starts before bluetoothd: a charge waits in the error state until it comes.
        let (kiosk, _) = try await daemon.startKiosk(["--radio", "bluez", "--bluez-bus", daemon.bus.address])
        defer { _ = try? kiosk.stopNow() }
        _ = try await connection.kiosk("Charge", [.int64(450), .string("restart")])
        #expect(try await eventually(timeout: .seconds(20)) { try await state() == "error" })
        try await startBluetoothd("bluetoothd-1")
        #expect(try await eventually(timeout: .seconds(20)) { try await registrations() == 1 })
        #expect(try await eventually { try await state() == "advertising" })

        try await startBluetoothd("bluetoothd-2")
        let restarted = ContinuousClock.now
        #expect(try await eventually(timeout: .seconds(10)) { try await registrations() == 1 })
        let took = ContinuousClock.now - restarted
        #expect(took < .seconds(2), "re-registered after \(took)")
        #expect(try await eventually { try await state() == "advertising" })

        _ = try await connection.mock("RemoveAdapter", at: mockRoot, [.string("hci0")])
        #expect(try await eventually(timeout: .seconds(10)) { try await state() == "error" })
        let charge = try await connection.kioskProperty("CurrentCharge", as: [String: DBusVariant].self)
        #expect(charge?["problem", as: String.self]?.contains("Bluetooth") == true)
        _ = try await connection.mock("AddAdapter", at: mockRoot, [.string("hci0"), .string("kiosk")])
        #expect(try await eventually(timeout: .seconds(20)) { try await state() == "advertising" })
        #expect(try await registrations() >= 1)
    }
}
