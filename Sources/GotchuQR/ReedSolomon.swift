/// Arithmetic in GF(2⁸) modulo the QR code's primitive polynomial x⁸ + x⁴ + x³ + x² + 1 (0x11D), by log and
/// antilog tables.
enum GaloisField {
    /// `exponents[i]` is αⁱ, for i in 0..<510, so that a sum of two logarithms needs no reduction.
    static let exponents: [UInt8] = {
        var table = [UInt8](repeating: 0, count: 510)
        var value = 1
        for index in 0..<255 {
            table[index] = UInt8(value)
            table[index + 255] = UInt8(value)
            value <<= 1
            if value & 0x100 != 0 { value ^= 0x11D }
        }
        return table
    }()

    /// `logarithms[x]` is the i with αⁱ = x, for x in 1...255 (the entry for 0 is unused).
    static let logarithms: [Int] = {
        var table = [Int](repeating: 0, count: 256)
        for index in 0..<255 { table[Int(exponents[index])] = index }
        return table
    }()

    /// The product of `a` and `b`.
    static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        if a == 0 || b == 0 { return 0 }
        return exponents[logarithms[Int(a)] + logarithms[Int(b)]]
    }
}

/// The Reed–Solomon error correction codewords of a block: the remainder of the block's polynomial, times x^degree,
/// divided by the generator (x − α⁰)(x − α¹)…(x − α^(degree−1)).
struct ReedSolomon {
    /// The generator's coefficients from x^(degree−1) down to x⁰; its leading coefficient, 1, is left out.
    let generator: [UInt8]

    /// An encoder that makes `degree` codewords per block (7 to 30 in a QR code).
    init(degree: Int) {
        precondition(degree >= 1 && degree <= 255)
        // Multiplied out one factor at a time, starting from the polynomial 1.
        var coefficients = [UInt8](repeating: 0, count: degree)
        coefficients[degree - 1] = 1
        var root: UInt8 = 1
        for _ in 0..<degree {
            for index in 0..<degree {
                coefficients[index] = GaloisField.multiply(coefficients[index], root)
                if index + 1 < degree { coefficients[index] ^= coefficients[index + 1] }
            }
            root = GaloisField.multiply(root, 2)
        }
        generator = coefficients
    }

    /// The error correction codewords of `data`, as many as the generator's degree.
    func remainder(of data: some Collection<UInt8>) -> [UInt8] {
        let degree = generator.count
        var result = [UInt8](repeating: 0, count: degree)
        for byte in data {
            let factor = byte ^ result[0]
            for index in 0..<degree - 1 {
                result[index] = result[index + 1] ^ GaloisField.multiply(generator[index], factor)
            }
            result[degree - 1] = GaloisField.multiply(generator[degree - 1], factor)
        }
        return result
    }
}
