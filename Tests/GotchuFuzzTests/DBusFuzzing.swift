import GotchuDBus
import GotchuTesting

/// Random D-Bus types and values: every basic type at its boundaries, empty and nested containers, variants of
/// variants, long strings.
enum DBusFuzzing {
    static let basicTypes: [DBusType] = [
        .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath, .signature,
    ]

    /// A random complete type at most `depth` containers deep.
    static func type(_ input: inout FuzzInput, depth: Int) -> DBusType {
        guard depth > 0, input.int(in: 0...2) == 0 else {
            return input.oneIn(6) ? .variant : input.pick(basicTypes)
        }
        switch input.int(in: 0...3) {
        case 0: return .array(type(&input, depth: depth - 1))
        case 1: return .dictionary(key: input.pick(basicTypes), value: type(&input, depth: depth - 1))
        case 2: return .structure((0..<input.int(in: 1...3)).map { _ in type(&input, depth: depth - 1) })
        default: return .variant
        }
    }

    static let paths = ["/", "/org/bluez/hci0", "/org/bluez/hci0/dev_00_11_22_33_44_55", "/_", "/a/b/c/d/e/f/g/h/i/j"]
    static let signatures = ["", "a{sv}", "(ii)", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaay", "v", "a{oa{sa{sv}}}"]

    /// A valid string for D-Bus: anything without NUL, sometimes long.
    static func text(_ input: inout FuzzInput) -> String {
        if input.oneIn(20) {
            return String(repeating: input.pick(["x", "é", "\u{1F600}"]), count: input.int(in: 256...70_000))
        }
        return String(input.string(maxLength: 12).unicodeScalars.filter { $0 != "\u{0}" })
    }

    /// A random value of `type`; variants hold random values up to `depth` deep.
    static func value(of type: DBusType, _ input: inout FuzzInput, depth: Int) -> DBusValue {
        switch type {
        case .byte: return .byte(input.boundaryInteger())
        case .boolean: return .boolean(input.oneIn(2))
        case .int16: return .int16(input.boundaryInteger())
        case .uint16: return .uint16(input.boundaryInteger())
        case .int32: return .int32(input.boundaryInteger())
        case .uint32: return .uint32(input.boundaryInteger())
        case .int64: return .int64(input.boundaryInteger())
        case .uint64: return .uint64(input.boundaryInteger())
        case .double:
            // NaN is not equal to itself, so it cannot take part in round-trip equality.
            return .double(
                input.pick([0, -0.0, .infinity, -.infinity, .greatestFiniteMagnitude, .leastNonzeroMagnitude, -1.5e300])
            )
        case .string: return .string(text(&input))
        case .objectPath: return .objectPath(DBusObjectPath(rawValue: input.pick(paths))!)
        case .signature: return .signature(DBusSignature(rawValue: input.pick(signatures))!)
        case .variant: return .variant(DBusVariant(anyValue(&input, depth: depth - 1)))
        case .array(let element):
            let count = input.length(typical: 3, boundaries: element == .byte ? [4_096, 65_536] : [64])
            return .array(
                DBusArray(
                    elementType: element,
                    elements: (0..<count).map { _ in value(of: element, &input, depth: depth - 1) }
                )
            )
        case .dictionary(let key, let valueType):
            let entries = (0..<input.length(typical: 3)).map { _ in
                DBusDictionary.Entry(
                    key: value(of: key, &input, depth: depth - 1),
                    value: value(of: valueType, &input, depth: depth - 1)
                )
            }
            return .dictionary(DBusDictionary(keyType: key, valueType: valueType, entries: entries))
        case .structure(let fields):
            return .structure(fields.map { value(of: $0, &input, depth: depth - 1) })
        }
    }

    /// A value of a random type.
    static func anyValue(_ input: inout FuzzInput, depth: Int) -> DBusValue {
        value(of: type(&input, depth: max(0, min(depth, 3))), &input, depth: max(0, depth))
    }
}
