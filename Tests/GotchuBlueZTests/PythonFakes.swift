import GotchuBlueZ
import GotchuDBus
import GotchuTesting
import Testing

/// Runs `body` with a private bus on which a Python fake of bluetoothd owns `org.bluez`.
///
/// The fake's modules must import (see ``TestPython/installHint``); a missing module fails the test rather than
/// skipping it, so a green run always means the fake really ran.
func withPythonBlueZ(
    modules: [String],
    arguments: [String],
    _ body: (PrivateBus, DBusConnection) async throws -> Void
) async throws {
    guard let python = TestPython.executable, TestPython.canImport(modules) else {
        Issue.record("Python modules \(modules) are missing: \(TestPython.installHint)")
        return
    }
    if modules.contains("dbusmock"), !TestPython.hasDBusMock(atLeast: 0, 38) {
        Issue.record("python-dbusmock is older than 0.38 (no LEAdvertisingManager1): \(TestPython.installHint)")
        return
    }
    try await PrivateBus.with { bus in
        let fake = try bus.launch(python, arguments, name: "fake-bluez")
        let connection = try await DBusConnection.connect(to: .address(bus.address))
        do {
            let appeared = try await eventually {
                try await connection.nameOwner(of: "org.bluez") != nil
            }
            guard appeared else {
                throw TestingError("the Python fake did not take org.bluez:\n\(bus.log(of: "fake-bluez"))")
            }
            try await body(bus, connection)
        } catch {
            await connection.close()
            fake.terminate()
            throw error
        }
        await connection.close()
        fake.terminate()
    }
}
