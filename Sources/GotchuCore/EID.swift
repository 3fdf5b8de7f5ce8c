/// An ephemeral identifier: the anonymous token a receiver advertises for one payment session.
///
/// On the wire it is 10 lowercase ASCII hex characters (5 random bytes), carried as the service data of the Gotchu
/// service UUID. It carries no personal data; only the ledger server can map it to a session.
public struct EID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    /// The number of random bytes behind an EID.
    public static let byteCount = 5
    /// The number of hex characters in the text form.
    public static let length = 10

    /// The 10 lowercase hex characters.
    public let rawValue: String

    /// Validates a text EID: exactly 10 characters from `0-9a-f`. Upper case is refused so one EID has one spelling.
    public init?(rawValue: String) {
        guard rawValue.utf8.count == Self.length, rawValue.utf8.allSatisfy(Self.isLowerHex) else { return nil }
        self.rawValue = rawValue
    }

    /// Builds an EID from its 5 bytes.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.byteCount else { return nil }
        var text = ""
        text.reserveCapacity(Self.length)
        for byte in bytes {
            text.append(Self.hexDigit(byte >> 4))
            text.append(Self.hexDigit(byte & 0x0F))
        }
        self.rawValue = text
    }

    /// Decodes the service data of an advertisement: the 10 ASCII bytes of the text form. Anything else is `nil`.
    /// Inlinable, so a scanner in another module gets it specialized to its buffer type: it runs for every signal.
    @inlinable
    public init?(serviceData: some Collection<UInt8>) {
        guard serviceData.count == Self.length, serviceData.allSatisfy(Self.isLowerHex) else { return nil }
        self.rawValue = String(decoding: serviceData, as: UTF8.self)
    }

    /// A fresh EID from the given generator (pass `SystemRandomNumberGenerator` for a CSPRNG).
    public static func random(using generator: inout some RandomNumberGenerator) -> EID {
        let bytes = (0..<byteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return EID(bytes: bytes)!
    }

    /// A fresh EID from the system's cryptographically secure generator.
    public static func random() -> EID {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    /// The service data that carries this EID: its 10 ASCII bytes.
    public var serviceData: [UInt8] { Array(rawValue.utf8) }

    /// The byte after an EID's 10 that says its terminal cannot reach the ledger: payers connect to it over GATT
    /// (``GattRadio``) and read its signed charge instead of resolving the EID. Payers that predate it find such
    /// service data malformed, as they cannot pay it.
    public static let offlineMarker: UInt8 = 0x01

    /// The service data that carries this EID, followed by ``offlineMarker`` when its terminal is `offline`.
    public func serviceData(offline: Bool) -> [UInt8] { offline ? serviceData + [Self.offlineMarker] : serviceData }

    /// The EID an advertisement's service data carries, and whether its terminal is offline: 10 ASCII bytes, or those
    /// and ``offlineMarker``. Anything else is `nil`.
    @inlinable
    public static func sighted(serviceData: some Collection<UInt8>) -> (eid: EID, offline: Bool)? {
        if serviceData.count == length { return EID(serviceData: serviceData).map { ($0, false) } }
        guard serviceData.count == length + 1, serviceData.dropFirst(length).first == offlineMarker else { return nil }
        return EID(serviceData: serviceData.prefix(length)).map { ($0, true) }
    }

    public var description: String { rawValue }

    public static func < (lhs: EID, rhs: EID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let eid = EID(rawValue: text) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "an EID is 10 lowercase hex characters"
            )
        }
        self = eid
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    @usableFromInline
    static func isLowerHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    private static func hexDigit(_ nibble: UInt8) -> Character {
        Character(Unicode.Scalar(nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10))
    }
}
