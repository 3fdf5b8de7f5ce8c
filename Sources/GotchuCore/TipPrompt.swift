/// The tips a terminal suggests to its payers, in whole percents of what each payer pays (its share of a split): 1 to
/// ``maximumChoices`` different percents from 1 to 100, in the terminal's order, such as 10, 15 and 20. ``none`` is a
/// terminal that asks for no tip. A suggestion only: a payer may tip anything the ledger allows, or nothing.
public struct TipPrompt: Hashable, Sendable, CustomStringConvertible {
    /// The most tips a terminal may suggest.
    public static let maximumChoices = 5
    /// The percents a suggested tip may be.
    public static let allowedPercents: ClosedRange<Int> = 1...100
    /// A terminal that asks for no tip.
    public static let none = TipPrompt(checked: [])

    /// The percents suggested, in the terminal's order; empty when it asks for no tip.
    public let percents: [Int]

    /// Why a list of percents was refused, for a person.
    public struct Invalid: Error, Hashable, Sendable, CustomStringConvertible {
        /// What is wrong, such as `each tip must be a whole percent from 1 to 100, got 0`.
        public var description: String
    }

    /// The suggestion of `percents` (an empty list is ``none``), or why it is refused: more than ``maximumChoices``,
    /// a percent outside ``allowedPercents``, or one listed twice.
    public init(percents: [Int]) throws(Invalid) {
        guard percents.count <= Self.maximumChoices else {
            throw Invalid(description: "at most \(Self.maximumChoices) tips may be suggested, got \(percents.count)")
        }
        var seen: Set<Int> = []
        for percent in percents {
            guard Self.allowedPercents.contains(percent) else {
                throw Invalid(description: "each tip must be a whole percent from 1 to 100, got \(percent)")
            }
            guard seen.insert(percent).inserted else { throw Invalid(description: "\(percent)% is listed twice") }
        }
        self.percents = percents
    }

    private init(checked percents: [Int]) { self.percents = percents }

    /// Reads a list such as `10,15,20` (whole percents; blanks around each are ignored, a `%` after each allowed);
    /// an empty text is ``none``. Anything else (`10.5`, `-5`, `ten`, `10,,15`) is refused with a reason.
    public static func parse(_ text: String) throws(Invalid) -> TipPrompt {
        let trimmed = text.trimmingWhitespace
        guard !trimmed.isEmpty else { return .none }
        var percents: [Int] = []
        for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            var digits = Substring(part.trimmingWhitespace)
            if digits.hasSuffix("%") { digits.removeLast() }
            guard (1...3).contains(digits.utf8.count), digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let percent = Int(digits)
            else {
                throw Invalid(
                    description: "'\(part.trimmingWhitespace)' is not a whole percent; list tips like 10,15,20"
                )
            }
            percents.append(percent)
        }
        return try TipPrompt(percents: percents)
    }

    /// Whether the terminal asks for no tip.
    public var isEmpty: Bool { percents.isEmpty }

    /// Each suggested tip, as a payer would type it.
    public var tips: [Tip] { percents.map { Tip.percent(hundredths: Int64($0) * 100) } }

    /// `10,15,20`, as ``parse(_:)`` reads it; empty for ``none``.
    public var description: String { percents.map(String.init).joined(separator: ",") }
}

extension StringProtocol {
    fileprivate var trimmingWhitespace: String {
        var text = Substring(self)
        while text.first?.isWhitespace == true { text.removeFirst() }
        while text.last?.isWhitespace == true { text.removeLast() }
        return String(text)
    }
}
