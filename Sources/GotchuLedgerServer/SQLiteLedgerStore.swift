public import Foundation
import GRDB
public import GotchuAPI
public import GotchuCore

/// The embedded ledger store: one SQLite file in WAL mode through GRDB.
///
/// Every mutation runs in an `IMMEDIATE` transaction, so SQLite's single writer lock serializes them even across
/// processes sharing the file (with a busy timeout); that also makes the wallet lock order moot here, but the
/// transfer still touches wallets in id order so the code matches the PostgreSQL store.
public final class SQLiteLedgerStore: LedgerStore {
    public let policy: LedgerPolicy
    private let database: DatabasePool
    private let clock: @Sendable () -> Date

    /// Opens (or creates) the database at `path`.
    /// - Parameters:
    ///   - clock: the store's clock; expiry and lock lapses are judged by it inside each transaction.
    public init(
        path: String,
        policy: LedgerPolicy = LedgerPolicy(),
        clock: @escaping @Sendable () -> Date = Date.init
    ) throws {
        // The ledger is private: create the file owner-only; SQLite gives its -wal and -shm files the same mode.
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.foreignKeysEnabled = true
        configuration.label = "gotchu-ledger"
        self.database = try DatabasePool(path: path, configuration: configuration)
        self.policy = policy
        self.clock = clock
    }

    public func migrate() async throws {
        try LedgerSchema.migrator.migrate(database)
        try await releaseInterruptedSends()
    }

    /// Releases every key still in flight when the store opens. This store is one process's: a key in flight now
    /// belongs to a request of a process that is gone (killed mid-payment), and since a payment's transfer commits
    /// in the same transaction as its key's outcome, a key without an outcome is provably not applied. Releasing it
    /// lets a retry with the same key run the payment at once, instead of after the in-flight timeout, by when the
    /// payer's lock has usually lapsed. (Should a second process share the file after all, a key released under a
    /// request still running costs nothing: ``completeSend(sid:payerID:idempotencyKey:)`` writes its outcome even
    /// when the row is gone, and a session is paid at most once.)
    private func releaseInterruptedSends() async throws {
        try await write { db, _ in
            try db.execute(
                sql: "DELETE FROM idempotency_keys WHERE state = ?",
                arguments: [IdempotencyState.inFlight.rawValue]
            )
        }
    }

    // MARK: Users and wallets

    public func login(email: String) async throws -> LedgerUser {
        let (normalized, displayName) = try LedgerUser.normalize(email: email)
        return try await write { db, now in
            if let row = try Row.fetchOne(
                db,
                sql: "SELECT id, display_name FROM users WHERE email = ?",
                arguments: [normalized]
            ) {
                return LedgerUser(id: row["id"], displayName: row["display_name"])
            }
            let user = LedgerUser(id: Self.newID(), displayName: displayName)
            try db.execute(
                sql: "INSERT INTO users (id, email, display_name, created_at) VALUES (?, ?, ?, ?)",
                arguments: [user.id, normalized, displayName, now]
            )
            try db.execute(
                sql:
                    "INSERT INTO wallet_accounts (id, user_id, kind, available_cents, created_at) VALUES (?, ?, ?, 0, ?)",
                arguments: [Self.newID(), user.id, WalletKind.user.rawValue, now]
            )
            return user
        }
    }

    public func user(id: String) async throws -> LedgerUser? {
        try await database.read { db in
            try Row.fetchOne(db, sql: "SELECT id, display_name FROM users WHERE id = ?", arguments: [id]).map {
                LedgerUser(id: $0["id"], displayName: $0["display_name"])
            }
        }
    }

    public func wallet(userID: String, recentLimit: Int) async throws -> WalletResponse {
        try await database.read { db in
            let wallet = try Self.wallet(of: userID, db)
            let entries = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, direction, amount_cents, type, ref_type, ref_id, created_at FROM ledger_entries
                    WHERE wallet_id = ? ORDER BY seq DESC LIMIT ?
                    """,
                arguments: [wallet.id, recentLimit]
            ).map { row in
                LedgerEntry(
                    id: row["id"],
                    direction: EntryDirection(rawValue: row["direction"]) ?? .debit,
                    amountCents: row["amount_cents"],
                    type: row["type"],
                    refType: row["ref_type"],
                    refID: row["ref_id"],
                    createdAt: LedgerTime.date(row["created_at"])
                )
            }
            return WalletResponse(walletID: wallet.id, availableCents: wallet.balance, recent: entries)
        }
    }

    public func fund(userID: String, amountCents: Cents) async throws -> Cents {
        try policy.validate(amount: amountCents)
        return try await write { db, now in
            let wallet = try Self.wallet(of: userID, db)
            let balances = try Self.transfer(
                db,
                from: LedgerSchema.fundingWalletID,
                to: wallet.id,
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
        return try await write { db, now in
            _ = try Self.wallet(of: payeeID, db)
            if let idempotencyKey, let earlier = try Self.keyedSession(payeeID, idempotencyKey, db) {
                return (try earlier.replay(amountCents: amountCents), true)
            }
            let sid = Self.newID()
            let expiresAt = now + lifetime
            // 40 random bits make a collision among live sessions rare; retry rather than hand out a live EID twice.
            for _ in 0..<16 {
                let eid = EID.random()
                let taken =
                    try Bool.fetchOne(
                        db,
                        sql: """
                            SELECT EXISTS (SELECT 1 FROM session_eids e JOIN payment_sessions s ON s.id = e.session_id
                            WHERE e.eid = ? AND s.status IN (?, ?) AND s.exp_at > ?)
                            """,
                        arguments: [
                            eid.rawValue, StoredSessionStatus.advertising.rawValue, StoredSessionStatus.locked.rawValue,
                            now,
                        ]
                    ) ?? true
                if taken { continue }
                // The write lock makes the lookup above final; the unique key stays the guarantee, as in PostgreSQL.
                try db.execute(
                    sql: """
                        INSERT INTO payment_sessions (id, payee_id, amount_cents, status, created_at, exp_at, create_key)
                        VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payee_id, create_key) DO NOTHING
                        """,
                    arguments: [
                        sid, payeeID, amountCents, StoredSessionStatus.advertising.rawValue, now, expiresAt,
                        idempotencyKey,
                    ]
                )
                guard db.changesCount == 1 else {
                    guard let idempotencyKey, let earlier = try Self.keyedSession(payeeID, idempotencyKey, db) else {
                        throw LedgerError(.unavailable, detail: "could not create the session; try again")
                    }
                    return (try earlier.replay(amountCents: amountCents), true)
                }
                try db.execute(
                    sql: "INSERT INTO session_eids (eid, session_id, created_at) VALUES (?, ?, ?)",
                    arguments: [eid.rawValue, sid, now]
                )
                return (CreateSessionResponse(sid: sid, eid: eid, expiresAt: LedgerTime.date(expiresAt)), false)
            }
            throw LedgerError(.unavailable, detail: "could not allocate a unique EID; try again")
        }
    }

    public func resolve(eid: EID) async throws -> ResolveResponse {
        let now = LedgerTime.milliseconds(clock())
        return try await database.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT s.*, u.display_name, u.email FROM session_eids e
                        JOIN payment_sessions s ON s.id = e.session_id JOIN users u ON u.id = s.payee_id
                        WHERE e.eid = ? ORDER BY s.created_at DESC, s.rowid DESC LIMIT 1
                        """,
                    arguments: [eid.rawValue]
                )
            else { throw LedgerError(.sessionNotFound, detail: "no session advertises EID \(eid)") }
            let session = try SessionRow(row)
            try session.requireLive(now: now)
            return ResolveResponse(
                sid: session.id,
                amountCents: session.amount,
                payeeDisplay: PayeeDisplay(name: row["display_name"], domain: EmailAddress.domain(of: row["email"]))
            )
        }
    }

    public func lock(sid: String, payerID: String) async throws {
        let lockLifetime = LedgerTime.milliseconds(policy.lockLifetime)
        let maximumLocks = policy.maximumLocksPerPayer
        try await write { db, now in
            let session = try Self.session(sid, db)
            try session.requireLockable(by: payerID, now: now)
            let held = try Row.fetchOne(
                db,
                sql: """
                    SELECT COUNT(*) AS count, COALESCE(SUM(amount_cents), 0) AS amount FROM payment_sessions
                    WHERE locked_by = ? AND status = ? AND lock_exp_at > ? AND exp_at > ? AND id <> ?
                    """,
                arguments: [payerID, StoredSessionStatus.locked.rawValue, now, now, sid]
            )
            try LockLimit.check(held: held?["count"] ?? 0, maximum: maximumLocks)
            let wallet = try Self.wallet(of: payerID, db)
            try LockLimit.checkFunds(balance: wallet.balance, held: held?["amount"] ?? 0, amount: session.amount)
            try db.execute(
                sql: "UPDATE payment_sessions SET status = ?, locked_by = ?, lock_exp_at = ? WHERE id = ?",
                arguments: [
                    StoredSessionStatus.locked.rawValue, payerID, min(now + lockLifetime, session.expiresAt), sid,
                ]
            )
        }
    }

    public func unlock(sid: String, payerID: String) async throws {
        try await write { db, now in
            let session = try Self.session(sid, db)
            guard try session.requireUnlockable(by: payerID, now: now) else { return }
            // The holder stays in `locked_by`, so a retried unlock is still told apart from a stranger's.
            try db.execute(
                sql: "UPDATE payment_sessions SET status = ?, lock_exp_at = ? WHERE id = ?",
                arguments: [StoredSessionStatus.advertising.rawValue, now, sid]
            )
        }
    }

    public func beginSend(sid: String, payerID: String, idempotencyKey: String) async throws -> SendAdmission {
        let inFlightTimeout = LedgerTime.milliseconds(policy.inFlightTimeout)
        return try await write { db, now in
            if let row = try Row.fetchOne(
                db,
                sql: "SELECT * FROM idempotency_keys WHERE user_id = ? AND key = ?",
                arguments: [payerID, idempotencyKey]
            ) {
                let record = IdempotencyRecord(row)
                if let admission = try record.admission(sid: sid, now: now, inFlightTimeout: inFlightTimeout) {
                    return admission
                }
                try db.execute(
                    sql: "UPDATE idempotency_keys SET updated_at = ? WHERE user_id = ? AND key = ?",
                    arguments: [now, payerID, idempotencyKey]
                )
                return .proceed
            }
            // Refused before it starts: no key is kept for a session that does not exist.
            _ = try Self.session(sid, db)
            try db.execute(
                sql: """
                    INSERT INTO idempotency_keys (user_id, key, sid, state, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [payerID, idempotencyKey, sid, IdempotencyState.inFlight.rawValue, now, now]
            )
            return .proceed
        }
    }

    public func completeSend(sid: String, payerID: String, idempotencyKey: String) async throws -> SendOutcome {
        try await write { db, now in
            // Another server that took the key over after the in-flight timeout may have finished it first.
            if let row = try Row.fetchOne(
                db,
                sql: "SELECT * FROM idempotency_keys WHERE user_id = ? AND key = ?",
                arguments: [payerID, idempotencyKey]
            ), let outcome = IdempotencyRecord(row).outcome {
                return outcome
            }
            let outcome: SendOutcome
            do {
                outcome = .paid(newBalanceCents: try Self.pay(sid: sid, payerID: payerID, db: db, now: now))
            } catch let error as LedgerError {
                outcome = .refused(error)
            }
            guard outcome.isRecorded else {
                try db.execute(
                    sql: "DELETE FROM idempotency_keys WHERE user_id = ? AND key = ?",
                    arguments: [payerID, idempotencyKey]
                )
                return outcome
            }
            // An upsert: the row may have been released meanwhile (see `releaseInterruptedSends`); the outcome of
            // what this transaction did is written either way.
            let stored = IdempotencyRecord.columns(for: outcome)
            try db.execute(
                sql: """
                    INSERT INTO idempotency_keys (user_id, key, sid, state, balance_cents, problem_type, problem_detail,
                    created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (user_id, key) DO UPDATE SET state = excluded.state, balance_cents = excluded.balance_cents,
                    problem_type = excluded.problem_type, problem_detail = excluded.problem_detail,
                    updated_at = excluded.updated_at
                    """,
                arguments: [
                    payerID, idempotencyKey, sid, IdempotencyState.done.rawValue, stored.balance, stored.refusalKind,
                    stored.refusalDetail, now, now,
                ]
            )
            return outcome
        }
    }

    public func abandonSend(payerID: String, idempotencyKey: String) async throws {
        try await write { db, _ in
            try db.execute(
                sql: "DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND state = ?",
                arguments: [payerID, idempotencyKey, IdempotencyState.inFlight.rawValue]
            )
        }
    }

    public func session(sid: String, viewerID: String) async throws -> SessionStatusResponse {
        let now = LedgerTime.milliseconds(clock())
        return try await database.read { db in
            let session = try Self.session(sid, db)
            let viewers = [session.payeeID, session.liveLockHolder(now: now), session.paidBy].compactMap { $0 }
            guard viewers.contains(viewerID) else {
                throw LedgerError(.sessionNotFound, detail: "no session \(sid) is visible to you")
            }
            return session.response(now: now)
        }
    }

    public func cancel(sid: String, payeeID: String) async throws {
        try await write { db, now in
            let session = try Self.session(sid, db)
            guard session.payeeID == payeeID else {
                throw LedgerError(.forbidden, detail: "only the payee can cancel a session")
            }
            if session.status(now: now) == .cancelled { return }
            try session.requireLive(now: now)
            try db.execute(
                sql: "UPDATE payment_sessions SET status = ?, cancelled_at = ? WHERE id = ?",
                arguments: [StoredSessionStatus.cancelled.rawValue, now, sid]
            )
        }
    }

    // MARK: Maintenance

    public func pruneIdempotencyKeys() async throws -> Int {
        let retention = LedgerTime.milliseconds(policy.idempotencyRetention)
        return try await write { db, now in
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE created_at < ?", arguments: [now - retention])
            return db.changesCount
        }
    }

    public func audit() async throws -> LedgerAudit {
        try await database.read { db in
            LedgerAudit(
                totalBalanceCents: try Int64.fetchOne(
                    db,
                    sql: "SELECT COALESCE(SUM(available_cents), 0) FROM wallet_accounts"
                ) ?? 0,
                walletsOutOfBalance: try String.fetchAll(
                    db,
                    sql: """
                        SELECT w.id FROM wallet_accounts w WHERE w.available_cents != (SELECT COALESCE(SUM(CASE
                        e.direction WHEN ? THEN e.amount_cents ELSE -e.amount_cents END), 0)
                        FROM ledger_entries e WHERE e.wallet_id = w.id)
                        """,
                    arguments: [EntryDirection.credit.rawValue]
                ),
                negativeWallets: try String.fetchAll(
                    db,
                    sql: "SELECT id FROM wallet_accounts WHERE kind = ? AND available_cents < 0",
                    arguments: [WalletKind.user.rawValue]
                ),
                unbalancedTransfers: try String.fetchAll(
                    db,
                    sql: """
                        SELECT transfer_id FROM ledger_entries GROUP BY transfer_id HAVING COUNT(*) != 2
                        OR SUM(direction = ?) != 1 OR SUM(direction = ?) != 1
                        OR MIN(amount_cents) != MAX(amount_cents)
                        """,
                    arguments: [EntryDirection.debit.rawValue, EntryDirection.credit.rawValue]
                ),
                sessionsPaidTwice: try String.fetchAll(
                    db,
                    sql: """
                        SELECT ref_id FROM ledger_entries WHERE ref_type = 'session'
                        GROUP BY ref_id HAVING COUNT(DISTINCT transfer_id) > 1
                        """
                ),
                entryCount: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ledger_entries") ?? 0
            )
        }
    }

    public func ping() async throws {
        _ = try await database.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    // MARK: Internals

    /// Runs `body` in an IMMEDIATE transaction with the store's clock read inside it (milliseconds since 1970).
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database, Int64) throws -> T) async throws -> T {
        let clock = self.clock
        return try await database.writeWithoutTransaction { db in
            var result: T?
            try db.inTransaction(.immediate) {
                result = try body(db, LedgerTime.milliseconds(clock()))
                return .commit
            }
            return result!
        }
    }

    /// The payment itself, inside the caller's transaction. Throws a ``LedgerError`` for every business refusal.
    private static func pay(sid: String, payerID: String, db: Database, now: Int64) throws -> Cents {
        let session = try session(sid, db)
        try session.requirePayable(by: payerID, now: now)
        let payer = try wallet(of: payerID, db)
        let payee = try wallet(of: session.payeeID, db)
        let balances = try transfer(
            db,
            from: payer.id,
            to: payee.id,
            amount: session.amount,
            kinds: ("SEND_P2P", "RECEIVE_P2P"),
            reference: ("session", sid),
            now: now
        )
        try db.execute(
            sql: """
                UPDATE payment_sessions SET status = ?, paid_by = ?, paid_at = ?, locked_by = NULL, lock_exp_at = NULL
                WHERE id = ?
                """,
            arguments: [StoredSessionStatus.paid.rawValue, payerID, now, sid]
        )
        return balances.from
    }

    /// Moves `amount` between two wallets: one DEBIT, one CREDIT, both balances updated, wallets touched in id order.
    private static func transfer(
        _ db: Database,
        from: String,
        to: String,
        amount: Cents,
        kinds: (debit: String, credit: String),
        reference: (type: String, id: String),
        now: Int64
    ) throws -> (from: Cents, to: Cents) {
        var balances: [String: (balance: Cents, isSystem: Bool)] = [:]
        for row in try Row.fetchAll(
            db,
            sql: "SELECT id, available_cents, kind FROM wallet_accounts WHERE id IN (?, ?) ORDER BY id",
            arguments: [from, to]
        ) {
            balances[row["id"]] = (row["available_cents"], WalletKind(rawValue: row["kind"]) == .system)
        }
        guard let source = balances[from], let target = balances[to], from != to else {
            throw LedgerError(.inconsistent, detail: "transfer between unknown or identical wallets")
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
        let newBalances = [from: newSource, to: newTarget]
        for id in [from, to].sorted() {
            try db.execute(
                sql: "UPDATE wallet_accounts SET available_cents = ? WHERE id = ?",
                arguments: [newBalances[id], id]
            )
        }
        let transferID = newID()
        for (wallet, direction, type) in [(from, EntryDirection.debit, kinds.debit), (to, .credit, kinds.credit)] {
            try db.execute(
                sql: """
                    INSERT INTO ledger_entries (id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id,
                    created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    newID(), transferID, wallet, direction.rawValue, amount, type, reference.type, reference.id, now,
                ]
            )
        }
        return (newSource, newTarget)
    }

    private static func wallet(of userID: String, _ db: Database) throws -> (id: String, balance: Cents) {
        guard
            let row = try Row.fetchOne(
                db,
                sql: "SELECT id, available_cents FROM wallet_accounts WHERE user_id = ?",
                arguments: [userID]
            )
        else { throw LedgerError(.unknownUser, detail: "unknown user; log in again") }
        return (row["id"], row["available_cents"])
    }

    private static func session(_ sid: String, _ db: Database) throws -> SessionRow {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM payment_sessions WHERE id = ?", arguments: [sid])
        else {
            throw LedgerError(.sessionNotFound, detail: "no session \(sid)")
        }
        return try SessionRow(row)
    }

    /// The payee's session made under `key`, with the EID it was first given.
    private static func keyedSession(_ payeeID: String, _ key: String, _ db: Database) throws -> KeyedSession? {
        try Row.fetchOne(
            db,
            sql: """
                SELECT s.id, e.eid, s.amount_cents, s.exp_at FROM payment_sessions s
                JOIN session_eids e ON e.session_id = s.id
                WHERE s.payee_id = ? AND s.create_key = ? ORDER BY e.created_at, e.eid LIMIT 1
                """,
            arguments: [payeeID, key]
        ).map { KeyedSession(sid: $0["id"], eid: $0["eid"], amount: $0["amount_cents"], expiresAt: $0["exp_at"]) }
    }

    private static func newID() -> String { UUID().uuidString.lowercased() }

}

extension SessionRow {
    init(_ row: Row) throws {
        self.init(
            id: row["id"],
            payeeID: row["payee_id"],
            amount: row["amount_cents"],
            storedStatus: try StoredSessionStatus(stored: row["status"]),
            expiresAt: row["exp_at"],
            lockedBy: row["locked_by"],
            lockExpiresAt: row["lock_exp_at"],
            paidBy: row["paid_by"],
            paidAt: row["paid_at"]
        )
    }
}

extension IdempotencyRecord {
    init(_ row: Row) {
        self.init(
            sid: row["sid"],
            state: row["state"],
            updatedAt: row["updated_at"],
            balance: row["balance_cents"],
            refusalKind: row["problem_type"],
            refusalDetail: row["problem_detail"]
        )
    }
}
