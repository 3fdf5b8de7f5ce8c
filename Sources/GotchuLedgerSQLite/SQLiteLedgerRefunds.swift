import GRDB
package import GotchuCore
package import GotchuLedger

extension SQLiteLedgerBackend {
    /// A lookup on a reader connection (`lookup(_:)`), which never waits for the writer.
    package func debitedCents(refType: String, refID: String, entryType: String) async throws -> Cents {
        try await lookup { db in try Self.debitedCents(refType, refID, entryType, db) }
    }

    fileprivate static func debitedCents(
        _ refType: String,
        _ refID: String,
        _ entryType: String,
        _ db: Database
    ) throws -> Cents {
        try Cents.fetchOne(
            cached: db,
            sql: """
                SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries
                WHERE ref_type = ? AND ref_id = ? AND type = ? AND direction = ?
                """,
            arguments: [refType, refID, entryType, EntryDirection.debit.rawValue]
        ) ?? 0
    }

    /// Every refund, in the order they were made, each column's storage class checked (for `ledger verify`).
    static func refunds(_ db: Database) throws -> [RefundRow] {
        try db.fetchAll(
            cached: """
                SELECT id, session_id, amount_cents, requested_by, idempotency_key, transfer_id, receipt_id,
                refunded_total_cents, created_at, payment_id FROM refunds ORDER BY created_at, id
                """
        ) { row in
            RefundRow(
                id: try row(0),
                sessionID: try row(1),
                amount: try row(2),
                requestedBy: try row(3),
                idempotencyKey: try row(4),
                transferID: try row(5),
                receiptID: try row.optional(6),
                refundedTotal: try row(7),
                createdAt: try row(8),
                paymentID: try row.optional(9)
            )
        }
    }

    /// A refund read with `SELECT refunds.*, receipts.body AS receipt_body … LEFT JOIN receipts`.
    static func joinedRefund(_ row: Row) -> RefundRow {
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
            createdAt: row["created_at"],
            paymentID: row["payment_id"]
        )
    }
}

extension SQLiteLedgerBackend.Transaction {
    /// A plain read, its receipt's body joined: the write lock already serializes every transaction.
    package func refund(requestedBy: String, key: String) async throws -> RefundRow? {
        try await database.writeWithoutTransaction { db in
            try Row.fetchOne(
                cached: db,
                sql: """
                    SELECT refunds.*, receipts.body AS receipt_body FROM refunds
                    LEFT JOIN receipts ON receipts.id = refunds.receipt_id
                    WHERE refunds.requested_by = ? AND refunds.idempotency_key = ?
                    """,
                arguments: [requestedBy, key]
            ).map(SQLiteLedgerBackend.joinedRefund)
        }
    }

    /// Read through the pool's writer access, so it counts this transaction's own entries.
    package func debitedCents(refType: String, refID: String, entryType: String) async throws -> Cents {
        try await database.writeWithoutTransaction { db in
            try SQLiteLedgerBackend.debitedCents(refType, refID, entryType, db)
        }
    }

    /// `INSERT … ON CONFLICT (requested_by, idempotency_key) DO NOTHING`: with one writer, a concurrent first use
    /// committed before this runs.
    package func insert(refund: RefundRow) async throws -> Bool {
        try await database.writeWithoutTransaction { db in
            try db.execute(
                sql: """
                    INSERT INTO refunds (id, session_id, amount_cents, requested_by, idempotency_key, transfer_id,
                        receipt_id, refunded_total_cents, created_at, payment_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (requested_by, idempotency_key) DO NOTHING
                    """,
                arguments: [
                    refund.id, refund.sessionID, refund.amount, refund.requestedBy, refund.idempotencyKey,
                    refund.transferID, refund.receiptID, refund.refundedTotal, refund.createdAt, refund.paymentID,
                ]
            )
            return db.changesCount > 0
        }
    }
}
