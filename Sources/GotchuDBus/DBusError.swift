internal import CGotchuDBus

/// An error as D-Bus names it: a dotted error name and a human-readable message.
///
/// Errors returned by peers keep their name, so callers can match on it (`catch let error as DBusError where
/// error.name == .unknownMethod`) and higher layers can map names such as `org.bluez.Error.AlreadyExists`.
public struct DBusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A D-Bus error name such as `org.freedesktop.DBus.Error.NoReply`.
    public struct Name: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
        public var rawValue: String

        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }
        public var description: String { rawValue }

        /// A generic failure; also what this library throws when nothing more specific applies.
        public static let failed: Name = "org.freedesktop.DBus.Error.Failed"
        static let noMemory: Name = "org.freedesktop.DBus.Error.NoMemory"
        /// A method call got no reply in time, or its connection closed before the reply came.
        public static let noReply: Name = "org.freedesktop.DBus.Error.NoReply"
        /// An operation the bus or a peer gave up on after a timeout of its own.
        public static let timeout: Name = "org.freedesktop.DBus.Error.Timeout"
        /// The connection is closed: the bus went away or it was closed here.
        public static let disconnected: Name = "org.freedesktop.DBus.Error.Disconnected"
        /// A method was called with arguments of the wrong number, type or value.
        public static let invalidArgs: Name = "org.freedesktop.DBus.Error.InvalidArgs"
        /// A message's type signature is malformed, or not the one the method takes.
        public static let invalidSignature: Name = "org.freedesktop.DBus.Error.InvalidSignature"
        /// The object has no such method (or the interface no such member).
        public static let unknownMethod: Name = "org.freedesktop.DBus.Error.UnknownMethod"
        /// Nothing is exported at the object path called.
        public static let unknownObject: Name = "org.freedesktop.DBus.Error.UnknownObject"
        static let unknownInterface: Name = "org.freedesktop.DBus.Error.UnknownInterface"
        static let unknownProperty: Name = "org.freedesktop.DBus.Error.UnknownProperty"
        static let propertyReadOnly: Name = "org.freedesktop.DBus.Error.PropertyReadOnly"
        /// No connection owns the bus name called, and none can be activated for it.
        public static let serviceUnknown: Name = "org.freedesktop.DBus.Error.ServiceUnknown"
        /// The bus name asked about (as by `GetNameOwner`) has no owner.
        public static let nameHasNoOwner: Name = "org.freedesktop.DBus.Error.NameHasNoOwner"
        /// The bus's security policy, or the peer, refused the call or the name request.
        public static let accessDenied: Name = "org.freedesktop.DBus.Error.AccessDenied"
        /// A file (such as the bus socket) was not found; thrown here too when no bus address is set.
        public static let fileNotFound: Name = "org.freedesktop.DBus.Error.FileNotFound"
        /// Nothing answered at the bus address (no socket, connection refused, authentication cut short).
        public static let noServer: Name = "org.freedesktop.DBus.Error.NoServer"
        /// The operation is not supported, such as a D-Bus type this library does not handle.
        public static let notSupported: Name = "org.freedesktop.DBus.Error.NotSupported"

        /// BlueZ's generic failure; its message tells more ("Maximum advertisements reached", "Failed to parse
        /// advertisement.").
        public static let bluezFailed: Name = "org.bluez.Error.Failed"
        /// BlueZ: the same object (such as an advertisement) is registered already.
        public static let bluezAlreadyExists: Name = "org.bluez.Error.AlreadyExists"
        /// BlueZ: no such object, such as an advertisement unregistered that was never registered.
        public static let bluezDoesNotExist: Name = "org.bluez.Error.DoesNotExist"
        /// BlueZ refused the arguments, often a wrongly typed property of a discovery filter or advertisement.
        public static let bluezInvalidArguments: Name = "org.bluez.Error.InvalidArguments"
        /// BlueZ: the operation is not permitted now; for an advertisement, often "Maximum advertisements reached".
        public static let bluezNotPermitted: Name = "org.bluez.Error.NotPermitted"
        /// BlueZ: the adapter is not ready, usually because it is powered off.
        public static let bluezNotReady: Name = "org.bluez.Error.NotReady"
        /// BlueZ: the same operation is already in progress.
        public static let bluezInProgress: Name = "org.bluez.Error.InProgress"
    }

    /// The D-Bus error name.
    public var name: Name
    /// The message that came with it (may be empty).
    public var message: String

    /// An error `name` with `message` for a person; handlers throw it to answer a call with that D-Bus error.
    public init(_ name: Name, _ message: String = "") {
        self.name = name
        self.message = message
    }

    public var description: String { message.isEmpty ? name.rawValue : "\(name.rawValue): \(message)" }
}

extension DBusError.Name {
    /// Matches an error against a name in `catch` and `switch` patterns.
    public static func ~= (name: DBusError.Name, error: any Error) -> Bool {
        (error as? DBusError)?.name == name
    }
}

/// The one place a libdbus `DBusError` becomes a Swift error: runs `body` with a fresh C error, and throws when
/// libdbus set it, keeping its name and message.
func withDBusError<T>(_ body: (UnsafeMutablePointer<CGotchuDBus.DBusError>) -> T) throws(DBusError) -> T {
    var cError = CGotchuDBus.DBusError()
    dbus_error_init(&cError)
    defer { dbus_error_free(&cError) }
    let result = body(&cError)
    if dbus_error_is_set(&cError) != 0 {
        let name = cError.name.map { String(cString: $0) } ?? DBusError.Name.failed.rawValue
        let message = cError.message.map { String(cString: $0) } ?? ""
        throw DBusError(DBusError.Name(rawValue: name), message)
    }
    return result
}
