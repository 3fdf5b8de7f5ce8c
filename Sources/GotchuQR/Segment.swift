extension QRCode {
    /// How a QR code's segment encodes its characters.
    package enum EncodingMode: Sendable, Hashable {
        /// The digits 0–9, three in 10 bits.
        case numeric
        /// The 45 characters `0–9 A–Z space $ % * + - . / :`, two in 11 bits.
        case alphanumeric
        /// Any bytes (here the text's UTF-8), one in 8 bits.
        case byte

        /// The four-bit mode indicator that starts the segment.
        var indicator: Int {
            switch self {
            case .numeric: 0b0001
            case .alphanumeric: 0b0010
            case .byte: 0b0100
            }
        }

        /// The width of the character count that follows the mode indicator in `version`.
        func countBits(in version: Int) -> Int {
            let band = version <= 9 ? 0 : version <= 26 ? 1 : 2
            switch self {
            case .numeric: return [10, 12, 14][band]
            case .alphanumeric: return [9, 11, 13][band]
            case .byte: return [8, 16, 16][band]
            }
        }
    }
}

/// The whole text as one segment, in the densest mode that holds every character.
struct Segment {
    /// The mode chosen.
    let mode: QRCode.EncodingMode
    /// The text's UTF-8 bytes.
    let bytes: [UInt8]

    init(_ text: String) {
        bytes = Array(text.utf8)
        if !bytes.isEmpty, bytes.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            mode = .numeric
        } else if bytes.allSatisfy({ Self.alphanumericValues[Int($0)] >= 0 }) {
            mode = .alphanumeric
        } else {
            mode = .byte
        }
    }

    /// The number of characters the count field gives: bytes, which are characters in the two narrower modes.
    var characterCount: Int { bytes.count }

    /// The bits of the character data alone, after the mode indicator and the count.
    var dataBitCount: Int {
        switch mode {
        case .numeric: return characterCount / 3 * 10 + [0, 4, 7][characterCount % 3]
        case .alphanumeric: return characterCount / 2 * 11 + characterCount % 2 * 6
        case .byte: return characterCount * 8
        }
    }

    /// The bits of the segment in `version`: mode indicator, character count and data.
    func bitCount(in version: Int) -> Int { 4 + mode.countBits(in: version) + dataBitCount }

    /// The data codewords of a symbol of `version` that holds `capacity` of them: the segment, then the terminator
    /// (up to four zero bits), zero bits to the next byte, and the pad codewords 0xEC and 0x11 in turn.
    func codewords(in version: Int, capacity: Int) -> [UInt8] {
        var buffer = BitBuffer(capacity: capacity)
        buffer.append(mode.indicator, bits: 4)
        buffer.append(characterCount, bits: mode.countBits(in: version))
        switch mode {
        case .numeric:
            var index = 0
            while index < bytes.count {
                let digits = min(3, bytes.count - index)
                var value = 0
                for byte in bytes[index..<index + digits] { value = value * 10 + Int(byte - UInt8(ascii: "0")) }
                buffer.append(value, bits: [0, 4, 7, 10][digits])
                index += digits
            }
        case .alphanumeric:
            var index = 0
            while index + 1 < bytes.count {
                let pair =
                    Self.alphanumericValues[Int(bytes[index])] * 45 + Self.alphanumericValues[Int(bytes[index + 1])]
                buffer.append(pair, bits: 11)
                index += 2
            }
            if index < bytes.count { buffer.append(Self.alphanumericValues[Int(bytes[index])], bits: 6) }
        case .byte:
            for byte in bytes { buffer.append(Int(byte), bits: 8) }
        }
        let capacityBits = capacity * 8
        precondition(buffer.count <= capacityBits, "the segment does not fit the version chosen for it")
        buffer.append(0, bits: min(4, capacityBits - buffer.count))
        buffer.append(0, bits: (8 - buffer.count % 8) % 8)
        var pad: UInt8 = 0xEC
        while buffer.count < capacityBits {
            buffer.append(Int(pad), bits: 8)
            pad ^= 0xEC ^ 0x11
        }
        return buffer.bytes
    }

    /// Each byte's value in alphanumeric mode, or −1 for a byte outside its 45 characters.
    private static let alphanumericValues: [Int] = {
        var table = [Int](repeating: -1, count: 256)
        for (value, character) in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:".utf8.enumerated() {
            table[Int(character)] = value
        }
        return table
    }()
}

/// Bits appended most significant first, packed into bytes.
struct BitBuffer {
    /// The bytes so far; the last one's low bits are zero until appended.
    private(set) var bytes: [UInt8] = []
    /// The bits appended.
    private(set) var count = 0

    /// An empty buffer with room for `capacity` bytes.
    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Appends the low `bits` bits of `value`, the highest first.
    mutating func append(_ value: Int, bits: Int) {
        precondition(bits >= 0 && bits <= 31 && value >> bits == 0, "\(value) does not fit in \(bits) bits")
        for shift in stride(from: bits - 1, through: 0, by: -1) {
            if count % 8 == 0 { bytes.append(0) }
            if (value >> shift) & 1 == 1 { bytes[bytes.count - 1] |= 0x80 >> UInt8(count % 8) }
            count += 1
        }
    }
}
