extension QRCode {
    /// A QR code's error correction level: how much of the symbol may be lost and the text still be read, paid for
    /// in size.
    package enum ErrorCorrection: Sendable, Hashable, CaseIterable {
        /// About 7 % of the codewords may be restored.
        case low
        /// About 15 %: the usual choice for a code shown on a screen.
        case medium
        /// About 25 %.
        case quartile
        /// About 30 %: for print that may be soiled or covered in part.
        case high

        /// The two bits that stand for the level in the format information (L 01, M 00, Q 11, H 10).
        var formatBits: Int {
            switch self {
            case .low: 1
            case .medium: 0
            case .quartile: 3
            case .high: 2
            }
        }

        /// The row of this level in the tables of ``BlockStructure``.
        var tableIndex: Int {
            switch self {
            case .low: 0
            case .medium: 1
            case .quartile: 2
            case .high: 3
            }
        }
    }
}

/// How a version's codewords are split, at one error correction level, into blocks of data and their error
/// correction codewords (ISO/IEC 18004, table 9).
struct BlockStructure {
    /// Every codeword the symbol holds, data and error correction.
    let totalCodewords: Int
    /// The error correction codewords of each block.
    let correctionCodewordsPerBlock: Int
    /// The number of blocks.
    let blocks: Int

    init(version: Int, correction: QRCode.ErrorCorrection) {
        totalCodewords = Self.dataModules(version: version) / 8
        correctionCodewordsPerBlock = Self.correctionCodewordsPerBlock[correction.tableIndex][version - 1]
        blocks = Self.blockCounts[correction.tableIndex][version - 1]
    }

    /// The data codewords, all blocks together.
    var dataCodewords: Int { totalCodewords - correctionCodewordsPerBlock * blocks }

    /// The data bits the symbol holds.
    var dataBits: Int { dataCodewords * 8 }

    /// The final sequence of codewords: `data` split into blocks (the first ones one codeword shorter when the
    /// codewords do not divide evenly), each block's Reed–Solomon codewords computed, then the data codewords
    /// interleaved column by column across the blocks, followed by the error correction codewords likewise.
    func interleave(_ data: [UInt8]) -> [UInt8] {
        precondition(data.count == dataCodewords)
        let shortBlocks = blocks - totalCodewords % blocks
        let shortDataLength = totalCodewords / blocks - correctionCodewordsPerBlock
        let encoder = ReedSolomon(degree: correctionCodewordsPerBlock)
        var dataBlocks: [ArraySlice<UInt8>] = []
        var correctionBlocks: [[UInt8]] = []
        var start = 0
        for index in 0..<blocks {
            let length = shortDataLength + (index < shortBlocks ? 0 : 1)
            let block = data[start..<start + length]
            dataBlocks.append(block)
            correctionBlocks.append(encoder.remainder(of: block))
            start += length
        }
        var result: [UInt8] = []
        result.reserveCapacity(totalCodewords)
        for column in 0...shortDataLength {
            for block in dataBlocks where column < block.count {
                result.append(block[block.startIndex + column])
            }
        }
        for column in 0..<correctionCodewordsPerBlock {
            for block in correctionBlocks { result.append(block[column]) }
        }
        return result
    }

    /// The modules of `version` left for codewords once the function patterns and the format and version information
    /// are drawn; at most 7 remainder bits over a whole number of codewords.
    static func dataModules(version: Int) -> Int {
        var result = (16 * version + 128) * version + 64
        if version >= 2 {
            let alignments = version / 7 + 2
            result -= (25 * alignments - 10) * alignments - 55
            if version >= 7 { result -= 36 }
        }
        return result
    }

    // Indexed [level: L, M, Q, H][version - 1].
    private static let correctionCodewordsPerBlock: [[Int]] = [
        [
            7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28,
            28, 28, 30, 30, 26, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
        [
            10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26,
            26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
        ],
        [
            13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30,
            28, 30, 30, 30, 30, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
        [
            17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28,
            30, 24, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
    ]

    private static let blockCounts: [[Int]] = [
        [
            1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8,
            8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18, 19, 19, 20, 21, 22, 24, 25,
        ],
        [
            1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16,
            17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49,
        ],
        [
            1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20,
            23, 23, 25, 27, 29, 34, 34, 35, 38, 40, 43, 45, 48, 51, 53, 56, 59, 62, 65, 68,
        ],
        [
            1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25,
            25, 34, 30, 32, 35, 37, 40, 42, 45, 48, 51, 54, 57, 60, 63, 66, 70, 74, 77, 81,
        ],
    ]
}
