package import Foundation
import GRDB
package import GotchuCore
package import GotchuLedger
package import GotchuReceipts

/// The embedded ledger store: the ``LedgerEngine`` over one SQLite file.
package typealias SQLiteLedgerStore = LedgerEngine<SQLiteLedgerBackend>

extension LedgerEngine where Backend == SQLiteLedgerBackend {
    /// Opens (or creates) the database at `path`.
    /// - Parameters:
    ///   - clock: the store's clock; expiry and lock lapses are judged by it inside each transaction.
    ///   - busyTimeout: how long a transaction waits for another connection's write lock on the file (another
    ///     process's, such as `gotchu admin` beside the server) before it fails with "database is locked".
    package init(
        path: String,
        policy: LedgerPolicy = LedgerPolicy(),
        clock: @escaping @Sendable () -> Date = Date.init,
        busyTimeout: Duration = .seconds(10)
    ) throws {
        self.init(
            backend: try SQLiteLedgerBackend(path: path, clock: clock, busyTimeout: busyTimeout),
            policy: policy
        )
    }
}

/// One SQLite file in WAL mode through GRDB, as a ``LedgerBackend``.
///
/// Every transaction is `IMMEDIATE`, so SQLite's single writer lock serializes them even across processes sharing
/// the file (with a busy timeout); within this process the ``SQLiteWriter`` runs one transaction at a time on the
/// writer connection, across the awaits between its statements, and commits concurrent ones in groups, each in a
/// savepoint of its own, with `synchronous=FULL`. One writer makes row locks and the allocation locks moot
/// here; the wallets are still touched in id order so the statements match the PostgreSQL backend's. The file is
/// one process's, so a key committed in flight that is still there at start is released.
package final class SQLiteLedgerBackend: LedgerBackend {
    let database: DatabasePool
    let clock: @Sendable () -> Date
    let writer: SQLiteWriter
    let lookupReaders: SQLiteLookupReaders

    /// Opens (or creates) the database at `path`, with `clock` as the store's clock, waiting at most `busyTimeout`
    /// for another connection's write lock.
    package init(path: String, clock: @escaping @Sendable () -> Date, busyTimeout: Duration = .seconds(10)) throws {
        // The ledger is private: create the file owner-only; SQLite gives its -wal and -shm files the same mode.
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout.seconds)
        configuration.foreignKeysEnabled = true
        configuration.label = "gotchu-ledger"
        // A batch of transactions spans several accesses to the writer (awaited in between); the writer's gate
        // keeps any other access of this process off the connection meanwhile.
        configuration.allowsUnsafeTransactions = true
        // Each write request runs in a savepoint, whose undo pages SQLite keeps in a sub-journal: a temporary file
        // by default, written (and created) on the writer's serial path. In memory they cost no syscalls; a crash
        // loses nothing by it, since the WAL alone carries what committed.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA temp_store = MEMORY") }
        self.database = try DatabasePool(path: path, configuration: configuration)
        // GRDB leaves a pool's writer at `synchronous=NORMAL`, where a commit in WAL mode is not yet on disk (a power
        // cut may undo it). A payment answered is a payment kept: every commit waits for its fsync.
        try database.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        self.writer = SQLiteWriter(database: database)
        self.lookupReaders = SQLiteLookupReaders(
            path: path,
            configuration: configuration,
            limit: configuration.maximumReaderCount
        )
        self.clock = clock
    }

    /// Write transactions run and commits made since the store opened: under load, several transactions share a
    /// commit. Operators read them in the metrics (``poolUsage()``); this is for the benchmarks and the tests.
    package var groupCommitStatistics: (transactions: Int, commits: Int) { writer.statistics }

    package func migrate() async throws {
        try await writer.exclusively {
            try SQLiteLedgerSchema.migrator.migrate(database)
            // A payment commits its key with its outcome, but a key committed in flight (by an earlier version, which
            // paid in two transactions, or by ``LedgerEngine/beginSend(sid:payerID:idempotencyKey:)``) and still there
            // now belongs to a process that is gone: the file is one process's. Its payment provably did not happen
            // (the transfer commits with the outcome), so releasing it lets a retry pay at once instead of after the
            // in-flight timeout, by when the payer's lock has usually lapsed.
            try writer.sync { db in
                try db.execute(
                    sql: "DELETE FROM idempotency_keys WHERE state = ?",
                    arguments: [IdempotencyState.inFlight.rawValue]
                )
            }
        }
    }

    /// Runs `body` in a savepoint of the writer's current batch, and returns once the batch is committed
    /// (``SQLiteWriter``): concurrent transactions share one commit, and a refusal undoes only its own writes.
    package func transaction<T: Sendable>(_ body: (Transaction) async throws -> T) async throws -> T {
        do {
            return try await writer.transaction {
                try await body(Transaction(database: database, writer: writer, now: LedgerTime.milliseconds(clock())))
            }
        } catch let error as DatabaseError {
            throw Self.outage(error) ?? error
        }
    }

    /// The refusal for a database error that means the file cannot take writes now, or `nil` for any other.
    static func outage(_ error: DatabaseError) -> LedgerError? {
        switch error.resultCode {
        case .SQLITE_FULL:
            LedgerError(.storageFull, detail: "the disk holding the ledger is full; writes resume once space is freed")
        case .SQLITE_IOERR, .SQLITE_CANTOPEN, .SQLITE_READONLY:
            LedgerError(.databaseUnavailable, detail: "the ledger's file cannot be written (\(error.resultCode))")
        default:
            nil
        }
    }

    package func now() async throws -> Int64 { LedgerTime.milliseconds(clock()) }

    /// The writer as the one connection transactions take turns at: whether a transaction holds it, and how many
    /// wait for it; and the transactions it ran and the commits it made since the store opened.
    package func poolUsage() async -> LedgerPoolUsage? {
        let usage = writer.usage
        let statistics = writer.statistics
        return LedgerPoolUsage(
            inUse: usage.inUse ? 1 : 0,
            waiting: usage.waiting,
            maximum: 1,
            transactions: statistics.transactions,
            commits: statistics.commits
        )
    }

    /// Reads a row or a few by key, in one statement, on the calling thread. Such a lookup takes microseconds, less
    /// than the two thread hops of GRDB's asynchronous read (to a reader's queue and back), which cost a resolve more
    /// than its query; a reader in WAL mode never waits for the writer. It runs on one of ``SQLiteLookupReaders``, or,
    /// when all of those are busy, as an asynchronous read of the pool. Never a synchronous one: that blocks its
    /// thread while the pool's readers are taken, and readers held by reads that wait for a thread of the concurrency
    /// pool to resume are freed only when one is, so with every thread blocked the server stopped.
    func lookup<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        if let found = try lookupReaders.read(body) { return found }
        return try await database.read(body)
    }

    package func user(id: String) async throws -> LedgerUser? {
        try await lookup { db in try Self.user(.id, id, db) }
    }

    package func credentials(email: String) async throws -> UserCredentials? {
        try await lookup { db in
            try db.fetchOne(
                cached: """
                    SELECT id, display_name, disabled_at, password_hash, email_confirmed_at IS NOT NULL FROM users
                    WHERE email = ?
                    """,
                arguments: [email]
            ) {
                UserCredentials(
                    user: try LedgerUser($0),
                    passwordHash: try $0.optional(3),
                    confirmed: try $0(4) as Int64 != 0
                )
            }
        }
    }

    package func users() async throws -> [UserSummary] {
        try await database.read { db in
            try Row.fetchAll(
                cached: db,
                sql: """
                    SELECT id, email, display_name, verified_name, password_hash IS NOT NULL AS has_password,
                    disabled_at IS NOT NULL AS disabled, created_at FROM users ORDER BY created_at, id
                    """
            ).map { row in
                UserSummary(
                    id: row["id"],
                    email: row["email"],
                    displayName: row["display_name"],
                    verifiedName: row["verified_name"],
                    hasPassword: row["has_password"],
                    disabled: row["disabled"],
                    createdAt: row["created_at"]
                )
            }
        }
    }

    package func auditLog(limit: Int) async throws -> [AuditEntry] {
        try await database.read { db in
            try Row.fetchAll(
                cached: db,
                sql: "SELECT actor, action, subject, detail, created_at FROM admin_audit ORDER BY seq DESC LIMIT ?",
                arguments: [limit]
            ).map { row in
                AuditEntry(
                    actor: row["actor"],
                    action: row["action"],
                    subject: row["subject"],
                    detail: row["detail"],
                    at: row["created_at"]
                )
            }
        }
    }

    package func wallet(userID: String, recentLimit: Int) async throws -> Wallet? {
        try await database.read { db in
            guard let wallet = try Self.wallet(userID: userID, db) else { return nil }
            let entries = try Row.fetchAll(
                cached: db,
                sql: """
                    SELECT id, direction, amount_cents, type, ref_type, ref_id, created_at FROM ledger_entries
                    WHERE wallet_id = ? ORDER BY seq DESC LIMIT ?
                    """,
                arguments: [wallet.id, recentLimit]
            ).map { row in
                WalletEntry(
                    id: row["id"],
                    direction: EntryDirection(rawValue: row["direction"]) ?? .debit,
                    amount: row["amount_cents"],
                    type: row["type"],
                    refType: row["ref_type"],
                    refID: row["ref_id"],
                    createdAt: LedgerTime.date(row["created_at"])
                )
            }
            return Wallet(id: wallet.id, balance: wallet.balance, recent: entries)
        }
    }

    package func entries(userID: String, before: EntryCursor?, limit: Int) async throws -> EntryHistoryPage? {
        try await database.read { db in
            guard let wallet = try Self.wallet(userID: userID, db) else { return nil }
            if let before {
                let found = try Bool.fetchOne(
                    cached: db,
                    sql: "SELECT EXISTS (SELECT 1 FROM ledger_entries WHERE seq = ? AND id = ? AND wallet_id = ?)",
                    arguments: [before.seq, before.entryID, wallet.id]
                )
                guard found == true else { return EntryHistoryPage(entries: [], cursorFound: false) }
            }
            // The page by (wallet_id, seq); each entry's other side by (transfer_id), at most one row each; a session's
            // reference by its primary key.
            let rows = try Row.fetchAll(
                cached: db,
                sql: """
                    SELECT h.*, u.display_name, u.email, u.verified_name, ps.reference FROM (
                        SELECT e.seq, e.id, e.direction, e.amount_cents, e.type, e.ref_type, e.ref_id, e.created_at,
                        (SELECT o.wallet_id FROM ledger_entries o WHERE o.transfer_id = e.transfer_id AND o.seq <> e.seq
                         ORDER BY o.seq LIMIT 1) AS other_wallet
                        FROM ledger_entries e WHERE e.wallet_id = ? AND e.seq < ? ORDER BY e.seq DESC LIMIT ?
                    ) h LEFT JOIN wallet_accounts w ON w.id = h.other_wallet LEFT JOIN users u ON u.id = w.user_id
                    LEFT JOIN payment_sessions ps ON h.ref_type = 'session' AND ps.id = h.ref_id
                    ORDER BY h.seq DESC
                    """,
                arguments: [wallet.id, before?.seq ?? Int64.max, limit]
            )
            return EntryHistoryPage(
                entries: try rows.map { row in
                    let direction: String = row["direction"]
                    guard let direction = EntryDirection(rawValue: direction) else {
                        throw LedgerError(.inconsistent, detail: "an entry has the unknown direction \(direction)")
                    }
                    let name: String? = row["display_name"]
                    return HistoryEntryRow(
                        seq: row["seq"],
                        entry: WalletEntry(
                            id: row["id"],
                            direction: direction,
                            amount: row["amount_cents"],
                            type: row["type"],
                            refType: row["ref_type"],
                            refID: row["ref_id"],
                            createdAt: LedgerTime.date(row["created_at"]),
                            reference: row["reference"]
                        ),
                        counterpartyWalletID: row["other_wallet"],
                        counterpartyUser: name.map {
                            PayeeRow(name: $0, email: row["email"], verifiedName: row["verified_name"])
                        }
                    )
                },
                cursorFound: true
            )
        }
    }

    package func session(eid: EID) async throws -> EIDSession? {
        let now = LedgerTime.milliseconds(clock())
        return try await lookup { db in
            try db.fetchOne(cached: SQLiteLedgerStatements.sessionByEID, arguments: [eid.rawValue]) { row in
                let payee = SessionRow.columnCount
                return EIDSession(
                    session: try SessionRow(row),
                    payee: PayeeRow(
                        name: try row(payee),
                        email: try row(payee + 1),
                        verifiedName: try row.optional(payee + 2)
                    ),
                    retiredAt: try row.optional(payee + 3),
                    readAt: now
                )
            }
        }
    }

    package func session(id: String) async throws -> SessionRow? {
        try await lookup { db in try Self.session(id, db) }
    }

    package func eids(sessionID: String) async throws -> [SessionEID] {
        try await lookup { db in try Self.eids(sessionID, db) }
    }

    /// The EIDs the session was given, oldest first.
    static func eids(_ sessionID: String, _ db: Database) throws -> [SessionEID] {
        try Row.fetchAll(
            cached: db,
            sql: "SELECT eid, retired_at FROM session_eids WHERE session_id = ? ORDER BY created_at, rowid",
            arguments: [sessionID]
        ).map { SessionEID(eid: $0["eid"], retiredAt: $0["retired_at"]) }
    }

    package func audit() async throws -> LedgerAudit {
        try await database.read { db in
            LedgerAudit(
                totalBalanceCents: try Int64.fetchOne(
                    cached: db,
                    sql: "SELECT COALESCE(SUM(available_cents), 0) FROM wallet_accounts"
                ) ?? 0,
                walletsOutOfBalance: try String.fetchAll(
                    cached: db,
                    sql: """
                        SELECT w.id FROM wallet_accounts w WHERE w.available_cents != (SELECT COALESCE(SUM(CASE
                        e.direction WHEN ? THEN e.amount_cents ELSE -e.amount_cents END), 0)
                        FROM ledger_entries e WHERE e.wallet_id = w.id)
                        """,
                    arguments: [EntryDirection.credit.rawValue]
                ),
                negativeWallets: try String.fetchAll(
                    cached: db,
                    sql: "SELECT id FROM wallet_accounts WHERE kind = ? AND available_cents < 0",
                    arguments: [WalletKind.user.rawValue]
                ),
                unbalancedTransfers: try String.fetchAll(
                    cached: db,
                    sql: """
                        SELECT transfer_id FROM ledger_entries GROUP BY transfer_id HAVING COUNT(*) != 2
                        OR SUM(direction = ?) != 1 OR SUM(direction = ?) != 1
                        OR MIN(amount_cents) != MAX(amount_cents)
                        """,
                    arguments: [EntryDirection.debit.rawValue, EntryDirection.credit.rawValue]
                ),
                // Payments only: a session's refunds reference it too. A split is paid once per payment its
                // shares record.
                sessionsPaidTwice: try String.fetchAll(
                    cached: db,
                    sql: """
                        SELECT e.ref_id FROM ledger_entries e WHERE e.ref_type = 'session' AND e.type = 'SEND_P2P'
                        GROUP BY e.ref_id HAVING COUNT(DISTINCT e.transfer_id) > MAX(1, (
                            SELECT COUNT(DISTINCT h.payment_id) FROM session_shares h WHERE h.session_id = e.ref_id
                        ))
                        """
                ),
                entryCount: try Int.fetchOne(cached: db, sql: "SELECT COUNT(*) FROM ledger_entries") ?? 0
            )
        }
    }

    package func snapshot() async throws -> LedgerSnapshot {
        // One read transaction: one snapshot of every table.
        try await database.read { db in
            let webhooks = try Self.webhookEvents(db)
            return LedgerSnapshot(
                wallets: try db.fetchAll(cached: "SELECT \(WalletRow.columns) FROM wallet_accounts ORDER BY id") {
                    try WalletRow($0)
                },
                entries: try Row.fetchAll(cached: db, sql: "SELECT * FROM ledger_entries ORDER BY seq").map {
                    try StoredEntry($0)
                },
                chainHead: try Self.chainHead(db),
                sessions: try db.fetchAll(
                    cached: "SELECT \(SessionRow.columns(of: "payment_sessions")) FROM payment_sessions ORDER BY id"
                ) { try SessionRow($0) },
                receipts: try db.fetchAll(cached: "SELECT \(StoredReceipt.columns) FROM receipts ORDER BY id") {
                    try StoredReceipt($0)
                },
                receiptKeys: try Self.receiptKeys(db).map { ($0.published, $0.createdAt) },
                deposits: try Row.fetchAll(db, sql: "SELECT * FROM deposits ORDER BY id").map(DepositRow.init),
                payouts: try Row.fetchAll(db, sql: "SELECT * FROM payouts ORDER BY id").map { try PayoutRow($0) },
                refunds: try Self.refunds(db),
                shares: try db.fetchAll(
                    cached: SQLiteLedgerStatements.shares.replacingOccurrences(
                        of: "WHERE session_id = ? ORDER BY share",
                        with: "ORDER BY session_id, share"
                    )
                ) { try ShareRow($0) },
                webhookEvents: webhooks.events,
                webhookOutboxStart: webhooks.start
            )
        }
    }

    package func receipt(sessionID: String, kind: ReceiptKind) async throws -> StoredReceipt? {
        try await lookup { db in
            try db.fetchOne(
                cached: """
                    SELECT \(StoredReceipt.columns) FROM receipts WHERE session_id = ? AND kind = ?
                    ORDER BY created_at, id LIMIT 1
                    """,
                arguments: [sessionID, kind.rawValue]
            ) { try StoredReceipt($0) }
        }
    }

    package func receiptKeys() async throws -> [ReceiptKeyRow] {
        try await database.read { db in try Self.receiptKeys(db) }
    }

    fileprivate static func receiptKeys(_ db: Database) throws -> [ReceiptKeyRow] {
        // The current key first, then the retired ones, latest retired first: creation times can tie.
        try Row.fetchAll(
            cached: db,
            sql: """
                SELECT * FROM receipt_keys
                ORDER BY retired_at IS NOT NULL, retired_at DESC, created_at DESC, id DESC
                """
        ).map {
            ReceiptKeyRow(
                id: $0["id"],
                publicKey: $0["public_key"],
                privateKey: $0["private_key"],
                createdAt: $0["created_at"],
                retiredAt: $0["retired_at"]
            )
        }
    }

    fileprivate static func chainHead(_ db: Database) throws -> ChainHead {
        let head = try db.fetchOne(cached: SQLiteLedgerStatements.chainHead) {
            ChainHead(hash: try $0(0), count: try $0(1))
        }
        guard let head else { throw LedgerError(.inconsistent, detail: "the ledger has no chain head") }
        return head
    }

    package func ping() async throws {
        _ = try await lookup { db in try Int.fetchOne(cached: db, sql: "SELECT 1") }
    }

    package func checkWritable() async throws {
        try await transaction { transaction in
            try writer.sync { db in
                try db.execute(
                    sql: """
                        INSERT INTO health_checks (id, checked_at) VALUES (1, ?)
                        ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at
                        """,
                    arguments: [transaction.now]
                )
            }
        }
    }

    /// A user by id or by e-mail: each a fixed statement, not text put together on every read (the server reads the
    /// user on every request).
    fileprivate enum UserKey: String {
        case id = "SELECT id, display_name, disabled_at, tokens_not_before FROM users WHERE id = ?"
        case email = "SELECT id, display_name, disabled_at, tokens_not_before FROM users WHERE email = ?"
    }

    fileprivate static func user(_ key: UserKey, _ value: String, _ db: Database) throws -> LedgerUser? {
        try db.fetchOne(cached: key.rawValue, arguments: [value]) { row in
            var user = try LedgerUser(row)
            user.tokensNotBefore = try row.optional(3)
            return user
        }
    }

    fileprivate static func wallet(userID: String, _ db: Database) throws -> WalletRow? {
        try db.fetchOne(cached: SQLiteLedgerStatements.walletByUser, arguments: [userID]) { try WalletRow($0) }
    }

    fileprivate static func session(_ sid: String, _ db: Database) throws -> SessionRow? {
        try db.fetchOne(cached: SQLiteLedgerStatements.sessionByID, arguments: [sid]) { try SessionRow($0) }
    }
}

extension SQLiteLedgerBackend {
    /// A request's savepoint on the writer connection: each primitive runs its statements, prepared once per
    /// connection, on the requesting thread (``sync(_:)``), inside the batch the writer opened.
    package struct Transaction: LedgerTransaction {
        /// The pool; its asynchronous accesses work too, but each costs a thread hop.
        let database: DatabasePool
        let writer: SQLiteWriter
        package let now: Int64

        /// Runs `body` on the writer connection on this thread.
        func sync<T>(_ body: (Database) throws -> T) throws -> T {
            try writer.sync(body)
        }

        private func execute(_ sql: String, _ arguments: StatementArguments) throws {
            try sync { db in try db.execute(cached: sql, arguments: arguments) }
        }

        /// Runs a statement; whether it changed a row.
        private func changes(_ sql: String, _ arguments: StatementArguments) throws -> Bool {
            try sync { db in
                try db.execute(cached: sql, arguments: arguments)
                return db.changesCount > 0
            }
        }

        package func user(email: String) async throws -> LedgerUser? {
            try sync { db in try SQLiteLedgerBackend.user(.email, email, db) }
        }

        package func user(id: String) async throws -> LedgerUser? {
            try sync { db in try SQLiteLedgerBackend.user(.id, id, db) }
        }

        package func setPassword(userID: String, hash: String) async throws {
            try execute("UPDATE users SET password_hash = ? WHERE id = ?", [hash, userID])
        }

        package func replacePassword(userID: String, hash old: String, with new: String) async throws {
            try execute(
                "UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?",
                [new, userID, old]
            )
        }

        package func disable(userID: String) async throws {
            try execute("UPDATE users SET disabled_at = ? WHERE id = ?", [now, userID])
        }

        package func setVerifiedName(userID: String, name: String) async throws {
            try execute("UPDATE users SET verified_name = ? WHERE id = ?", [name, userID])
        }

        package func insert(refreshToken row: RefreshTokenRow) async throws {
            try execute(
                """
                INSERT INTO refresh_tokens (token_hash, family_id, user_id, created_at, expires_at)
                VALUES (?, ?, ?, ?, ?)
                """,
                [row.digest, row.familyID, row.userID, now, row.expiresAt]
            )
        }

        package func refreshToken(digest: String) async throws -> RefreshTokenRow? {
            try sync { db in
                try Row.fetchOne(
                    cached: db,
                    sql: "SELECT * FROM refresh_tokens WHERE token_hash = ?",
                    arguments: [digest]
                )
                .map { row in
                    RefreshTokenRow(
                        digest: row["token_hash"],
                        familyID: row["family_id"],
                        userID: row["user_id"],
                        expiresAt: row["expires_at"],
                        usedAt: row["used_at"],
                        revokedAt: row["revoked_at"]
                    )
                }
            }
        }

        package func markUsed(refreshToken digest: String) async throws {
            try execute("UPDATE refresh_tokens SET used_at = ? WHERE token_hash = ?", [now, digest])
        }

        package func revokeRefreshTokens(familyID: String) async throws {
            try execute(
                "UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL",
                [now, familyID]
            )
        }

        package func revokeRefreshTokens(userID: String) async throws {
            try execute(
                "UPDATE refresh_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL",
                [now, userID]
            )
        }

        package func revokeAccessTokens(userID: String) async throws {
            try execute("UPDATE users SET tokens_not_before = ? WHERE id = ?", [now, userID])
        }

        package func deleteRefreshTokens(expiredBefore time: Int64) async throws -> Int {
            try sync { db in
                try db.execute(cached: "DELETE FROM refresh_tokens WHERE expires_at < ?", arguments: [time])
                return db.changesCount
            }
        }

        package func insert(audit entry: AuditEntry) async throws {
            try execute(
                "INSERT INTO admin_audit (actor, action, subject, detail, created_at) VALUES (?, ?, ?, ?, ?)",
                [entry.actor, entry.action, entry.subject, entry.detail, entry.at]
            )
        }

        package func insertWallet(id: String, userID: String) async throws {
            try execute(
                "INSERT INTO wallet_accounts (id, user_id, kind, available_cents, created_at) VALUES (?, ?, ?, 0, ?)",
                [id, userID, WalletKind.user.rawValue, now]
            )
        }

        package func wallet(userID: String) async throws -> WalletRow? {
            try sync { db in try SQLiteLedgerBackend.wallet(userID: userID, db) }
        }

        package func walletsForUpdate(accountIDs: [String], userIDs: [String]) async throws -> [WalletRow] {
            let sql = SQLiteLedgerStatements.walletsForUpdate(accounts: accountIDs.count, users: userIDs.count)
            let arguments = StatementArguments(accountIDs + userIDs)
            return try sync { db in try db.fetchAll(cached: sql, arguments: arguments) { try WalletRow($0) } }
        }

        /// One statement for the transfer's balances.
        package func setBalances(_ balances: [(walletID: String, balance: Cents)]) async throws {
            guard !balances.isEmpty else { return }
            var arguments: [(any DatabaseValueConvertible)?] = []
            for (id, balance) in balances {
                arguments.append(id)
                arguments.append(balance)
            }
            arguments += balances.map(\.walletID)
            try execute(SQLiteLedgerStatements.setBalances(count: balances.count), StatementArguments(arguments))
        }

        /// One statement for the transfer's entries.
        package func insert(entries: [EntryRow]) async throws {
            guard !entries.isEmpty else { return }
            var arguments: [(any DatabaseValueConvertible)?] = []
            for entry in entries {
                arguments += [
                    entry.id, entry.transferID, entry.walletID, entry.direction.rawValue, entry.amount, entry.type,
                    entry.refType, entry.refID, entry.createdAt, entry.hash,
                ]
            }
            try execute(SQLiteLedgerStatements.insertEntries(count: entries.count), StatementArguments(arguments))
        }

        package func session(id: String, forUpdate: Bool) async throws -> SessionRow? {
            try sync { db in try SQLiteLedgerBackend.session(id, db) }
        }

        package func keyedSession(payeeID: String, key: String) async throws -> KeyedSession? {
            try sync { db in
                try Row.fetchOne(
                    cached: db,
                    sql: """
                        SELECT s.id, e.eid, s.amount_cents, s.exp_at, s.shares, s.tip_percents, s.reference
                        FROM payment_sessions s
                        JOIN session_eids e ON e.session_id = s.id
                        WHERE s.payee_id = ? AND s.create_key = ?
                        ORDER BY e.retired_at IS NULL DESC, e.created_at DESC, e.eid LIMIT 1
                        """,
                    arguments: [payeeID, key]
                ).map {
                    KeyedSession(
                        sid: $0["id"],
                        eid: $0["eid"],
                        amount: $0["amount_cents"],
                        expiresAt: $0["exp_at"],
                        shares: $0["shares"],
                        tipPrompt: try TipPrompt(stored: $0["tip_percents"]),
                        reference: $0["reference"]
                    )
                }
            }
        }

        /// The write lock already serializes every allocation.
        package func lockEID(_ eid: EID) async throws {}

        package func isAllocated(eid: EID) async throws -> Bool {
            try sync { db in
                try Bool.fetchOne(
                    cached: db,
                    sql: SQLiteLedgerStatements.eidAllocated,
                    arguments: [eid.rawValue]
                ) ?? true
            }
        }

        package func eids(sessionID: String) async throws -> [SessionEID] {
            try sync { db in try SQLiteLedgerBackend.eids(sessionID, db) }
        }

        package func retireEIDs(sessionID: String) async throws {
            try execute(
                "UPDATE session_eids SET retired_at = ? WHERE session_id = ? AND retired_at IS NULL",
                [now, sessionID]
            )
        }

        package func insert(session: SessionRow, createKey: String?) async throws -> Bool {
            try changes(
                SQLiteLedgerStatements.insertSession,
                [
                    session.id, session.payeeID, session.amount, session.storedStatus.rawValue, now, session.expiresAt,
                    createKey, session.shares, session.tipPrompt.stored, session.reference,
                ]
            )
        }

        package func insert(eid: EID, sessionID: String) async throws {
            try execute(SQLiteLedgerStatements.insertEID, [eid.rawValue, sessionID, now])
        }

        /// The write lock already serializes every lock.
        package func lockPayer(_ payerID: String) async throws {}

        package func locksHeld(by payerID: String, excluding sid: String) async throws -> (count: Int, amount: Cents) {
            let now = self.now
            return try sync { db in
                try db.fetchOne(
                    cached: SQLiteLedgerStatements.locksHeld,
                    arguments: [payerID, StoredSessionStatus.locked.rawValue, now, now, sid]
                ) { (count: try $0(0), amount: try $0(1)) } ?? (0, 0)
            }
        }

        package func update(session sid: String, _ change: SessionChange) async throws {
            switch change {
            case .lock(let payerID, let until):
                try execute(
                    SQLiteLedgerStatements.lockSession,
                    [StoredSessionStatus.locked.rawValue, payerID, until, sid]
                )
            case .unlock:
                try execute(
                    "UPDATE payment_sessions SET status = ?, lock_exp_at = ? WHERE id = ?",
                    [StoredSessionStatus.advertising.rawValue, now, sid]
                )
            case .paid(let payerID, let tip):
                try execute(
                    SQLiteLedgerStatements.paySession,
                    [StoredSessionStatus.paid.rawValue, payerID, now, tip, sid]
                )
            case .sharesPaid(let count, let amount, let tip, let payerID, let complete):
                try execute(
                    SQLiteLedgerStatements.paySharesOfSession,
                    [
                        count, amount, tip, complete ? StoredSessionStatus.paid.rawValue : nil,
                        complete ? payerID : nil,
                        complete ? now : nil, sid,
                    ]
                )
            case .cancelled:
                try execute(
                    "UPDATE payment_sessions SET status = ?, cancelled_at = ? WHERE id = ?",
                    [StoredSessionStatus.cancelled.rawValue, now, sid]
                )
            case .refundsSwept:
                try execute("UPDATE payment_sessions SET refunds_swept_at = ? WHERE id = ?", [now, sid])
            case .expiryNoted:
                try execute("UPDATE payment_sessions SET expiry_noted_at = ? WHERE id = ?", [now, sid])
            }
        }

        /// No other transaction can hold a key: the writer runs one request's savepoint at a time (a second request
        /// with the key runs after the first and reads its outcome), and SQLite's write lock keeps every other
        /// connection's transaction out until this one's batch commits.
        package func claimKey(userID: String, key: String, wait: Bool) async throws -> Bool { true }

        package func idempotencyRecord(userID: String, key: String) async throws -> IdempotencyRecord? {
            try sync { db in
                try db.fetchOne(
                    cached: SQLiteLedgerStatements.idempotencyRecord,
                    arguments: [userID, key]
                ) { row in
                    IdempotencyRecord(
                        sid: try row(0),
                        state: try row(1),
                        updatedAt: try row(2),
                        balance: try row.optional(3),
                        refusalKind: try row.optional(4),
                        refusalDetail: try row.optional(5)
                    )
                }
            }
        }

        package func insertInFlight(userID: String, key: String, sid: String) async throws -> Bool {
            try changes(
                SQLiteLedgerStatements.insertInFlight,
                [userID, key, sid, IdempotencyState.inFlight.rawValue, now, now]
            )
        }

        package func touch(userID: String, key: String) async throws {
            try execute(
                "UPDATE idempotency_keys SET updated_at = ? WHERE user_id = ? AND key = ?",
                [now, userID, key]
            )
        }

        package func delete(userID: String, key: String) async throws {
            try execute("DELETE FROM idempotency_keys WHERE user_id = ? AND key = ?", [userID, key])
        }

        package func record(
            outcome: SendOutcome,
            paymentID: String?,
            userID: String,
            key: String,
            sid: String
        ) async throws {
            let stored = IdempotencyRecord.columns(for: outcome)
            try execute(
                SQLiteLedgerStatements.recordOutcome,
                [
                    userID, key, sid, IdempotencyState.done.rawValue, stored.balance, stored.refusalKind,
                    stored.refusalDetail, now, now, paymentID,
                ]
            )
        }

        package func deleteKeys(createdBefore time: Int64) async throws -> Int {
            try sync { db in
                try db.execute(cached: "DELETE FROM idempotency_keys WHERE created_at < ?", arguments: [time])
                return db.changesCount
            }
        }

        /// The write lock already serializes every transfer: the head read here cannot move before commit.
        package func chainHeadForUpdate() async throws -> ChainHead {
            try sync { db in try SQLiteLedgerBackend.chainHead(db) }
        }

        package func setChainHead(_ head: ChainHead) async throws {
            try execute(SQLiteLedgerStatements.setChainHead, [head.hash, head.count])
        }

        package func unchainedEntries(limit: Int) async throws -> [StoredEntry] {
            try sync { db in
                try Row.fetchAll(
                    cached: db,
                    sql: "SELECT * FROM ledger_entries WHERE hash IS NULL ORDER BY seq LIMIT ?",
                    arguments: [limit]
                ).map { try StoredEntry($0) }
            }
        }

        package func setHashes(_ hashes: [(seq: Int64, hash: String)]) async throws {
            try sync { db in
                for (seq, hash) in hashes {
                    try db.execute(cached: "UPDATE ledger_entries SET hash = ? WHERE seq = ?", arguments: [hash, seq])
                }
            }
        }

        /// The write lock already serializes key creation.
        package func lockReceiptKeys() async throws {}

        package func receiptKeys() async throws -> [ReceiptKeyRow] {
            try sync { db in try SQLiteLedgerBackend.receiptKeys(db) }
        }

        package func insert(receiptKey: ReceiptKeyRow) async throws {
            try execute(
                "INSERT INTO receipt_keys (id, public_key, private_key, created_at, retired_at) VALUES (?, ?, ?, ?, ?)",
                [
                    receiptKey.id, receiptKey.publicKey, receiptKey.privateKey, receiptKey.createdAt,
                    receiptKey.retiredAt,
                ]
            )
        }

        package func retireReceiptKeys(except keyID: String) async throws {
            try execute(
                """
                UPDATE receipt_keys SET retired_at = COALESCE(retired_at, ?), private_key = NULL WHERE id <> ?
                """,
                [now, keyID]
            )
        }

        package func insert(receipt: StoredReceipt) async throws {
            try execute(
                SQLiteLedgerStatements.insertReceipt,
                [receipt.id, receipt.kind, receipt.sessionID, receipt.body, now]
            )
        }
    }
}

extension SessionRow {
    private static let columnNames = [
        "id", "payee_id", "amount_cents", "status", "exp_at", "locked_by", "lock_exp_at", "paid_by", "paid_at",
        "shares", "shares_paid", "paid_cents", "tip_cents", "refunds_swept_at", "tip_percents",
        "reference",
    ]

    /// How many columns ``init(_:)`` reads.
    static var columnCount: CInt { CInt(columnNames.count) }

    /// The columns ``init(_:)`` reads, in its order, of `table` (a table's name or alias).
    static func columns(of table: String) -> String {
        columnNames.map { "\(table).\($0)" }.joined(separator: ", ")
    }

    init(_ row: SQLiteColumns) throws {
        self.init(
            id: try row(0),
            payeeID: try row(1),
            amount: try row(2),
            storedStatus: try StoredSessionStatus(stored: try row(3)),
            expiresAt: try row(4),
            lockedBy: try row.optional(5),
            lockExpiresAt: try row.optional(6),
            paidBy: try row.optional(7),
            paidAt: try row.optional(8),
            shares: Int(try row(9) as Int64),
            sharesPaid: Int(try row(10) as Int64),
            paidCents: try row(11),
            tip: try row(12),
            refundsSweptAt: try row.optional(13),
            tipPrompt: try TipPrompt(stored: try row.optional(14)),
            reference: try row.optional(15)
        )
    }
}

extension LedgerUser {
    /// Reads `id, display_name, disabled_at`.
    fileprivate init(_ row: SQLiteColumns) throws {
        self.init(id: try row(0), displayName: try row(1), disabled: try row.optional(2) as Int64? != nil)
    }
}

extension StoredReceipt {
    /// The columns ``init(_:)`` reads, in its order.
    static let columns = "id, kind, session_id, body"

    init(_ row: SQLiteColumns) throws {
        self.init(id: try row(0), kind: try row(1), sessionID: try row(2), body: try row(3))
    }
}

extension StoredEntry {
    init(_ row: Row) throws {
        try self.init(
            seq: row["seq"],
            id: row["id"],
            transferID: row["transfer_id"],
            walletID: row["wallet_id"],
            direction: row["direction"],
            amount: row["amount_cents"],
            type: row["type"],
            refType: row["ref_type"],
            refID: row["ref_id"],
            createdAt: row["created_at"],
            hash: row["hash"]
        )
    }
}

extension WalletRow {
    /// The columns ``init(_:)`` reads, in its order.
    static let columns = "id, user_id, available_cents, kind"

    init(_ row: SQLiteColumns) throws {
        guard let kind = WalletKind(rawValue: try row(3)) else {
            throw LedgerError(.inconsistent, detail: "a wallet has an unknown kind")
        }
        self.init(id: try row(0), userID: try row.optional(1), balance: try row(2), kind: kind)
    }
}
