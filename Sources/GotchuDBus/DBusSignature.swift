/// The type of one D-Bus value: a single complete type in the D-Bus type system.
public indirect enum DBusType: Hashable, Sendable, CustomStringConvertible {
    /// The fixed-size basic types: `y` (UInt8), `b`, `n`, `q`, `i`, `u`, `x`, `t` (Int16 to UInt64) and `d` (a
    /// Double).
    case byte, boolean, int16, uint16, int32, uint32, int64, uint64, double
    /// The string-like basic types: `s` (UTF-8 text), `o` (an object path) and `g` (a type signature).
    case string, objectPath, signature
    /// `v`: a value that carries its own type.
    case variant
    /// `aT`: an array of one element type.
    case array(DBusType)
    /// `a{KV}`: a dictionary; the key must be a basic type.
    case dictionary(key: DBusType, value: DBusType)
    /// `(…)`: a structure of one or more fields.
    case structure([DBusType])

    /// The type's signature text, such as `a{sv}`.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .variant: "v"
        case .array(let element): "a" + element.signature
        case .dictionary(let key, let value): "a{" + key.signature + value.signature + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        }
    }

    public var description: String { signature }

    /// Whether the type is basic (allowed as a dictionary key).
    public var isBasic: Bool {
        switch self {
        case .variant, .array, .dictionary, .structure: false
        default: true
        }
    }

    /// The wire type code of the type's first character.
    var code: UInt8 { signature.utf8.first ?? 0 }
}

/// A validated D-Bus type signature: a sequence of complete types such as `oa{sv}`.
public struct DBusSignature: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByArrayLiteral {
    /// The signature text.
    public let rawValue: String
    /// The complete types it lists, in order.
    public let types: [DBusType]

    /// The longest signature D-Bus allows.
    public static let maximumLength = 255
    /// Array and structure nesting limits of the D-Bus specification.
    static let maximumArrayDepth = 32
    static let maximumStructDepth = 32

    /// Parses and validates a signature; `nil` if it is not valid D-Bus.
    public init?(rawValue: String) {
        guard rawValue.utf8.count <= Self.maximumLength else { return nil }
        var parser = Parser(bytes: Array(rawValue.utf8))
        var types: [DBusType] = []
        while !parser.atEnd {
            guard let type = parser.parseComplete(arrayDepth: 0, structDepth: 0) else { return nil }
            types.append(type)
        }
        self.rawValue = rawValue
        self.types = types
    }

    /// A signature listing `types`.
    public init(_ types: [DBusType]) {
        self.types = types
        self.rawValue = types.map(\.signature).joined()
    }

    public init(arrayLiteral elements: DBusType...) { self.init(elements) }

    /// The empty signature.
    public static let empty = DBusSignature([])

    public var description: String { rawValue }

    /// Parses exactly one complete type, or `nil`.
    static func singleType(_ text: String) -> DBusType? {
        guard let signature = DBusSignature(rawValue: text), signature.types.count == 1 else { return nil }
        return signature.types[0]
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index >= bytes.count }

        mutating func parseComplete(arrayDepth: Int, structDepth: Int) -> DBusType? {
            guard index < bytes.count else { return nil }
            let code = bytes[index]
            index += 1
            switch code {
            case UInt8(ascii: "y"): return .byte
            case UInt8(ascii: "b"): return .boolean
            case UInt8(ascii: "n"): return .int16
            case UInt8(ascii: "q"): return .uint16
            case UInt8(ascii: "i"): return .int32
            case UInt8(ascii: "u"): return .uint32
            case UInt8(ascii: "x"): return .int64
            case UInt8(ascii: "t"): return .uint64
            case UInt8(ascii: "d"): return .double
            case UInt8(ascii: "s"): return .string
            case UInt8(ascii: "o"): return .objectPath
            case UInt8(ascii: "g"): return .signature
            case UInt8(ascii: "v"): return .variant
            case UInt8(ascii: "a"):
                guard arrayDepth < DBusSignature.maximumArrayDepth else { return nil }
                if index < bytes.count, bytes[index] == UInt8(ascii: "{") {
                    index += 1
                    guard let key = parseComplete(arrayDepth: arrayDepth + 1, structDepth: structDepth), key.isBasic,
                        let value = parseComplete(arrayDepth: arrayDepth + 1, structDepth: structDepth),
                        index < bytes.count, bytes[index] == UInt8(ascii: "}")
                    else { return nil }
                    index += 1
                    return .dictionary(key: key, value: value)
                }
                guard let element = parseComplete(arrayDepth: arrayDepth + 1, structDepth: structDepth) else {
                    return nil
                }
                return .array(element)
            case UInt8(ascii: "("):
                guard structDepth < DBusSignature.maximumStructDepth else { return nil }
                var fields: [DBusType] = []
                while index < bytes.count, bytes[index] != UInt8(ascii: ")") {
                    guard let field = parseComplete(arrayDepth: arrayDepth, structDepth: structDepth + 1) else {
                        return nil
                    }
                    fields.append(field)
                }
                guard index < bytes.count, !fields.isEmpty else { return nil }
                index += 1
                return .structure(fields)
            default:
                return nil
            }
        }
    }
}
