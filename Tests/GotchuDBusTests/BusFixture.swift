import GotchuDBus
import GotchuTesting
import Testing

/// Runs `body` with two fresh connections to the suite's private bus, closing them afterwards.
func withTwoConnections(
    on shared: PrivateBus.Shared,
    _ body: (PrivateBus, DBusConnection, DBusConnection) async throws -> Void
) async throws {
    do {
        let bus = try await shared.get()
        let server = try await DBusConnection.connect(to: .address(bus.address))
        let client = try await DBusConnection.connect(to: .address(bus.address))
        do {
            try await body(bus, server, client)
        } catch {
            await client.close()
            await server.close()
            throw error
        }
        await client.close()
        await server.close()
    }
}

let requiresDBusDaemon = Testing.ConditionTrait.enabled(
    if: PrivateBus.isAvailable,
    "dbus-daemon is not installed (apt-get install dbus)"
)

let echoPath = DBusObjectPath(rawValue: "/io/gotchu/test/echo")!
let echoInterface = "io.gotchu.Test.Echo"

/// An object whose `Echo` method returns its arguments, whatever their types.
func echoObject() -> DBusObject {
    DBusObject(interfaces: [
        DBusInterface(
            echoInterface,
            methods: [],
            properties: [
                DBusProperty("Name", "echo"),
                DBusProperty("Volume", UInt16(3), access: .readWrite),
            ]
        )
    ])
}

/// Exports a method named `Echo` that accepts exactly `signature` and answers with the same values.
func echoMethodObject(signature: DBusSignature) -> DBusObject {
    DBusObject(interfaces: [
        DBusInterface(
            echoInterface,
            methods: [DBusMethod("Echo", inputs: signature, outputs: signature) { call in call.body }]
        )
    ])
}
