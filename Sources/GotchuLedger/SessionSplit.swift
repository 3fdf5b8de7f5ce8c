public import GotchuCore

/// How a session's amount is split among its payers: into 1 to ``maximumShares`` equal shares, the cents that do not
/// divide evenly going one each to the first shares (1001 in 4: 251, 250, 250, 250). One share is a session with one
/// payer, as sessions always were.
public struct SessionSplit: Sendable, Hashable {
    /// The most shares a session may be split into.
    public static let maximumShares = 50

    /// The session's whole amount, in cents.
    public let amount: Cents
    /// How many shares it is split into.
    public let shares: Int

    /// A split of `amount` into `shares`; refused unless `shares` is 1 to ``maximumShares`` and every share gets at
    /// least a cent.
    public init(amount: Cents, shares: Int) throws(LedgerError) {
        guard (1...Self.maximumShares).contains(shares) else {
            throw LedgerError(
                .invalidShares,
                detail: "shares must be a whole number from 1 to \(Self.maximumShares), got \(shares)"
            )
        }
        guard amount >= Cents(shares) else {
            throw LedgerError(
                .invalidShares,
                detail: "\(amount) cents cannot be split into \(shares) shares of at least one cent"
            )
        }
        self.amount = amount
        self.shares = shares
    }

    /// The amount of share `number` (1 is the first), in cents.
    public func cents(ofShare number: Int) -> Cents {
        let (base, remainder) = amount.quotientAndRemainder(dividingBy: Cents(shares))
        return base + (Cents(number) <= remainder ? 1 : 0)
    }

    /// Every share's amount, the first share's first; they add up to ``amount``.
    public var allCents: [Cents] { (1...shares).map(cents(ofShare:)) }

    /// Refuses a tip that is negative or more than `paid`, the amount it is given on top of.
    public static func validate(tip: Cents, paid: Cents) throws(LedgerError) {
        guard tip >= 0 else { throw LedgerError(.invalidTip, detail: "a tip cannot be negative, got \(tip) cents") }
        guard tip <= paid else {
            throw LedgerError(
                .invalidTip,
                detail: "a tip may be at most the \(paid) cents paid with it, got \(tip) cents"
            )
        }
    }
}
