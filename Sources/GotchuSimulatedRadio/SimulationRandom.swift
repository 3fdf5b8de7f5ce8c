#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// SplitMix64: turns one 64-bit seed (or a seed and a few labels) into well-mixed 64-bit values.
///
/// Used to seed ``Xoshiro256StarStar`` and to derive independent streams (per link, per advertising period) from the
/// simulation's seed, so adding a peer does not change what the others draw.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose whole sequence is fixed by `seed`: the same seed draws the same values.
    public init(seed: UInt64) {
        self.state = seed
    }

    /// The next value.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A seed derived from `seed` and `labels`: equal inputs give equal seeds, different inputs unrelated ones.
    public static func derive(_ seed: UInt64, _ labels: UInt64...) -> UInt64 {
        var mixer = SplitMix64(seed: seed)
        var value = mixer.next()
        for label in labels {
            mixer = SplitMix64(seed: value ^ label &* 0xD6E8_FEB8_6659_FD93)
            value = mixer.next()
        }
        return value
    }
}

/// xoshiro256**: a small, fast generator with 256 bits of state; the simulation's only source of randomness.
/// Not cryptographic: EIDs for real sessions come from the system generator.
public struct Xoshiro256StarStar: RandomNumberGenerator, Sendable {
    private var s0, s1, s2, s3: UInt64

    /// Creates a generator whose state is filled from `seed` by SplitMix64 (never all zero).
    public init(seed: UInt64) {
        var mixer = SplitMix64(seed: seed)
        s0 = mixer.next()
        s1 = mixer.next()
        s2 = mixer.next()
        s3 = mixer.next()
    }

    /// The next value.
    public mutating func next() -> UInt64 {
        let result = rotate(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = rotate(s3, 45)
        return result
    }

    private func rotate(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
}

extension RandomNumberGenerator {
    /// A uniform value in [0, 1) with 53 random bits.
    mutating func unit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A standard normal value (Box–Muller; one of the pair is discarded to keep the generator state simple).
    mutating func gaussian() -> Double {
        let u1 = 1 - unit()  // in (0, 1], so log is finite
        let u2 = unit()
        return sqrt(-2 * log(u1)) * cos(2 * Double.pi * u2)
    }
}
