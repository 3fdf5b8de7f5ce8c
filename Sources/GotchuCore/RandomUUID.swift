/// Random (version 4) UUIDs as lowercase text, the form the ledger stores its ids in.
///
/// Drawn from the system's random source, which the standard library reads with `getrandom(2)`. Foundation's
/// `UUID()` on Linux opens, reads and closes /dev/urandom for every UUID, and a payment makes five of them.
public enum RandomUUID {
    /// A new random UUID, such as `0f8e3b1c-5d2a-4c47-9e61-2b7a9c3d4e5f`.
    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return make(using: &generator)
    }

    /// A UUID from `generator`'s next 128 bits, with the version (4) and variant (RFC 9562) bits set.
    public static func make(using generator: inout some RandomNumberGenerator) -> String {
        let high = (generator.next() as UInt64) & ~0xF000 | 0x4000
        let low = (generator.next() as UInt64) & ~(0xC << 60) | (0x8 << 60)
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            for digit in 0..<32 {
                if digit == 8 || digit == 12 || digit == 16 || digit == 20 {
                    buffer[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = digit < 16 ? high : low
                let shift = UInt64(60 - 4 * (digit % 16))
                buffer[position] = hexDigits[Int(truncatingIfNeeded: word >> shift) & 0xF]
                position += 1
            }
            return position
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
