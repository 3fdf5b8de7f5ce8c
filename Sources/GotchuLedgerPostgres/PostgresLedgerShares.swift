package import GotchuCore
package import GotchuLedger
import PostgresNIO

extension PostgresLedgerBackend {
    /// One statement on a pooled connection, outside a transaction.
    package func shares(sessionID: String) async throws -> [ShareRow] {
        try await read { connection in try await connection.shares(sessionID: sessionID) }
    }

    /// The split sessions cancelled, or expired by `now`, whose payments are not all returned yet.
    package func sessionsOwedRefunds(now: Int64, limit: Int) async throws -> [String] {
        try await read { connection in
            try await connection.rows(
                """
                SELECT id FROM payment_sessions
                WHERE shares_paid > 0 AND status <> 'PAID' AND refunds_swept_at IS NULL
                AND (status = 'CANCELLED' OR exp_at <= \(now)) ORDER BY exp_at LIMIT \(Int64(limit))
                """
            ).map { try $0.decode(String.self) }
        }
    }

    /// The split payment a send made under this key, if any.
    package func paymentID(userID: String, key: String) async throws -> String? {
        try await read { connection in
            let row = try await connection.rows(
                "SELECT payment_id FROM idempotency_keys WHERE user_id = \(userID) AND key = \(key)"
            ).first
            return try row?.decode(String?.self) ?? nil
        }
    }

    /// The stored receipt with this id, if any.
    package func receipt(id: String) async throws -> StoredReceipt? {
        try await read { connection in
            try await connection.first(
                "SELECT id, kind, session_id, body FROM receipts WHERE id = \(id)",
                as: (String, String, String, String).self
            ).map { StoredReceipt(id: $0.0, kind: $0.1, sessionID: $0.2, body: $0.3) }
        }
    }

    /// What the refunds of each payment of a split session returned, by payment id.
    package func refundedCentsByPayment(sessionID: String) async throws -> [String: Cents] {
        try await read { connection in
            let rows = try await connection.rows(
                """
                SELECT payment_id, SUM(amount_cents)::BIGINT FROM refunds
                WHERE session_id = \(sessionID) AND payment_id IS NOT NULL GROUP BY payment_id
                """
            )
            return Dictionary(uniqueKeysWithValues: try rows.map { try $0.decode((String, Int64).self) })
        }
    }
}

extension PostgresLedgerBackend.Connection {
    /// The shares of split session `sessionID`, the first first.
    func shares(sessionID: String) async throws -> [ShareRow] {
        try await rows(
            "SELECT \(unescaped: Self.shareColumns) FROM session_shares WHERE session_id = \(sessionID) ORDER BY share"
        ).map(ShareRow.init)
    }

    /// Every share of every split, by session and number (for `ledger verify`).
    func allShares() async throws -> [ShareRow] {
        try await rows("SELECT \(unescaped: Self.shareColumns) FROM session_shares ORDER BY session_id, share")
            .map(ShareRow.init)
    }

    static let shareColumns =
        "session_id, share::BIGINT, amount_cents, locked_by, lock_exp_at, payment_id, paid_by, paid_at, tip_cents"
}

extension ShareRow {
    init(_ row: PostgresRow) throws {
        let columns = try row.decode((String, Int64, Int64, String?, Int64?, String?, String?, Int64?, Int64).self)
        self.init(
            sessionID: columns.0,
            number: Int(columns.1),
            amount: columns.2,
            lockedBy: columns.3,
            lockExpiresAt: columns.4,
            paymentID: columns.5,
            paidBy: columns.6,
            paidAt: columns.7,
            tip: columns.8
        )
    }
}

extension PostgresLedgerBackend.Transaction {
    /// Inserts the shares of a new split session.
    package func insert(shares: [ShareRow]) async throws {
        guard let sessionID = shares.first?.sessionID else { return }
        let numbers = shares.map { Int64($0.number) }
        let amounts = shares.map(\.amount)
        try await connection.write(
            """
            INSERT INTO session_shares (session_id, share, amount_cents)
            SELECT \(sessionID), share, amount FROM unnest(\(numbers)::BIGINT[], \(amounts)::BIGINT[]) AS t(share, amount)
            """,
            to: "session_shares"
        )
    }

    /// Read on the transaction's connection, under the session's row lock, which every change of its shares takes
    /// first.
    package func shares(sessionID: String) async throws -> [ShareRow] {
        try await connection.shares(sessionID: sessionID)
    }

    /// Writes a change of some shares of a split session.
    package func update(shares numbers: [Int], sessionID: String, _ change: ShareChange) async throws {
        let list = numbers.map(Int64.init)
        let statement: SQLFragment =
            switch change {
            case .lock(let payerID, let until):
                """
                UPDATE session_shares SET locked_by = \(payerID), lock_exp_at = \(until)
                WHERE session_id = \(sessionID) AND share = ANY(\(list))
                """
            case .release:
                "UPDATE session_shares SET lock_exp_at = \(now) WHERE session_id = \(sessionID) AND share = ANY(\(list))"
            case .paid(let paymentID, let payerID, let tip):
                """
                UPDATE session_shares SET payment_id = \(paymentID), paid_by = \(payerID), paid_at = \(now),
                tip_cents = \(tip) WHERE session_id = \(sessionID) AND share = ANY(\(list))
                """
            }
        try await connection.write(statement, to: "session_shares")
    }

    /// What the refunds of a split payment returned so far, by its refund rows.
    package func refundedCents(paymentID: String) async throws -> Cents {
        try await connection.value(
            "SELECT COALESCE(SUM(amount_cents), 0)::BIGINT FROM refunds WHERE payment_id = \(paymentID)",
            as: Int64.self
        ) ?? 0
    }

    /// What the entries of one type referencing a row add up to on one user's wallet.
    package func entryCents(refType: String, refID: String, entryType: String, userID: String) async throws -> Cents {
        try await connection.value(
            """
            SELECT COALESCE(SUM(e.amount_cents), 0)::BIGINT FROM ledger_entries e
            JOIN wallet_accounts w ON w.id = e.wallet_id
            WHERE e.ref_type = \(refType) AND e.ref_id = \(refID) AND e.type = \(entryType) AND w.user_id = \(userID)
            """,
            as: Int64.self
        ) ?? 0
    }
}
