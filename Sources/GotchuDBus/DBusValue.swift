/// One D-Bus value, modelled completely: containers know their element types, so an empty `a{sv}` or `ao` still
/// marshals with the right signature.
public enum DBusValue: Hashable, Sendable {
    /// `y`: an unsigned byte.
    case byte(UInt8)
    /// `b`: a boolean (4 bytes on the wire).
    case boolean(Bool)
    /// `n`: a signed 16-bit integer.
    case int16(Int16)
    /// `q`: an unsigned 16-bit integer.
    case uint16(UInt16)
    /// `i`: a signed 32-bit integer.
    case int32(Int32)
    /// `u`: an unsigned 32-bit integer.
    case uint32(UInt32)
    /// `x`: a signed 64-bit integer.
    case int64(Int64)
    /// `t`: an unsigned 64-bit integer.
    case uint64(UInt64)
    /// `d`: an IEEE 754 double.
    case double(Double)
    /// `s`: UTF-8 text.
    case string(String)
    /// `o`: an object path, valid by construction.
    case objectPath(DBusObjectPath)
    /// `g`: a type signature.
    case signature(DBusSignature)
    /// Only a variant holds another value inline; containers hold theirs in arrays, so nothing else is boxed.
    indirect case variant(DBusVariant)
    /// `aT`: an array, with its element type.
    case array(DBusArray)
    /// `a{KV}`: a dictionary, with its key and value types.
    case dictionary(DBusDictionary)
    /// `(…)`: a structure, its fields in order.
    case structure([DBusValue])

    /// The value's D-Bus type.
    public var type: DBusType {
        switch self {
        case .byte: .byte
        case .boolean: .boolean
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .string: .string
        case .objectPath: .objectPath
        case .signature: .signature
        case .variant: .variant
        case .array(let array): .array(array.elementType)
        case .dictionary(let dictionary): .dictionary(key: dictionary.keyType, value: dictionary.valueType)
        case .structure(let fields): .structure(fields.map(\.type))
        }
    }
}

/// A validated D-Bus object path such as `/org/bluez/hci0`.
public struct DBusObjectPath: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: String

    /// Validates a path: `/`, or `/`-separated non-empty elements of `[A-Za-z0-9_]`, no trailing `/`.
    public init?(rawValue: String) {
        let bytes = rawValue.utf8
        guard bytes.first == UInt8(ascii: "/") else { return nil }
        if bytes.count > 1 {
            guard bytes.last != UInt8(ascii: "/") else { return nil }
            var previousWasSlash = false
            for byte in bytes {
                if byte == UInt8(ascii: "/") {
                    guard !previousWasSlash else { return nil }
                    previousWasSlash = true
                } else {
                    guard Self.isElementByte(byte) else { return nil }
                    previousWasSlash = false
                }
            }
        }
        self.rawValue = rawValue
    }

    /// The root path `/`.
    public static let root = DBusObjectPath(rawValue: "/")!

    /// Appends one element, replacing characters a path element cannot hold with `_`.
    public func appending(_ element: String) -> DBusObjectPath {
        var clean = String(
            String.UnicodeScalarView(
                element.unicodeScalars.map { scalar in
                    scalar.isASCII && Self.isElementByte(UInt8(scalar.value)) ? scalar : "_"
                }
            )
        )
        if clean.isEmpty { clean = "_" }
        return DBusObjectPath(rawValue: (rawValue == "/" ? "" : rawValue) + "/" + clean)!
    }

    /// Whether `self` is `other` or lies below it.
    public func isDescendant(of other: DBusObjectPath) -> Bool {
        other.rawValue == "/" || rawValue == other.rawValue || rawValue.hasPrefix(other.rawValue + "/")
    }

    /// The last element, or `""` for the root.
    public var lastElement: String {
        String(rawValue.split(separator: "/").last ?? "")
    }

    public var description: String { rawValue }

    public static func < (lhs: DBusObjectPath, rhs: DBusObjectPath) -> Bool { lhs.rawValue < rhs.rawValue }

    private static func isElementByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
    }
}

/// A value wrapped with its own type (`v`).
public struct DBusVariant: Hashable, Sendable, CustomStringConvertible {
    /// The wrapped value.
    public var value: DBusValue

    /// Wraps a value.
    public init(_ value: DBusValue) { self.value = value }

    /// Wraps a typed Swift value.
    public init(_ value: some DBusRepresentable) { self.value = value.dbusValue }

    public var description: String { "\(value.type.signature):\(value)" }
}

/// An array whose element type is known even when it is empty.
public struct DBusArray: Hashable, Sendable {
    /// The type of every element.
    public let elementType: DBusType
    /// The elements; each one's ``DBusValue/type`` must equal ``elementType`` to marshal.
    public var elements: [DBusValue]

    /// Creates an array of `elementType`.
    public init(elementType: DBusType, elements: [DBusValue] = []) {
        self.elementType = elementType
        self.elements = elements
    }
}

/// A dictionary (`a{KV}`) kept as ordered entries, with typed keys and values: `a{sv}`, `a{qv}`, `a{oa{sa{sv}}}`.
public struct DBusDictionary: Hashable, Sendable {
    /// One key and its value.
    public struct Entry: Hashable, Sendable {
        /// The key, of the dictionary's key type.
        public var key: DBusValue
        /// The value, of the dictionary's value type.
        public var value: DBusValue

        /// Pairs `key` with `value`, which should be of the dictionary's key and value types.
        public init(key: DBusValue, value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The key type; must be basic.
    public let keyType: DBusType
    /// The value type.
    public let valueType: DBusType
    /// Entries in wire order.
    public var entries: [Entry]

    /// A dictionary of `keyType` (a basic type) to `valueType`, with `entries` in wire order (none by default).
    public init(keyType: DBusType, valueType: DBusType, entries: [Entry] = []) {
        self.keyType = keyType
        self.valueType = valueType
        self.entries = entries
    }

    /// The value of the first entry with `key`.
    public subscript(key: DBusValue) -> DBusValue? {
        entries.first { $0.key == key }?.value
    }
}

extension DBusValue {
    /// A string array (`as`).
    public static func strings(_ values: [String]) -> DBusValue {
        .array(DBusArray(elementType: .string, elements: values.map { .string($0) }))
    }

    /// A byte array (`ay`).
    public static func bytes(_ values: [UInt8]) -> DBusValue {
        .array(DBusArray(elementType: .byte, elements: values.map { .byte($0) }))
    }

    /// A property dictionary (`a{sv}`).
    public static func properties(_ values: [String: DBusVariant]) -> DBusValue {
        values.dbusValue
    }

    /// Checks that containers hold what their declared types say, so marshalling cannot fail half-way.
    func validate(depth: Int = 0) throws(DBusError) {
        guard depth <= DBusMarshalling.maximumDepth else {
            throw DBusError(.invalidArgs, "value nested deeper than \(DBusMarshalling.maximumDepth)")
        }
        if depth == 0 {
            guard DBusSignature(rawValue: type.signature) != nil else {
                throw DBusError(.invalidSignature, "\(type) is not a valid D-Bus signature")
            }
        }
        switch self {
        case .string(let text):
            guard !text.utf8.contains(0) else { throw DBusError(.invalidArgs, "string contains NUL") }
        case .signature(let signature):
            // `DBusSignature(_:)` builds from types without validating; libdbus aborts on an invalid signature.
            guard DBusSignature(rawValue: signature.rawValue) != nil else {
                throw DBusError(.invalidSignature, "'\(signature.rawValue)' is not a valid D-Bus signature")
            }
        case .variant(let variant):
            guard DBusSignature(rawValue: variant.value.type.signature) != nil else {
                throw DBusError(.invalidSignature, "\(variant.value.type) is not a valid D-Bus signature")
            }
            try variant.value.validate(depth: depth + 1)
        case .array(let array):
            for element in array.elements {
                guard element.type == array.elementType else {
                    throw DBusError(
                        .invalidArgs,
                        "array of \(array.elementType) holds a \(element.type)"
                    )
                }
                try element.validate(depth: depth + 1)
            }
        case .dictionary(let dictionary):
            guard dictionary.keyType.isBasic else { throw DBusError(.invalidArgs, "dictionary key is not basic") }
            for entry in dictionary.entries {
                guard entry.key.type == dictionary.keyType, entry.value.type == dictionary.valueType else {
                    throw DBusError(.invalidArgs, "dictionary entry does not match \(self.type)")
                }
                // On the wire a dictionary is two containers deep: the array and its entries.
                try entry.key.validate(depth: depth + 2)
                try entry.value.validate(depth: depth + 2)
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw DBusError(.invalidArgs, "empty structure") }
            for field in fields { try field.validate(depth: depth + 1) }
        default:
            break
        }
    }
}
