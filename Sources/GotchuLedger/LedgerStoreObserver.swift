/// Told how long each of a store's transactions took, so the edge above can keep metrics without the store knowing
/// of HTTP or of a metrics library.
public protocol LedgerStoreObserver: Sendable {
    /// One transaction ended.
    /// - Parameters:
    ///   - operation: the engine's operation that ran it (`login`, `send`, …): a name from a small fixed set.
    ///   - duration: from asking for the transaction (waits for the database included) to its commit or rollback.
    ///   - committed: `false` when it rolled back (the operation threw: a refusal, or a database error).
    func transaction(operation: String, duration: Duration, committed: Bool)
}

/// How a store's connections are used now.
public struct LedgerPoolUsage: Sendable, Hashable {
    /// Connections (SQLite: the one writer) held by a transaction or statement now.
    public var inUse: Int
    /// Requests waiting for a connection (SQLite: transactions waiting their turn at the writer).
    public var waiting: Int
    /// Connections open and idle, where the database has a pool; `nil` where it has not or does not say.
    public var idle: Int?
    /// The most connections in use at once.
    public var maximum: Int
    /// Write transactions committed or rolled back since the store opened, where the store commits several in one
    /// (SQLite's group commit); `nil` elsewhere.
    public var transactions: Int?
    /// Commits made since the store opened, where the store commits several transactions in one; with
    /// ``transactions``, how many transactions a commit carries. `nil` elsewhere.
    public var commits: Int?

    /// Creates a reading.
    public init(
        inUse: Int,
        waiting: Int,
        idle: Int? = nil,
        maximum: Int,
        transactions: Int? = nil,
        commits: Int? = nil
    ) {
        self.inUse = inUse
        self.waiting = waiting
        self.idle = idle
        self.maximum = maximum
        self.transactions = transactions
        self.commits = commits
    }
}
