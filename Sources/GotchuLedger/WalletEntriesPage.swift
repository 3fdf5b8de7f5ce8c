/// One page of a wallet's history, newest first, and where the next (older) page starts.
public struct WalletEntriesPage: Sendable, Hashable {
    /// The page's entries, newest first, each with its counterparty.
    public var entries: [WalletEntry]
    /// The token of the cursor (``EntryCursor/token``) that asks for the next, older page; `nil` on the last page.
    public var nextCursor: String?

    /// A page of `entries`, newest first, followed by the page at `nextCursor`, if any.
    public init(entries: [WalletEntry], nextCursor: String?) {
        self.entries = entries
        self.nextCursor = nextCursor
    }
}
