/// A symbol being drawn: the colour of each module, and which modules belong to function patterns (finder,
/// separator, timing and alignment patterns, the format and version information) rather than to the codewords.
///
/// `x` is the column and `y` the row, both from the top left.
struct ModuleGrid {
    /// The symbol's version.
    let version: Int
    /// The modules on a side.
    let size: Int
    /// Row by row, `true` for dark.
    var dark: [Bool]
    /// Row by row, `true` for a module of a function pattern, which the codewords and the mask leave alone.
    private(set) var isFunction: [Bool]

    /// A symbol of `version` with its function patterns drawn and its format information reserved (drawn for mask
    /// 0 at level M until ``masked(_:correction:)`` draws the real one).
    init(version: Int) {
        self.version = version
        size = QRCode.size(ofVersion: version)
        dark = [Bool](repeating: false, count: size * size)
        isFunction = [Bool](repeating: false, count: size * size)
        drawFunctionPatterns()
    }

    subscript(x: Int, y: Int) -> Bool {
        get { dark[y * size + x] }
        set { dark[y * size + x] = newValue }
    }

    private mutating func setFunction(_ x: Int, _ y: Int, _ isDark: Bool) {
        dark[y * size + x] = isDark
        isFunction[y * size + x] = true
    }

    private mutating func drawFunctionPatterns() {
        // Timing patterns: row 6 and column 6 alternate, dark on even indices.
        for index in 0..<size {
            setFunction(6, index, index % 2 == 0)
            setFunction(index, 6, index % 2 == 0)
        }
        // Finder patterns in three corners, each with its light separator.
        drawFinder(centreX: 3, centreY: 3)
        drawFinder(centreX: size - 4, centreY: 3)
        drawFinder(centreX: 3, centreY: size - 4)
        // Alignment patterns at every pair of centres but the three that fall on the finders.
        let centres = Self.alignmentCentres(version: version)
        let last = centres.count - 1
        for (row, y) in centres.enumerated() {
            for (column, x) in centres.enumerated() {
                let onFinder = (row == 0 && column == 0) || (row == 0 && column == last) || (row == last && column == 0)
                if !onFinder { drawAlignment(centreX: x, centreY: y) }
            }
        }
        drawFormatBits(correction: .medium, mask: 0)
        drawVersionBits()
    }

    /// A 7×7 finder pattern (dark ring, light ring, 3×3 dark centre) and the light separator around it, clipped to
    /// the symbol.
    private mutating func drawFinder(centreX: Int, centreY: Int) {
        for dy in -4...4 {
            for dx in -4...4 {
                let x = centreX + dx
                let y = centreY + dy
                guard x >= 0, x < size, y >= 0, y < size else { continue }
                let distance = max(abs(dx), abs(dy))
                setFunction(x, y, distance != 2 && distance != 4)
            }
        }
    }

    /// A 5×5 alignment pattern: dark ring, light ring, dark centre.
    private mutating func drawAlignment(centreX: Int, centreY: Int) {
        for dy in -2...2 {
            for dx in -2...2 { setFunction(centreX + dx, centreY + dy, max(abs(dx), abs(dy)) != 1) }
        }
    }

    /// Draws the 15 format bits, the level and `mask` protected by a BCH(15, 5) code and XORed with 0x5412, in both
    /// copies, and the dark module beside the lower left finder.
    private mutating func drawFormatBits(correction: QRCode.ErrorCorrection, mask: Int) {
        let bits = Self.formatBits(correction: correction, mask: mask)
        func bit(_ index: Int) -> Bool { (bits >> index) & 1 == 1 }
        // Around the top left finder: down column 8, then left along row 8, skipping the timing patterns.
        for index in 0...5 { setFunction(8, index, bit(index)) }
        setFunction(8, 7, bit(6))
        setFunction(8, 8, bit(7))
        setFunction(7, 8, bit(8))
        for index in 9..<15 { setFunction(14 - index, 8, bit(index)) }
        // Beside the other two finders.
        for index in 0..<8 { setFunction(size - 1 - index, 8, bit(index)) }
        for index in 8..<15 { setFunction(8, size - 15 + index, bit(index)) }
        setFunction(8, size - 8, true)
    }

    /// From version 7 on, the 18 version bits (the version protected by a BCH(18, 6) code) in the 6×3 blocks beside
    /// the upper right and lower left finders.
    private mutating func drawVersionBits() {
        guard version >= 7 else { return }
        let bits = Self.versionBits(version: version)
        for index in 0..<18 {
            let isDark = (bits >> index) & 1 == 1
            let along = size - 11 + index % 3
            let across = index / 3
            setFunction(along, across, isDark)
            setFunction(across, along, isDark)
        }
    }

    /// Places the codewords' bits, most significant first, in the modules that no function pattern takes: in pairs
    /// of columns from the right, up the first pair, down the next, and so on, each pair right column first, stepping
    /// over the vertical timing pattern. The remainder modules left over stay light.
    mutating func placeCodewords(_ codewords: [UInt8]) {
        let bitCount = codewords.count * 8
        var index = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            let upward = (right + 1) & 2 == 0
            for step in 0..<size {
                let y = upward ? size - 1 - step : step
                for x in stride(from: right, through: right - 1, by: -1)
                where !isFunction[y * size + x] && index < bitCount {
                    self[x, y] = (codewords[index >> 3] >> (7 - UInt8(index & 7))) & 1 == 1
                    index += 1
                }
            }
            right -= 2
        }
        precondition(index == bitCount, "the codewords do not fill the symbol's data modules")
    }

    /// A copy with mask pattern `mask` XORed onto every module outside the function patterns, and the format
    /// information for `correction` and `mask` drawn.
    func masked(_ mask: Int, correction: QRCode.ErrorCorrection) -> ModuleGrid {
        var result = self
        for y in 0..<size {
            for x in 0..<size where !isFunction[y * size + x] && MaskPattern.isDark(mask, x: x, y: y) {
                result.dark[y * size + x].toggle()
            }
        }
        result.drawFormatBits(correction: correction, mask: mask)
        return result
    }

    /// The symbol under the mask whose penalty, format information included, is the lowest (the lowest numbered of
    /// equals), and that mask.
    func bestMasked(correction: QRCode.ErrorCorrection) -> (grid: ModuleGrid, mask: Int) {
        var best = (grid: masked(0, correction: correction), mask: 0)
        var lowest = MaskPattern.penalty(of: best.grid.dark, size: size)
        for mask in 1..<8 {
            let candidate = masked(mask, correction: correction)
            let penalty = MaskPattern.penalty(of: candidate.dark, size: size)
            if penalty < lowest {
                lowest = penalty
                best = (candidate, mask)
            }
        }
        return best
    }

    /// The format information: the level's two bits and the mask's three, ten BCH bits, XORed with 0x5412.
    static func formatBits(correction: QRCode.ErrorCorrection, mask: Int) -> Int {
        let data = correction.formatBits << 3 | mask
        var remainder = data
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        return (data << 10 | remainder) ^ 0x5412
    }

    /// The version information: six bits of version, twelve BCH bits (generator 0x1F25).
    static func versionBits(version: Int) -> Int {
        var remainder = version
        for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
        return version << 12 | remainder
    }

    /// The row and column coordinates of the alignment patterns' centres, ascending: none in version 1, then from
    /// 6 to `size - 7` in equal even steps, the first step taking up what is left over.
    static func alignmentCentres(version: Int) -> [Int] {
        guard version >= 2 else { return [] }
        let count = version / 7 + 2
        let step = (version * 8 + count * 3 + 5) / (count * 4 - 4) * 2
        let last = QRCode.size(ofVersion: version) - 7
        return [6] + (0..<count - 1).reversed().map { last - $0 * step }
    }
}
