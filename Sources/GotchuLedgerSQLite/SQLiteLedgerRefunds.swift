import GRDB
public import GotchuCore
public import GotchuLedger

extension SQLiteLedgerBackend {
    public func refundedCents(sessionID: String) async throws -> Cents {
        try await lookup { db in try Self.refundedCents(sessionID, db) }
    }

    fileprivate static func refundedCents(_ sessionID: String, _ db: Database) throws -> Cents {
        try Cents.fetchOne(
            cached: db,
            sql: "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE session_id = ?",
            arguments: [sessionID]
        ) ?? 0
    }
}

extension SQLiteLedgerBackend.Transaction {
    public func refund(requestedBy: String, key: String) async throws -> RefundRow? {
        try await database.writeWithoutTransaction { db in
            try Row.fetchOne(
                cached: db,
                sql: """
                    SELECT refunds.*, receipts.body AS receipt_body FROM refunds
                    LEFT JOIN receipts ON receipts.id = refunds.receipt_id
                    WHERE refunds.requested_by = ? AND refunds.idempotency_key = ?
                    """,
                arguments: [requestedBy, key]
            ).map { row in
                RefundRow(
                    id: row["id"],
                    sessionID: row["session_id"],
                    amount: row["amount_cents"],
                    requestedBy: row["requested_by"],
                    idempotencyKey: row["idempotency_key"],
                    transferID: row["transfer_id"],
                    receiptID: row["receipt_id"],
                    receiptBody: row["receipt_body"],
                    refundedTotal: row["refunded_total_cents"],
                    createdAt: row["created_at"]
                )
            }
        }
    }

    public func refundedCents(sessionID: String) async throws -> Cents {
        try await database.writeWithoutTransaction { db in try SQLiteLedgerBackend.refundedCents(sessionID, db) }
    }

    public func insert(refund: RefundRow) async throws -> Bool {
        try await database.writeWithoutTransaction { db in
            try db.execute(
                sql: """
                    INSERT INTO refunds (id, session_id, amount_cents, requested_by, idempotency_key, transfer_id,
                        receipt_id, refunded_total_cents, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (requested_by, idempotency_key) DO NOTHING
                    """,
                arguments: [
                    refund.id, refund.sessionID, refund.amount, refund.requestedBy, refund.idempotencyKey,
                    refund.transferID, refund.receiptID, refund.refundedTotal, refund.createdAt,
                ]
            )
            return db.changesCount > 0
        }
    }
}
