/// A Swift type with a fixed D-Bus type, convertible to and from ``DBusValue`` without `Any`.
public protocol DBusRepresentable: Sendable {
    /// The D-Bus type every value of this Swift type has.
    static var dbusType: DBusType { get }
    /// Converts from a D-Bus value; `nil` when the value has another type.
    init?(dbusValue: DBusValue)
    /// The D-Bus form of this value.
    var dbusValue: DBusValue { get }
}

extension UInt8: DBusRepresentable {
    public static var dbusType: DBusType { .byte }
    public init?(dbusValue: DBusValue) {
        guard case .byte(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .byte(self) }
}

extension Bool: DBusRepresentable {
    public static var dbusType: DBusType { .boolean }
    public init?(dbusValue: DBusValue) {
        guard case .boolean(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .boolean(self) }
}

extension Int16: DBusRepresentable {
    public static var dbusType: DBusType { .int16 }
    public init?(dbusValue: DBusValue) {
        guard case .int16(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .int16(self) }
}

extension UInt16: DBusRepresentable {
    public static var dbusType: DBusType { .uint16 }
    public init?(dbusValue: DBusValue) {
        guard case .uint16(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .uint16(self) }
}

extension Int32: DBusRepresentable {
    public static var dbusType: DBusType { .int32 }
    public init?(dbusValue: DBusValue) {
        guard case .int32(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .int32(self) }
}

extension UInt32: DBusRepresentable {
    public static var dbusType: DBusType { .uint32 }
    public init?(dbusValue: DBusValue) {
        guard case .uint32(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .uint32(self) }
}

extension Int64: DBusRepresentable {
    public static var dbusType: DBusType { .int64 }
    public init?(dbusValue: DBusValue) {
        guard case .int64(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .int64(self) }
}

extension UInt64: DBusRepresentable {
    public static var dbusType: DBusType { .uint64 }
    public init?(dbusValue: DBusValue) {
        guard case .uint64(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .uint64(self) }
}

extension Double: DBusRepresentable {
    public static var dbusType: DBusType { .double }
    public init?(dbusValue: DBusValue) {
        guard case .double(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .double(self) }
}

extension String: DBusRepresentable {
    public static var dbusType: DBusType { .string }
    public init?(dbusValue: DBusValue) {
        guard case .string(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .string(self) }
}

extension DBusObjectPath: DBusRepresentable {
    public static var dbusType: DBusType { .objectPath }
    public init?(dbusValue: DBusValue) {
        guard case .objectPath(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .objectPath(self) }
}

extension DBusSignature: DBusRepresentable {
    public static var dbusType: DBusType { .signature }
    public init?(dbusValue: DBusValue) {
        guard case .signature(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .signature(self) }
}

extension DBusVariant: DBusRepresentable {
    public static var dbusType: DBusType { .variant }
    public init?(dbusValue: DBusValue) {
        guard case .variant(let value) = dbusValue else { return nil }
        self = value
    }
    public var dbusValue: DBusValue { .variant(self) }
}

// The generic conformances are inlinable so other modules get specialized code: BlueZ decodes these per signal.
extension Array: DBusRepresentable where Element: DBusRepresentable {
    @inlinable public static var dbusType: DBusType { .array(Element.dbusType) }
    @inlinable public init?(dbusValue: DBusValue) {
        guard case .array(let array) = dbusValue, array.elementType == Element.dbusType else { return nil }
        var result: [Element] = []
        result.reserveCapacity(array.elements.count)
        for element in array.elements {
            guard let converted = Element(dbusValue: element) else { return nil }
            result.append(converted)
        }
        self = result
    }
    @inlinable public var dbusValue: DBusValue {
        .array(DBusArray(elementType: Element.dbusType, elements: map(\.dbusValue)))
    }
}

extension Dictionary: DBusRepresentable where Key: DBusRepresentable, Value: DBusRepresentable {
    @inlinable public static var dbusType: DBusType { .dictionary(key: Key.dbusType, value: Value.dbusType) }
    /// Converts a D-Bus dictionary; when a key repeats, the last entry wins.
    @inlinable public init?(dbusValue: DBusValue) {
        guard case .dictionary(let dictionary) = dbusValue, dictionary.keyType == Key.dbusType,
            dictionary.valueType == Value.dbusType
        else { return nil }
        var result: [Key: Value] = [:]
        for entry in dictionary.entries {
            guard let key = Key(dbusValue: entry.key), let value = Value(dbusValue: entry.value) else { return nil }
            result[key] = value
        }
        self = result
    }
    /// Entries are sorted by their key's text so the wire form is deterministic.
    public var dbusValue: DBusValue {
        let entries = map { DBusDictionary.Entry(key: $0.key.dbusValue, value: $0.value.dbusValue) }
            .sorted { "\($0.key)" < "\($1.key)" }
        return .dictionary(DBusDictionary(keyType: Key.dbusType, valueType: Value.dbusType, entries: entries))
    }
}

extension Dictionary where Key == String, Value == DBusVariant {
    /// Reads a property of a known type: `props["RSSI", as: Int16.self]`. `nil` when absent or of another type.
    @inlinable public subscript<T: DBusRepresentable>(key: String, as type: T.Type) -> T? {
        guard let variant = self[key] else { return nil }
        return T(dbusValue: variant.value)
    }
}

extension DBusValue {
    /// Converts to a typed Swift value; `nil` when the type differs. Variants are not unwrapped implicitly.
    public func decode<T: DBusRepresentable>(as type: T.Type = T.self) -> T? {
        T(dbusValue: self)
    }
}
