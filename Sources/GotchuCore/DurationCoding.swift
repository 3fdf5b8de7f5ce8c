// Durations in JSON as seconds (numbers), not as Swift's own `[high, low]` attosecond pairs, which no reader of
// `--json` output can use.

extension KeyedEncodingContainer {
    /// Encodes `duration` as a number of seconds.
    public mutating func encode(seconds duration: Duration, forKey key: Key) throws {
        try encode(duration.seconds, forKey: key)
    }

    /// Encodes `duration` as a number of seconds, or nothing when `nil`.
    public mutating func encodeIfPresent(seconds duration: Duration?, forKey key: Key) throws {
        guard let duration else { return }
        try encode(seconds: duration, forKey: key)
    }
}

extension KeyedDecodingContainer {
    /// A duration written as a number of seconds, to the nearest nanosecond.
    public func decode(secondsForKey key: Key) throws -> Duration {
        let seconds = try decode(Double.self, forKey: key)
        guard seconds.isFinite, abs(seconds) < 9e9 else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: self,
                debugDescription: "a duration must be a finite number of seconds"
            )
        }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// A duration written as a number of seconds, if present and not null.
    public func decodeIfPresent(secondsForKey key: Key) throws -> Duration? {
        guard try contains(key) && !decodeNil(forKey: key) else { return nil }
        return try decode(secondsForKey: key)
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}
