public import GotchuCore

/// A user's wallet: its balance and its latest entries, newest first, read together.
public struct Wallet: Sendable, Hashable {
    /// The wallet's id.
    public var id: String
    /// The balance, in cents.
    public var balance: Cents
    /// The latest entries, newest first, without their counterparties.
    public var recent: [WalletEntry]

    /// A wallet as read from the database.
    public init(id: String, balance: Cents, recent: [WalletEntry]) {
        self.id = id
        self.balance = balance
        self.recent = recent
    }
}
