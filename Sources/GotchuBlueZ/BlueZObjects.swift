public import GotchuDBus

/// Names and paths of the BlueZ D-Bus API.
public enum BlueZ {
    /// bluetoothd's bus name.
    public static let service = "org.bluez"
    static let adapterInterface = "org.bluez.Adapter1"
    static let deviceInterface = "org.bluez.Device1"
    static let advertisingManagerInterface = "org.bluez.LEAdvertisingManager1"
    static let advertisementInterface = "org.bluez.LEAdvertisement1"
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    /// Where bluetoothd keeps its adapters and their devices.
    static let rootPath = DBusObjectPath(rawValue: "/org/bluez")!

    /// Every object bluetoothd exports, with its interfaces and their properties.
    public typealias ManagedObjects = [DBusObjectPath: [String: [String: DBusVariant]]]

    /// Calls `GetManagedObjects` on bluetoothd's root. A reply of the wrong shape is an error, not a crash.
    public static func managedObjects(on connection: DBusConnection) async throws -> ManagedObjects {
        let reply: [DBusValue]
        do {
            reply = try await connection.call(
                destination: service,
                path: .root,
                interface: objectManagerInterface,
                method: "GetManagedObjects",
                timeout: .seconds(10)
            )
        } catch let error as DBusError {
            throw BlueZError(error)
        }
        guard let objects = reply.first.flatMap({ ManagedObjects(dbusValue: $0) }) else {
            throw BlueZError(.malformedReply, message: "GetManagedObjects answered \(reply.map(\.type))")
        }
        return objects
    }

    /// The adapters in `objects`, sorted by path.
    public static func adapters(in objects: ManagedObjects) -> [BlueZAdapter] {
        objects.compactMap { path, interfaces in
            interfaces[adapterInterface].map {
                BlueZAdapter(path: path, properties: $0, interfaces: Set(interfaces.keys))
            }
        }
        .sorted { $0.path < $1.path }
    }

    /// The adapter named `name` (such as `hci0`), or by default the first powered one, else the first one.
    public static func selectAdapter(named name: String?, from adapters: [BlueZAdapter]) throws -> BlueZAdapter {
        if let name {
            guard let adapter = adapters.first(where: { $0.name == name }) else {
                let known = adapters.map(\.name).joined(separator: ", ")
                throw BlueZError(.noAdapter, message: "no adapter \(name) (found: \(known.isEmpty ? "none" : known))")
            }
            return adapter
        }
        guard let adapter = adapters.first(where: { $0.powered == true }) ?? adapters.first else {
            throw BlueZError(.noAdapter, message: "no Bluetooth adapter")
        }
        return adapter
    }
}

/// A snapshot of one `org.bluez.Adapter1`.
public struct BlueZAdapter: Hashable, Sendable {
    /// Its object path, such as `/org/bluez/hci0`.
    public var path: DBusObjectPath
    /// The last path element, such as `hci0`.
    public var name: String { path.lastElement }
    /// `Address`, the adapter's identity address such as `DC:A6:32:01:02:03`; `nil` when not reported.
    public var address: String?
    /// `AddressType`: whether ``address``, the adapter's identity address, is `public` or (static) `random`. It is
    /// the address a ``BlueZAdvertisingType/peripheral`` advertisement goes out from.
    public var addressType: String?
    /// `Powered`: whether the adapter is on; `nil` when not reported.
    public var powered: Bool?
    /// `Discoverable`. While it is on, bluetoothd makes the adapter connectable too, and the kernel then sends even a
    /// ``BlueZAdvertisingType/broadcast`` advertisement connectable, from the adapter's identity address.
    public var discoverable: Bool?
    /// `Discovering`: whether a scan (by any program) is running; `nil` when not reported.
    public var discovering: Bool?
    /// Whether the adapter offers `LEAdvertisingManager1`.
    public var canAdvertise: Bool

    init(path: DBusObjectPath, properties: [String: DBusVariant], interfaces: Set<String>) {
        self.path = path
        self.address = properties["Address", as: String.self]
        self.addressType = properties["AddressType", as: String.self]
        self.powered = properties["Powered", as: Bool.self]
        self.discoverable = properties["Discoverable", as: Bool.self]
        self.discovering = properties["Discovering", as: Bool.self]
        self.canAdvertise = interfaces.contains(BlueZ.advertisingManagerInterface)
    }
}
