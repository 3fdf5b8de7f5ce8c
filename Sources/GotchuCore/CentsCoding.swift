import Foundation

// Amounts in JSON as a client reads them, shared by the receipts and the API's answers.

extension KeyedDecodingContainer {
    /// Decodes an amount in cents leniently, as a client should: a JSON integer, or a string of digits (servers
    /// backed by PostgreSQL often send `bigint` columns as strings).
    package func decodeLenientCents(forKey key: Key) throws -> Int64 {
        if let value = try? decode(Int64.self, forKey: key) {
            guard isExactly(value, forKey: key) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key,
                    in: self,
                    debugDescription: "not exactly a whole number of cents"
                )
            }
            return value
        }
        let text = try decode(String.self, forKey: key)
        guard let value = Int64(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: self,
                debugDescription: "'\(text)' is not an integer number of cents"
            )
        }
        return value
    }

    /// Whether the number under `key` is exactly `value`. Integer decoding of a number written with a fraction or an
    /// exponent goes through `Double`, which rounds: `1.0000000000000000001` would be 1 and `9007199254740993.0`
    /// would be 9007199254740992. `Decimal` reads the digits as written.
    package func isExactly(_ value: Int64, forKey key: Key) -> Bool {
        guard let written = try? decode(Decimal.self, forKey: key) else { return false }
        return written == Decimal(value)
    }
}
