import Foundation
import GotchuDBus

/// The GATT half of ``FakeBlueZ``: `GattManager1` takes applications as bluetoothd does (reading their objects with
/// `GetManagedObjects` before it answers), and a peer device added with ``addPeer(_:mtu:)`` is the last application
/// seen from the air. Connecting to it exports its service and characteristics under the device, as bluetoothd does
/// for a remote device, and their reads, writes and notifications reach the application's objects as ATT would carry
/// them: a read in parts of `mtu - 1` bytes (a long read, each part from an offset, at most 512 bytes in all), a write
/// longer than `mtu - 3` bytes as a long write from offsets (none longer than 510 bytes, as bluetoothd refuses), a refusal as an ATT error code without its text.
actor FakeGatt {
    struct Application: Sendable {
        var owner: String
        var path: DBusObjectPath
        var objects: [DBusObjectPath: [String: [String: DBusVariant]]]
    }

    struct Peer {
        var mtu: UInt16
        var application: Application?
        var remote: [DBusObjectPath] = []
        var watchers: [Task<Void, Never>] = []
    }

    private let connection: DBusConnection
    private let adapterPath: DBusObjectPath
    private(set) var applications: [Application] = []
    private var peers: [String: Peer] = [:]
    /// Every `ReadValue` and `WriteValue` sent to an application, with its options.
    private(set) var forwarded: [(method: String, options: [String: DBusVariant])] = []

    init(connection: DBusConnection, adapterPath: DBusObjectPath) {
        self.connection = connection
        self.adapterPath = adapterPath
    }

    static let characteristic = "org.bluez.GattCharacteristic1"
    static let service = "org.bluez.GattService1"

    /// `org.bluez.GattManager1` on the adapter.
    nonisolated func managerInterface() -> DBusInterface {
        DBusInterface(
            "org.bluez.GattManager1",
            methods: [
                DBusMethod("RegisterApplication", inputs: [.objectPath, [String: DBusVariant].dbusType]) {
                    [weak self] call in
                    guard let self, let owner = call.sender, let path = call.argument(0, as: DBusObjectPath.self)
                    else { throw DBusError(.bluezInvalidArguments, "Invalid arguments") }
                    try await self.register(owner: owner, path: path)
                    return []
                },
                DBusMethod("UnregisterApplication", inputs: [.objectPath]) { [weak self] call in
                    guard let self, let owner = call.sender, let path = call.argument(0, as: DBusObjectPath.self)
                    else { throw DBusError(.bluezInvalidArguments, "Invalid arguments") }
                    try await self.unregister(owner: owner, path: path)
                    return []
                },
            ]
        )
    }

    private func register(owner: String, path: DBusObjectPath) async throws {
        guard !applications.contains(where: { $0.owner == owner && $0.path == path }) else {
            throw DBusError(.bluezAlreadyExists, "Already Exists")
        }
        let reply = try await connection.call(
            destination: owner,
            path: path,
            interface: "org.freedesktop.DBus.ObjectManager",
            method: "GetManagedObjects",
            timeout: .seconds(30)
        )
        guard let objects = reply.first.flatMap({ [DBusObjectPath: [String: [String: DBusVariant]]](dbusValue: $0) })
        else { throw DBusError(.bluezFailed, "Failed to register application") }
        // As bluetoothd: every characteristic belongs to a service of the application, and has a UUID and flags.
        let services = objects.filter { $0.value[Self.service]?["UUID", as: String.self] != nil }.keys
        for (_, interfaces) in objects {
            guard let characteristic = interfaces[Self.characteristic] else { continue }
            guard let service = characteristic["Service", as: DBusObjectPath.self], services.contains(service),
                characteristic["UUID", as: String.self] != nil, characteristic["Flags", as: [String].self] != nil
            else { throw DBusError(.bluezFailed, "Failed to register application") }
        }
        guard !services.isEmpty else { throw DBusError(.bluezFailed, "No valid service object found") }
        applications.append(Application(owner: owner, path: path, objects: objects))
    }

    private func unregister(owner: String, path: DBusObjectPath) throws {
        guard let index = applications.firstIndex(where: { $0.owner == owner && $0.path == path }) else {
            throw DBusError(.bluezDoesNotExist, "Does Not Exist")
        }
        applications.remove(at: index)
    }

    func devicePath(_ name: String) -> DBusObjectPath { adapterPath.appending("dev_" + name) }

    /// Adds a device whose GATT server is the last application registered when a client connects to it.
    func addPeer(_ name: String, mtu: UInt16 = 23) async throws {
        peers[name] = Peer(mtu: mtu)
        try await connection.export(
            DBusObject(interfaces: [
                DBusInterface(
                    "org.bluez.Device1",
                    methods: [
                        DBusMethod("Connect") { [weak self] _ in
                            try await self?.connect(name)
                            return []
                        },
                        DBusMethod("Disconnect") { [weak self] _ in
                            await self?.disconnect(name)
                            return []
                        },
                    ],
                    properties: [
                        DBusProperty("Address", "00:AA:01:00:00:00"),
                        DBusProperty("Connected", false),
                        DBusProperty("ServicesResolved", false),
                    ]
                )
            ]),
            at: devicePath(name)
        )
    }

    private func connect(_ name: String) async throws {
        guard var peer = peers[name], peer.remote.isEmpty else {
            throw DBusError("org.bluez.Error.AlreadyConnected", "Already Connected")
        }
        guard let application = applications.last else {
            throw DBusError(.bluezFailed, "le-connection-abort-by-local")
        }
        peer.application = application
        let device = devicePath(name)
        let services = application.objects.filter { $0.value[Self.service] != nil }.keys.sorted()
        for (serviceIndex, servicePath) in services.enumerated() {
            let remoteService = device.appending(String(format: "service%04x", 0x10 * (serviceIndex + 1)))
            let uuid = application.objects[servicePath]?[Self.service]?["UUID", as: String.self] ?? ""
            try await connection.export(
                DBusObject(interfaces: [
                    DBusInterface(
                        Self.service,
                        properties: [
                            DBusProperty("UUID", uuid), DBusProperty("Primary", true),
                            DBusProperty("Device", DBusValue.objectPath(device)),
                        ]
                    )
                ]),
                at: remoteService
            )
            peer.remote.append(remoteService)
            let characteristics = application.objects.filter {
                $0.value[Self.characteristic]?["Service", as: DBusObjectPath.self] == servicePath
            }
            for (index, (local, interfaces)) in characteristics.sorted(by: { $0.key < $1.key }).enumerated() {
                let properties = interfaces[Self.characteristic] ?? [:]
                let remote = remoteService.appending(String(format: "char%04x", 0x10 * (serviceIndex + 1) + index + 1))
                try await connection.export(
                    remoteCharacteristic(
                        peer: name,
                        local: local,
                        properties: properties,
                        service: remoteService,
                        mtu: peer.mtu
                    ),
                    at: remote
                )
                peer.remote.append(remote)
            }
        }
        peers[name] = peer
        try await connection.setProperty("Connected", of: "org.bluez.Device1", at: device, to: .boolean(true))
        try await connection.setProperty("ServicesResolved", of: "org.bluez.Device1", at: device, to: .boolean(true))
    }

    /// Ends the connection to `name`, as when either side drops the link.
    func disconnect(_ name: String) async {
        guard var peer = peers[name] else { return }
        for watcher in peer.watchers { watcher.cancel() }
        for path in peer.remote.reversed() { await connection.unexport(path) }
        peer.remote = []
        peer.watchers = []
        peer.application = nil
        peers[name] = peer
        let device = devicePath(name)
        try? await connection.setProperty("ServicesResolved", of: "org.bluez.Device1", at: device, to: .boolean(false))
        try? await connection.setProperty("Connected", of: "org.bluez.Device1", at: device, to: .boolean(false))
    }

    private nonisolated func remoteCharacteristic(
        peer name: String,
        local: DBusObjectPath,
        properties: [String: DBusVariant],
        service: DBusObjectPath,
        mtu: UInt16
    ) -> DBusObject {
        let flags = properties["Flags", as: [String].self] ?? []
        var remoteProperties = [
            DBusProperty("UUID", properties["UUID", as: String.self] ?? ""),
            DBusProperty("Service", DBusValue.objectPath(service)),
            DBusProperty("Flags", flags),
            DBusProperty("MTU", mtu),
            DBusProperty("Value", DBusValue.bytes([])),
        ]
        remoteProperties.append(DBusProperty("Notifying", false))
        return DBusObject(interfaces: [
            DBusInterface(
                Self.characteristic,
                methods: [
                    DBusMethod("ReadValue", inputs: [[String: DBusVariant].dbusType], outputs: [.array(.byte)]) {
                        [weak self] _ in
                        guard let self else { throw DBusError(.bluezFailed, "Not connected") }
                        guard flags.contains("read") else { throw Self.attError(0x02) }
                        return [.bytes(try await self.read(name, local: local))]
                    },
                    DBusMethod("WriteValue", inputs: [.array(.byte), [String: DBusVariant].dbusType]) {
                        [weak self] call in
                        guard let self else { throw DBusError(.bluezFailed, "Not connected") }
                        guard flags.contains("write") else { throw Self.attError(0x03) }
                        try await self.write(call.argument(0, as: [UInt8].self) ?? [], name, local: local)
                        return []
                    },
                    DBusMethod("StartNotify") { [weak self] call in
                        guard let self, let path = call.path else { throw DBusError(.bluezFailed, "Not connected") }
                        guard flags.contains("notify") else { throw DBusError("org.bluez.Error.NotSupported", "") }
                        try await self.startNotify(name, local: local, remote: path)
                        return []
                    },
                    DBusMethod("StopNotify") { _ in [] },
                ],
                properties: remoteProperties
            )
        ])
    }

    /// The peer's unique path as the application's side sees it.
    private func central(_ name: String) -> DBusObjectPath { adapterPath.appending("dev_CENTRAL_" + name) }

    private func application(_ name: String) throws -> (Application, UInt16) {
        guard let peer = peers[name], let application = peer.application else {
            throw DBusError("org.bluez.Error.NotConnected", "Not Connected")
        }
        return (application, peer.mtu)
    }

    private func options(_ name: String, offset: Int, mtu: UInt16) -> [String: DBusVariant] {
        [
            "device": DBusVariant(.objectPath(central(name))),
            "mtu": DBusVariant(.uint16(mtu)),
            "offset": DBusVariant(.uint16(UInt16(offset))),
        ]
    }

    private func read(_ name: String, local: DBusObjectPath) async throws -> [UInt8] {
        let (application, mtu) = try application(name)
        let part = Int(mtu) - 1
        var value: [UInt8] = []
        while true {
            let options = options(name, offset: value.count, mtu: mtu)
            forwarded.append(("ReadValue", options))
            let reply: [DBusValue]
            do {
                reply = try await connection.call(
                    destination: application.owner,
                    path: local,
                    interface: Self.characteristic,
                    method: "ReadValue",
                    [options.dbusValue],
                    timeout: .seconds(10)
                )
            } catch let error as DBusError {
                throw Self.attError(Self.code(error))
            }
            let bytes = reply.first.flatMap { [UInt8](dbusValue: $0) } ?? []
            value += bytes.prefix(part)
            guard value.count <= 512 else { throw Self.attError(0x0D) }
            if bytes.count < part { return value }
        }
    }

    private func write(_ value: [UInt8], _ name: String, local: DBusObjectPath) async throws {
        let (application, mtu) = try application(name)
        // Longer than one write: a long write, its parts from offsets.
        // As bluetoothd: no write is longer than 510 bytes.
        guard value.count <= 510 else { throw Self.attError(0x0D) }
        let part = value.count <= Int(mtu) - 3 ? max(value.count, 1) : Int(mtu) - 5
        var offset = 0
        repeat {
            var options = options(name, offset: offset, mtu: mtu)
            options["type"] = DBusVariant(.string("request"))
            forwarded.append(("WriteValue", options))
            do {
                _ = try await connection.call(
                    destination: application.owner,
                    path: local,
                    interface: Self.characteristic,
                    method: "WriteValue",
                    [.bytes(Array(value[offset..<min(offset + part, value.count)])), options.dbusValue],
                    timeout: .seconds(10)
                )
            } catch let error as DBusError {
                throw Self.attError(Self.code(error))
            }
            offset += part
        } while offset < value.count
    }

    private func startNotify(_ name: String, local: DBusObjectPath, remote: DBusObjectPath) async throws {
        let (application, _) = try application(name)
        let changes = try await connection.signals(
            matching: DBusMatchRule(
                sender: application.owner,
                interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                path: local
            )
        )
        _ = try await connection.call(
            destination: application.owner,
            path: local,
            interface: Self.characteristic,
            method: "StartNotify",
            timeout: .seconds(10)
        )
        let connection = self.connection
        let watcher = Task {
            for await signal in changes {
                guard let value = signal.argument(1, as: [String: DBusVariant].self)?["Value", as: [UInt8].self]
                else { continue }
                try? await connection.setProperty("Value", of: Self.characteristic, at: remote, to: .bytes(value))
            }
        }
        peers[name]?.watchers.append(watcher)
        try await connection.setProperty("Notifying", of: Self.characteristic, at: remote, to: .boolean(true))
    }

    /// The ATT error code bluetoothd answers a peer with for an application's D-Bus error.
    private static func code(_ error: DBusError) -> UInt8 {
        switch error.name.rawValue {
        case "org.bluez.Error.InvalidValueLength": 0x0D
        case "org.bluez.Error.InvalidOffset": 0x07
        case "org.bluez.Error.NotPermitted": 0x03
        case "org.bluez.Error.NotAuthorized": 0x08
        case "org.bluez.Error.NotSupported": 0x06
        default: 0x0E
        }
    }

    /// What bluetoothd's client side answers when the peer refused with ATT error `code`: the code, not the text.
    private static func attError(_ code: UInt8) -> DBusError {
        DBusError(.bluezFailed, "Operation failed with ATT error: 0x" + String(format: "%02x", code))
    }
}
