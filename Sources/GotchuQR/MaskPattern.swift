/// The eight data mask patterns and the penalty by which one is chosen (ISO/IEC 18004, 7.8).
enum MaskPattern {
    /// Whether mask `mask` flips the module in column `x` and row `y`.
    static func isDark(_ mask: Int, x: Int, y: Int) -> Bool {
        switch mask {
        case 0: return (x + y) % 2 == 0
        case 1: return y % 2 == 0
        case 2: return x % 3 == 0
        case 3: return (x + y) % 3 == 0
        case 4: return (x / 3 + y / 2) % 2 == 0
        case 5: return x * y % 2 + x * y % 3 == 0
        case 6: return (x * y % 2 + x * y % 3) % 2 == 0
        case 7: return ((x + y) % 2 + x * y % 3) % 2 == 0
        default: preconditionFailure("mask \(mask) is not in 0–7")
        }
    }

    /// The penalty of a symbol, row by row `modules` on a side: the lower, the easier to read.
    ///
    /// - Rule 1: 3 + (n − 5) for each run of n ≥ 5 modules of one colour in a row or a column.
    /// - Rule 2: 3 for each 2×2 block of one colour (blocks may overlap).
    /// - Rule 3: 40 for each 1:1:3:1:1 finder-like pattern with four light modules on one side (`10111010000` or
    ///   `00001011101`) in a row or a column, within the symbol.
    /// - Rule 4: 10 for each full 5 % by which the share of dark modules is away from 50 %.
    static func penalty(of modules: [Bool], size: Int) -> Int {
        modules.withUnsafeBufferPointer { modules in
            var total = 0
            for index in 0..<size {
                total += linePenalty(modules, start: index * size, step: 1, count: size)  // row `index`
                total += linePenalty(modules, start: index, step: size, count: size)  // column `index`
            }
            for y in 0..<size - 1 {
                for x in 0..<size - 1 {
                    let colour = modules[y * size + x]
                    if modules[y * size + x + 1] == colour && modules[(y + 1) * size + x] == colour
                        && modules[(y + 1) * size + x + 1] == colour
                    {
                        total += 3
                    }
                }
            }
            var darkCount = 0
            for module in modules where module { darkCount += 1 }
            let cells = size * size
            total += abs(darkCount * 20 - cells * 10) / cells * 10
            return total
        }
    }

    /// Rules 1 and 3 along the `count` modules from `start`, `step` apart: a row or a column.
    private static func linePenalty(_ modules: UnsafeBufferPointer<Bool>, start: Int, step: Int, count: Int) -> Int {
        var total = 0
        var run = 0
        var previous = false
        // The last eleven modules, the latest in the lowest bit, and the two patterns of rule 3 in that form.
        var window: UInt16 = 0
        let finderLike: UInt16 = 0b101_1101_0000
        let finderLikeReversed: UInt16 = 0b000_0101_1101
        for offset in 0..<count {
            let dark = modules[start + offset * step]
            if offset > 0 && dark == previous {
                run += 1
            } else {
                if run >= 5 { total += run - 2 }
                run = 1
                previous = dark
            }
            window = (window << 1 | (dark ? 1 : 0)) & 0x7FF
            if offset >= 10 && (window == finderLike || window == finderLikeReversed) { total += 40 }
        }
        if run >= 5 { total += run - 2 }
        return total
    }
}
