package import Foundation
package import GotchuCore
package import GotchuLedger
package import GotchuReceipts
package import Logging
package import PostgresNIO
import Synchronization

/// The ledger store on PostgreSQL, for one or more servers sharing a database: the ``LedgerEngine`` over a
/// ``PostgresLedgerBackend``.
package typealias PostgresLedgerStore = LedgerEngine<PostgresLedgerBackend>

extension LedgerEngine where Backend == PostgresLedgerBackend {
    /// The first host's connection pool, the only one of a one-host URL; it must be running while the store is used
    /// (it is a `Service`).
    package var client: PostgresClient { backend.client }

    /// Every host's pool and the choice of the primary among them; run it while the store is used (it is a
    /// `Service`, and runs the pools).
    package var primary: PostgresPrimary { backend.primary }

    /// A store over the database at `url` (which also says whether statements are prepared).
    /// - Parameters:
    ///   - clock: replaces the database clock (tests); `nil` judges time by `clock_timestamp()` on the server.
    ///   - maximumConnections: the pool's size.
    ///   - connectionWait: how long a request waits for a connection before it is refused as
    ///     ``LedgerError/Kind/databaseUnavailable`` (the database down, restarting, or every connection busy).
    package init(
        url: PostgresURL,
        policy: LedgerPolicy = LedgerPolicy(),
        clock: (@Sendable () -> Date)? = nil,
        maximumConnections: Int = 20,
        connectionWait: Duration = PostgresLedgerBackend.defaultConnectionWait,
        logger: Logger
    ) {
        let primary = PostgresPrimary(url: url, logger: logger) { configuration in
            configuration.options.maximumConnections = maximumConnections
            // Kept open even when idle: postgres-nio arms an idle-timeout timer (a task) each time it takes back a
            // connection above the minimum, which cost about 3 % of the CPU of a lone payer's payments.
            configuration.options.minimumConnections = min(2, maximumConnections)
        }
        self.init(
            backend: PostgresLedgerBackend(
                primary: primary,
                clock: clock,
                maximumConnections: maximumConnections,
                preparesStatements: url.preparesStatements,
                connectionWait: connectionWait,
                logger: logger
            ),
            policy: policy
        )
    }

    /// A store over an existing client, which the caller runs.
    /// - Parameters:
    ///   - maximumConnections: the client's pool size, as reported in ``poolUsage()``.
    ///   - preparesStatements: whether each statement is prepared once per connection (see ``PostgresURL``).
    ///   - connectionWait: how long a request waits for a connection before it is refused as unavailable.
    package init(
        client: PostgresClient,
        policy: LedgerPolicy = LedgerPolicy(),
        clock: (@Sendable () -> Date)? = nil,
        maximumConnections: Int = 20,
        preparesStatements: Bool = true,
        connectionWait: Duration = PostgresLedgerBackend.defaultConnectionWait,
        logger: Logger
    ) {
        self.init(
            backend: PostgresLedgerBackend(
                primary: PostgresPrimary(client: client, logger: logger),
                clock: clock,
                maximumConnections: maximumConnections,
                preparesStatements: preparesStatements,
                connectionWait: connectionWait,
                logger: logger
            ),
            policy: policy
        )
    }
}

/// PostgreSQL through postgres-nio, as a ``LedgerBackend``.
///
/// **Concurrency.** Transactions run at READ COMMITTED and take explicit row locks (`SELECT … FOR UPDATE`) on every
/// row a decision depends on, in the engine's one order: the idempotency key (its advisory lock, taken without
/// waiting, then its row), then the session, then the wallets sorted by id (one statement with
/// `ORDER BY id FOR UPDATE`: PostgreSQL sorts before it locks). A locked row is read in its latest committed version
/// and cannot change until we commit, so each check holds at commit; with one global lock order no two
/// transactions can wait on each other in a cycle, so deadlocks cannot arise. New rows are guarded by unique keys
/// (users' e-mail, idempotency keys, a payee's session create keys) or, for EIDs unique among live sessions, by a
/// transaction-scoped advisory lock on the EID. SERIALIZABLE would also be correct, but every hot session would then
/// cost aborted and retried transactions; locks make the losers wait a few milliseconds instead. As a safeguard, a
/// transaction that fails with a deadlock or a serialization failure anyway is run again (up to five times) rather
/// than surfacing as a server error.
///
/// **Clock.** Expiry and lock lapses are judged inside the transaction at a time read at its start. By default that
/// is the database's `clock_timestamp()`: one clock for every server on the database, so replicas with skewed clocks
/// still agree on when a session expired. An injected clock replaces it (its value is read at the start of each
/// transaction and passed as a parameter); tests use that to move time by hand.
///
/// The backend keeps no state of its own: idempotency, locks and expiry live in the database, so several servers on
/// one database behave as one; keys are held in flight by the transaction
/// (``LedgerTransaction/claimKey(userID:key:wait:)``).
package struct PostgresLedgerBackend: LedgerBackend {
    /// The pools of the database's hosts and the choice of the primary; they must be running while the backend is
    /// used.
    package let primary: PostgresPrimary
    /// The first host's pool, the only one of a one-host URL.
    package var client: PostgresClient { primary.clients[0] }
    let clock: (@Sendable () -> Date)?
    private let logger: Logger

    /// How many times a transaction that failed with a deadlock or serialization failure is run again.
    static let retryLimit = 5

    /// Connections leased from the pool and leases waited for, counted here: postgres-nio does not publish its
    /// pool's state.
    private let leases = PoolLeases()
    /// The pool's size (the client's `maximumConnections`).
    let maximumConnections: Int
    /// Whether statements are prepared once per connection; off, the database parses each on every run (for a
    /// pooler that cannot keep prepared statements).
    let preparesStatements: Bool
    /// How long a request waits for a connection of the pool before it is refused.
    let connectionWait: Duration

    /// How long a request waits for a connection by default: long enough to ride out a busy moment, short enough
    /// that a client (and a load balancer's health check) learns of an outage in seconds, not after the minute
    /// postgres-nio's pool would keep it waiting while it retries the database.
    package static let defaultConnectionWait: Duration = .seconds(3)

    /// A backend over `primary`'s pools, with `clock` replacing the database clock when given.
    /// - Parameters:
    ///   - maximumConnections: the client's pool size, as reported in ``poolUsage()``.
    ///   - preparesStatements: whether each statement is prepared once per connection (see ``PostgresURL``).
    ///   - connectionWait: how long a request waits for a connection before it is refused as
    ///     ``LedgerError/Kind/databaseUnavailable``.
    package init(
        primary: PostgresPrimary,
        clock: (@Sendable () -> Date)?,
        maximumConnections: Int = 20,
        preparesStatements: Bool = true,
        connectionWait: Duration = Self.defaultConnectionWait,
        logger: Logger
    ) {
        self.primary = primary
        self.clock = clock
        self.maximumConnections = maximumConnections
        self.preparesStatements = preparesStatements
        self.connectionWait = connectionWait
        self.logger = logger
    }

    package func poolUsage() async -> LedgerPoolUsage? {
        let (inUse, waiting) = leases.usage()
        return LedgerPoolUsage(inUse: inUse, waiting: waiting, maximum: maximumConnections)
    }

    /// Leases a connection from the pool for `body`, counted in ``poolUsage()``. A request that gets no connection
    /// within ``connectionWait`` is refused as ``LedgerError/Kind/databaseUnavailable`` (its place in the pool's queue
    /// given up), and so is one whose connection fails under it: a client learns of an outage at once, and no request
    /// holds an HTTP connection while the pool retries the database.
    func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let lease = leases.ask()
        defer { lease.end() }
        // The host writes go to now; a failure that may mean it is no longer the primary makes the ledger look again.
        let (host, client) = primary.current
        do {
            return try await Self.leasing(lease, within: connectionWait, from: client) { connection in
                do {
                    // On the connection's own event loop, each statement's write and its answer stay on one thread.
                    return try await withTaskExecutorPreference(EventLoopTaskExecutor(connection.eventLoop)) {
                        try await body(connection)
                    }
                } catch let error as PSQLError {
                    // postgres-nio remembers a failed preparation for the connection's life and fails every later use
                    // of that statement with the same error. A statement that failed may have failed in its
                    // preparation (its table renamed by a migration, a lock timeout), so the connection goes: the
                    // pool replaces it, and with it what it remembered. Business refusals are not database errors
                    // and keep it.
                    try? await connection.close()
                    throw error
                }
            }
        } catch let error as PSQLError {
            guard let outage = Self.outage(error) else { throw error }
            primary.suspect(host)
            throw outage
        } catch let error as LedgerError where error.kind == .databaseUnavailable {
            primary.suspect(host)
            throw error
        }
    }

    /// Runs `body` with a connection of `client`'s pool, waiting at most `wait` for one (``BoundedLease``); once
    /// granted, `body` runs to its end whatever the time.
    private static func leasing<T: Sendable>(
        _ lease: PoolLeases.Lease,
        within wait: Duration,
        from client: PostgresClient,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            return try await BoundedLease.run(client, within: wait, granted: { lease.granted() }, body)
        } catch is BoundedLease.Expired {
            throw LedgerError(
                .databaseUnavailable,
                detail: "no database connection within \(wait.seconds) s; the database may be down or overloaded"
            )
        }
    }

    /// The refusal for a database error that means the database is out of reach or out of room, or `nil` for any
    /// other (a constraint, a bug): those stay errors of their own.
    static func outage(_ error: PSQLError) -> LedgerError? {
        switch error.code {
        case .connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection, .poolClosed:
            return LedgerError(.databaseUnavailable, detail: "the connection to the database failed; retry shortly")
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            // 53100 disk_full; class 08 connection exceptions; 57P01–57P03 shutdown and startup; class 53 other
            // resource limits (too many connections, out of memory).
            if state == "53100" {
                return LedgerError(.storageFull, detail: "the database's disk is full; writes resume once it has room")
            }
            // 25006 read_only_sql_transaction: the host is a standby now (the primary moved).
            if state == "25006" {
                return LedgerError(
                    .databaseUnavailable,
                    detail:
                        "the database host is read-only (a standby); the ledger is finding the primary, retry shortly"
                )
            }
            if state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53") {
                return LedgerError(
                    .databaseUnavailable,
                    detail: "the database refused the request (\(state)); retry shortly"
                )
            }
            return nil
        default:
            return nil
        }
    }

    package func migrate() async throws {
        try await transaction { transaction in
            let connection = transaction.connection
            try await connection.execute("SELECT pg_advisory_xact_lock(\(PostgresLedgerSchema.migrationLockKey))")
            try await connection.execute(
                "CREATE TABLE IF NOT EXISTS gotchu_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)"
            )
            let applied = Set(
                try await connection.rows("SELECT name FROM gotchu_migrations").map { try $0.decode(String.self) }
            )
            for migration in PostgresLedgerSchema.migrations where !applied.contains(migration.name) {
                // Schema changes run once: nothing to prepare.
                for statement in migration.statements {
                    _ = try await connection.unprepared(PostgresQuery(unsafeSQL: statement))
                }
                try await connection.execute(
                    "INSERT INTO gotchu_migrations (name, applied_at) VALUES (\(migration.name), now())"
                )
            }
        }
    }

    /// Runs `body` in a transaction with the store's time read at its start; commits if it returns, rolls back and
    /// rethrows the original error if it throws.
    package func transaction<T: Sendable>(_ body: (Transaction) async throws -> T) async throws -> T {
        try await transaction(isolation: "READ COMMITTED") { connection in
            try await body(Transaction(connection: connection, now: try await now(connection.connection)))
        }
    }

    /// Runs `body` in a transaction at `isolation`, run again on a deadlock or serialization failure.
    private func transaction<T: Sendable>(
        isolation: String,
        _ body: (Connection) async throws -> T
    ) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await withConnection { connection in
                    let connection = bind(connection, deferring: DeferredWrites())
                    try await connection.execute("BEGIN ISOLATION LEVEL \(unescaped: isolation)")
                    do {
                        let result = try await body(connection)
                        // Sends the writes still held back first.
                        try await connection.execute("COMMIT")
                        return result
                    } catch {
                        connection.deferred?.discard()
                        // A failed ROLLBACK means the connection is broken; the pool discards it.
                        _ = try? await connection.execute("ROLLBACK")
                        throw error
                    }
                }
            } catch let error as PSQLError where Self.isTransient(error) && attempt < Self.retryLimit {
                attempt += 1
                logger.debug("retrying transaction", metadata: ["sqlstate": "\(error.serverInfo?[.sqlState] ?? "")"])
            }
        }
    }

    /// Deadlock detected or serialization failure: the transaction was rolled back and may run again.
    static func isTransient(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40P01" || state == "40001"
    }

    /// `connection` with the backend's way of running statements.
    private func bind(_ connection: PostgresConnection, deferring deferred: DeferredWrites? = nil) -> Connection {
        Connection(connection: connection, prepares: preparesStatements, logger: logger, deferred: deferred)
    }

    /// Runs a single-statement read; one statement needs no transaction to see one snapshot.
    func read<T: Sendable>(_ body: (Connection) async throws -> T) async throws -> T {
        try await withConnection { connection in
            try await body(bind(connection))
        }
    }

    package func now() async throws -> Int64 {
        if let clock { return LedgerTime.milliseconds(clock()) }
        return try await withConnection { connection in try await now(connection) }
    }

    /// The database's clock in milliseconds, as SQL: one clock for every server on the database.
    static let clockMilliseconds = "floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT"

    private func now(_ connection: PostgresConnection) async throws -> Int64 {
        if let clock { return LedgerTime.milliseconds(clock()) }
        return try await bind(connection).value(
            "SELECT \(unescaped: Self.clockMilliseconds)",
            as: Int64.self
        ) ?? 0
    }

    package func user(id: String) async throws -> LedgerUser? {
        try await read { connection in try await connection.user(id: id) }
    }

    package func credentials(email: String) async throws -> UserCredentials? {
        try await read { connection in
            try await connection.first(
                """
                SELECT id, display_name, disabled_at, password_hash, email_confirmed_at IS NOT NULL FROM users
                WHERE email = \(email)
                """,
                as: (String, String, Int64?, String?, Bool).self
            ).map {
                UserCredentials(
                    user: LedgerUser(id: $0.0, displayName: $0.1, disabled: $0.2 != nil),
                    passwordHash: $0.3,
                    confirmed: $0.4
                )
            }
        }
    }

    package func users() async throws -> [UserSummary] {
        try await read { connection in
            try await connection.rows(
                """
                SELECT id, email, display_name, verified_name, password_hash IS NOT NULL, disabled_at IS NOT NULL,
                created_at FROM users ORDER BY created_at, id
                """
            ).map { row in
                let (id, email, name, verified, hasPassword, disabled, created) = try row.decode(
                    (String, String, String, String?, Bool, Bool, Int64).self
                )
                return UserSummary(
                    id: id,
                    email: email,
                    displayName: name,
                    verifiedName: verified,
                    hasPassword: hasPassword,
                    disabled: disabled,
                    createdAt: created
                )
            }
        }
    }

    package func auditLog(limit: Int) async throws -> [AuditEntry] {
        try await read { connection in
            try await connection.rows(
                """
                SELECT actor, action, subject, detail, created_at FROM admin_audit ORDER BY seq DESC
                LIMIT \(Int64(limit))
                """
            ).map { row in
                let (actor, action, subject, detail, at) = try row.decode((String, String, String, String, Int64).self)
                return AuditEntry(actor: actor, action: action, subject: subject, detail: detail, at: at)
            }
        }
    }

    package func wallet(userID: String, recentLimit: Int) async throws -> Wallet? {
        // One snapshot for the balance and the entries, so they agree.
        try await transaction(isolation: "REPEATABLE READ READ ONLY") { connection in
            guard let wallet = try await connection.wallet(userID: userID, forUpdate: false) else { return nil }
            let entries = try await connection.rows(
                """
                SELECT id, direction, amount_cents, type, ref_type, ref_id, created_at FROM ledger_entries
                WHERE wallet_id = \(wallet.id) ORDER BY seq DESC LIMIT \(Int64(recentLimit))
                """
            ).map { row in
                let (id, direction, amount, type, refType, refID, createdAt) = try row.decode(
                    (String, String, Int64, String, String, String, Int64).self
                )
                return WalletEntry(
                    id: id,
                    direction: EntryDirection(rawValue: direction) ?? .debit,
                    amount: amount,
                    type: type,
                    refType: refType,
                    refID: refID,
                    createdAt: LedgerTime.date(createdAt)
                )
            }
            return Wallet(id: wallet.id, balance: wallet.balance, recent: entries)
        }
    }

    package func entries(userID: String, before: EntryCursor?, limit: Int) async throws -> EntryHistoryPage? {
        // One snapshot for the cursor's check and the page.
        try await transaction(isolation: "REPEATABLE READ READ ONLY") { connection in
            guard let wallet = try await connection.wallet(userID: userID, forUpdate: false) else { return nil }
            if let before {
                let found = try await connection.rows(
                    """
                    SELECT 1 FROM ledger_entries
                    WHERE seq = \(before.seq) AND id = \(before.entryID) AND wallet_id = \(wallet.id)
                    """
                )
                guard !found.isEmpty else { return EntryHistoryPage(entries: [], cursorFound: false) }
            }
            // The page by (wallet_id, seq); each entry's other side by (transfer_id), at most one row each; a session's
            // reference by its primary key.
            let rows = try await connection.rows(
                """
                SELECT h.seq, h.id, h.direction, h.amount_cents, h.type, h.ref_type, h.ref_id, h.created_at,
                h.other_wallet, u.display_name, u.email, u.verified_name, ps.reference FROM (
                    SELECT e.seq, e.id, e.direction, e.amount_cents, e.type, e.ref_type, e.ref_id, e.created_at,
                    (SELECT o.wallet_id FROM ledger_entries o WHERE o.transfer_id = e.transfer_id AND o.seq <> e.seq
                     ORDER BY o.seq LIMIT 1) AS other_wallet
                    FROM ledger_entries e WHERE e.wallet_id = \(wallet.id) AND e.seq < \(before?.seq ?? Int64.max)
                    ORDER BY e.seq DESC LIMIT \(Int64(limit))
                ) h LEFT JOIN wallet_accounts w ON w.id = h.other_wallet LEFT JOIN users u ON u.id = w.user_id
                LEFT JOIN payment_sessions ps ON h.ref_type = 'session' AND ps.id = h.ref_id
                ORDER BY h.seq DESC
                """
            )
            return EntryHistoryPage(
                entries: try rows.map { row in
                    let (
                        seq, id, direction, amount, type, refType, refID, createdAt, otherWallet, name, email, verified,
                        reference
                    ) =
                        try row.decode(
                            (
                                Int64, String, String, Int64, String, String, String, Int64, String?, String?, String?,
                                String?, String?
                            ).self
                        )
                    guard let direction = EntryDirection(rawValue: direction) else {
                        throw LedgerError(.inconsistent, detail: "an entry has the unknown direction \(direction)")
                    }
                    return HistoryEntryRow(
                        seq: seq,
                        entry: WalletEntry(
                            id: id,
                            direction: direction,
                            amount: amount,
                            type: type,
                            refType: refType,
                            refID: refID,
                            createdAt: LedgerTime.date(createdAt),
                            reference: reference
                        ),
                        counterpartyWalletID: otherWallet,
                        counterpartyUser: name.map { PayeeRow(name: $0, email: email ?? "", verifiedName: verified) }
                    )
                },
                cursorFound: true
            )
        }
    }

    package func session(eid: EID) async throws -> EIDSession? {
        try await read { connection in
            // The database's clock in the same statement: a resolve takes one round trip.
            guard
                let row = try await connection.rows(
                    """
                    SELECT \(unescaped: Connection.sessionColumns), u.display_name, u.email, u.verified_name, e.retired_at,
                    \(unescaped: Self.clockMilliseconds) AS read_at
                    FROM session_eids e
                    JOIN payment_sessions s ON s.id = e.session_id JOIN users u ON u.id = s.payee_id
                    WHERE e.eid = \(eid.rawValue) ORDER BY s.created_at DESC, s.seq DESC LIMIT 1
                    """
                ).first
            else { return nil }
            let columns = row.makeRandomAccess()
            return EIDSession(
                session: try SessionRow(row),
                payee: PayeeRow(
                    name: try columns["display_name"].decode(String.self),
                    email: try columns["email"].decode(String.self),
                    verifiedName: try columns["verified_name"].decode(String?.self)
                ),
                retiredAt: try columns["retired_at"].decode(Int64?.self),
                readAt: try clock.map { LedgerTime.milliseconds($0()) } ?? columns["read_at"].decode(Int64.self)
            )
        }
    }

    package func session(id: String) async throws -> SessionRow? {
        try await read { connection in try await connection.session(id: id, forUpdate: false) }
    }

    package func eids(sessionID: String) async throws -> [SessionEID] {
        try await read { connection in try await connection.eids(sessionID: sessionID) }
    }

    package func audit() async throws -> LedgerAudit {
        // One statement, so one snapshot for every sum: concurrent payments cannot make a healthy ledger look
        // broken. Sums are numeric in PostgreSQL; the cast back to bigint fails loudly rather than wrap.
        try await read { connection in
            let credit = EntryDirection.credit.rawValue
            let debit = EntryDirection.debit.rawValue
            // Sessions paid twice count payments only: a session's refunds reference it too; a split is paid once
            // per payment its shares record.
            let row = try await connection.rows(
                """
                SELECT
                (SELECT COALESCE(SUM(available_cents), 0)::BIGINT FROM wallet_accounts),
                ARRAY(SELECT w.id FROM wallet_accounts w WHERE w.available_cents != (SELECT COALESCE(SUM(CASE
                    e.direction WHEN \(credit) THEN e.amount_cents ELSE -e.amount_cents END), 0)
                    FROM ledger_entries e WHERE e.wallet_id = w.id) ORDER BY w.id),
                ARRAY(SELECT id FROM wallet_accounts WHERE kind = \(WalletKind.user.rawValue) AND available_cents < 0
                    ORDER BY id),
                ARRAY(SELECT transfer_id FROM ledger_entries GROUP BY transfer_id HAVING COUNT(*) != 2
                    OR COUNT(*) FILTER (WHERE direction = \(debit)) != 1
                    OR COUNT(*) FILTER (WHERE direction = \(credit)) != 1
                    OR MIN(amount_cents) != MAX(amount_cents) ORDER BY transfer_id),
                ARRAY(SELECT e.ref_id FROM ledger_entries e WHERE e.ref_type = 'session' AND e.type = 'SEND_P2P'
                    GROUP BY e.ref_id HAVING COUNT(DISTINCT e.transfer_id) > GREATEST(1, (
                        SELECT COUNT(DISTINCT h.payment_id) FROM session_shares h WHERE h.session_id = e.ref_id
                    )) ORDER BY e.ref_id),
                (SELECT COUNT(*) FROM ledger_entries)
                """
            ).first
            guard let row else { throw LedgerError(.inconsistent, detail: "the audit returned no row") }
            let (total, outOfBalance, negative, unbalanced, paidTwice, entries) = try row.decode(
                (Int64, [String], [String], [String], [String], Int64).self
            )
            return LedgerAudit(
                totalBalanceCents: total,
                walletsOutOfBalance: outOfBalance,
                negativeWallets: negative,
                unbalancedTransfers: unbalanced,
                sessionsPaidTwice: paidTwice,
                entryCount: Int(entries)
            )
        }
    }

    package func snapshot() async throws -> LedgerSnapshot {
        // One snapshot for every table, so concurrent payments cannot make a sound ledger look broken.
        try await transaction(isolation: "REPEATABLE READ READ ONLY") { connection in
            let wallets = try await connection.rows(
                "SELECT id, user_id, available_cents, kind FROM wallet_accounts ORDER BY id"
            ).map { try WalletRow($0) }
            let entries = try await connection.rows(
                "SELECT \(unescaped: Connection.entryColumns) FROM ledger_entries ORDER BY seq"
            ).map { try StoredEntry($0) }
            let sessions = try await connection.rows(
                "SELECT \(unescaped: Connection.sessionColumns) FROM payment_sessions s ORDER BY s.id"
            ).map { try SessionRow($0) }
            let receipts = try await connection.rows("SELECT id, kind, session_id, body FROM receipts ORDER BY id").map
            {
                let (id, kind, sessionID, body) = try $0.decode((String, String, String, String).self)
                return StoredReceipt(id: id, kind: kind, sessionID: sessionID, body: body)
            }
            let webhooks = try await connection.webhookEvents()
            return LedgerSnapshot(
                wallets: wallets,
                entries: entries,
                chainHead: try await connection.chainHead(forUpdate: false),
                sessions: sessions,
                receipts: receipts,
                receiptKeys: try await connection.receiptKeys().map { ($0.published, $0.createdAt) },
                deposits: try await connection.rows(
                    "SELECT \(unescaped: Connection.depositColumns) FROM deposits ORDER BY id"
                ).map { try DepositRow($0) },
                payouts: try await connection.rows(
                    "SELECT \(unescaped: Connection.payoutColumns) FROM payouts p ORDER BY p.id"
                ).map { try PayoutRow($0) },
                refunds: try await connection.refunds(),
                shares: try await connection.allShares(),
                webhookEvents: webhooks.events,
                webhookOutboxStart: webhooks.start
            )
        }
    }

    package func receipt(sessionID: String, kind: ReceiptKind) async throws -> StoredReceipt? {
        try await read { connection in
            try await connection.first(
                """
                SELECT id, kind, session_id, body FROM receipts WHERE session_id = \(sessionID) AND kind = \(kind.rawValue)
                ORDER BY created_at, id LIMIT 1
                """,
                as: (String, String, String, String).self
            ).map { StoredReceipt(id: $0.0, kind: $0.1, sessionID: $0.2, body: $0.3) }
        }
    }

    package func receiptKeys() async throws -> [ReceiptKeyRow] {
        try await read { connection in try await connection.receiptKeys() }
    }

    package func ping() async throws {
        try await read { connection in try await connection.execute("SELECT 1") }
    }

    package func checkWritable() async throws {
        try await read { connection in
            try await connection.execute(
                """
                INSERT INTO health_checks (id, checked_at) VALUES (1, \(unescaped: Self.clockMilliseconds))
                ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at
                """
            )
        }
    }

    /// The notification channel session changes are announced on.
    package static let changeChannel = "gotchu_session_changes"

    /// `LISTEN`s on ``changeChannel`` over one connection of the pool, held for as long as it lasts, and publishes each
    /// notice; reconnects with backoff when the connection fails. Every time listening (re)starts, every watcher is
    /// woken to re-read, since changes committed while nobody listened were not heard.
    package func relayChanges(to changes: SessionChanges) async throws {
        var failures = 0
        while !Task.isCancelled {
            let started = ContinuousClock.now
            do {
                try await withConnection { connection in
                    try await connection.listen(on: Self.changeChannel) { notifications in
                        changes.publishAll()
                        for try await notification in notifications {
                            guard let (sid, notice) = SessionNotice.parse(payload: notification.payload) else {
                                continue
                            }
                            changes.publish(sid: sid, notice)
                        }
                    }
                }
            } catch {
                if Task.isCancelled { break }
                // A connection that listened for a while before failing starts the backoff over.
                failures = ContinuousClock.now - started > .seconds(10) ? 1 : failures + 1
                logger.warning(
                    "listening for session changes failed; event streams fall back to their safety poll",
                    metadata: ["error": "\(String(reflecting: error))"]
                )
            }
            // The sequence also ends when the connection closes; wait before listening again either way.
            try await Task.sleep(for: .milliseconds(min(200 << min(failures, 5), 5000)))
        }
    }
}

extension PostgresLedgerBackend {
    /// A connection and the statements both transactions and single reads run on it.
    struct Connection {
        let connection: PostgresConnection
        /// Whether statements run prepared (``PreparedLedgerStatement``) or parsed every time.
        let prepares: Bool
        let logger: Logger
        /// A transaction's writes held back until its next statement; `nil` outside transactions.
        let deferred: DeferredWrites?

        static let sessionColumns =
            "s.id, s.payee_id, s.amount_cents, s.status, s.exp_at, s.locked_by, s.lock_exp_at, s.paid_by, s.paid_at, "
            + "s.shares::BIGINT, s.shares_paid::BIGINT, s.paid_cents, s.tip_cents, s.refunds_swept_at, s.tip_percents, "
            + "s.reference"

        /// Runs `query`, prepared unless the backend says otherwise, and reads every row, so errors raised while it
        /// executes surface here.
        func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
            try await sendDeferred()
            return try await send(query)
        }

        /// Runs `query` parsed on the spot (schema changes, prepared statements off, or past
        /// ``StatementNames/capacity``) and reads every row.
        func unprepared(_ query: PostgresQuery) async throws -> [PostgresRow] {
            try await sendDeferred()
            return try await sendUnprepared(query)
        }

        private func send(_ query: PostgresQuery) async throws -> [PostgresRow] {
            if prepares, let name = StatementNames.shared.name(for: query.sql) {
                return try await PreparedLedgerStatement.run(query, named: name, on: connection, logger: logger)
            }
            return try await sendUnprepared(query)
        }

        private func sendUnprepared(_ query: PostgresQuery) async throws -> [PostgresRow] {
            try await connection.query(query, logger: logger).collect()
        }

        /// A write whose answer nobody reads, to `table` (`nil` for a notification): in a transaction it is held back
        /// and sent with the writes after it, as one statement, before the transaction's next read or its COMMIT
        /// (see ``DeferredWrites``); outside one it runs at once.
        func write(_ statement: SQLFragment, to table: String?) async throws {
            guard let deferred else { return try await execute(statement.query) }
            if deferred.hold(statement, writing: table) { return }
            try await sendDeferred()
            _ = deferred.hold(statement, writing: table)
        }

        /// Runs `read`, a `SELECT` of `table` alone, with the writes held back to other tables as one statement (see
        /// ``DeferredWrites/take(before:reading:)``); otherwise as ``rows(_:)`` does.
        func rows(_ read: SQLFragment, reading table: String) async throws -> [PostgresRow] {
            if let joined = deferred?.take(before: read, reading: table) { return try await send(joined) }
            return try await rows(read.query)
        }

        private func sendDeferred() async throws {
            guard let deferred, let held = deferred.take() else { return }
            _ = try await send(held)
        }

        func execute(_ query: PostgresQuery) async throws {
            _ = try await rows(query)
        }

        func first<each Column: PostgresDecodable>(
            _ query: PostgresQuery,
            as type: (repeat each Column).Type
        ) async throws -> (repeat each Column)? {
            guard let row = try await rows(query).first else { return nil }
            return try row.decode(type)
        }

        func value<Value: PostgresDecodable>(_ query: PostgresQuery, as type: Value.Type) async throws -> Value? {
            guard let row = try await rows(query).first else { return nil }
            return try row.decode(Value.self)
        }

        func session(id: String, forUpdate: Bool) async throws -> SessionRow? {
            try await rows(
                """
                SELECT \(unescaped: Self.sessionColumns) FROM payment_sessions s WHERE s.id = \(id)
                \(unescaped: forUpdate ? "FOR UPDATE" : "")
                """
            ).first.map { try SessionRow($0) }
        }

        /// The EIDs the session was given, oldest first.
        func eids(sessionID: String) async throws -> [SessionEID] {
            try await rows(
                """
                SELECT eid, retired_at FROM session_eids WHERE session_id = \(sessionID) ORDER BY created_at, eid
                """
            ).map { row in
                let (eid, retiredAt) = try row.decode((String, Int64?).self)
                return SessionEID(eid: eid, retiredAt: retiredAt)
            }
        }

        func user(id: String) async throws -> LedgerUser? {
            try await first(
                "SELECT id, display_name, disabled_at, tokens_not_before FROM users WHERE id = \(id)",
                as: (String, String, Int64?, Int64?).self
            ).map { LedgerUser(id: $0.0, displayName: $0.1, disabled: $0.2 != nil, tokensNotBefore: $0.3) }
        }

        static let entryColumns =
            "seq, id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id, created_at, hash"

        func chainHead(forUpdate: Bool) async throws -> ChainHead {
            // A transfer's balances, held back, go with it: one round trip fewer per payment.
            let read: SQLFragment =
                forUpdate
                ? "SELECT head_hash, entry_count FROM ledger_chain WHERE id = 1 FOR UPDATE"
                : "SELECT head_hash, entry_count FROM ledger_chain WHERE id = 1"
            guard let row = try await rows(read, reading: "ledger_chain").first else {
                throw LedgerError(.inconsistent, detail: "the ledger has no chain head")
            }
            let (hash, count) = try row.decode((String, Int64).self)
            return ChainHead(hash: hash, count: count)
        }

        func receiptKeys() async throws -> [ReceiptKeyRow] {
            try await rows(
                """
                SELECT id, public_key, private_key, created_at, retired_at FROM receipt_keys
                ORDER BY retired_at IS NOT NULL, retired_at DESC, created_at DESC, id DESC
                """
            ).map { row in
                let (id, publicKey, privateKey, createdAt, retiredAt) = try row.decode(
                    (String, String, String?, Int64, Int64?).self
                )
                return ReceiptKeyRow(
                    id: id,
                    publicKey: publicKey,
                    privateKey: privateKey,
                    createdAt: createdAt,
                    retiredAt: retiredAt
                )
            }
        }

        func wallet(userID: String, forUpdate: Bool) async throws -> WalletRow? {
            try await rows(
                """
                SELECT id, user_id, available_cents, kind FROM wallet_accounts WHERE user_id = \(userID)
                \(unescaped: forUpdate ? "FOR UPDATE" : "")
                """
            ).first.map { try WalletRow($0) }
        }
    }

    /// A READ COMMITTED transaction: rows read `forUpdate` stay locked until it ends.
    package struct Transaction: LedgerTransaction {
        let connection: Connection
        package let now: Int64

        package func user(email: String) async throws -> LedgerUser? {
            try await connection.first(
                "SELECT id, display_name, disabled_at, tokens_not_before FROM users WHERE email = \(email)",
                as: (String, String, Int64?, Int64?).self
            ).map { LedgerUser(id: $0.0, displayName: $0.1, disabled: $0.2 != nil, tokensNotBefore: $0.3) }
        }

        package func user(id: String) async throws -> LedgerUser? {
            try await connection.user(id: id)
        }

        package func setPassword(userID: String, hash: String) async throws {
            try await connection.execute("UPDATE users SET password_hash = \(hash) WHERE id = \(userID)")
        }

        package func replacePassword(userID: String, hash old: String, with new: String) async throws {
            try await connection.execute(
                "UPDATE users SET password_hash = \(new) WHERE id = \(userID) AND password_hash = \(old)"
            )
        }

        package func disable(userID: String) async throws {
            try await connection.execute("UPDATE users SET disabled_at = \(now) WHERE id = \(userID)")
        }

        package func setVerifiedName(userID: String, name: String) async throws {
            try await connection.execute("UPDATE users SET verified_name = \(name) WHERE id = \(userID)")
        }

        package func insert(refreshToken row: RefreshTokenRow) async throws {
            try await connection.execute(
                """
                INSERT INTO refresh_tokens (token_hash, family_id, user_id, created_at, expires_at)
                VALUES (\(row.digest), \(row.familyID), \(row.userID), \(now), \(row.expiresAt))
                """
            )
        }

        /// The token's row, locked until the transaction ends: two refreshes with one token are serialized, so the
        /// second sees it used.
        package func refreshToken(digest: String) async throws -> RefreshTokenRow? {
            try await connection.first(
                """
                SELECT token_hash, family_id, user_id, expires_at, used_at, revoked_at FROM refresh_tokens
                WHERE token_hash = \(digest) FOR UPDATE
                """,
                as: (String, String, String, Int64, Int64?, Int64?).self
            ).map {
                RefreshTokenRow(
                    digest: $0.0,
                    familyID: $0.1,
                    userID: $0.2,
                    expiresAt: $0.3,
                    usedAt: $0.4,
                    revokedAt: $0.5
                )
            }
        }

        package func markUsed(refreshToken digest: String) async throws {
            try await connection.execute("UPDATE refresh_tokens SET used_at = \(now) WHERE token_hash = \(digest)")
        }

        package func revokeRefreshTokens(familyID: String) async throws {
            try await connection.execute(
                """
                UPDATE refresh_tokens SET revoked_at = \(now) WHERE family_id = \(familyID) AND revoked_at IS NULL
                """
            )
        }

        package func revokeRefreshTokens(userID: String) async throws {
            try await connection.execute(
                "UPDATE refresh_tokens SET revoked_at = \(now) WHERE user_id = \(userID) AND revoked_at IS NULL"
            )
        }

        package func revokeAccessTokens(userID: String) async throws {
            try await connection.execute("UPDATE users SET tokens_not_before = \(now) WHERE id = \(userID)")
        }

        package func deleteRefreshTokens(expiredBefore time: Int64) async throws -> Int {
            let count = try await connection.value(
                """
                WITH pruned AS (DELETE FROM refresh_tokens WHERE expires_at < \(time) RETURNING 1)
                SELECT COUNT(*) FROM pruned
                """,
                as: Int64.self
            )
            return Int(count ?? 0)
        }

        package func insert(audit entry: AuditEntry) async throws {
            try await connection.execute(
                """
                INSERT INTO admin_audit (actor, action, subject, detail, created_at)
                VALUES (\(entry.actor), \(entry.action), \(entry.subject), \(entry.detail), \(entry.at))
                """
            )
        }

        package func insertWallet(id: String, userID: String) async throws {
            try await connection.execute(
                """
                INSERT INTO wallet_accounts (id, user_id, kind, available_cents, created_at)
                VALUES (\(id), \(userID), \(WalletKind.user.rawValue), 0, \(now))
                """
            )
        }

        package func wallet(userID: String) async throws -> WalletRow? {
            try await connection.wallet(userID: userID, forUpdate: false)
        }

        package func walletsForUpdate(accountIDs: [String], userIDs: [String]) async throws -> [WalletRow] {
            try await connection.rows(
                """
                SELECT id, user_id, available_cents, kind FROM wallet_accounts
                WHERE id = ANY(\(accountIDs)) OR user_id = ANY(\(userIDs)) ORDER BY id FOR UPDATE
                """
            ).map { try WalletRow($0) }
        }

        package func setBalances(_ balances: [(walletID: String, balance: Cents)]) async throws {
            // One statement; the rows are already locked, so the order it updates them in does not matter.
            try await connection.write(
                """
                UPDATE wallet_accounts w SET available_cents = b.balance
                FROM UNNEST(\(balances.map(\.walletID)), \(balances.map(\.balance))) AS b(id, balance)
                WHERE w.id = b.id
                """,
                to: "wallet_accounts"
            )
        }

        package func insert(entries: [EntryRow]) async throws {
            try await connection.write(
                """
                INSERT INTO ledger_entries (id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id,
                created_at, hash) SELECT e.id, e.transfer_id, e.wallet_id, e.direction, e.amount_cents, e.type,
                e.ref_type, e.ref_id, e.created_at, e.hash FROM UNNEST(\(entries.map(\.id)), \(entries.map(\.transferID)),
                \(entries.map(\.walletID)), \(entries.map(\.direction.rawValue)), \(entries.map(\.amount)),
                \(entries.map(\.type)), \(entries.map(\.refType)), \(entries.map(\.refID)),
                \(entries.map(\.createdAt)), \(entries.map(\.hash))) WITH ORDINALITY AS e(id, transfer_id, wallet_id,
                direction, amount_cents, type, ref_type, ref_id, created_at, hash, position) ORDER BY e.position
                """,
                to: "ledger_entries"
            )
        }

        package func session(id: String, forUpdate: Bool) async throws -> SessionRow? {
            try await connection.session(id: id, forUpdate: forUpdate)
        }

        package func keyedSession(payeeID: String, key: String) async throws -> KeyedSession? {
            try await connection.first(
                """
                SELECT s.id, e.eid, s.amount_cents, s.exp_at, s.shares::BIGINT, s.tip_percents, s.reference
                FROM payment_sessions s
                JOIN session_eids e ON e.session_id = s.id
                WHERE s.payee_id = \(payeeID) AND s.create_key = \(key)
                ORDER BY e.retired_at IS NULL DESC, e.created_at DESC, e.eid LIMIT 1
                """,
                as: (String, String, Int64, Int64, Int64, String?, String?).self
            ).map {
                KeyedSession(
                    sid: $0.0,
                    eid: $0.1,
                    amount: $0.2,
                    expiresAt: $0.3,
                    shares: Int($0.4),
                    tipPrompt: try TipPrompt(stored: $0.5),
                    reference: $0.6
                )
            }
        }

        /// Two servers drawing the same EID at once: the second waits, then sees the first's session.
        package func lockEID(_ eid: EID) async throws {
            try await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(\(eid.rawValue), 0))")
        }

        package func isAllocated(eid: EID) async throws -> Bool {
            try await connection.value(
                "SELECT EXISTS (SELECT 1 FROM session_eids WHERE eid = \(eid.rawValue))",
                as: Bool.self
            ) ?? true
        }

        package func eids(sessionID: String) async throws -> [SessionEID] {
            try await connection.eids(sessionID: sessionID)
        }

        package func retireEIDs(sessionID: String) async throws {
            try await connection.execute(
                "UPDATE session_eids SET retired_at = \(now) WHERE session_id = \(sessionID) AND retired_at IS NULL"
            )
        }

        package func insert(session: SessionRow, createKey: String?) async throws -> Bool {
            try await !connection.rows(
                """
                INSERT INTO payment_sessions (
                    id, payee_id, amount_cents, status, created_at, exp_at, create_key, shares, tip_percents, reference
                )
                VALUES (\(session.id), \(session.payeeID), \(session.amount), \(session.storedStatus.rawValue),
                \(now), \(session.expiresAt), \(createKey), \(Int64(session.shares)), \(session.tipPrompt.stored),
                \(session.reference))
                ON CONFLICT (payee_id, create_key) DO NOTHING RETURNING 1
                """
            ).isEmpty
        }

        package func insert(eid: EID, sessionID: String) async throws {
            try await connection.write(
                "INSERT INTO session_eids (eid, session_id, created_at) VALUES (\(eid.rawValue), \(sessionID), \(now))",
                to: "session_eids"
            )
        }

        /// Serializes one payer's locks. Nothing else takes this lock, so it cannot deadlock with the row locks.
        package func lockPayer(_ payerID: String) async throws {
            try await connection.execute("SELECT pg_advisory_xact_lock(hashtext(\(payerID)))")
        }

        package func locksHeld(by payerID: String, excluding sid: String) async throws -> (count: Int, amount: Cents) {
            // SUM over bigint is numeric; the cast back fails loudly rather than wrap.
            let (count, amount) =
                try await connection.first(
                    """
                    SELECT COUNT(*), COALESCE(SUM(amount), 0)::BIGINT FROM (
                        SELECT amount_cents AS amount FROM payment_sessions
                        WHERE locked_by = \(payerID) AND status = \(StoredSessionStatus.locked.rawValue)
                        AND lock_exp_at > \(now) AND exp_at > \(now) AND id <> \(sid)
                        UNION ALL
                        SELECT h.amount_cents FROM session_shares h JOIN payment_sessions s ON s.id = h.session_id
                        WHERE h.locked_by = \(payerID) AND h.payment_id IS NULL AND h.lock_exp_at > \(now)
                        AND s.exp_at > \(now) AND s.status NOT IN ('PAID', 'CANCELLED') AND h.session_id <> \(sid)
                    ) held
                    """,
                    as: (Int64, Int64).self
                ) ?? (Int64(0), Int64(0))
            return (Int(count), amount)
        }

        package func update(session sid: String, _ change: SessionChange) async throws {
            let statement: SQLFragment
            switch change {
            case .lock(let payerID, let until):
                statement = """
                    UPDATE payment_sessions SET status = \(StoredSessionStatus.locked.rawValue), locked_by = \(payerID),
                    lock_exp_at = \(until) WHERE id = \(sid)
                    """
            case .unlock:
                statement = """
                    UPDATE payment_sessions SET status = \(StoredSessionStatus.advertising.rawValue), lock_exp_at = \(now)
                    WHERE id = \(sid)
                    """
            case .paid(let payerID, let tip):
                statement = """
                    UPDATE payment_sessions SET status = \(StoredSessionStatus.paid.rawValue), paid_by = \(payerID),
                    paid_at = \(now), locked_by = NULL, lock_exp_at = NULL, shares_paid = 1, paid_cents = amount_cents,
                    tip_cents = \(tip) WHERE id = \(sid)
                    """
            case .sharesPaid(let count, let amount, let tip, let payerID, let complete):
                statement = """
                    UPDATE payment_sessions SET shares_paid = shares_paid + \(Int64(count)),
                    paid_cents = paid_cents + \(amount), tip_cents = tip_cents + \(tip),
                    status = COALESCE(\(complete ? StoredSessionStatus.paid.rawValue : nil), status),
                    paid_by = COALESCE(\(complete ? payerID : nil), paid_by),
                    paid_at = COALESCE(\(complete ? now : nil), paid_at) WHERE id = \(sid)
                    """
            case .cancelled:
                statement = """
                    UPDATE payment_sessions SET status = \(StoredSessionStatus.cancelled.rawValue), cancelled_at = \(now)
                    WHERE id = \(sid)
                    """
            case .refundsSwept:
                statement = "UPDATE payment_sessions SET refunds_swept_at = \(now) WHERE id = \(sid)"
            case .expiryNoted:
                statement = "UPDATE payment_sessions SET expiry_noted_at = \(now) WHERE id = \(sid)"
            }
            try await connection.write(statement, to: "payment_sessions")
        }

        /// The keys' own number space (seed 1), apart from the EID locks (seed 0). A collision of two keys' hashes
        /// can only answer one of them 409, which its retry gets past.
        package func claimKey(userID: String, key: String, wait: Bool) async throws -> Bool {
            // A key is scoped to its user; a newline appears in neither part.
            let name = userID + "\n" + key
            if wait {
                try await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(\(name), 1))")
                return true
            }
            return try await connection.value(
                "SELECT pg_try_advisory_xact_lock(hashtextextended(\(name), 1))",
                as: Bool.self
            ) ?? false
        }

        /// The key's row, locked until the transaction ends.
        package func idempotencyRecord(userID: String, key: String) async throws -> IdempotencyRecord? {
            guard
                let (sid, state, updatedAt, balance, kind, detail) = try await connection.first(
                    """
                    SELECT sid, state, updated_at, balance_cents, problem_type, problem_detail FROM idempotency_keys
                    WHERE user_id = \(userID) AND key = \(key) FOR UPDATE
                    """,
                    as: (String, String, Int64, Int64?, String?, String?).self
                )
            else { return nil }
            return IdempotencyRecord(
                sid: sid,
                state: state,
                updatedAt: updatedAt,
                balance: balance,
                refusalKind: kind,
                refusalDetail: detail
            )
        }

        package func insertInFlight(userID: String, key: String, sid: String) async throws -> Bool {
            try await !connection.rows(
                """
                INSERT INTO idempotency_keys (user_id, key, sid, state, created_at, updated_at)
                VALUES (\(userID), \(key), \(sid), \(IdempotencyState.inFlight.rawValue), \(now), \(now))
                ON CONFLICT (user_id, key) DO NOTHING RETURNING 1
                """
            ).isEmpty
        }

        package func touch(userID: String, key: String) async throws {
            try await connection.execute(
                "UPDATE idempotency_keys SET updated_at = \(now) WHERE user_id = \(userID) AND key = \(key)"
            )
        }

        package func delete(userID: String, key: String) async throws {
            try await connection.execute("DELETE FROM idempotency_keys WHERE user_id = \(userID) AND key = \(key)")
        }

        package func record(
            outcome: SendOutcome,
            paymentID: String?,
            userID: String,
            key: String,
            sid: String
        ) async throws {
            let stored = IdempotencyRecord.columns(for: outcome)
            try await connection.write(
                """
                INSERT INTO idempotency_keys (user_id, key, sid, state, balance_cents, problem_type, problem_detail,
                created_at, updated_at, payment_id) VALUES (\(userID), \(key), \(sid),
                \(IdempotencyState.done.rawValue), \(stored.balance), \(stored.refusalKind), \(stored.refusalDetail),
                \(now), \(now), \(paymentID))
                ON CONFLICT (user_id, key) DO UPDATE SET state = EXCLUDED.state, balance_cents = EXCLUDED.balance_cents,
                problem_type = EXCLUDED.problem_type, problem_detail = EXCLUDED.problem_detail,
                updated_at = EXCLUDED.updated_at, payment_id = EXCLUDED.payment_id
                """,
                to: "idempotency_keys"
            )
        }

        /// The head row locked until commit: a concurrent transfer waits here (after its wallets, the last lock it
        /// takes) and then reads the head this one committed, so each transfer chains on the one before it.
        package func chainHeadForUpdate() async throws -> ChainHead {
            try await connection.chainHead(forUpdate: true)
        }

        package func setChainHead(_ head: ChainHead) async throws {
            try await connection.write(
                "UPDATE ledger_chain SET head_hash = \(head.hash), entry_count = \(head.count) WHERE id = 1",
                to: "ledger_chain"
            )
        }

        package func unchainedEntries(limit: Int) async throws -> [StoredEntry] {
            try await connection.rows(
                """
                SELECT \(unescaped: Connection.entryColumns) FROM ledger_entries WHERE hash IS NULL ORDER BY seq
                LIMIT \(Int64(limit))
                """
            ).map { try StoredEntry($0) }
        }

        package func setHashes(_ hashes: [(seq: Int64, hash: String)]) async throws {
            try await connection.execute(
                """
                UPDATE ledger_entries e SET hash = h.hash FROM UNNEST(\(hashes.map(\.seq)), \(hashes.map(\.hash)))
                AS h(seq, hash) WHERE e.seq = h.seq
                """
            )
        }

        /// Servers starting together on a new database make one key between them.
        package func lockReceiptKeys() async throws {
            try await connection.execute("SELECT pg_advisory_xact_lock(\(PostgresLedgerSchema.receiptKeyLockKey))")
        }

        package func receiptKeys() async throws -> [ReceiptKeyRow] {
            try await connection.receiptKeys()
        }

        package func insert(receiptKey: ReceiptKeyRow) async throws {
            try await connection.execute(
                """
                INSERT INTO receipt_keys (id, public_key, private_key, created_at, retired_at) VALUES (\(receiptKey.id),
                \(receiptKey.publicKey), \(receiptKey.privateKey), \(receiptKey.createdAt), \(receiptKey.retiredAt))
                """
            )
        }

        package func retireReceiptKeys(except keyID: String) async throws {
            try await connection.execute(
                """
                UPDATE receipt_keys SET retired_at = COALESCE(retired_at, \(now)), private_key = NULL
                WHERE id <> \(keyID)
                """
            )
        }

        package func insert(receipt: StoredReceipt) async throws {
            try await connection.write(
                """
                INSERT INTO receipts (id, kind, session_id, body, created_at) VALUES (\(receipt.id), \(receipt.kind),
                \(receipt.sessionID), \(receipt.body), \(now))
                """,
                to: "receipts"
            )
        }

        package func deleteKeys(createdBefore time: Int64) async throws -> Int {
            let count = try await connection.value(
                """
                WITH pruned AS (DELETE FROM idempotency_keys WHERE created_at < \(time) RETURNING 1)
                SELECT COUNT(*) FROM pruned
                """,
                as: Int64.self
            )
            return Int(count ?? 0)
        }

        /// `pg_notify` inside the transaction: PostgreSQL delivers it to every listener when, and only if, the
        /// transaction commits.
        package func announce(sid: String, _ notice: SessionNotice) async throws {
            let payload = SessionNotice.payload(sid: sid, notice)
            try await connection.write("SELECT pg_notify(\(PostgresLedgerBackend.changeChannel), \(payload))", to: nil)
        }
    }
}

extension SessionRow {
    init(_ row: PostgresRow) throws {
        let columns = try row.decode(
            (
                String, String, Int64, String, Int64, String?, Int64?, String?, Int64?, Int64, Int64, Int64, Int64,
                Int64?,
                String?, String?
            ).self
        )
        self.init(
            id: columns.0,
            payeeID: columns.1,
            amount: columns.2,
            storedStatus: try StoredSessionStatus(stored: columns.3),
            expiresAt: columns.4,
            lockedBy: columns.5,
            lockExpiresAt: columns.6,
            paidBy: columns.7,
            paidAt: columns.8,
            shares: Int(columns.9),
            sharesPaid: Int(columns.10),
            paidCents: columns.11,
            tip: columns.12,
            refundsSweptAt: columns.13,
            tipPrompt: try TipPrompt(stored: columns.14),
            reference: columns.15
        )
    }
}

extension StoredEntry {
    init(_ row: PostgresRow) throws {
        let (seq, id, transferID, walletID, direction, amount, type, refType, refID, createdAt, hash) = try row.decode(
            (Int64, String, String, String, String, Int64, String, String, String, Int64, String?).self
        )
        try self.init(
            seq: seq,
            id: id,
            transferID: transferID,
            walletID: walletID,
            direction: direction,
            amount: amount,
            type: type,
            refType: refType,
            refID: refID,
            createdAt: createdAt,
            hash: hash
        )
    }
}

extension WalletRow {
    init(_ row: PostgresRow) throws {
        let (id, userID, balance, kind) = try row.decode((String, String?, Int64, String).self)
        guard let kind = WalletKind(rawValue: kind) else {
            throw LedgerError(.inconsistent, detail: "a wallet has an unknown kind")
        }
        self.init(id: id, userID: userID, balance: balance, kind: kind)
    }
}

/// Counts the backend's leases from the pool: asked for and not yet granted (waiting), and granted and not yet
/// returned (in use).
private final class PoolLeases: Sendable {
    private let counts = Mutex<(inUse: Int, waiting: Int)>((0, 0))

    func usage() -> (inUse: Int, waiting: Int) { counts.withLock { $0 } }

    /// A lease asked for: waiting until ``Lease/granted()``, counted until ``Lease/end()``.
    func ask() -> Lease {
        counts.withLock { $0.waiting += 1 }
        return Lease(leases: self)
    }

    /// One lease's passage from waiting to in use to returned (or given up while waiting).
    final class Lease: Sendable {
        private let leases: PoolLeases
        private let isGranted = Atomic(false)

        fileprivate init(leases: PoolLeases) { self.leases = leases }

        /// The pool granted a connection.
        func granted() {
            guard !isGranted.exchange(true, ordering: .relaxed) else { return }
            leases.counts.withLock {
                $0.waiting -= 1
                $0.inUse += 1
            }
        }

        func end() {
            let granted = isGranted.load(ordering: .relaxed)
            leases.counts.withLock {
                if granted { $0.inUse -= 1 } else { $0.waiting -= 1 }
            }
        }
    }
}
