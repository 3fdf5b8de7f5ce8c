import Foundation
import GRDB
package import GotchuLedger

extension SQLiteLedgerBackend {
    /// One asynchronous read of the pool, in one snapshot.
    package func payouts(status: PayoutStatus?, limit: Int) async throws -> [PayoutListing] {
        try await database.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT p.*, u.email FROM payouts p JOIN users u ON u.id = p.user_id
                    WHERE ? IS NULL OR p.status = ? ORDER BY p.created_at, p.id LIMIT ?
                    """,
                arguments: [status?.rawValue, status?.rawValue, limit]
            ).map { PayoutListing(payout: try PayoutRow($0), email: $0["email"]) }
        }
    }
}

// The write lock serializes every transaction, so "for update" reads are plain reads here.
extension SQLiteLedgerBackend.Transaction {
    /// Through the pool's writer access (a thread hop), inside the request's savepoint.
    package func deposit(reference: String) async throws -> DepositRow? {
        try await database.writeWithoutTransaction { db in
            try Row.fetchOne(db, sql: "SELECT * FROM deposits WHERE reference = ?", arguments: [reference])
                .map(DepositRow.init)
        }
    }

    /// `INSERT … ON CONFLICT (reference) DO NOTHING`: with one writer, a concurrent deposit with the reference
    /// committed before this runs, so nothing waits here.
    package func insert(deposit: DepositRow) async throws -> Bool {
        try await database.writeWithoutTransaction { db in
            try db.execute(
                sql: """
                    INSERT INTO deposits (id, reference, user_id, amount_cents, actor, created_at)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (reference) DO NOTHING
                    """,
                arguments: [
                    deposit.id, deposit.reference, deposit.userID, deposit.amount, deposit.actor, deposit.createdAt,
                ]
            )
            return db.changesCount > 0
        }
    }

    /// Through the pool's writer access (a thread hop), inside the request's savepoint.
    package func payout(userID: String, key: String) async throws -> PayoutRow? {
        try await database.writeWithoutTransaction { db in
            try Row.fetchOne(
                db,
                sql: "SELECT * FROM payouts WHERE user_id = ? AND idempotency_key = ?",
                arguments: [userID, key]
            ).map { try PayoutRow($0) }
        }
    }

    /// `forUpdate` changes nothing here: the write lock serializes every transaction, so of two operators resolving one
    /// payout the second runs after the first and reads its outcome.
    package func payout(id: String, forUpdate: Bool) async throws -> PayoutRow? {
        try await database.writeWithoutTransaction { db in
            try Row.fetchOne(db, sql: "SELECT * FROM payouts WHERE id = ?", arguments: [id]).map { try PayoutRow($0) }
        }
    }

    /// A second payout under the user's key breaks the unique index `payouts_key` and throws the database's error.
    package func insert(payout: PayoutRow) async throws {
        try await database.writeWithoutTransaction { db in
            try db.execute(
                sql: """
                    INSERT INTO payouts (id, user_id, idempotency_key, amount_cents, balance_after_cents, status,
                    created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    payout.id, payout.userID, payout.idempotencyKey, payout.amount, payout.balanceAfter,
                    payout.status.rawValue, payout.createdAt,
                ]
            )
        }
    }

    /// Changes only a row still pending (`status = 'PENDING'`).
    package func resolve(
        payout id: String,
        status: PayoutStatus,
        reference: String?,
        reason: String?,
        actor: String
    ) async throws {
        let now = self.now
        try await database.writeWithoutTransaction { db in
            try db.execute(
                sql: """
                    UPDATE payouts SET status = ?, resolved_at = ?, reference = ?, reason = ?, resolved_by = ?
                    WHERE id = ? AND status = ?
                    """,
                arguments: [status.rawValue, now, reference, reason, actor, id, PayoutStatus.pending.rawValue]
            )
        }
    }
}

extension DepositRow {
    init(_ row: Row) {
        self.init(
            id: row["id"],
            reference: row["reference"],
            userID: row["user_id"],
            amount: row["amount_cents"],
            actor: row["actor"],
            createdAt: row["created_at"]
        )
    }
}

extension PayoutRow {
    init(_ row: Row) throws {
        self.init(
            id: row["id"],
            userID: row["user_id"],
            idempotencyKey: row["idempotency_key"],
            amount: row["amount_cents"],
            balanceAfter: row["balance_after_cents"],
            status: try PayoutStatus(stored: row["status"]),
            createdAt: row["created_at"],
            resolvedAt: row["resolved_at"],
            reference: row["reference"],
            reason: row["reason"],
            resolvedBy: row["resolved_by"]
        )
    }
}
