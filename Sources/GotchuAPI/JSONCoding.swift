public import Foundation
import GotchuCore

/// The JSON conventions of the ledger API: snake_case keys spelled out in each type's `CodingKeys`, dates as
/// RFC 3339 / ISO 8601 UTC strings with milliseconds.
public enum APIJSON {
    /// An encoder for API bodies.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(timestampStyle))
        }
        return encoder
    }

    /// A decoder for API bodies. Accepts timestamps with or without fractional seconds.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = (try? timestampStyle.parse(text)) ?? (try? Date.ISO8601FormatStyle().parse(text)) {
                return date
            }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is not an ISO 8601 time")
        }
        return decoder
    }

    private static let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}

/// A request body field that failed validation; the server answers 400 with this message.
public struct InvalidField: Error, Hashable, Sendable, CustomStringConvertible {
    /// The JSON field name.
    public var field: String
    /// What is wrong with it, for a person.
    public var reason: String
    /// Whether the field is an amount (answered with the `invalid-amount` problem type).
    public var isAmount: Bool

    /// A failure of `field`, explained by `reason` (`"is required"`); `isAmount` makes the server answer
    /// `invalid-amount` rather than `bad-request`.
    public init(field: String, reason: String, isAmount: Bool = false) {
        self.field = field
        self.reason = reason
        self.isAmount = isAmount
    }

    public var description: String { "\(field) \(reason)" }
}

extension KeyedDecodingContainer {
    /// Decodes an amount in cents strictly, as the server must: a JSON integer, nothing else. Every refusal says
    /// what was wrong (a string, a fraction, an overflow, a missing field).
    func decodeStrictCents(forKey key: Key) throws -> Int64 {
        let name = key.stringValue
        guard contains(key), (try? decodeNil(forKey: key)) == false else {
            throw InvalidField(field: name, reason: "is required (an integer number of cents)", isAmount: true)
        }
        if let value = try? decode(Int64.self, forKey: key) {
            guard isExactly(value, forKey: key) else {
                throw InvalidField(field: name, reason: "must be exactly a whole number of cents", isAmount: true)
            }
            return value
        }
        if (try? decode(String.self, forKey: key)) != nil {
            throw InvalidField(field: name, reason: "must be a JSON integer, not a string", isAmount: true)
        }
        if let number = try? decode(Double.self, forKey: key) {
            if number.rounded(.towardZero) != number {
                throw InvalidField(
                    field: name,
                    reason: "must be a whole number of cents, not \(number)",
                    isAmount: true
                )
            }
            throw InvalidField(field: name, reason: "is out of range", isAmount: true)
        }
        throw InvalidField(field: name, reason: "must be an integer number of cents", isAmount: true)
    }

    /// Decodes an optional JSON integer strictly: absent or `null` is `nil`; a string, a fraction or a value beyond
    /// `Int64` is refused naming the field. The range is the caller's to check (a negative tip is its own refusal).
    func decodeStrictOptionalInteger(forKey key: Key, unit: String) throws -> Int64? {
        guard contains(key), (try? decodeNil(forKey: key)) == false else { return nil }
        if let value = try? decode(Int64.self, forKey: key), isExactly(value, forKey: key) { return value }
        throw InvalidField(field: key.stringValue, reason: "must be a JSON integer number of \(unit)")
    }

    /// Decodes an optional count (such as a number of shares) strictly: absent or `null` is `nil`, anything but a
    /// JSON integer is refused naming the field; the range is the caller's to check.
    func decodeStrictCount(forKey key: Key) throws -> Int? {
        guard let value = try decodeStrictOptionalInteger(forKey: key, unit: "shares") else { return nil }
        guard let count = Int(exactly: value) else {
            throw InvalidField(field: key.stringValue, reason: "is out of range")
        }
        return count
    }

    /// Decodes an optional list of JSON integers strictly: absent or `null` is `nil`; anything but an array of whole
    /// numbers (a string, an object, a fraction, a string or `null` in the list) is refused naming the field. The
    /// values and their count are the caller's to check; a number too large for any check to take is refused here.
    func decodeStrictIntegers(forKey key: Key, example: String) throws -> [Int]? {
        guard contains(key), (try? decodeNil(forKey: key)) == false else { return nil }
        let refusal = InvalidField(
            field: key.stringValue,
            reason: "must be a list of whole numbers, such as \(example)"
        )
        // Decimal reads the digits as written, so 10.5 stays a fraction and a long number is not rounded.
        guard let numbers = try? decode([Decimal].self, forKey: key) else { throw refusal }
        return try numbers.map { number in
            var rounded = Decimal()
            var copy = number
            NSDecimalRound(&rounded, &copy, 0, .plain)
            guard rounded == number else { throw refusal }
            guard number.magnitude <= 1_000_000 else {
                throw InvalidField(field: key.stringValue, reason: "holds a number out of range")
            }
            return NSDecimalNumber(decimal: number).intValue
        }
    }

    /// Decodes a required string field, refusing other JSON types with a clear message.
    func decodeStrictString(forKey key: Key) throws -> String {
        guard contains(key), (try? decodeNil(forKey: key)) == false else {
            throw InvalidField(field: key.stringValue, reason: "is required")
        }
        guard let value = try? decode(String.self, forKey: key) else {
            throw InvalidField(field: key.stringValue, reason: "must be a string")
        }
        return value
    }
}
