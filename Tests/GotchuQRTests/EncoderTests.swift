import Testing

@testable import GotchuQR

/// The encoder's parts against the standard's own numbers, and the public API's promises.
@Suite(.timeLimit(.minutes(10))) struct EncoderTests {
    /// ISO/IEC 18004's worked example: "01234567" in a version 1-M symbol.
    @Test func standardExampleCodewords() {
        let structure = BlockStructure(version: 1, correction: .medium)
        #expect(structure.dataCodewords == 16)
        let data = Segment("01234567").codewords(in: 1, capacity: structure.dataCodewords)
        let expectedData: [UInt8] = [
            0x10, 0x20, 0x0C, 0x56, 0x61, 0x80, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11,
        ]
        #expect(data == expectedData)
        let correction: [UInt8] = [0xA5, 0x24, 0xD4, 0xC1, 0xED, 0x36, 0xC7, 0x87, 0x2C, 0x55]
        #expect(ReedSolomon(degree: 10).remainder(of: data) == correction)
        #expect(structure.interleave(data) == expectedData + correction)
    }

    @Test func modeIsTheDensestThatHoldsEveryCharacter() throws {
        #expect(try QRCode(encoding: "0123456789").mode == .numeric)
        #expect(try QRCode(encoding: "HELLO WORLD $%*+-./:").mode == .alphanumeric)
        #expect(try QRCode(encoding: "Hello").mode == .byte)
        #expect(try QRCode(encoding: "١٢٣").mode == .byte)  // Arabic-Indic digits are not 0–9
        #expect(try QRCode(encoding: "").mode == .alphanumeric)
    }

    /// The format information of each level with mask 0, and the version information of 7 and 40, from the
    /// standard's tables.
    @Test func formatAndVersionBits() {
        #expect(ModuleGrid.formatBits(correction: .low, mask: 0) == 0b111_0111_1100_0100)
        #expect(ModuleGrid.formatBits(correction: .medium, mask: 0) == 0b101_0100_0001_0010)
        #expect(ModuleGrid.formatBits(correction: .quartile, mask: 0) == 0b011_0101_0101_1111)
        #expect(ModuleGrid.formatBits(correction: .high, mask: 0) == 0b001_0110_1000_1001)
        #expect(ModuleGrid.formatBits(correction: .high, mask: 7) == 0b000_1000_0011_1011)
        #expect(ModuleGrid.versionBits(version: 7) == 0b00_0111_1100_1001_0100)
        #expect(ModuleGrid.versionBits(version: 40) == 0b10_1000_1100_0110_1001)
    }

    @Test func alignmentPatternCentres() {
        #expect(ModuleGrid.alignmentCentres(version: 1) == [])
        #expect(ModuleGrid.alignmentCentres(version: 2) == [6, 18])
        #expect(ModuleGrid.alignmentCentres(version: 7) == [6, 22, 38])
        #expect(ModuleGrid.alignmentCentres(version: 14) == [6, 26, 46, 66])
        #expect(ModuleGrid.alignmentCentres(version: 32) == [6, 34, 60, 86, 112, 138])
        #expect(ModuleGrid.alignmentCentres(version: 40) == [6, 30, 58, 86, 114, 142, 170])
    }

    @Test func penaltyRules() {
        // All light, 21 × 21: 42 runs of 21 (19 each), 400 2×2 blocks (3 each), 0 % dark (10 × 10).
        #expect(MaskPattern.penalty(of: [Bool](repeating: false, count: 441), size: 21) == 42 * 19 + 400 * 3 + 100)
        // A checkerboard: no runs, no blocks, 221 of 441 dark.
        let checkerboard = (0..<441).map { ($0 / 21 + $0 % 21) % 2 == 0 }
        #expect(MaskPattern.penalty(of: checkerboard, size: 21) == 0)
        // An 11 × 11 grid: a finder-like first row over a checkerboard.
        var grid = [Bool](repeating: false, count: 121)
        for (x, dark) in [true, false, true, true, true, false, true, false, false, false, false].enumerated() {
            grid[x] = dark
        }
        for y in 1..<11 {
            for x in 0..<11 { grid[y * 11 + x] = (x + y) % 2 == 0 }
        }
        // Only rule 3 scores, once (40): the first row's light run is 4, under rule 1's 5; every 2×2 block and column
        // meets the checkerboard; 5 + 55 of 121 modules are dark, within 5 % of half.
        #expect(MaskPattern.penalty(of: grid, size: 11) == 40)
    }

    @Test func versionGrowsWithLengthAndHonoursTheMinimum() throws {
        #expect(try QRCode(encoding: "https://pay.example.com/p/0123456789").version == 3)
        #expect(try QRCode(encoding: "https://pay.example.com/p/0123456789", correction: .low).version == 3)
        #expect(try QRCode(encoding: "https://pay.example.com/p/0123456789", correction: .quartile).version == 4)
        #expect(try QRCode(encoding: "https://pay.example.com/p/0123456789", correction: .high).version == 5)
        #expect(try QRCode(encoding: "x", minimumVersion: 12).version == 12)
        #expect(try QRCode(encoding: "x", minimumVersion: 12).size == 65)
        // The largest version 1-L byte symbol holds 17 bytes; the 18th needs version 2.
        #expect(try QRCode(encoding: String(repeating: "a", count: 17), correction: .low).version == 1)
        #expect(try QRCode(encoding: String(repeating: "a", count: 18), correction: .low).version == 2)
    }

    /// The capacities of version 40 that the initializer's documentation gives, and the error past them.
    @Test func dataTooLongPastVersion40() throws {
        #expect(try QRCode(encoding: String(repeating: "a", count: 2331)).version == 40)
        #expect(try QRCode(encoding: String(repeating: "A", count: 3391)).version == 40)
        #expect(try QRCode(encoding: String(repeating: "7", count: 5596)).version == 40)
        #expect(try QRCode(encoding: String(repeating: "a", count: 2953), correction: .low).version == 40)
        #expect(throws: QRCodeError.dataTooLong(bits: 4 + 16 + 2332 * 8, capacity: 2334 * 8)) {
            try QRCode(encoding: String(repeating: "a", count: 2332))
        }
        #expect(throws: QRCodeError.dataTooLong(bits: 4 + 16 + 1166 * 2 * 8, capacity: 2334 * 8)) {
            try QRCode(encoding: String(repeating: "é", count: 1166))
        }
        #expect(throws: QRCodeError.self) { try QRCode(encoding: String(repeating: "A", count: 3392)) }
        #expect(throws: QRCodeError.self) { try QRCode(encoding: String(repeating: "7", count: 5597)) }
        #expect(throws: QRCodeError.self) {
            try QRCode(encoding: String(repeating: "a", count: 1274), correction: .high)
        }
    }

    @Test func argumentsOutOfRange() {
        #expect(throws: QRCodeError.versionOutOfRange(0)) { try QRCode(encoding: "x", minimumVersion: 0) }
        #expect(throws: QRCodeError.versionOutOfRange(41)) { try QRCode(encoding: "x", minimumVersion: 41) }
        #expect(throws: QRCodeError.maskOutOfRange(8)) { try QRCode(encoding: "x", mask: 8) }
        #expect(throws: QRCodeError.maskOutOfRange(-1)) { try QRCode(encoding: "x", mask: -1) }
    }

    @Test func deterministic() throws {
        let text = "https://pay.example.com/p/0123456789"
        let first = try QRCode(encoding: text)
        let second = try QRCode(encoding: text)
        #expect(first == second)
        #expect(first.svg() == second.svg())
        #expect(try QRCode(encoding: text, correction: .high) != first)
    }

    /// The fixed patterns every reader looks for: the finders, their separators, the timing patterns and the dark
    /// module, in every version.
    @Test(arguments: 1...40)
    func functionPatterns(_ version: Int) throws {
        let code = try QRCode(encoding: "gotchu", minimumVersion: version)
        let size = code.size
        #expect(size == version * 4 + 17)
        for (left, top) in [(0, 0), (size - 7, 0), (0, size - 7)] {
            for dy in 0..<7 {
                for dx in 0..<7 {
                    let ring = max(abs(dx - 3), abs(dy - 3))
                    #expect(code[left + dx, top + dy] == (ring != 2), "finder at (\(left), \(top))")
                }
            }
        }
        for index in 0..<8 {
            #expect(!code[7, index] && !code[index, 7] && !code[size - 8, index] && !code[7, size - 1 - index])
        }
        for index in 8..<(size - 8) {
            #expect(code[index, 6] == (index % 2 == 0) && code[6, index] == (index % 2 == 0))
        }
        #expect(code[8, size - 8])
    }
}
