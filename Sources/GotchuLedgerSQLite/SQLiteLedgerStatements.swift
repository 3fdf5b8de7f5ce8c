import GotchuLedger

/// Statements of the SQLite store, one definition each, for the store and for `gotchu-bench`'s raw-SQL anchor, which
/// replays a payment's statements through the SQLite C API: the anchor runs the store's own text, not a copy that
/// could drift from it. Each binds its values positionally (`?`), in the order its doc gives.
package enum SQLiteLedgerStatements {
    /// A request's savepoint in the writer's shared transaction, and its release (``SQLiteWriter``).
    package static let savepoint = "SAVEPOINT request"
    package static let releaseSavepoint = "RELEASE request"

    /// A user's wallet: `user_id`.
    package static let walletByUser = "SELECT \(WalletRow.columns) FROM wallet_accounts WHERE user_id = ?"

    /// Whether an EID was ever given: `eid`.
    package static let eidAllocated = "SELECT EXISTS (SELECT 1 FROM session_eids WHERE eid = ?)"

    /// A new session: `id, payee_id, amount_cents, status, created_at, exp_at, create_key, shares, tip_percents,
    /// reference`.
    package static let insertSession = """
        INSERT INTO payment_sessions (
            id, payee_id, amount_cents, status, created_at, exp_at, create_key, shares, tip_percents, reference
        )
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payee_id, create_key) DO NOTHING
        """

    /// A session's EID: `eid, session_id, created_at`.
    package static let insertEID = "INSERT INTO session_eids (eid, session_id, created_at) VALUES (?, ?, ?)"

    /// A session by any of its EIDs (the newest session, should an EID ever have been reused), with its payee: `eid`.
    package static let sessionByEID = """
        SELECT \(SessionRow.columns(of: "s")), u.display_name, u.email, u.verified_name, e.retired_at
        FROM session_eids e JOIN payment_sessions s ON s.id = e.session_id JOIN users u ON u.id = s.payee_id
        WHERE e.eid = ? ORDER BY s.created_at DESC, s.rowid DESC LIMIT 1
        """

    /// A session by id: `id`.
    package static let sessionByID =
        "SELECT \(SessionRow.columns(of: "payment_sessions")) FROM payment_sessions WHERE id = ?"

    /// The live locks a payer holds on other sessions and on shares of other splits: `locked_by, status,
    /// lock_exp_at, exp_at, id` (the lock time and the expiry time are both the time of the read).
    package static let locksHeld = """
        SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM (
            SELECT amount_cents AS amount FROM payment_sessions
            WHERE locked_by = ?1 AND status = ?2 AND lock_exp_at > ?3 AND exp_at > ?4 AND id <> ?5
            UNION ALL
            SELECT h.amount_cents FROM session_shares h JOIN payment_sessions s ON s.id = h.session_id
            WHERE h.locked_by = ?1 AND h.payment_id IS NULL AND h.lock_exp_at > ?3 AND s.exp_at > ?4
            AND s.status NOT IN ('PAID', 'CANCELLED') AND h.session_id <> ?5
        )
        """

    /// A session locked: `status, locked_by, lock_exp_at, id`.
    package static let lockSession =
        "UPDATE payment_sessions SET status = ?, locked_by = ?, lock_exp_at = ? WHERE id = ?"

    /// A session of one share paid, with a tip: `status, paid_by, paid_at, tip_cents, id`.
    package static let paySession = """
        UPDATE payment_sessions SET status = ?, paid_by = ?, paid_at = ?, locked_by = NULL, lock_exp_at = NULL,
        shares_paid = 1, paid_cents = amount_cents, tip_cents = ? WHERE id = ?
        """

    /// More shares of a split paid: `count, amount, tip, status (PAID once complete, else NULL to keep it), paid_by,
    /// paid_at (both NULL to keep them), id`.
    package static let paySharesOfSession = """
        UPDATE payment_sessions SET shares_paid = shares_paid + ?, paid_cents = paid_cents + ?,
        tip_cents = tip_cents + ?, status = COALESCE(?, status), paid_by = COALESCE(?, paid_by),
        paid_at = COALESCE(?, paid_at) WHERE id = ?
        """

    /// A split session's shares, the first first: `session_id`.
    package static let shares = """
        SELECT session_id, share, amount_cents, locked_by, lock_exp_at, payment_id, paid_by, paid_at, tip_cents
        FROM session_shares WHERE session_id = ? ORDER BY share
        """

    /// An idempotency key's record: `user_id, key`.
    package static let idempotencyRecord = """
        SELECT sid, state, updated_at, balance_cents, problem_type, problem_detail FROM idempotency_keys
        WHERE user_id = ? AND key = ?
        """

    /// A key admitted in flight: `user_id, key, sid, state, created_at, updated_at`.
    package static let insertInFlight = """
        INSERT INTO idempotency_keys (user_id, key, sid, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (user_id, key) DO NOTHING
        """

    /// A key's outcome: `user_id, key, sid, state, balance_cents, problem_type, problem_detail, created_at,
    /// updated_at, payment_id`.
    package static let recordOutcome = """
        INSERT INTO idempotency_keys (user_id, key, sid, state, balance_cents, problem_type, problem_detail,
        created_at, updated_at, payment_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (user_id, key) DO UPDATE SET state = excluded.state, balance_cents = excluded.balance_cents,
        problem_type = excluded.problem_type, problem_detail = excluded.problem_detail,
        updated_at = excluded.updated_at, payment_id = excluded.payment_id
        """

    /// The wallets of a transfer, by `accounts` wallet ids and then `users` user ids, in id order.
    package static func walletsForUpdate(accounts: Int, users: Int) -> String {
        """
        SELECT \(WalletRow.columns) FROM wallet_accounts WHERE id IN (\(placeholders(accounts)))
        OR user_id IN (\(placeholders(users))) ORDER BY id
        """
    }

    /// The balances of `count` wallets: `id, balance` for each, then each `id` again.
    package static func setBalances(count: Int) -> String {
        let cases = Array(repeating: "WHEN ? THEN ?", count: count).joined(separator: " ")
        return """
            UPDATE wallet_accounts SET available_cents = CASE id \(cases) END
            WHERE id IN (\(placeholders(count)))
            """
    }

    /// A transfer's `count` entries: `id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id,
    /// created_at, hash` for each.
    package static func insertEntries(count: Int) -> String {
        let rows = Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: count).joined(separator: ", ")
        return """
            INSERT INTO ledger_entries (id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id,
            created_at, hash) VALUES \(rows)
            """
    }

    /// The chain's head.
    package static let chainHead = "SELECT head_hash, entry_count FROM ledger_chain WHERE id = 1"

    /// The chain's new head: `head_hash, entry_count`.
    package static let setChainHead = "UPDATE ledger_chain SET head_hash = ?, entry_count = ? WHERE id = 1"

    /// A signed receipt: `id, kind, session_id, body, created_at`.
    package static let insertReceipt =
        "INSERT INTO receipts (id, kind, session_id, body, created_at) VALUES (?, ?, ?, ?, ?)"

    /// `?, ?, …` for an `IN` list of `count` values (SQLite takes an empty list).
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}
