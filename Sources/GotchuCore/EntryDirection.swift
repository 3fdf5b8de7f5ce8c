/// Which side of a transfer a ledger entry records: money out of its wallet, or into it.
public enum EntryDirection: String, Codable, Hashable, Sendable {
    /// Money out of the wallet.
    case debit = "DEBIT"
    /// Money into the wallet.
    case credit = "CREDIT"
}
