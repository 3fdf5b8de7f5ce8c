import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuTesting
import Testing

let requiresDBusDaemon = Testing.ConditionTrait.enabled(
    if: PrivateBus.isAvailable,
    "dbus-daemon is not installed (apt-get install dbus)"
)

/// A private bus with the Swift fake bluetoothd and a radio connected to it.
func withFakeBlueZ(
    configuration: BlueZRadio.Configuration = .init(),
    observer: (any BlueZRadioObserver)? = nil,
    _ body: (PrivateBus, FakeBlueZ, BlueZRadio) async throws -> Void
) async throws {
    try await PrivateBus.with { bus in
        let fake = try await FakeBlueZ.start(on: bus)
        let connection = try await DBusConnection.connect(to: .address(bus.address))
        let radio = BlueZRadio(connection: connection, configuration: configuration, observer: observer)
        do {
            try await body(bus, fake, radio)
        } catch {
            await connection.close()
            await fake.stop()
            throw error
        }
        await connection.close()
        await fake.stop()
    }
}

let sampleEID = EID(rawValue: "a1b2c3d4e5")!
let feedKey = "0000feed-0000-1000-8000-00805f9b34fb"

func serviceData(_ text: String, key: String = feedKey) -> DBusValue {
    [key: DBusVariant(.bytes(Array(text.utf8)))].dbusValue
}
