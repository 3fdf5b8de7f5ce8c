/// A method an exported interface offers.
public struct DBusMethod: Sendable {
    /// The method's name.
    public var name: String
    /// The argument types callers must send; other signatures get `InvalidArgs` before the handler runs.
    public var inputs: DBusSignature
    /// The types of the reply, as declared in introspection data.
    public var outputs: DBusSignature
    /// Handles one call; returns the reply arguments, or throws a ``DBusError`` sent back to the caller.
    public var handler: @Sendable (DBusMessage) async throws -> [DBusValue]

    /// A method `name` taking `inputs` and replying with `outputs` (both empty by default), answered by
    /// `handler`.
    public init(
        _ name: String,
        inputs: DBusSignature = .empty,
        outputs: DBusSignature = .empty,
        handler: @escaping @Sendable (DBusMessage) async throws -> [DBusValue]
    ) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.handler = handler
    }
}

/// A property an exported interface offers, answered through `org.freedesktop.DBus.Properties`.
public struct DBusProperty: Sendable {
    /// Whether peers may set it.
    public enum Access: Sendable {
        /// `read`: peers may only get it; `readWrite`: peers may also `Set` it.
        case read, readWrite
    }

    /// The property's name, such as `State`.
    public var name: String
    /// Its type; `Set` with another type is refused, and so is a local update of another type.
    public var type: DBusType
    /// Whether peers may set it; `Set` on a `read` property is refused with `PropertyReadOnly`.
    public var access: Access
    /// The current value.
    public var value: DBusValue

    /// Creates a property of the value's type.
    public init(_ name: String, _ value: DBusValue, access: Access = .read) {
        self.name = name
        self.type = value.type
        self.access = access
        self.value = value
    }

    /// A property `name` holding `value`, whose D-Bus type becomes the property's type; read-only by default.
    public init(_ name: String, _ value: some DBusRepresentable, access: Access = .read) {
        self.init(name, value.dbusValue, access: access)
    }
}

/// A signal an exported interface declares (for introspection).
public struct DBusSignalDescription: Sendable {
    /// The signal's name, such as `ChargeChanged`.
    public var name: String
    /// The types of the arguments the signal carries.
    public var arguments: DBusSignature

    /// Declares a signal `name` carrying `arguments`.
    public init(_ name: String, arguments: DBusSignature = .empty) {
        self.name = name
        self.arguments = arguments
    }
}

/// One interface of an exported object.
public struct DBusInterface: Sendable {
    /// The interface's name, such as `io.gotchu.Kiosk1`.
    public var name: String
    /// The methods it offers; a call to any other gets `UnknownMethod`.
    public var methods: [DBusMethod]
    /// Its properties, answered through `org.freedesktop.DBus.Properties` (`Get`, `GetAll`, `Set`).
    public var properties: [DBusProperty]
    /// The signals it declares, for introspection; sending them is up to the exporter.
    public var signals: [DBusSignalDescription]

    /// An interface `name` with its methods, properties and signals (none by default).
    public init(
        _ name: String,
        methods: [DBusMethod] = [],
        properties: [DBusProperty] = [],
        signals: [DBusSignalDescription] = []
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }
}

/// An object to export on a connection: its interfaces, and whether it is an object manager for the objects below
/// it (`org.freedesktop.DBus.ObjectManager`, with `InterfacesAdded`/`InterfacesRemoved` as objects come and go).
public struct DBusObject: Sendable {
    /// The object's interfaces; `Introspectable`, `Properties` (and `ObjectManager`) are added by the connection.
    public var interfaces: [DBusInterface]
    /// Whether it implements `org.freedesktop.DBus.ObjectManager` for the objects exported below its path.
    public var isObjectManager: Bool

    /// An object with `interfaces`; `isObjectManager` adds `org.freedesktop.DBus.ObjectManager` over the objects
    /// below it.
    public init(interfaces: [DBusInterface], isObjectManager: Bool = false) {
        self.interfaces = interfaces
        self.isObjectManager = isObjectManager
    }
}

/// The connection's record of an exported object.
struct ExportedObject {
    var object: DBusObject
    let token: UInt64

    func interface(named name: String) -> DBusInterface? {
        object.interfaces.first { $0.name == name }
    }

    func properties(of interface: DBusInterface) -> [String: DBusVariant] {
        Dictionary(interface.properties.map { ($0.name, DBusVariant($0.value)) }, uniquingKeysWith: { _, last in last })
    }

    var allProperties: [String: [String: DBusVariant]] {
        Dictionary(object.interfaces.map { ($0.name, properties(of: $0)) }, uniquingKeysWith: { _, last in last })
    }
}
