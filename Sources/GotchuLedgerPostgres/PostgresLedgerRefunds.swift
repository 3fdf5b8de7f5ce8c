public import GotchuLedger
import PostgresNIO

extension PostgresLedgerBackend {
    public func refundedCents(sessionID: String) async throws -> Int64 {
        try await read { connection in try await connection.refundedCents(sessionID: sessionID) }
    }
}

extension PostgresLedgerBackend.Connection {
    func refundedCents(sessionID: String) async throws -> Int64 {
        try await value(
            "SELECT COALESCE(SUM(amount_cents), 0)::BIGINT FROM refunds WHERE session_id = \(sessionID)",
            as: Int64.self
        ) ?? 0
    }
}

extension PostgresLedgerBackend.Transaction {
    public func refund(requestedBy: String, key: String) async throws -> RefundRow? {
        try await connection.first(
            """
            SELECT r.id, r.session_id, r.amount_cents, r.requested_by, r.idempotency_key, r.transfer_id, r.receipt_id,
            c.body, r.refunded_total_cents, r.created_at FROM refunds r LEFT JOIN receipts c ON c.id = r.receipt_id
            WHERE r.requested_by = \(requestedBy) AND r.idempotency_key = \(key)
            """,
            as: (String, String, Int64, String, String, String, String?, String?, Int64, Int64).self
        ).map { row in
            RefundRow(
                id: row.0,
                sessionID: row.1,
                amount: row.2,
                requestedBy: row.3,
                idempotencyKey: row.4,
                transferID: row.5,
                receiptID: row.6,
                receiptBody: row.7,
                refundedTotal: row.8,
                createdAt: row.9
            )
        }
    }

    public func refundedCents(sessionID: String) async throws -> Int64 {
        try await connection.refundedCents(sessionID: sessionID)
    }

    /// A concurrent first use of the key waits on the unique index until the other commits (then inserts nothing).
    public func insert(refund: RefundRow) async throws -> Bool {
        try await !connection.rows(
            """
            INSERT INTO refunds (id, session_id, amount_cents, requested_by, idempotency_key, transfer_id, receipt_id,
            refunded_total_cents, created_at) VALUES (\(refund.id), \(refund.sessionID), \(refund.amount),
            \(refund.requestedBy), \(refund.idempotencyKey), \(refund.transferID), \(refund.receiptID),
            \(refund.refundedTotal), \(refund.createdAt))
            ON CONFLICT (requested_by, idempotency_key) DO NOTHING RETURNING 1
            """
        ).isEmpty
    }
}
