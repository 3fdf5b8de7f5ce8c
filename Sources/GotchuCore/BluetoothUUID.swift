/// A 128-bit Bluetooth UUID, kept in its canonical lowercase text form.
///
/// 16- and 32-bit UUIDs are shorthands for UUIDs on the Bluetooth base UUID `0000xxxx-0000-1000-8000-00805f9b34fb`;
/// `BluetoothUUID("feed")` and `BluetoothUUID("0000FEED-0000-1000-8000-00805F9B34FB")` are the same value.
public struct BluetoothUUID: Hashable, Sendable, CustomStringConvertible, Codable {
    /// The canonical form: 36 lowercase characters with dashes.
    public let uuidString: String

    /// The service UUID Gotchu advertises under by default (16-bit 0xFEED).
    public static let gotchu = BluetoothUUID("feed")!

    /// The service data UUID a terminal's calibration rides under (16-bit 0xFEDC), beside the EID's: one more AD
    /// structure of 5 bytes, so flags, the UUID list, the EID, the TX Power Level and the calibration still fit the
    /// 31 bytes of a legacy advertisement (29 in all).
    public static let gotchuCalibration = BluetoothUUID("fedc")!

    private static let baseSuffix = "-0000-1000-8000-00805f9b34fb"

    /// Parses a 16-bit (`feed`), 32-bit (`0000feed`) or 128-bit UUID, in either case.
    public init?(_ text: String) {
        let lower = text.lowercased()
        let hex = lower.utf8.filter { $0 != UInt8(ascii: "-") }
        guard hex.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        // Short forms are hex digits only: a dash there is not a digit.
        switch lower.utf8.count {
        case 4 where hex.count == 4: self.uuidString = "0000" + lower + Self.baseSuffix
        case 8 where hex.count == 8: self.uuidString = lower + Self.baseSuffix
        case 36:
            let dashes = lower.utf8.enumerated().filter { $0.element == UInt8(ascii: "-") }.map(\.offset)
            guard dashes == [8, 13, 18, 23] else { return nil }
            self.uuidString = lower
        default: return nil
        }
    }

    /// The 16-bit short form (`"feed"`) when this UUID is on the Bluetooth base UUID, else `nil`.
    public var shortForm: String? {
        guard uuidString.hasSuffix(Self.baseSuffix), uuidString.hasPrefix("0000") else { return nil }
        return String(uuidString.dropFirst(4).prefix(4))
    }

    public var description: String { uuidString }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        guard let uuid = BluetoothUUID(try container.decode(String.self)) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a Bluetooth UUID")
        }
        self = uuid
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(uuidString)
    }
}
