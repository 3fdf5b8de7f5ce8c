public import Foundation
public import GotchuAPI
public import GotchuCore
public import Logging
public import PostgresNIO

/// The ledger store on PostgreSQL, for one or more servers sharing a database.
///
/// **Concurrency.** Transactions run at READ COMMITTED and take explicit row locks (`SELECT … FOR UPDATE`) on every
/// row a decision depends on, always in the same order: the idempotency key (its advisory lock, taken without
/// waiting, then its row), then the session, then the wallets
/// sorted by id (one statement with `ORDER BY id FOR UPDATE`: PostgreSQL sorts before it locks). A locked row is
/// read in its latest committed version and cannot change until we commit, so each check holds at commit; with
/// one global lock order no two transactions can wait on each other in a cycle, so deadlocks cannot arise. New rows
/// are guarded by unique keys (users' e-mail, idempotency keys, a payee's session create keys) or, for EIDs unique
/// among live sessions, by a transaction-scoped advisory lock on the EID. SERIALIZABLE would also be correct, but
/// every hot session would then cost aborted and retried transactions; locks make the losers wait a few milliseconds
/// instead. As a safeguard, a transaction that fails with a deadlock or a serialization failure anyway is run again
/// (up to five times) rather than surfacing as a server error.
///
/// **Clock.** Expiry and lock lapses are judged inside the transaction at a time read at its start. By default that
/// is the database's `clock_timestamp()`: one clock for every server on the database, so replicas with skewed clocks
/// still agree on when a session expired. An injected clock replaces it (its value is read at the start of each
/// transaction and passed as a parameter); tests use that to move time by hand.
///
/// The store keeps no state of its own: idempotency, locks and expiry live in the database, so several servers on
/// one database behave as one. ``client`` is a `Service`: run it (for instance in the application's service group)
/// for as long as the store is used.
public final class PostgresLedgerStore: LedgerStore {
    public let policy: LedgerPolicy
    /// The connection pool; it must be running while the store is used.
    public let client: PostgresClient
    private let clock: (@Sendable () -> Date)?
    private let logger: Logger

    /// How many times a transaction that failed with a deadlock or serialization failure is run again.
    static let retryLimit = 5

    /// A store over the database at `url`.
    /// - Parameters:
    ///   - clock: replaces the database clock (tests); `nil` judges time by `clock_timestamp()` on the server.
    ///   - maximumConnections: the pool's size.
    public convenience init(
        url: PostgresURL,
        policy: LedgerPolicy = LedgerPolicy(),
        clock: (@Sendable () -> Date)? = nil,
        maximumConnections: Int = 20,
        logger: Logger
    ) {
        var configuration = url.configuration
        configuration.options.maximumConnections = maximumConnections
        self.init(
            client: PostgresClient(configuration: configuration, backgroundLogger: logger),
            policy: policy,
            clock: clock,
            logger: logger
        )
    }

    /// A store over an existing client, which the caller runs.
    public init(
        client: PostgresClient,
        policy: LedgerPolicy = LedgerPolicy(),
        clock: (@Sendable () -> Date)? = nil,
        logger: Logger
    ) {
        self.client = client
        self.policy = policy
        self.clock = clock
        self.logger = logger
    }

    public func migrate() async throws {
        try await transaction { connection, _ in
            try await self.execute("SELECT pg_advisory_xact_lock(\(PostgresLedgerSchema.migrationLockKey))", connection)
            try await self.execute(
                "CREATE TABLE IF NOT EXISTS gotchu_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)",
                connection
            )
            let applied = Set(
                try await self.rows("SELECT name FROM gotchu_migrations", connection).map {
                    try $0.decode(String.self)
                }
            )
            for migration in PostgresLedgerSchema.migrations where !applied.contains(migration.name) {
                for statement in migration.statements {
                    try await self.execute(PostgresQuery(unsafeSQL: statement), connection)
                }
                try await self.execute(
                    "INSERT INTO gotchu_migrations (name, applied_at) VALUES (\(migration.name), now())",
                    connection
                )
            }
        }
    }

    // MARK: Users and wallets

    public func login(email: String) async throws -> LedgerUser {
        let (normalized, displayName) = try LedgerUser.normalize(email: email)
        return try await transaction { connection, now in
            // Two first logins with one address race on the unique e-mail: the loser reads the winner's row.
            for _ in 0..<2 {
                if case let (id, name)? = try await self.first(
                    "SELECT id, display_name FROM users WHERE email = \(normalized)",
                    as: (String, String).self,
                    connection
                ) {
                    return LedgerUser(id: id, displayName: name)
                }
                let user = LedgerUser(id: Self.newID(), displayName: displayName)
                let inserted = try await self.rows(
                    """
                    INSERT INTO users (id, email, display_name, created_at) VALUES (\(user.id), \(normalized),
                    \(displayName), \(now)) ON CONFLICT (email) DO NOTHING RETURNING id
                    """,
                    connection
                )
                guard !inserted.isEmpty else { continue }
                try await self.execute(
                    """
                    INSERT INTO wallet_accounts (id, user_id, kind, available_cents, created_at)
                    VALUES (\(Self.newID()), \(user.id), \(WalletKind.user.rawValue), 0, \(now))
                    """,
                    connection
                )
                return user
            }
            throw LedgerError(.unavailable, detail: "could not create the user; try again")
        }
    }

    public func user(id: String) async throws -> LedgerUser? {
        try await client.withConnection { connection in
            try await self.first(
                "SELECT id, display_name FROM users WHERE id = \(id)",
                as: (String, String).self,
                connection
            )
            .map { LedgerUser(id: $0.0, displayName: $0.1) }
        }
    }

    public func wallet(userID: String, recentLimit: Int) async throws -> WalletResponse {
        // One snapshot for the balance and the entries, so they agree.
        try await transaction(readOnly: true) { connection, _ in
            let wallet = try await self.wallet(of: userID, connection)
            let entries = try await self.rows(
                """
                SELECT id, direction, amount_cents, type, ref_type, ref_id, created_at FROM ledger_entries
                WHERE wallet_id = \(wallet.id) ORDER BY seq DESC LIMIT \(Int64(recentLimit))
                """,
                connection
            ).map { row in
                let (id, direction, amount, type, refType, refID, createdAt) = try row.decode(
                    (String, String, Int64, String, String, String, Int64).self
                )
                return LedgerEntry(
                    id: id,
                    direction: EntryDirection(rawValue: direction) ?? .debit,
                    amountCents: amount,
                    type: type,
                    refType: refType,
                    refID: refID,
                    createdAt: LedgerTime.date(createdAt)
                )
            }
            return WalletResponse(walletID: wallet.id, availableCents: wallet.balance, recent: entries)
        }
    }

    public func fund(userID: String, amountCents: Cents) async throws -> Cents {
        try policy.validate(amount: amountCents)
        return try await transaction { connection, now in
            let balances = try await self.transfer(
                connection,
                from: .account(LedgerSchema.fundingWalletID),
                to: .user(userID),
                amount: amountCents,
                kinds: ("DEV_FUND_OUT", "DEV_FUND"),
                reference: ("funding", Self.newID()),
                now: now
            )
            return balances.to
        }
    }

    // MARK: Sessions

    public func createSession(
        payeeID: String,
        amountCents: Cents,
        idempotencyKey: String?
    ) async throws -> (session: CreateSessionResponse, replayed: Bool) {
        try policy.validate(amount: amountCents)
        let lifetime = LedgerTime.milliseconds(policy.sessionLifetime)
        return try await transaction { connection, now in
            _ = try await self.wallet(of: payeeID, connection)
            if let idempotencyKey, let earlier = try await self.keyedSession(payeeID, idempotencyKey, connection) {
                return (try earlier.replay(amountCents: amountCents), true)
            }
            let sid = Self.newID()
            let expiresAt = now + lifetime
            for _ in 0..<16 {
                let eid = EID.random()
                // Two servers drawing the same EID at once: the lock makes the second see the first's session.
                try await self.execute("SELECT pg_advisory_xact_lock(hashtextextended(\(eid.rawValue), 0))", connection)
                let taken =
                    try await self.value(
                        """
                        SELECT EXISTS (SELECT 1 FROM session_eids e JOIN payment_sessions s ON s.id = e.session_id
                        WHERE e.eid = \(eid.rawValue) AND s.status IN (\(Self.advertising), \(Self.locked)) AND s.exp_at > \(now))
                        """,
                        as: Bool.self,
                        connection
                    ) ?? true
                if taken { continue }
                // A concurrent create with the same key waits here on the unique key until the other commits (then
                // inserts nothing) or rolls back (then inserts). Nothing after this takes another lock, so the wait
                // cannot close a cycle.
                let inserted = try await self.rows(
                    """
                    INSERT INTO payment_sessions (id, payee_id, amount_cents, status, created_at, exp_at, create_key)
                    VALUES (\(sid), \(payeeID), \(amountCents), \(Self.advertising), \(now), \(expiresAt),
                    \(idempotencyKey))
                    ON CONFLICT (payee_id, create_key) DO NOTHING RETURNING 1
                    """,
                    connection
                )
                guard !inserted.isEmpty else {
                    // READ COMMITTED: this statement sees the winner's committed row.
                    guard let idempotencyKey,
                        let earlier = try await self.keyedSession(payeeID, idempotencyKey, connection)
                    else {
                        throw LedgerError(.unavailable, detail: "could not create the session; try again")
                    }
                    return (try earlier.replay(amountCents: amountCents), true)
                }
                try await self.execute(
                    "INSERT INTO session_eids (eid, session_id, created_at) VALUES (\(eid.rawValue), \(sid), \(now))",
                    connection
                )
                return (CreateSessionResponse(sid: sid, eid: eid, expiresAt: LedgerTime.date(expiresAt)), false)
            }
            throw LedgerError(.unavailable, detail: "could not allocate a unique EID; try again")
        }
    }

    public func resolve(eid: EID) async throws -> ResolveResponse {
        try await read { connection, now in
            let rows = try await self.rows(
                """
                SELECT \(unescaped: Self.sessionColumns), u.display_name, u.email FROM session_eids e
                JOIN payment_sessions s ON s.id = e.session_id JOIN users u ON u.id = s.payee_id
                WHERE e.eid = \(eid.rawValue) ORDER BY s.created_at DESC, s.seq DESC LIMIT 1
                """,
                connection
            )
            guard let row = rows.first else {
                throw LedgerError(.sessionNotFound, detail: "no session advertises EID \(eid)")
            }
            let session = try Self.sessionRow(row)
            try session.requireLive(now: now)
            return ResolveResponse(
                sid: session.id,
                amountCents: session.amount,
                payeeDisplay: PayeeDisplay(
                    name: try row.makeRandomAccess()["display_name"].decode(String.self),
                    domain: EmailAddress.domain(of: try row.makeRandomAccess()["email"].decode(String.self))
                )
            )
        }
    }

    public func lock(sid: String, payerID: String) async throws {
        let lockLifetime = LedgerTime.milliseconds(policy.lockLifetime)
        let maximumLocks = policy.maximumLocksPerPayer
        try await transaction { connection, now in
            // Serializes one payer's locks, so two at once cannot both see room under the cap. Nothing else takes
            // this lock, so it cannot deadlock with the row locks.
            try await self.execute("SELECT pg_advisory_xact_lock(hashtext(\(payerID)))", connection)
            let session = try await self.session(sid, forUpdate: true, connection)
            try session.requireLockable(by: payerID, now: now)
            // SUM over bigint is numeric; the cast back fails loudly rather than wrap.
            let (count, amount) =
                try await self.first(
                    """
                    SELECT COUNT(*), COALESCE(SUM(amount_cents), 0)::BIGINT FROM payment_sessions
                    WHERE locked_by = \(payerID) AND status = \(Self.locked) AND lock_exp_at > \(now) AND exp_at > \(now)
                    AND id <> \(sid)
                    """,
                    as: (Int64, Int64).self,
                    connection
                ) ?? (Int64(0), Int64(0))
            try LockLimit.check(held: Int(count), maximum: maximumLocks)
            let wallet = try await self.wallet(of: payerID, connection)
            try LockLimit.checkFunds(balance: wallet.balance, held: amount, amount: session.amount)
            try await self.execute(
                """
                UPDATE payment_sessions SET status = \(Self.locked), locked_by = \(payerID),
                lock_exp_at = \(min(now + lockLifetime, session.expiresAt)) WHERE id = \(sid)
                """,
                connection
            )
        }
    }

    public func unlock(sid: String, payerID: String) async throws {
        try await transaction { connection, now in
            let session = try await self.session(sid, forUpdate: true, connection)
            guard try session.requireUnlockable(by: payerID, now: now) else { return }
            // The holder stays in `locked_by`, so a retried unlock is still told apart from a stranger's.
            try await self.execute(
                "UPDATE payment_sessions SET status = \(Self.advertising), lock_exp_at = \(now) WHERE id = \(sid)",
                connection
            )
        }
    }

    /// Admits and runs a payment in one transaction.
    ///
    /// Several servers share this database, so none can release the keys in flight when it starts, as the SQLite
    /// store does: they may be another server's, still running. Instead no key is ever committed in flight here:
    /// the admission, the transfer and the outcome commit together, and "in flight" is a transaction-scoped
    /// advisory lock on the key. A second request with the key while the first runs fails to take that lock and is
    /// told 409 `idempotency-in-flight`. If the server dies mid-payment, PostgreSQL rolls its transaction back and
    /// drops the lock as soon as the connection closes, so a retry on any server runs the payment at once, while
    /// the payer's lock still holds. The alternatives are weaker: keeping the session's lock alive while a key is in
    /// flight still leaves the retry waiting out the in-flight timeout, and recording which server owns a key needs
    /// a way to tell a dead server from a slow one (heartbeats, themselves a timeout), which the database already
    /// has for its own connections. Keys committed in flight by ``beginSend(sid:payerID:idempotencyKey:)`` keep the
    /// in-flight timeout.
    public func send(sid: String, payerID: String, idempotencyKey: String) async throws -> (SendOutcome, Bool) {
        let inFlightTimeout = LedgerTime.milliseconds(policy.inFlightTimeout)
        // A key is scoped to its user; a newline appears in neither part.
        let lockName = payerID + "\n" + idempotencyKey
        return try await transaction { connection, now in
            // The keys' own number space (seed 1), apart from the EID locks (seed 0). A collision of two keys'
            // hashes can only answer one of them 409, which its retry gets past.
            let free =
                try await self.value(
                    "SELECT pg_try_advisory_xact_lock(hashtextextended(\(lockName), 1))",
                    as: Bool.self,
                    connection
                ) ?? false
            guard free else {
                throw LedgerError(.idempotencyInFlight, detail: "the first request with this key is still running")
            }
            let admission = try await self.admit(
                sid: sid,
                payerID: payerID,
                idempotencyKey: idempotencyKey,
                inFlightTimeout: inFlightTimeout,
                connection,
                now: now
            )
            if case .replay(let outcome) = admission { return (outcome, true) }
            let outcome = try await self.complete(
                sid: sid,
                payerID: payerID,
                idempotencyKey: idempotencyKey,
                connection,
                now: now
            )
            return (outcome, false)
        }
    }

    public func beginSend(sid: String, payerID: String, idempotencyKey: String) async throws -> SendAdmission {
        let inFlightTimeout = LedgerTime.milliseconds(policy.inFlightTimeout)
        return try await transaction { connection, now in
            try await self.admit(
                sid: sid,
                payerID: payerID,
                idempotencyKey: idempotencyKey,
                inFlightTimeout: inFlightTimeout,
                connection,
                now: now
            )
        }
    }

    public func completeSend(sid: String, payerID: String, idempotencyKey: String) async throws -> SendOutcome {
        try await transaction { connection, now in
            try await self.complete(sid: sid, payerID: payerID, idempotencyKey: idempotencyKey, connection, now: now)
        }
    }

    /// The admission of a key inside the caller's transaction: a replay, a refusal, or the go-ahead with the key's
    /// row written in flight (and locked until the transaction ends).
    private func admit(
        sid: String,
        payerID: String,
        idempotencyKey: String,
        inFlightTimeout: Int64,
        _ connection: PostgresConnection,
        now: Int64
    ) async throws -> SendAdmission {
        var existing = try await idempotencyRecord(payerID, idempotencyKey, connection)
        if existing == nil {
            // Refused before it starts: no key is kept for a session that does not exist (sessions are never
            // deleted, so this cannot change before the insert).
            _ = try await session(sid, forUpdate: false, connection)
            // A concurrent first use of the same key waits here on the primary key until the other commits.
            let inserted = try await rows(
                """
                INSERT INTO idempotency_keys (user_id, key, sid, state, created_at, updated_at)
                VALUES (\(payerID), \(idempotencyKey), \(sid), \(IdempotencyState.inFlight.rawValue), \(now), \(now))
                ON CONFLICT (user_id, key) DO NOTHING RETURNING 1
                """,
                connection
            )
            if !inserted.isEmpty { return .proceed }
            existing = try await idempotencyRecord(payerID, idempotencyKey, connection)
        }
        guard let record = existing else {
            throw LedgerError(.idempotencyInFlight, detail: "the first request with this key is still running")
        }
        if let admission = try record.admission(sid: sid, now: now, inFlightTimeout: inFlightTimeout) {
            return admission
        }
        try await execute(
            "UPDATE idempotency_keys SET updated_at = \(now) WHERE user_id = \(payerID) AND key = \(idempotencyKey)",
            connection
        )
        return .proceed
    }

    /// The payment of an admitted key inside the caller's transaction, and its outcome written with the key (or the
    /// key released, for an outcome not to replay).
    private func complete(
        sid: String,
        payerID: String,
        idempotencyKey: String,
        _ connection: PostgresConnection,
        now: Int64
    ) async throws -> SendOutcome {
        // Locking the key first serializes two servers completing one key (after an in-flight takeover): the
        // second finds the first's outcome.
        if let outcome = try await idempotencyRecord(payerID, idempotencyKey, connection)?.outcome {
            return outcome
        }
        let outcome: SendOutcome
        do {
            outcome = .paid(newBalanceCents: try await pay(sid: sid, payerID: payerID, connection, now: now))
        } catch let error as LedgerError {
            outcome = .refused(error)
        }
        guard outcome.isRecorded else {
            try await execute(
                "DELETE FROM idempotency_keys WHERE user_id = \(payerID) AND key = \(idempotencyKey)",
                connection
            )
            return outcome
        }
        // An upsert: a concurrent request may have released the row meanwhile; what this transaction did is
        // recorded either way.
        let stored = IdempotencyRecord.columns(for: outcome)
        try await execute(
            """
            INSERT INTO idempotency_keys (user_id, key, sid, state, balance_cents, problem_type, problem_detail,
            created_at, updated_at) VALUES (\(payerID), \(idempotencyKey), \(sid), \(IdempotencyState.done.rawValue),
            \(stored.balance),
            \(stored.refusalKind), \(stored.refusalDetail), \(now), \(now))
            ON CONFLICT (user_id, key) DO UPDATE SET state = EXCLUDED.state, balance_cents = EXCLUDED.balance_cents,
            problem_type = EXCLUDED.problem_type, problem_detail = EXCLUDED.problem_detail,
            updated_at = EXCLUDED.updated_at
            """,
            connection
        )
        return outcome
    }

    public func abandonSend(payerID: String, idempotencyKey: String) async throws {
        try await transaction { connection, _ in
            try await self.execute(
                """
                DELETE FROM idempotency_keys WHERE user_id = \(payerID) AND key = \(idempotencyKey)
                AND state = \(IdempotencyState.inFlight.rawValue)
                """,
                connection
            )
        }
    }

    public func session(sid: String, viewerID: String) async throws -> SessionStatusResponse {
        try await read { connection, now in
            let session = try await self.session(sid, forUpdate: false, connection)
            let viewers = [session.payeeID, session.liveLockHolder(now: now), session.paidBy].compactMap { $0 }
            guard viewers.contains(viewerID) else {
                throw LedgerError(.sessionNotFound, detail: "no session \(sid) is visible to you")
            }
            return session.response(now: now)
        }
    }

    public func cancel(sid: String, payeeID: String) async throws {
        try await transaction { connection, now in
            let session = try await self.session(sid, forUpdate: true, connection)
            guard session.payeeID == payeeID else {
                throw LedgerError(.forbidden, detail: "only the payee can cancel a session")
            }
            if session.status(now: now) == .cancelled { return }
            try session.requireLive(now: now)
            try await self.execute(
                "UPDATE payment_sessions SET status = \(Self.cancelled), cancelled_at = \(now) WHERE id = \(sid)",
                connection
            )
        }
    }

    // MARK: Maintenance

    public func pruneIdempotencyKeys() async throws -> Int {
        let retention = LedgerTime.milliseconds(policy.idempotencyRetention)
        return try await transaction { connection, now in
            let count = try await self.value(
                """
                WITH pruned AS (DELETE FROM idempotency_keys WHERE created_at < \(now - retention) RETURNING 1)
                SELECT COUNT(*) FROM pruned
                """,
                as: Int64.self,
                connection
            )
            return Int(count ?? 0)
        }
    }

    public func audit() async throws -> LedgerAudit {
        // One statement, so one snapshot for every sum: concurrent payments cannot make a healthy ledger look
        // broken. Sums are numeric in PostgreSQL; the cast back to bigint fails loudly rather than wrap.
        try await client.withConnection { connection in
            let row = try await self.rows(
                """
                SELECT
                (SELECT COALESCE(SUM(available_cents), 0)::BIGINT FROM wallet_accounts),
                ARRAY(SELECT w.id FROM wallet_accounts w WHERE w.available_cents != (SELECT COALESCE(SUM(CASE
                    e.direction WHEN \(EntryDirection.credit.rawValue) THEN e.amount_cents ELSE -e.amount_cents END), 0) FROM ledger_entries e
                    WHERE e.wallet_id = w.id) ORDER BY w.id),
                ARRAY(SELECT id FROM wallet_accounts WHERE kind = \(WalletKind.user.rawValue) AND available_cents < 0 ORDER BY id),
                ARRAY(SELECT transfer_id FROM ledger_entries GROUP BY transfer_id HAVING COUNT(*) != 2
                    OR COUNT(*) FILTER (WHERE direction = \(EntryDirection.debit.rawValue)) != 1
                    OR COUNT(*) FILTER (WHERE direction = \(EntryDirection.credit.rawValue)) != 1
                    OR MIN(amount_cents) != MAX(amount_cents) ORDER BY transfer_id),
                ARRAY(SELECT ref_id FROM ledger_entries WHERE ref_type = 'session'
                    GROUP BY ref_id HAVING COUNT(DISTINCT transfer_id) > 1 ORDER BY ref_id),
                (SELECT COUNT(*) FROM ledger_entries)
                """,
                connection
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

    public func ping() async throws {
        try await client.withConnection { connection in _ = try await self.rows("SELECT 1", connection) }
    }

    // MARK: Transactions

    /// Runs `body` in a transaction with the store's time (milliseconds since 1970) read at its start; commits if it
    /// returns, rolls back and rethrows the original error if it throws. Read-only transactions use REPEATABLE READ
    /// so every statement sees one snapshot.
    private func transaction<T: Sendable>(
        readOnly: Bool = false,
        _ body: (PostgresConnection, Int64) async throws -> T
    ) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await client.withConnection { connection in
                    try await self.execute(
                        readOnly
                            ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                            : "BEGIN ISOLATION LEVEL READ COMMITTED",
                        connection
                    )
                    do {
                        let result = try await body(connection, try await self.now(connection))
                        try await self.execute("COMMIT", connection)
                        return result
                    } catch {
                        // A failed ROLLBACK means the connection is broken; the pool discards it.
                        _ = try? await connection.query("ROLLBACK", logger: self.logger).collect()
                        throw error
                    }
                }
            } catch let error as PSQLError where Self.isTransient(error) && attempt < Self.retryLimit {
                attempt += 1
                logger.debug("retrying transaction", metadata: ["sqlstate": "\(error.serverInfo?[.sqlState] ?? "")"])
            }
        }
    }

    /// Runs a single-statement read with the store's time read just before it; one statement needs no transaction
    /// to see one snapshot.
    private func read<T: Sendable>(_ body: (PostgresConnection, Int64) async throws -> T) async throws -> T {
        try await client.withConnection { connection in try await body(connection, try await self.now(connection)) }
    }

    /// Deadlock detected or serialization failure: the transaction was rolled back and may run again.
    static func isTransient(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40P01" || state == "40001"
    }

    private func now(_ connection: PostgresConnection) async throws -> Int64 {
        if let clock { return LedgerTime.milliseconds(clock()) }
        return try await value(
            "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT",
            as: Int64.self,
            connection
        ) ?? 0
    }

    // MARK: Internals

    /// The payment itself, inside the caller's transaction. Throws a ``LedgerError`` for every business refusal.
    private func pay(sid: String, payerID: String, _ connection: PostgresConnection, now: Int64) async throws -> Cents {
        let session = try await session(sid, forUpdate: true, connection)
        try session.requirePayable(by: payerID, now: now)
        let balances = try await transfer(
            connection,
            from: .user(payerID),
            to: .user(session.payeeID),
            amount: session.amount,
            kinds: ("SEND_P2P", "RECEIVE_P2P"),
            reference: ("session", sid),
            now: now
        )
        try await execute(
            """
            UPDATE payment_sessions SET status = \(Self.paid), paid_by = \(payerID), paid_at = \(now), locked_by = NULL,
            lock_exp_at = NULL WHERE id = \(sid)
            """,
            connection
        )
        return balances.from
    }

    /// A wallet named by its owner, or a system account by its id.
    enum WalletOwner {
        case user(String)
        case account(String)

        func owns(id: String, userID: String?) -> Bool {
            switch self {
            case .user(let user): userID == user
            case .account(let account): id == account
            }
        }
    }

    /// Moves `amount` between two wallets: both rows found and locked in id order by one statement, balances checked
    /// and computed here with overflow detection, one DEBIT and one CREDIT written.
    private func transfer(
        _ connection: PostgresConnection,
        from: WalletOwner,
        to: WalletOwner,
        amount: Cents,
        kinds: (debit: String, credit: String),
        reference: (type: String, id: String),
        now: Int64
    ) async throws -> (from: Cents, to: Cents) {
        var userIDs: [String] = []
        var accountIDs: [String] = []
        for owner in [from, to] {
            switch owner {
            case .user(let user): userIDs.append(user)
            case .account(let account): accountIDs.append(account)
            }
        }
        var wallets: [(id: String, userID: String?, balance: Cents, isSystem: Bool)] = []
        for row in try await rows(
            """
            SELECT id, user_id, available_cents, kind FROM wallet_accounts
            WHERE id = ANY(\(accountIDs)) OR user_id = ANY(\(userIDs)) ORDER BY id FOR UPDATE
            """,
            connection
        ) {
            let (id, userID, balance, kind) = try row.decode((String, String?, Int64, String).self)
            wallets.append((id, userID, balance, WalletKind(rawValue: kind) == .system))
        }
        guard let source = wallets.first(where: { from.owns(id: $0.id, userID: $0.userID) }),
            let target = wallets.first(where: { to.owns(id: $0.id, userID: $0.userID) })
        else { throw LedgerError(.unknownUser, detail: "unknown user; log in again") }
        guard source.id != target.id else {
            throw LedgerError(.inconsistent, detail: "transfer between identical wallets")
        }
        guard source.isSystem || source.balance >= amount else {
            throw LedgerError(
                .insufficientFunds,
                detail: "balance \(Money.format(source.balance)) is below \(Money.format(amount))"
            )
        }
        let (newSource, sourceOverflow) = source.balance.subtractingReportingOverflow(amount)
        let (newTarget, targetOverflow) = target.balance.addingReportingOverflow(amount)
        guard !sourceOverflow, !targetOverflow else {
            throw LedgerError(.invalidAmount, detail: "the resulting balance would overflow")
        }
        try await execute(
            """
            UPDATE wallet_accounts SET available_cents = CASE id WHEN \(source.id) THEN \(newSource)
            ELSE \(newTarget) END WHERE id IN (\(source.id), \(target.id))
            """,
            connection
        )
        let transferID = Self.newID()
        try await execute(
            """
            INSERT INTO ledger_entries (id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id,
            created_at) VALUES
            (\(Self.newID()), \(transferID), \(source.id), \(EntryDirection.debit.rawValue), \(amount), \(kinds.debit), \(reference.type),
            \(reference.id), \(now)),
            (\(Self.newID()), \(transferID), \(target.id), \(EntryDirection.credit.rawValue), \(amount), \(kinds.credit), \(reference.type),
            \(reference.id), \(now))
            """,
            connection
        )
        return (newSource, newTarget)
    }

    private func wallet(
        of userID: String,
        _ connection: PostgresConnection
    ) async throws -> (
        id: String, balance: Cents
    ) {
        guard
            case let (id, balance)? = try await first(
                "SELECT id, available_cents FROM wallet_accounts WHERE user_id = \(userID)",
                as: (String, Int64).self,
                connection
            )
        else { throw LedgerError(.unknownUser, detail: "unknown user; log in again") }
        return (id, balance)
    }

    private static let sessionColumns =
        "s.id, s.payee_id, s.amount_cents, s.status, s.exp_at, s.locked_by, s.lock_exp_at, s.paid_by, s.paid_at"

    private func session(_ sid: String, forUpdate: Bool, _ connection: PostgresConnection) async throws -> SessionRow {
        let rows = try await rows(
            """
            SELECT \(unescaped: Self.sessionColumns) FROM payment_sessions s WHERE s.id = \(sid)
            \(unescaped: forUpdate ? "FOR UPDATE" : "")
            """,
            connection
        )
        guard let row = rows.first else { throw LedgerError(.sessionNotFound, detail: "no session \(sid)") }
        return try Self.sessionRow(row)
    }

    private static func sessionRow(_ row: PostgresRow) throws -> SessionRow {
        let (id, payeeID, amount, status, expiresAt, lockedBy, lockExpiresAt, paidBy, paidAt) = try row.decode(
            (String, String, Int64, String, Int64, String?, Int64?, String?, Int64?).self
        )
        return SessionRow(
            id: id,
            payeeID: payeeID,
            amount: amount,
            storedStatus: try StoredSessionStatus(stored: status),
            expiresAt: expiresAt,
            lockedBy: lockedBy,
            lockExpiresAt: lockExpiresAt,
            paidBy: paidBy,
            paidAt: paidAt
        )
    }

    /// The payee's session made under `key`, with the EID it was first given.
    private func keyedSession(
        _ payeeID: String,
        _ key: String,
        _ connection: PostgresConnection
    ) async throws -> KeyedSession? {
        try await first(
            """
            SELECT s.id, e.eid, s.amount_cents, s.exp_at FROM payment_sessions s
            JOIN session_eids e ON e.session_id = s.id
            WHERE s.payee_id = \(payeeID) AND s.create_key = \(key) ORDER BY e.created_at, e.eid LIMIT 1
            """,
            as: (String, String, Int64, Int64).self,
            connection
        ).map { KeyedSession(sid: $0.0, eid: $0.1, amount: $0.2, expiresAt: $0.3) }
    }

    /// The key's row, locked until the transaction ends.
    private func idempotencyRecord(
        _ userID: String,
        _ key: String,
        _ connection: PostgresConnection
    ) async throws -> IdempotencyRecord? {
        let rows = try await rows(
            """
            SELECT sid, state, updated_at, balance_cents, problem_type, problem_detail FROM idempotency_keys
            WHERE user_id = \(userID) AND key = \(key) FOR UPDATE
            """,
            connection
        )
        guard let row = rows.first else { return nil }
        let (sid, state, updatedAt, balance, problemType, problemDetail) = try row.decode(
            (String, String, Int64, Int64?, String?, String?).self
        )
        return IdempotencyRecord(
            sid: sid,
            state: state,
            updatedAt: updatedAt,
            balance: balance,
            refusalKind: problemType,
            refusalDetail: problemDetail
        )
    }

    /// Runs `query` and reads every row, so errors raised while it executes surface here.
    private func rows(_ query: PostgresQuery, _ connection: PostgresConnection) async throws -> [PostgresRow] {
        try await connection.query(query, logger: logger).collect()
    }

    private func execute(_ query: PostgresQuery, _ connection: PostgresConnection) async throws {
        _ = try await rows(query, connection)
    }

    private func first<each Column: PostgresDecodable>(
        _ query: PostgresQuery,
        as type: (repeat each Column).Type,
        _ connection: PostgresConnection
    ) async throws -> (repeat each Column)? {
        guard let row = try await rows(query, connection).first else { return nil }
        return try row.decode(type)
    }

    private func value<Value: PostgresDecodable>(
        _ query: PostgresQuery,
        as type: Value.Type,
        _ connection: PostgresConnection
    ) async throws -> Value? {
        guard let row = try await rows(query, connection).first else { return nil }
        return try row.decode(Value.self)
    }

    private static func newID() -> String { UUID().uuidString.lowercased() }

    private static let advertising = StoredSessionStatus.advertising.rawValue
    private static let locked = StoredSessionStatus.locked.rawValue
    private static let paid = StoredSessionStatus.paid.rawValue
    private static let cancelled = StoredSessionStatus.cancelled.rawValue
}
