import Foundation
package import GotchuLedger
import PostgresNIO

extension PostgresLedgerBackend {
    /// One statement on a pooled connection, outside a transaction.
    package func payouts(status: PayoutStatus?, limit: Int) async throws -> [PayoutListing] {
        try await read { connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Connection.payoutColumns), u.email FROM payouts p JOIN users u ON u.id = p.user_id
                WHERE \(status?.rawValue)::TEXT IS NULL OR p.status = \(status?.rawValue)
                ORDER BY p.created_at, p.id LIMIT \(Int64(limit))
                """
            ).map { row in
                let email = try row.makeRandomAccess()["email"].decode(String.self)
                return PayoutListing(payout: try PayoutRow(row), email: email)
            }
        }
    }
}

extension PostgresLedgerBackend.Connection {
    static let depositColumns = "id, reference, user_id, amount_cents, actor, created_at"
    static let payoutColumns = """
        p.id, p.user_id, p.idempotency_key, p.amount_cents, p.balance_after_cents, p.status, p.created_at,
        p.resolved_at, p.reference, p.reason, p.resolved_by
        """
}

extension PostgresLedgerBackend.Transaction {
    /// An unlocked read on the transaction's connection.
    package func deposit(reference: String) async throws -> DepositRow? {
        try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.depositColumns) FROM deposits
            WHERE reference = \(reference)
            """
        ).first.map { try DepositRow($0) }
    }

    /// A concurrent insert of the same reference waits here until the other transaction ends.
    package func insert(deposit: DepositRow) async throws -> Bool {
        try await !connection.rows(
            """
            INSERT INTO deposits (id, reference, user_id, amount_cents, actor, created_at)
            VALUES (\(deposit.id), \(deposit.reference), \(deposit.userID), \(deposit.amount), \(deposit.actor),
            \(deposit.createdAt)) ON CONFLICT (reference) DO NOTHING RETURNING 1
            """
        ).isEmpty
    }

    /// An unlocked read: the caller holds the user's wallet locked, so the user's payout requests run one at a time.
    package func payout(userID: String, key: String) async throws -> PayoutRow? {
        try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.payoutColumns) FROM payouts p
            WHERE p.user_id = \(userID) AND p.idempotency_key = \(key)
            """
        ).first.map { try PayoutRow($0) }
    }

    /// The row locked when `forUpdate`: of two operators settling or failing one payout, the second waits here and
    /// then reads the first's outcome.
    package func payout(id: String, forUpdate: Bool) async throws -> PayoutRow? {
        try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.payoutColumns) FROM payouts p WHERE p.id = \(id)
            \(unescaped: forUpdate ? "FOR UPDATE" : "")
            """
        ).first.map { try PayoutRow($0) }
    }

    /// A second payout under the user's key breaks the unique index `payouts_key` and throws the database's error.
    package func insert(payout: PayoutRow) async throws {
        try await connection.execute(
            """
            INSERT INTO payouts (id, user_id, idempotency_key, amount_cents, balance_after_cents, status, created_at)
            VALUES (\(payout.id), \(payout.userID), \(payout.idempotencyKey), \(payout.amount),
            \(payout.balanceAfter), \(payout.status.rawValue), \(payout.createdAt))
            """
        )
    }

    /// Changes only a row still pending (`status = 'PENDING'`).
    package func resolve(
        payout id: String,
        status: PayoutStatus,
        reference: String?,
        reason: String?,
        actor: String
    ) async throws {
        try await connection.execute(
            """
            UPDATE payouts SET status = \(status.rawValue), resolved_at = \(now), reference = \(reference),
            reason = \(reason), resolved_by = \(actor) WHERE id = \(id) AND status = \(PayoutStatus.pending.rawValue)
            """
        )
    }
}

extension DepositRow {
    init(_ row: PostgresRow) throws {
        let (id, reference, userID, amount, actor, createdAt) = try row.decode(
            (String, String, String, Int64, String, Int64).self
        )
        self.init(id: id, reference: reference, userID: userID, amount: amount, actor: actor, createdAt: createdAt)
    }
}

extension PayoutRow {
    /// A row of ``PostgresLedgerBackend/Connection/payoutColumns`` (and possibly more columns after them).
    init(_ row: PostgresRow) throws {
        let columns = row.makeRandomAccess()
        self.init(
            id: try columns[0].decode(String.self),
            userID: try columns[1].decode(String.self),
            idempotencyKey: try columns[2].decode(String.self),
            amount: try columns[3].decode(Int64.self),
            balanceAfter: try columns[4].decode(Int64.self),
            status: try PayoutStatus(stored: try columns[5].decode(String.self)),
            createdAt: try columns[6].decode(Int64.self),
            resolvedAt: try columns[7].decode(Int64?.self),
            reference: try columns[8].decode(String?.self),
            reason: try columns[9].decode(String?.self),
            resolvedBy: try columns[10].decode(String?.self)
        )
    }
}
