/// A QR code symbol (ISO/IEC 18004, Model 2) that encodes one text: its version, error correction level, mask and
/// the colour of every module.
///
/// The text is encoded as UTF-8 in one segment, in the densest mode that holds all of it: numeric when it is only
/// the digits 0–9, alphanumeric when it is only `0–9 A–Z space $ % * + - . / :`, bytes otherwise (no ECI header, as
/// readers assume UTF-8). The version is the smallest from `minimumVersion` on that holds the data at the level
/// asked for, and the mask the one of the eight with the lowest penalty by the standard's four rules, unless one is
/// given. The same arguments always make the same symbol.
///
/// ```swift
/// let code = try QRCode(encoding: "https://pay.example.com/p/0123456789", correction: .medium)
/// let image = code.svg()  // an SVG document, for a page or an HTTP response
/// ```
package struct QRCode: Sendable, Hashable {
    /// The text encoded.
    package let text: String
    /// The symbol's version, 1–40: version `v` is `4v + 17` modules on a side.
    package let version: Int
    /// The share of the symbol that may be damaged or missing and still be read.
    package let correction: ErrorCorrection
    /// The data mask applied, 0–7 (the standard's mask pattern reference).
    package let mask: Int
    /// The encoding mode of the text's one segment.
    package let mode: EncodingMode
    /// The modules row by row, top to bottom, each row left to right; `true` is dark.
    private let modules: [Bool]

    /// The number of modules on a side, without the quiet zone: `4 * version + 17`, 21 to 177.
    package var size: Int { Self.size(ofVersion: version) }

    /// Encodes `text` as UTF-8 in the smallest symbol from `minimumVersion` on that holds it at `correction`.
    ///
    /// - Parameters:
    ///   - text: What the symbol says; a reader gives back exactly its UTF-8 bytes.
    ///   - correction: The error correction level: `.medium` (15 %) suits a screen; higher levels make larger
    ///     symbols.
    ///   - minimumVersion: The smallest version to use, 1–40, for symbols of one size across similar texts.
    ///   - mask: The data mask, 0–7; `nil` (the default) chooses the one with the lowest penalty.
    /// - Throws: ``QRCodeError/dataTooLong(bits:capacity:)`` when the text does not fit in version 40 at
    ///   `correction` (at `.medium`: 2,331 bytes of UTF-8, 3,391 alphanumeric characters or 5,596 digits);
    ///   ``QRCodeError/versionOutOfRange(_:)`` or ``QRCodeError/maskOutOfRange(_:)`` for arguments outside their
    ///   ranges.
    package init(
        encoding text: String,
        correction: ErrorCorrection = .medium,
        minimumVersion: Int = 1,
        mask: Int? = nil
    ) throws(QRCodeError) {
        guard (1...40).contains(minimumVersion) else { throw .versionOutOfRange(minimumVersion) }
        if let mask, !(0...7).contains(mask) { throw .maskOutOfRange(mask) }
        let segment = Segment(text)
        let fitting = (minimumVersion...40).first { version in
            segment.bitCount(in: version) <= BlockStructure(version: version, correction: correction).dataBits
        }
        guard let version = fitting else {
            throw .dataTooLong(
                bits: segment.bitCount(in: 40),
                capacity: BlockStructure(version: 40, correction: correction).dataBits
            )
        }
        let structure = BlockStructure(version: version, correction: correction)
        let data = segment.codewords(in: version, capacity: structure.dataCodewords)
        var grid = ModuleGrid(version: version)
        grid.placeCodewords(structure.interleave(data))
        let symbol: (grid: ModuleGrid, mask: Int)
        if let mask {
            symbol = (grid.masked(mask, correction: correction), mask)
        } else {
            symbol = grid.bestMasked(correction: correction)
        }

        self.text = text
        self.version = version
        self.correction = correction
        self.mask = symbol.mask
        self.mode = segment.mode
        self.modules = symbol.grid.dark
    }

    /// Whether the module in column `x` and row `y` is dark; `(0, 0)` is the top left, within the finder pattern.
    ///
    /// - Precondition: `0 <= x < size` and `0 <= y < size`; the quiet zone around the symbol is not part of it.
    package subscript(x: Int, y: Int) -> Bool {
        precondition(x >= 0 && x < size && y >= 0 && y < size, "module (\(x), \(y)) is outside a \(size)-module symbol")
        return modules[y * size + x]
    }

    /// The modules on a side of a symbol of `version`.
    static func size(ofVersion version: Int) -> Int { version * 4 + 17 }
}

/// Why a text could not be made into a QR code.
package enum QRCodeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The encoded text needs `bits` bits (mode, length and data), more than the `capacity` bits version 40 holds at
    /// the error correction level asked for.
    case dataTooLong(bits: Int, capacity: Int)
    /// A minimum version outside 1–40 was asked for.
    case versionOutOfRange(Int)
    /// A mask outside 0–7 was asked for.
    case maskOutOfRange(Int)

    package var description: String {
        switch self {
        case .dataTooLong(let bits, let capacity):
            return "the text needs \(bits) bits, more than the \(capacity) a version 40 QR code holds at this level"
        case .versionOutOfRange(let version): return "QR code version \(version) is not in 1–40"
        case .maskOutOfRange(let mask): return "QR code mask \(mask) is not in 0–7"
        }
    }
}
