import GotchuDBus
import GotchuTesting
import Synchronization

/// A minimal bluetoothd written with our own export API: ObjectManager at `/`, one adapter with `Adapter1` and
/// `LEAdvertisingManager1`, and devices the test adds. Like bluetoothd, `RegisterAdvertisement` calls
/// `Properties.GetAll` back on the caller before it replies, and it watches `PropertiesChanged` afterwards.
actor FakeBlueZ {
    struct Registration: Sendable {
        var owner: String
        var path: DBusObjectPath
        var properties: [String: DBusVariant]
    }

    struct Call: Sendable {
        var method: String
        var arguments: [DBusValue]
    }

    /// A `PropertiesChanged` of `LEAdvertisement1` some client emitted: the path and the properties it changed.
    struct AdvertisementChange: Sendable {
        var path: DBusObjectPath
        var changed: [String: DBusVariant]
    }

    /// Every ``AdvertisementChange`` received, recorded on the connection's thread as each is read: one sent before a
    /// method call is recorded before that call is answered.
    nonisolated let advertisementChanges = Mutex<[AdvertisementChange]>([])

    let address: String
    let adapterPath = DBusObjectPath(rawValue: "/org/bluez/hci0")!
    private(set) var connection: DBusConnection
    /// `GattManager1` and the peers whose GATT servers are the applications registered with it.
    private(set) var gatt: FakeGatt
    private(set) var registrations: [Registration] = []
    private(set) var calls: [Call] = []
    private(set) var registerCount = 0
    /// When set, `RegisterAdvertisement` fails with this error after the call-back.
    var registerError: DBusError?
    /// How many more registrations ``registerError`` fails.
    private var registerErrorsLeft = Int.max
    private var watchers: [Task<Void, Never>] = []

    static func start(on bus: PrivateBus) async throws -> FakeBlueZ {
        let connection = try await DBusConnection.connect(to: .address(bus.address))
        let fake = FakeBlueZ(address: bus.address, connection: connection)
        try await fake.publish()
        return fake
    }

    private init(address: String, connection: DBusConnection) {
        self.address = address
        self.connection = connection
        self.gatt = FakeGatt(connection: connection, adapterPath: adapterPath)
    }

    /// Makes the next `times` registrations fail with `error` (after the call-back), or none when `error` is `nil`.
    func setRegisterError(_ error: DBusError?, times: Int = .max) {
        registerError = error
        registerErrorsLeft = times
    }

    private func publish() async throws {
        try await connection.export(DBusObject(interfaces: [], isObjectManager: true), at: .root)
        try await connection.export(adapterObject(), at: adapterPath)
        _ = try await connection.addSignalHandler(
            matching: DBusMatchRule(
                interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                arg0: "org.bluez.LEAdvertisement1"
            )
        ) { [weak self] signal in
            guard let path = signal.path, let changed = signal.argument(1, as: [String: DBusVariant].self) else {
                return
            }
            self?.advertisementChanges.withLock { $0.append(AdvertisementChange(path: path, changed: changed)) }
        }
        try await connection.requestName("org.bluez")
    }

    /// Takes the advertising manager away from the adapter, as on an adapter without Bluetooth LE.
    func removeAdvertisingManager() async throws {
        await connection.unexport(adapterPath)
        var adapter = adapterObject()
        adapter.interfaces.removeAll { $0.name == "org.bluez.LEAdvertisingManager1" }
        try await connection.export(adapter, at: adapterPath)
    }

    /// Simulates bluetoothd restarting: the old connection goes away, a new one takes the name.
    func restart() async throws {
        for watcher in watchers { watcher.cancel() }
        watchers.removeAll()
        registrations.removeAll()
        await connection.close()
        connection = try await DBusConnection.connect(to: .address(address))
        gatt = FakeGatt(connection: connection, adapterPath: adapterPath)
        try await publish()
    }

    func stop() async {
        for watcher in watchers { watcher.cancel() }
        await connection.close()
    }

    /// Sends `Release` to every registered advertisement and forgets them, as bluetoothd does on a timeout.
    func releaseAll() async throws {
        let released = registrations
        registrations.removeAll()
        for registration in released {
            try await connection.send(
                DBusMessage(
                    kind: .methodCall,
                    destination: registration.owner,
                    path: registration.path,
                    interface: "org.bluez.LEAdvertisement1",
                    member: "Release",
                    noReplyExpected: true
                )
            )
        }
    }

    func removeAdapter() async {
        await connection.unexport(adapterPath)
    }

    /// Powers the adapter on or off, announced with `PropertiesChanged`.
    func setPowered(_ powered: Bool) async throws {
        try await connection.setProperty("Powered", of: "org.bluez.Adapter1", at: adapterPath, to: .boolean(powered))
    }

    func devicePath(_ name: String) -> DBusObjectPath { adapterPath.appending(name) }

    /// Adds a device, announced with `InterfacesAdded`.
    func addDevice(_ name: String, properties: [String: DBusValue]) async throws {
        try await connection.export(
            DBusObject(interfaces: [
                DBusInterface(
                    "org.bluez.Device1",
                    properties: properties.sorted { $0.key < $1.key }.map { DBusProperty($0.key, $0.value) }
                )
            ]),
            at: devicePath(name)
        )
    }

    /// Changes a device property, announced with `PropertiesChanged`.
    func updateDevice(_ name: String, _ property: String, _ value: DBusValue) async throws {
        try await connection.setProperty(property, of: "org.bluez.Device1", at: devicePath(name), to: value)
    }

    func removeDevice(_ name: String) async {
        await connection.unexport(devicePath(name))
    }

    private func record(_ method: String, _ arguments: [DBusValue]) {
        calls.append(Call(method: method, arguments: arguments))
    }

    func calls(named method: String) -> [Call] { calls.filter { $0.method == method } }

    private func register(owner: String, path: DBusObjectPath) async throws {
        registerCount += 1
        guard !registrations.contains(where: { $0.owner == owner && $0.path == path }) else {
            throw DBusError(.bluezAlreadyExists, "Already Exists")
        }
        // The call-back a blocking client would deadlock on.
        let reply = try await connection.call(
            destination: owner,
            path: path,
            interface: "org.freedesktop.DBus.Properties",
            method: "GetAll",
            [.string("org.bluez.LEAdvertisement1")],
            timeout: .seconds(30)
        )
        guard let properties = reply.first.flatMap({ [String: DBusVariant](dbusValue: $0) }) else {
            throw DBusError(.bluezFailed, "Failed to parse advertisement.")
        }
        if let registerError, registerErrorsLeft > 0 {
            registerErrorsLeft -= 1
            throw registerError
        }
        registrations.append(Registration(owner: owner, path: path, properties: properties))
        let changes = try await connection.signals(
            matching: DBusMatchRule(
                sender: owner,
                interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                path: path
            )
        )
        watchers.append(
            Task { [weak self] in
                for await signal in changes {
                    guard let changed = signal.argument(1, as: [String: DBusVariant].self) else { continue }
                    await self?.apply(changed, owner: owner, path: path)
                }
            }
        )
    }

    private func apply(_ changed: [String: DBusVariant], owner: String, path: DBusObjectPath) {
        guard let index = registrations.firstIndex(where: { $0.owner == owner && $0.path == path }) else { return }
        registrations[index].properties.merge(changed) { _, new in new }
    }

    private func unregister(owner: String, path: DBusObjectPath) throws {
        guard let index = registrations.firstIndex(where: { $0.owner == owner && $0.path == path }) else {
            throw DBusError(.bluezDoesNotExist, "Does Not Exist")
        }
        registrations.remove(at: index)
    }

    private func adapterObject() -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                "org.bluez.Adapter1",
                methods: [
                    DBusMethod("SetDiscoveryFilter", inputs: [[String: DBusVariant].dbusType]) { [weak self] call in
                        await self?.record("SetDiscoveryFilter", call.body)
                        return []
                    },
                    DBusMethod("StartDiscovery") { [weak self] call in
                        await self?.record("StartDiscovery", call.body)
                        return []
                    },
                    DBusMethod("StopDiscovery") { [weak self] call in
                        await self?.record("StopDiscovery", call.body)
                        return []
                    },
                ],
                properties: [
                    DBusProperty("Address", "00:11:22:33:44:55"),
                    DBusProperty("AddressType", "public"),
                    DBusProperty("Powered", true),
                    DBusProperty("Discoverable", false),
                    DBusProperty("Discovering", false),
                ]
            ),
            DBusInterface(
                "org.bluez.LEAdvertisingManager1",
                methods: [
                    DBusMethod("RegisterAdvertisement", inputs: [.objectPath, [String: DBusVariant].dbusType]) {
                        [weak self] call in
                        guard let self, let sender = call.sender, let path = call.argument(0, as: DBusObjectPath.self)
                        else { throw DBusError(.bluezInvalidArguments, "Invalid arguments") }
                        await self.record("RegisterAdvertisement", call.body)
                        try await self.register(owner: sender, path: path)
                        return []
                    },
                    DBusMethod("UnregisterAdvertisement", inputs: [.objectPath]) { [weak self] call in
                        guard let self, let sender = call.sender, let path = call.argument(0, as: DBusObjectPath.self)
                        else { throw DBusError(.bluezInvalidArguments, "Invalid arguments") }
                        await self.record("UnregisterAdvertisement", call.body)
                        try await self.unregister(owner: sender, path: path)
                        return []
                    },
                ],
                properties: [
                    DBusProperty("ActiveInstances", UInt8(0)),
                    DBusProperty("SupportedInstances", UInt8(5)),
                    DBusProperty("SupportedIncludes", ["tx-power", "appearance", "local-name"]),
                ]
            ),
            gatt.managerInterface(),
        ])
    }
}
