/// A whole number of cents, the only unit money is counted in.
public typealias Cents = Int64

/// Parsing and printing of decimal money amounts, exactly: no floating point is ever involved.
public enum Money {
    /// Why an amount text was refused.
    public enum ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        /// The text is empty or only whitespace.
        case empty
        /// The text starts with a minus sign.
        case negative
        /// The text (given) is not digits with at most one dot: a sign, an exponent, grouping or letters.
        case notADecimal(String)
        /// The text (given) has more than two decimals, finer than a cent.
        case tooManyDecimals(String)
        /// The amount is zero; the smallest is 0.01.
        case zero
        /// The text (given) is more cents than `Int64` holds.
        case tooLarge(String)

        public var description: String {
            switch self {
            case .empty: return "the amount is empty; write it like 12.50"
            case .negative: return "the amount must be positive"
            case .notADecimal(let text): return "'\(text)' is not an amount; write it like 12.50 (digits and one dot)"
            case .tooManyDecimals(let text): return "'\(text)' has more than two decimals; amounts are in whole cents"
            case .zero: return "the amount must be at least 0.01"
            case .tooLarge(let text): return "'\(text)' is too large"
            }
        }
    }

    /// Parses `"12.5"`, `"12.50"`, `"0.01"` or `"12"` into cents. Signs, exponents, grouping, more than two
    /// decimals, zero and values beyond `Int64` are refused with a reason.
    public static func parse(_ text: String) throws(ParseError) -> Cents {
        var trimmed = Substring(text)
        while trimmed.first?.isWhitespace == true { trimmed.removeFirst() }
        while trimmed.last?.isWhitespace == true { trimmed.removeLast() }
        guard !trimmed.isEmpty else { throw .empty }
        if trimmed.hasPrefix("-") { throw .negative }
        let parts = trimmed.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (48...57).contains($0) } })
        else { throw .notADecimal(text) }
        let fraction = parts.count == 2 ? parts[1] : ""
        guard fraction.count <= 2 else { throw .tooManyDecimals(text) }
        var cents: Cents = 0
        for digit in (parts[0] + fraction + String(repeating: "0", count: 2 - fraction.count)).utf8 {
            let (shifted, overflowA) = cents.multipliedReportingOverflow(by: 10)
            let (next, overflowB) = shifted.addingReportingOverflow(Cents(digit - 48))
            guard !overflowA, !overflowB else { throw .tooLarge(text) }
            cents = next
        }
        guard cents > 0 else { throw .zero }
        return cents
    }

    /// Formats cents as dollars with two decimals: `1250` → `"$12.50"`, `-5` → `"-$0.05"`.
    public static func format(_ cents: Cents, currencySymbol: String = "$") -> String {
        let magnitude = cents.magnitude
        let fraction = magnitude % 100
        return (cents < 0 ? "-" : "") + currencySymbol + "\(magnitude / 100)." + (fraction < 10 ? "0" : "")
            + "\(fraction)"
    }
}
