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

        public static let failed: Name = "org.freedesktop.DBus.Error.Failed"
        public static let noMemory: Name = "org.freedesktop.DBus.Error.NoMemory"
        public static let noReply: Name = "org.freedesktop.DBus.Error.NoReply"
        public static let timeout: Name = "org.freedesktop.DBus.Error.Timeout"
        public static let disconnected: Name = "org.freedesktop.DBus.Error.Disconnected"
        public static let invalidArgs: Name = "org.freedesktop.DBus.Error.InvalidArgs"
        public static let invalidSignature: Name = "org.freedesktop.DBus.Error.InvalidSignature"
        public static let unknownMethod: Name = "org.freedesktop.DBus.Error.UnknownMethod"
        public static let unknownObject: Name = "org.freedesktop.DBus.Error.UnknownObject"
        public static let unknownInterface: Name = "org.freedesktop.DBus.Error.UnknownInterface"
        public static let unknownProperty: Name = "org.freedesktop.DBus.Error.UnknownProperty"
        public static let propertyReadOnly: Name = "org.freedesktop.DBus.Error.PropertyReadOnly"
        public static let serviceUnknown: Name = "org.freedesktop.DBus.Error.ServiceUnknown"
        public static let nameHasNoOwner: Name = "org.freedesktop.DBus.Error.NameHasNoOwner"
        public static let accessDenied: Name = "org.freedesktop.DBus.Error.AccessDenied"
        public static let fileNotFound: Name = "org.freedesktop.DBus.Error.FileNotFound"
        public static let noServer: Name = "org.freedesktop.DBus.Error.NoServer"
        public static let notSupported: Name = "org.freedesktop.DBus.Error.NotSupported"

        public static let bluezFailed: Name = "org.bluez.Error.Failed"
        public static let bluezAlreadyExists: Name = "org.bluez.Error.AlreadyExists"
        public static let bluezDoesNotExist: Name = "org.bluez.Error.DoesNotExist"
        public static let bluezInvalidArguments: Name = "org.bluez.Error.InvalidArguments"
        public static let bluezNotPermitted: Name = "org.bluez.Error.NotPermitted"
        public static let bluezNotReady: Name = "org.bluez.Error.NotReady"
        public static let bluezInProgress: Name = "org.bluez.Error.InProgress"
        public static let bluezNotSupported: Name = "org.bluez.Error.NotSupported"
    }

    /// The D-Bus error name.
    public var name: Name
    /// The message that came with it (may be empty).
    public var message: String

    /// Creates an error.
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
