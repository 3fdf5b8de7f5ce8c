import GotchuCore
package import GotchuLedger
import PostgresNIO

extension PostgresLedgerBackend {
    /// One statement on a pooled connection, outside a transaction.
    package func debitedCents(refType: String, refID: String, entryType: String) async throws -> Int64 {
        try await read { connection in
            try await connection.debitedCents(refType: refType, refID: refID, entryType: entryType)
        }
    }
}

extension PostgresLedgerBackend.Connection {
    func debitedCents(refType: String, refID: String, entryType: String) async throws -> Int64 {
        try await value(
            """
            SELECT COALESCE(SUM(amount_cents), 0)::BIGINT FROM ledger_entries
            WHERE ref_type = \(refType) AND ref_id = \(refID) AND type = \(entryType)
            AND direction = \(EntryDirection.debit.rawValue)
            """,
            as: Int64.self
        ) ?? 0
    }

    /// Every refund, in the order they were made (for `ledger verify`).
    func refunds() async throws -> [RefundRow] {
        try await rows(
            """
            SELECT id, session_id, amount_cents, requested_by, idempotency_key, transfer_id, receipt_id,
            refunded_total_cents, created_at, payment_id FROM refunds ORDER BY created_at, id
            """
        ).map { row in
            let (id, sessionID, amount, requestedBy, key, transferID, receiptID, total, createdAt, paymentID) =
                try row.decode((String, String, Int64, String, String, String, String?, Int64, Int64, String?).self)
            return RefundRow(
                id: id,
                sessionID: sessionID,
                amount: amount,
                requestedBy: requestedBy,
                idempotencyKey: key,
                transferID: transferID,
                receiptID: receiptID,
                refundedTotal: total,
                createdAt: createdAt,
                paymentID: paymentID
            )
        }
    }
}

extension PostgresLedgerBackend.Transaction {
    /// An unlocked read, its receipt's body joined.
    package func refund(requestedBy: String, key: String) async throws -> RefundRow? {
        try await connection.first(
            """
            SELECT \(unescaped: RefundRow.joinedColumns)
            WHERE r.requested_by = \(requestedBy) AND r.idempotency_key = \(key)
            """,
            as: RefundRow.Joined.self
        ).map(RefundRow.init(joined:))
    }

    /// Read on the transaction's connection, so it counts this transaction's own entries.
    package func debitedCents(refType: String, refID: String, entryType: String) async throws -> Int64 {
        try await connection.debitedCents(refType: refType, refID: refID, entryType: entryType)
    }

    /// A concurrent first use of the key waits on the unique index until the other commits (then inserts nothing).
    package func insert(refund: RefundRow) async throws -> Bool {
        try await !connection.rows(
            """
            INSERT INTO refunds (id, session_id, amount_cents, requested_by, idempotency_key, transfer_id, receipt_id,
            refunded_total_cents, created_at, payment_id) VALUES (\(refund.id), \(refund.sessionID), \(refund.amount),
            \(refund.requestedBy), \(refund.idempotencyKey), \(refund.transferID), \(refund.receiptID),
            \(refund.refundedTotal), \(refund.createdAt), \(refund.paymentID))
            ON CONFLICT (requested_by, idempotency_key) DO NOTHING RETURNING 1
            """
        ).isEmpty
    }
}

extension RefundRow {
    /// The columns ``init(joined:)`` reads, from `refunds r` with its receipt's body joined: a statement's
    /// `SELECT` list and `FROM` clause, its `WHERE` to follow.
    static let joinedColumns = """
        r.id, r.session_id, r.amount_cents, r.requested_by, r.idempotency_key, r.transfer_id, r.receipt_id, c.body,
        r.refunded_total_cents, r.created_at, r.payment_id FROM refunds r LEFT JOIN receipts c ON c.id = r.receipt_id
        """

    /// A row of ``joinedColumns`` as PostgresNIO decodes it.
    typealias Joined = (String, String, Int64, String, String, String, String?, String?, Int64, Int64, String?)

    /// A refund read through ``joinedColumns``.
    init(joined row: Joined) {
        self.init(
            id: row.0,
            sessionID: row.1,
            amount: row.2,
            requestedBy: row.3,
            idempotencyKey: row.4,
            transferID: row.5,
            receiptID: row.6,
            receiptBody: row.7,
            refundedTotal: row.8,
            createdAt: row.9,
            paymentID: row.10
        )
    }
}
