public import GotchuDBus

/// An error from BlueZ or from talking to it, classified so callers can react, with the raw D-Bus name and
/// message kept for logs.
public struct BlueZError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as far as a caller can act on it.
    public enum Kind: Hashable, Sendable {
        /// `org.bluez.Error.AlreadyExists`: the same object is already registered.
        case alreadyExists
        /// `org.bluez.Error.InvalidArguments`: BlueZ refused the arguments (often a wrongly typed property).
        case invalidArguments
        /// `org.bluez.Error.NotPermitted` (other than the advertisement limit).
        case notPermitted
        /// `NotPermitted`/`Failed` "Maximum advertisements reached": no free advertising instance.
        case maximumAdvertisements
        /// `Failed` "Failed to parse advertisement.": usually data too long for 31 bytes.
        case parseFailure
        /// `org.bluez.Error.NotReady`: the adapter is off.
        case notReady
        /// `org.bluez.Error.InProgress`.
        case inProgress
        /// `org.bluez.Error.DoesNotExist`.
        case doesNotExist
        /// bluetoothd is not on the bus.
        case serviceUnavailable
        /// No adapter, or not the one asked for.
        case noAdapter
        /// The adapter went away while in use.
        case adapterRemoved
        /// BlueZ released the advertisement and registering it again failed.
        case released
        /// BlueZ answered with data of the wrong shape.
        case malformedReply
        /// Anything else; see ``BlueZError/name`` and ``BlueZError/message``.
        case other
    }

    /// What went wrong, for a program to act on.
    public var kind: Kind
    /// The D-Bus error name, or a `io.gotchu.Error.*` name for errors found locally.
    public var name: String
    /// The error's message, from bluetoothd or written here, for a person to read.
    public var message: String

    /// An error of `kind` found here rather than by BlueZ, named `io.gotchu.Error.BlueZ` unless `name` says
    /// otherwise.
    public init(_ kind: Kind, name: String = "io.gotchu.Error.BlueZ", message: String) {
        self.kind = kind
        self.name = name
        self.message = message
    }

    /// Classifies a D-Bus error from BlueZ.
    public init(_ error: DBusError) {
        let kind: Kind
        switch error.name {
        case .bluezAlreadyExists: kind = .alreadyExists
        case .bluezInvalidArguments, .invalidArgs: kind = .invalidArguments
        case .bluezNotPermitted:
            kind = error.message.contains("Maximum advertisements") ? .maximumAdvertisements : .notPermitted
        case .bluezNotReady: kind = .notReady
        case .bluezInProgress: kind = .inProgress
        case .bluezDoesNotExist: kind = .doesNotExist
        case .serviceUnknown, .nameHasNoOwner: kind = .serviceUnavailable
        case .bluezFailed:
            if error.message.contains("Maximum advertisements") {
                kind = .maximumAdvertisements
            } else if error.message.contains("Failed to parse advertisement") {
                kind = .parseFailure
            } else {
                kind = .other
            }
        default: kind = .other
        }
        self.init(kind, name: error.name.rawValue, message: error.message)
    }

    /// Wraps any error: D-Bus errors are classified, ``BlueZError``s pass through, others become ``Kind/other``.
    static func wrap(_ error: any Error) -> any Error {
        if let error = error as? DBusError { return BlueZError(error) }
        return error
    }

    public var description: String { "\(kind): \(name): \(message)" }
}
