/// How a session's amount is shared among payers, as the ledger resolves it: equal shares, the cents that do not
/// divide evenly going to the first shares (1001 in 4 is 251, 250, 250, 250).
public struct SessionShares: Hashable, Sendable {
    /// Into how many shares the amount is split (1: one payer pays it whole).
    public var count: Int
    /// How many shares are paid.
    public var paid: Int
    /// What the next payer pays for one share: the first share free to lock.
    public var nextShareCents: Cents
    /// What is left to pay: the amount less the shares paid.
    public var remainingCents: Cents

    /// A split into `count` shares of which `paid` are paid, the next free one costing `nextShareCents` and
    /// `remainingCents` left to pay, as the ledger resolved it.
    public init(count: Int, paid: Int, nextShareCents: Cents, remainingCents: Cents) {
        self.count = count
        self.paid = paid
        self.nextShareCents = nextShareCents
        self.remainingCents = remainingCents
    }

    /// Whether the amount is shared by more than one payer.
    public var isSplit: Bool { count > 1 }

    /// The shares' amounts of `amountCents` split `count` ways, the first share's first: equal, the remainder
    /// cents one each to the first shares. Empty when `count` is not positive.
    public static func amounts(of amountCents: Cents, count: Int) -> [Cents] {
        guard count > 0 else { return [] }
        let (base, remainder) = amountCents.quotientAndRemainder(dividingBy: Cents(count))
        return (0..<count).map { base + (Cents($0) < remainder ? 1 : 0) }
    }

    /// What `shares` shares cost of a session of `amountCents`, taken from the next free one on, as the ledger
    /// reserves them: the shares after the paid ones, starting at the first that costs ``nextShareCents``. The
    /// lock's answer is the ledger's word; this is what the payer is asked to confirm before it.
    public func cents(ofShares shares: Int, amountCents: Cents) -> Cents {
        let amounts = Self.amounts(of: amountCents, count: count)
        guard !amounts.isEmpty, shares > 0 else { return 0 }
        let unpaid = min(max(paid, 0), amounts.count - 1)
        let first = amounts[unpaid...].firstIndex(of: nextShareCents) ?? unpaid
        let taken = amounts[first...].prefix(shares)
        // Beyond the last share (more asked than are left), each further one counts as the next share: the ledger
        // refuses such a lock anyway.
        return taken.reduce(0, +) + Cents(shares - taken.count) * nextShareCents
    }
}
