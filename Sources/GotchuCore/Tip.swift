/// A tip a payer adds on top of what it pays: a fixed amount, or a percentage of the amount paid. Parsed and
/// computed exactly, in whole cents: no floating point is ever involved.
public enum Tip: Hashable, Sendable, CustomStringConvertible {
    /// A fixed amount, in cents (0 is no tip).
    case cents(Cents)
    /// A percentage of the amount paid, in hundredths of a percent: 1500 is 15%, 1250 is 12.5%; at most 10000.
    case percent(hundredths: Int64)

    /// Why a tip text was refused.
    public enum ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        /// The text is empty or only whitespace.
        case empty
        /// The text starts with a minus sign.
        case negative
        /// The text (given) is neither an amount such as 2.00 nor a percentage such as 15%.
        case notATip(String)
        /// The text (given) has more than two decimals.
        case tooManyDecimals(String)
        /// The percentage (given) is above 100: a tip is at most the amount paid.
        case percentTooLarge(String)
        /// The amount (given) is more cents than `Int64` holds.
        case tooLarge(String)

        public var description: String {
            switch self {
            case .empty: return "the tip is empty; write it like 2.00 (dollars and cents) or 15% (of the amount paid)"
            case .negative: return "a tip cannot be negative"
            case .notATip(let text):
                return "'\(text)' is not a tip; write it like 2.00 (dollars and cents) or 15% (of the amount paid)"
            case .tooManyDecimals(let text):
                return "'\(text)' has more than two decimals; tips are in whole cents or hundredths of a percent"
            case .percentTooLarge(let text): return "'\(text)' is more than 100%; a tip is at most the amount paid"
            case .tooLarge(let text): return "'\(text)' is too large"
            }
        }
    }

    /// Parses `"2.00"`, `"2"` or `"0.50"` (dollars and cents, as ``Money/parse(_:)`` reads them) and `"15%"` or
    /// `"12.5%"` (of the amount paid, up to 100% with at most two decimals). `"0"` and `"0%"` are no tip. Signs,
    /// exponents, grouping, a currency symbol and more than two decimals are refused with a reason.
    public static func parse(_ text: String) throws(ParseError) -> Tip {
        var trimmed = Substring(text)
        while trimmed.first?.isWhitespace == true { trimmed.removeFirst() }
        while trimmed.last?.isWhitespace == true { trimmed.removeLast() }
        guard !trimmed.isEmpty else { throw .empty }
        if trimmed.hasPrefix("-") { throw .negative }
        guard trimmed.hasSuffix("%") else {
            do throws(Money.ParseError) {
                return .cents(try Money.parse(String(trimmed)))
            } catch {
                switch error {
                case .zero: return .cents(0)
                case .empty, .notADecimal: throw .notATip(text)
                case .negative: throw .negative
                case .tooManyDecimals: throw .tooManyDecimals(text)
                case .tooLarge: throw .tooLarge(text)
                }
            }
        }
        let number = trimmed.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (48...57).contains($0) } })
        else { throw .notATip(text) }
        let fraction = parts.count == 2 ? parts[1] : ""
        guard fraction.count <= 2 else { throw .tooManyDecimals(text) }
        var hundredths: Int64 = 0
        for digit in (parts[0] + fraction + String(repeating: "0", count: 2 - fraction.count)).utf8 {
            hundredths = hundredths * 10 + Int64(digit - 48)
            // Checked at every digit, so a long run of digits cannot overflow before it is refused.
            guard hundredths <= 10_000 else { throw .percentTooLarge(text) }
        }
        return .percent(hundredths: hundredths)
    }

    /// The tip in cents on `amountCents` paid: the fixed amount, or the percentage rounded to the nearest cent,
    /// half a cent up (15% of $0.10 is $0.02).
    public func cents(on amountCents: Cents) -> Cents {
        switch self {
        case .cents(let cents): return cents
        case .percent(let hundredths):
            // amount × p / 10000 split as (q × 10000 + r) × p / 10000 = q × p + r × p / 10000: nothing overflows,
            // since p is at most 10000, and only the remainder's part is rounded.
            let amount = max(amountCents, 0)
            let (quotient, remainder) = amount.quotientAndRemainder(dividingBy: 10_000)
            return quotient * hundredths + (remainder * hundredths + 5_000) / 10_000
        }
    }

    /// Whether the tip is none at all: 0, or 0%.
    public var isZero: Bool {
        switch self {
        case .cents(let cents): return cents == 0
        case .percent(let hundredths): return hundredths == 0
        }
    }

    /// `$2.00` or `15%` (`12.5%`, `0.25%`), as it is typed.
    public var description: String {
        switch self {
        case .cents(let cents): return Money.format(cents)
        case .percent(let hundredths):
            let whole = hundredths / 100
            let fraction = hundredths % 100
            guard fraction != 0 else { return "\(whole)%" }
            let digits = fraction < 10 ? "0\(fraction)" : (fraction % 10 == 0 ? "\(fraction / 10)" : "\(fraction)")
            return "\(whole).\(digits)%"
        }
    }
}
