import GRDB
package import GotchuCore
package import GotchuLedger

extension SQLiteLedgerBackend {
    /// A lookup on a reader connection (`lookup(_:)`), which never waits for the writer.
    package func shares(sessionID: String) async throws -> [ShareRow] {
        try await lookup { db in try Self.shares(sessionID, db) }
    }

    static func shares(_ sessionID: String, _ db: Database) throws -> [ShareRow] {
        try db.fetchAll(cached: SQLiteLedgerStatements.shares, arguments: [sessionID]) { try ShareRow($0) }
    }

    /// The split sessions cancelled, or expired by `now`, whose payments are not all returned yet.
    package func sessionsOwedRefunds(now: Int64, limit: Int) async throws -> [String] {
        try await lookup { db in
            try String.fetchAll(
                cached: db,
                sql: """
                    SELECT id FROM payment_sessions
                    WHERE shares_paid > 0 AND status <> 'PAID' AND refunds_swept_at IS NULL
                    AND (status = 'CANCELLED' OR exp_at <= ?) ORDER BY exp_at LIMIT ?
                    """,
                arguments: [now, limit]
            )
        }
    }

    /// The split payment a send made under this key, if any.
    package func paymentID(userID: String, key: String) async throws -> String? {
        try await lookup { db in
            try String.fetchOne(
                cached: db,
                sql: "SELECT payment_id FROM idempotency_keys WHERE user_id = ? AND key = ?",
                arguments: [userID, key]
            )
        }
    }

    /// The stored receipt with this id, if any.
    package func receipt(id: String) async throws -> StoredReceipt? {
        try await lookup { db in
            try db.fetchOne(
                cached: "SELECT \(StoredReceipt.columns) FROM receipts WHERE id = ?",
                arguments: [id]
            ) { try StoredReceipt($0) }
        }
    }

    /// What the refunds of each payment of a split session returned, by payment id.
    package func refundedCentsByPayment(sessionID: String) async throws -> [String: Cents] {
        try await lookup { db in
            let rows = try Row.fetchAll(
                cached: db,
                sql: """
                    SELECT payment_id, SUM(amount_cents) AS total FROM refunds
                    WHERE session_id = ? AND payment_id IS NOT NULL GROUP BY payment_id
                    """,
                arguments: [sessionID]
            )
            return Dictionary(uniqueKeysWithValues: rows.map { ($0["payment_id"] as String, $0["total"] as Cents) })
        }
    }
}

extension SQLiteLedgerBackend.Transaction {
    /// Inserts the shares of a new split session.
    package func insert(shares: [ShareRow]) async throws {
        try sync { db in
            for share in shares {
                try db.execute(
                    cached: "INSERT INTO session_shares (session_id, share, amount_cents) VALUES (?, ?, ?)",
                    arguments: [share.sessionID, share.number, share.amount]
                )
            }
        }
    }

    /// The shares of a split session, the first first (none for a session of one share).
    package func shares(sessionID: String) async throws -> [ShareRow] {
        try sync { db in try SQLiteLedgerBackend.shares(sessionID, db) }
    }

    /// Writes a change of some shares of a split session.
    package func update(shares numbers: [Int], sessionID: String, _ change: ShareChange) async throws {
        let placeholders = Array(repeating: "?", count: numbers.count).joined(separator: ", ")
        let (assignments, values): (String, [(any DatabaseValueConvertible)?]) =
            switch change {
            case .lock(let payerID, let until): ("locked_by = ?, lock_exp_at = ?", [payerID, until])
            case .release: ("lock_exp_at = ?", [now])
            case .paid(let paymentID, let payerID, let tip):
                ("payment_id = ?, paid_by = ?, paid_at = ?, tip_cents = ?", [paymentID, payerID, now, tip])
            }
        try sync { db in
            try db.execute(
                sql: "UPDATE session_shares SET \(assignments) WHERE session_id = ? AND share IN (\(placeholders))",
                arguments: StatementArguments(values + [sessionID] + numbers.map { $0 })
            )
        }
    }

    /// What the refunds of a split payment returned so far, by its refund rows.
    package func refundedCents(paymentID: String) async throws -> Cents {
        try sync { db in
            try Cents.fetchOne(
                cached: db,
                sql: "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE payment_id = ?",
                arguments: [paymentID]
            ) ?? 0
        }
    }

    /// What the entries of one type referencing a row add up to on one user's wallet.
    package func entryCents(refType: String, refID: String, entryType: String, userID: String) async throws -> Cents {
        try sync { db in
            try Cents.fetchOne(
                cached: db,
                sql: """
                    SELECT COALESCE(SUM(e.amount_cents), 0) FROM ledger_entries e
                    JOIN wallet_accounts w ON w.id = e.wallet_id
                    WHERE e.ref_type = ? AND e.ref_id = ? AND e.type = ? AND w.user_id = ?
                    """,
                arguments: [refType, refID, entryType, userID]
            ) ?? 0
        }
    }
}

extension ShareRow {
    /// Reads the columns of ``SQLiteLedgerStatements/shares``, in order.
    init(_ row: SQLiteColumns) throws {
        self.init(
            sessionID: try row(0),
            number: Int(try row(1) as Int64),
            amount: try row(2),
            lockedBy: try row.optional(3),
            lockExpiresAt: try row.optional(4),
            paymentID: try row.optional(5),
            paidBy: try row.optional(6),
            paidAt: try row.optional(7),
            tip: try row(8)
        )
    }
}
