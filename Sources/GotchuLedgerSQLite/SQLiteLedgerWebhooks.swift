package import Foundation
import GRDB
import GotchuCore
package import GotchuLedger

// Webhooks on SQLite. One writer serializes every transaction, so rows read "for update" are plain reads, and a claim
// skips nothing: no other transaction can hold a row meanwhile.

extension SQLiteLedgerBackend {
    /// A lookup on a reader connection, which never waits for the writer.
    package func webhookEndpoint(id: String) async throws -> WebhookEndpointRow? {
        try await lookup { db in try Self.webhookEndpoint(id, db) }
    }

    static func webhookEndpoint(_ id: String, _ db: Database) throws -> WebhookEndpointRow? {
        try Row.fetchOne(
            cached: db,
            sql: "SELECT \(endpointColumns) FROM webhook_endpoints e JOIN users u ON u.id = e.user_id WHERE e.id = ?",
            arguments: [id]
        ).map(WebhookEndpointRow.init)
    }

    /// The columns ``WebhookEndpointRow/init(_:)`` reads, of `webhook_endpoints e` joined with `users u`.
    static let endpointColumns = "e.*, u.email AS user_email"

    /// One asynchronous read of the pool.
    package func webhookEndpoints(userID: String?) async throws -> [WebhookEndpointRow] {
        try await database.read { db in
            let select = "SELECT \(Self.endpointColumns) FROM webhook_endpoints e JOIN users u ON u.id = e.user_id"
            guard let userID else {
                return try Row.fetchAll(
                    cached: db,
                    sql: "\(select) WHERE e.deleted_at IS NULL ORDER BY e.created_at, e.id"
                ).map(WebhookEndpointRow.init)
            }
            return try Row.fetchAll(
                cached: db,
                sql: "\(select) WHERE e.user_id = ? AND e.deleted_at IS NULL ORDER BY e.created_at, e.id",
                arguments: [userID]
            ).map(WebhookEndpointRow.init)
        }
    }

    /// One asynchronous read of the pool, by the index on `(endpoint_id, seq)`.
    package func webhookDeliveries(endpointID: String, limit: Int) async throws -> [WebhookDelivery] {
        try await database.read { db in
            try Row.fetchAll(
                cached: db,
                sql: """
                    SELECT \(Self.deliveryColumns) FROM webhook_deliveries d JOIN webhook_events v ON v.id = d.event_id
                    WHERE d.endpoint_id = ? ORDER BY d.seq DESC LIMIT ?
                    """,
                arguments: [endpointID, limit]
            ).map { try WebhookDeliveryRow($0).delivery }
        }
    }

    /// The columns ``WebhookDeliveryRow/init(_:)`` reads, of `webhook_deliveries d` joined with `webhook_events v`.
    static let deliveryColumns = "d.*, v.type AS event_type"

    /// A lookup on a reader connection.
    package func webhookEvent(id: String) async throws -> WebhookEvent? {
        try await lookup { db in
            try Row.fetchOne(cached: db, sql: "SELECT * FROM webhook_events WHERE id = ?", arguments: [id])
                .map { try WebhookEvent($0) }
        }
    }

    /// A lookup on a reader connection, by the index of pending deliveries on `next_attempt_at`.
    package func webhookDeliveriesDue(now: Int64) async throws -> Bool {
        try await lookup { db in
            try Bool.fetchOne(
                cached: db,
                sql: """
                    SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'PENDING' AND next_attempt_at <= ?
                    AND (lease_until IS NULL OR lease_until <= ?))
                    """,
                arguments: [now, now]
            ) ?? false
        }
    }

    /// A lookup on a reader connection, by the partial index of sessions whose expiry is not noted yet.
    package func sessionExpiriesDue(now: Int64) async throws -> Bool {
        try await lookup { db in
            try Bool.fetchOne(
                cached: db,
                sql: """
                    SELECT EXISTS (SELECT 1 FROM payment_sessions WHERE status IN ('CREATED', 'ADVERTISING', 'LOCKED')
                    AND expiry_noted_at IS NULL AND exp_at <= ?)
                    """,
                arguments: [now]
            ) ?? false
        }
    }

    /// A lookup on a reader connection, its receipt's body joined.
    package func refund(id: String) async throws -> RefundRow? {
        try await lookup { db in
            try Row.fetchOne(
                cached: db,
                sql: """
                    SELECT refunds.*, receipts.body AS receipt_body FROM refunds
                    LEFT JOIN receipts ON receipts.id = refunds.receipt_id WHERE refunds.id = ?
                    """,
                arguments: [id]
            ).map(Self.joinedRefund)
        }
    }

    /// A lookup on a reader connection.
    package func payout(id: String) async throws -> PayoutRow? {
        try await lookup { db in
            try Row.fetchOne(cached: db, sql: "SELECT * FROM payouts WHERE id = ?", arguments: [id])
                .map { try PayoutRow($0) }
        }
    }

    /// A lookup on a reader connection.
    package func deposit(id: String) async throws -> DepositRow? {
        try await lookup { db in
            try Row.fetchOne(cached: db, sql: "SELECT * FROM deposits WHERE id = ?", arguments: [id])
                .map(DepositRow.init)
        }
    }

    /// Every event without its body, oldest first, and where the outbox began (for `ledger verify`), in the caller's read.
    static func webhookEvents(_ db: Database) throws -> (events: [WebhookEvent], start: Int64?) {
        // Without their bodies: the check needs none, and a large ledger's would not fit in memory.
        let events = try Row.fetchAll(
            cached: db,
            sql: """
                SELECT id, type, user_id, created_at, session_id, payment_id, refund_id, payout_id, deposit_id,
                transfer_id, amount_cents, NULL AS body FROM webhook_events ORDER BY seq
                """
        ).map { try WebhookEvent($0) }
        let start = try Int64.fetchOne(cached: db, sql: "SELECT first_entry_seq FROM webhook_outbox WHERE id = 1")
        return (events, start)
    }
}

extension SQLiteLedgerBackend.Transaction {
    /// Two statements on the writer connection, on this thread: the event, then its deliveries (found by the
    /// subscriptions' primary key, user and type first: with no endpoint, one probe that finds nothing).
    package func insert(webhookEvent event: WebhookEvent) async throws {
        let now = self.now
        try sync { db in
            try db.execute(
                cached: """
                    INSERT INTO webhook_events (id, user_id, type, created_at, session_id, payment_id, refund_id,
                    payout_id, deposit_id, transfer_id, amount_cents) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    event.id, event.userID, event.type.rawValue, event.createdAt, event.sessionID, event.paymentID,
                    event.refundID, event.payoutID, event.depositID, event.transferID, event.amount,
                ]
            )
            try db.execute(
                cached: """
                    INSERT INTO webhook_deliveries (id, event_id, endpoint_id, status, attempts, created_at,
                    next_attempt_at) SELECT 'whd_' || lower(hex(randomblob(16))), ?, s.endpoint_id, 'PENDING', 0, ?, ?
                    FROM webhook_subscriptions s JOIN webhook_endpoints e ON e.id = s.endpoint_id
                    WHERE s.user_id = ? AND s.event_type IN (?, '*') AND e.disabled_at IS NULL AND e.deleted_at IS NULL
                    """,
                arguments: [event.id, now, now, event.userID, event.type.rawValue]
            )
        }
    }

    /// By the partial index of sessions whose expiry is not noted yet.
    package func expiredSessionsForUpdate(limit: Int) async throws -> [SessionRow] {
        let now = self.now
        return try sync { db in
            try db.fetchAll(
                cached: """
                    SELECT \(SessionRow.columns(of: "s")) FROM payment_sessions s
                    WHERE s.status IN ('CREATED', 'ADVERTISING', 'LOCKED') AND s.expiry_noted_at IS NULL
                    AND s.exp_at <= ? ORDER BY s.exp_at LIMIT ?
                    """,
                arguments: [now, limit]
            ) { try SessionRow($0) }
        }
    }

    /// One `COUNT(*)` of the user's endpoints that are not deleted.
    package func webhookEndpointCount(userID: String) async throws -> Int {
        try sync { db in
            try Int.fetchOne(
                cached: db,
                sql: "SELECT COUNT(*) FROM webhook_endpoints WHERE user_id = ? AND deleted_at IS NULL",
                arguments: [userID]
            ) ?? 0
        }
    }

    /// The endpoint's row, created at ``now``, then one subscription row per event type, on the writer connection.
    package func insert(webhookEndpoint row: WebhookEndpointRow) async throws {
        let now = self.now
        try sync { db in
            let endpoint = row.endpoint
            try db.execute(
                cached: """
                    INSERT INTO webhook_endpoints (id, user_id, url, events, secret, created_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    endpoint.id, endpoint.userID, endpoint.url, endpoint.events.joined(separator: " "),
                    row.secret, now,
                ]
            )
            for type in endpoint.events {
                try db.execute(
                    cached: "INSERT INTO webhook_subscriptions (user_id, event_type, endpoint_id) VALUES (?, ?, ?)",
                    arguments: [endpoint.userID, type, endpoint.id]
                )
            }
        }
    }

    /// A plain read: the write lock already serializes every transaction.
    package func webhookEndpoint(id: String, forUpdate: Bool) async throws -> WebhookEndpointRow? {
        try sync { db in try SQLiteLedgerBackend.webhookEndpoint(id, db) }
    }

    /// One statement per change, and for a delete a second that drops the endpoint's subscriptions, so no event fans
    /// out to it again; a second delete keeps the first one's time.
    package func update(webhookEndpoint id: String, _ change: WebhookEndpointChange) async throws {
        let now = self.now
        try sync { db in
            switch change {
            case .deleted:
                try db.execute(
                    cached: "UPDATE webhook_endpoints SET deleted_at = COALESCE(deleted_at, ?) WHERE id = ?",
                    arguments: [now, id]
                )
                // No event fans out to it again: its subscriptions go.
                try db.execute(cached: "DELETE FROM webhook_subscriptions WHERE endpoint_id = ?", arguments: [id])
            case .secretRotated(let secret, let previous, let until):
                try db.execute(
                    cached: """
                        UPDATE webhook_endpoints SET secret = ?, previous_secret = ?, previous_secret_until = ?
                        WHERE id = ?
                        """,
                    arguments: [secret, previous, until, id]
                )
            case .disabled(let reason):
                try db.execute(
                    cached: "UPDATE webhook_endpoints SET disabled_at = ?, disabled_reason = ? WHERE id = ?",
                    arguments: [now, reason, id]
                )
            case .enabled:
                try db.execute(
                    cached: """
                        UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL
                        WHERE id = ?
                        """,
                    arguments: [id]
                )
            case .attempted(let failingSince):
                try db.execute(
                    cached: "UPDATE webhook_endpoints SET failing_since = ? WHERE id = ?",
                    arguments: [failingSince, id]
                )
            }
        }
    }

    /// One statement: every pending delivery to the endpoint failed, its lease voided, `reason` its last error.
    package func abandonWebhookDeliveries(endpointID: String, reason: String) async throws {
        try sync { db in
            try db.execute(
                cached: """
                    UPDATE webhook_deliveries SET status = 'FAILED', next_attempt_at = NULL, lease_token = NULL,
                    lease_until = NULL, last_error = ? WHERE endpoint_id = ? AND status = 'PENDING'
                    """,
                arguments: [reason, endpointID]
            )
        }
    }

    /// A plain read: the write lock already serializes every transaction.
    package func webhookDelivery(id: String, forUpdate: Bool) async throws -> WebhookDeliveryRow? {
        try sync { db in
            try Row.fetchOne(
                cached: db,
                sql: """
                    SELECT \(SQLiteLedgerBackend.deliveryColumns) FROM webhook_deliveries d
                    JOIN webhook_events v ON v.id = d.event_id WHERE d.id = ?
                    """,
                arguments: [id]
            ).map { try WebhookDeliveryRow($0) }
        }
    }

    /// By the index of pending deliveries on `next_attempt_at`; each endpoint's live leases by their own index.
    package func dueWebhookDeliveries(limit: Int, perEndpoint: Int) async throws -> [WebhookDeliveryRow] {
        let now = self.now
        return try sync { db in
            try Row.fetchAll(
                cached: db,
                sql: """
                    SELECT \(SQLiteLedgerBackend.deliveryColumns) FROM webhook_deliveries d
                    JOIN webhook_events v ON v.id = d.event_id JOIN webhook_endpoints e ON e.id = d.endpoint_id
                    WHERE d.status = 'PENDING' AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?)
                    AND e.disabled_at IS NULL AND e.deleted_at IS NULL
                    AND (SELECT COUNT(*) FROM webhook_deliveries l WHERE l.endpoint_id = d.endpoint_id
                        AND l.status = 'PENDING' AND l.lease_token IS NOT NULL AND l.lease_until > ?) < ?
                    ORDER BY d.next_attempt_at, d.seq LIMIT ?
                    """,
                arguments: [now, now, now, perEndpoint, limit]
            ).map { try WebhookDeliveryRow($0) }
        }
    }

    /// Every one of them: no other transaction can hold one.
    package func lockWebhookEndpoints(ids: [String]) async throws -> [WebhookEndpointRow] {
        guard !ids.isEmpty else { return [] }
        let placeholders = Array(repeating: "?", count: ids.count).joined(separator: ", ")
        return try sync { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(SQLiteLedgerBackend.endpointColumns) FROM webhook_endpoints e
                    JOIN users u ON u.id = e.user_id WHERE e.id IN (\(placeholders)) ORDER BY e.id
                    """,
                arguments: StatementArguments(ids)
            ).map(WebhookEndpointRow.init)
        }
    }

    /// One grouped count of the live leases: the write lock already keeps any other claim out meanwhile.
    package func leasedWebhookDeliveries(endpointIDs: [String]) async throws -> [String: Int] {
        guard !endpointIDs.isEmpty else { return [:] }
        let placeholders = Array(repeating: "?", count: endpointIDs.count).joined(separator: ", ")
        let now = self.now
        return try sync { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT endpoint_id, COUNT(*) AS leased FROM webhook_deliveries
                    WHERE status = 'PENDING' AND lease_token IS NOT NULL AND lease_until > ?
                    AND endpoint_id IN (\(placeholders)) GROUP BY endpoint_id
                    """,
                arguments: StatementArguments([now] + endpointIDs.map { $0 as (any DatabaseValueConvertible)? })
            )
            return Dictionary(uniqueKeysWithValues: rows.map { ($0["endpoint_id"] as String, $0["leased"] as Int) })
        }
    }

    /// One statement for all of them (`id IN (…)`); none for no ids.
    package func update(webhookDeliveries ids: [String], _ change: WebhookDeliveryChange) async throws {
        guard !ids.isEmpty else { return }
        let now = self.now
        let placeholders = Array(repeating: "?", count: ids.count).joined(separator: ", ")
        let (assignments, values): (String, [(any DatabaseValueConvertible)?]) =
            switch change {
            case .claimed(let token, let until):
                ("lease_token = ?, lease_until = ?", [token, until])
            case .delivered(let statusCode, let duration):
                (
                    """
                    status = 'DELIVERED', attempts = attempts + 1, next_attempt_at = NULL, lease_token = NULL,
                    lease_until = NULL, last_attempt_at = ?, last_status_code = ?, last_error = NULL,
                    last_duration_ms = ?, delivered_at = ?
                    """,
                    [now, statusCode, duration, now]
                )
            case .attemptFailed(let statusCode, let error, let duration, let next):
                (
                    """
                    status = ?, attempts = attempts + 1, next_attempt_at = ?, lease_token = NULL, lease_until = NULL,
                    last_attempt_at = ?, last_status_code = ?, last_error = ?, last_duration_ms = ?
                    """,
                    [
                        next == nil ? WebhookDeliveryStatus.failed.rawValue : WebhookDeliveryStatus.pending.rawValue,
                        next, now, statusCode, error, duration,
                    ]
                )
            case .requeued:
                (
                    """
                    status = 'PENDING', next_attempt_at = ?, lease_token = NULL, lease_until = NULL, delivered_at = NULL
                    """,
                    [now]
                )
            case .abandoned(let reason):
                (
                    """
                    status = 'FAILED', next_attempt_at = NULL, lease_token = NULL, lease_until = NULL, last_error = ?
                    """,
                    [reason]
                )
            }
        try sync { db in
            try db.execute(
                sql: "UPDATE webhook_deliveries SET \(assignments) WHERE id IN (\(placeholders))",
                arguments: StatementArguments(values + ids.map { $0 })
            )
        }
    }

    /// One statement (`id IN (…)`), bodies included; none for no ids.
    package func webhookEvents(ids: [String]) async throws -> [WebhookEvent] {
        guard !ids.isEmpty else { return [] }
        let placeholders = Array(repeating: "?", count: ids.count).joined(separator: ", ")
        return try sync { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM webhook_events WHERE id IN (\(placeholders))",
                arguments: StatementArguments(ids)
            ).map { try WebhookEvent($0) }
        }
    }

    /// An update where the body is still `NULL`, then a read of the body stored; `nil` for an unknown event.
    package func pinWebhookBody(eventID: String, body: Data) async throws -> Data? {
        try sync { db in
            try db.execute(
                cached: "UPDATE webhook_events SET body = ? WHERE id = ? AND body IS NULL",
                arguments: [body, eventID]
            )
            return try Row.fetchOne(
                cached: db,
                sql: "SELECT body FROM webhook_events WHERE id = ?",
                arguments: [eventID]
            )
            .flatMap { $0["body"] as Data? }
        }
    }
}

extension WebhookEndpointRow {
    /// A row of ``SQLiteLedgerBackend/endpointColumns``.
    init(_ row: Row) {
        let events: String = row["events"]
        self.init(
            endpoint: WebhookEndpoint(
                id: row["id"],
                userID: row["user_id"],
                userEmail: row["user_email"],
                url: row["url"],
                events: events.split(separator: " ").map(String.init),
                createdAt: row["created_at"],
                disabledAt: row["disabled_at"],
                disabledReason: row["disabled_reason"],
                failingSince: row["failing_since"],
                previousSecretExpiresAt: row["previous_secret_until"]
            ),
            secret: row["secret"],
            previousSecret: row["previous_secret"],
            deletedAt: row["deleted_at"]
        )
    }
}

extension WebhookDeliveryRow {
    /// A row of ``SQLiteLedgerBackend/deliveryColumns``.
    init(_ row: Row) throws {
        self.init(
            delivery: WebhookDelivery(
                id: row["id"],
                eventID: row["event_id"],
                eventType: try WebhookEventType(stored: row["event_type"]),
                endpointID: row["endpoint_id"],
                status: try WebhookDeliveryStatus(stored: row["status"]),
                attempts: row["attempts"],
                createdAt: row["created_at"],
                nextAttemptAt: row["next_attempt_at"],
                lastAttemptAt: row["last_attempt_at"],
                lastStatusCode: row["last_status_code"],
                lastError: row["last_error"],
                lastDurationMilliseconds: row["last_duration_ms"],
                deliveredAt: row["delivered_at"]
            ),
            leaseToken: row["lease_token"],
            leaseUntil: row["lease_until"]
        )
    }
}

extension WebhookEvent {
    /// A `webhook_events` row.
    init(_ row: Row) throws {
        self.init(
            id: row["id"],
            type: try WebhookEventType(stored: row["type"]),
            userID: row["user_id"],
            createdAt: row["created_at"],
            sessionID: row["session_id"],
            paymentID: row["payment_id"],
            refundID: row["refund_id"],
            payoutID: row["payout_id"],
            depositID: row["deposit_id"],
            transferID: row["transfer_id"],
            amount: row["amount_cents"],
            body: row["body"]
        )
    }
}
