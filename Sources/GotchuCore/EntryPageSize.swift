/// How many entries one page of a wallet's history holds (`GET /wallet/entries`).
public enum EntryPageSize {
    /// Without `limit`.
    public static let `default` = 50
    /// The most a page holds.
    public static let maximum = 500
}
