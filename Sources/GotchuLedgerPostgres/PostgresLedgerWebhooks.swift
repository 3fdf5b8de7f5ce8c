package import Foundation
import GotchuCore
package import GotchuLedger
import PostgresNIO

// Webhooks on PostgreSQL. A claim locks the due deliveries it takes and their endpoints with `SKIP LOCKED`, so
// servers claiming at once take different deliveries and never wait for each other; an endpoint is locked
// `FOR NO KEY UPDATE`, which the foreign keys of new deliveries (a payment fanning out its event) do not wait for.

extension PostgresLedgerBackend {
    /// One statement on a pooled connection, outside a transaction.
    package func webhookEndpoint(id: String) async throws -> WebhookEndpointRow? {
        try await read { connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Connection.endpointColumns) FROM webhook_endpoints e JOIN users u ON u.id = e.user_id
                WHERE e.id = \(id)
                """
            ).first.map { try WebhookEndpointRow($0) }
        }
    }

    /// One statement on a pooled connection.
    package func webhookEndpoints(userID: String?) async throws -> [WebhookEndpointRow] {
        try await read { connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Connection.endpointColumns) FROM webhook_endpoints e JOIN users u ON u.id = e.user_id
                WHERE (\(userID)::TEXT IS NULL OR e.user_id = \(userID)) AND e.deleted_at IS NULL
                ORDER BY e.created_at, e.id
                """
            ).map { try WebhookEndpointRow($0) }
        }
    }

    /// One statement on a pooled connection, by the index on `(endpoint_id, seq)`.
    package func webhookDeliveries(endpointID: String, limit: Int) async throws -> [WebhookDelivery] {
        try await read { connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Connection.deliveryColumns) FROM webhook_deliveries d
                JOIN webhook_events v ON v.id = d.event_id
                WHERE d.endpoint_id = \(endpointID) ORDER BY d.seq DESC LIMIT \(Int64(limit))
                """
            ).map { try WebhookDeliveryRow($0).delivery }
        }
    }

    /// One statement on a pooled connection.
    package func webhookEvent(id: String) async throws -> WebhookEvent? {
        try await read { connection in
            try await connection.rows(
                "SELECT \(unescaped: Connection.eventColumns) FROM webhook_events WHERE id = \(id)"
            ).first.map { try WebhookEvent($0) }
        }
    }

    /// One statement on a pooled connection, by the index of pending deliveries on `next_attempt_at`.
    package func webhookDeliveriesDue(now: Int64) async throws -> Bool {
        try await read { connection in
            try await connection.value(
                """
                SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'PENDING' AND next_attempt_at <= \(now)
                AND (lease_until IS NULL OR lease_until <= \(now)))
                """,
                as: Bool.self
            ) ?? false
        }
    }

    /// One statement on a pooled connection, by the partial index of sessions whose expiry is not noted yet.
    package func sessionExpiriesDue(now: Int64) async throws -> Bool {
        try await read { connection in
            try await connection.value(
                """
                SELECT EXISTS (SELECT 1 FROM payment_sessions WHERE status IN ('CREATED', 'ADVERTISING', 'LOCKED')
                AND expiry_noted_at IS NULL AND exp_at <= \(now))
                """,
                as: Bool.self
            ) ?? false
        }
    }

    /// One statement on a pooled connection, its receipt's body joined.
    package func refund(id: String) async throws -> RefundRow? {
        try await read { connection in
            try await connection.first(
                "SELECT \(unescaped: RefundRow.joinedColumns) WHERE r.id = \(id)",
                as: RefundRow.Joined.self
            ).map(RefundRow.init(joined:))
        }
    }

    /// One statement on a pooled connection.
    package func payout(id: String) async throws -> PayoutRow? {
        try await read { connection in
            try await connection.rows(
                "SELECT \(unescaped: Connection.payoutColumns) FROM payouts p WHERE p.id = \(id)"
            ).first.map { try PayoutRow($0) }
        }
    }

    /// One statement on a pooled connection.
    package func deposit(id: String) async throws -> DepositRow? {
        try await read { connection in
            try await connection.rows(
                "SELECT \(unescaped: Connection.depositColumns) FROM deposits WHERE id = \(id)"
            ).first.map { try DepositRow($0) }
        }
    }
}

extension PostgresLedgerBackend.Connection {
    /// The columns ``WebhookEndpointRow/init(_:)`` reads, of `webhook_endpoints e` joined with `users u`.
    static let endpointColumns = """
        e.id, e.user_id, u.email, e.url, e.events, e.created_at, e.disabled_at, e.disabled_reason, e.failing_since,
        e.previous_secret_until, e.secret, e.previous_secret, e.deleted_at
        """
    /// The columns ``WebhookDeliveryRow/init(_:)`` reads, of `webhook_deliveries d` joined with `webhook_events v`.
    static let deliveryColumns = """
        d.id, d.event_id, v.type, d.endpoint_id, d.status, d.attempts::BIGINT, d.created_at, d.next_attempt_at,
        d.last_attempt_at, d.last_status_code::BIGINT, d.last_error, d.last_duration_ms, d.delivered_at, d.lease_token,
        d.lease_until
        """
    /// The columns ``WebhookEvent/init(_:)`` reads.
    static let eventColumns = """
        id, type, user_id, created_at, session_id, payment_id, refund_id, payout_id, deposit_id, transfer_id,
        amount_cents, body
        """

    /// Every event without its body, oldest first, and where the outbox began (for `ledger verify`).
    func webhookEvents() async throws -> (events: [WebhookEvent], start: Int64?) {
        // Without their bodies: the check needs none, and a large ledger's would not fit in memory.
        let events = try await rows(
            """
            SELECT id, type, user_id, created_at, session_id, payment_id, refund_id, payout_id, deposit_id, transfer_id,
            amount_cents, NULL::BYTEA FROM webhook_events ORDER BY seq
            """
        ).map { try WebhookEvent($0) }
        let start = try await value("SELECT first_entry_seq FROM webhook_outbox WHERE id = 1", as: Int64.self)
        return (events, start)
    }
}

extension PostgresLedgerBackend.Transaction {
    /// Two writes held back (``DeferredWrites``): they go with the transaction's next statement or its COMMIT, as
    /// clauses of one statement, so the outbox adds no round trip. The deliveries' reference to the event is checked
    /// at the statement's end, when both rows exist.
    package func insert(webhookEvent event: WebhookEvent) async throws {
        try await connection.write(
            """
            INSERT INTO webhook_events (id, user_id, type, created_at, session_id, payment_id, refund_id, payout_id,
            deposit_id, transfer_id, amount_cents) VALUES (\(event.id), \(event.userID), \(event.type.rawValue),
            \(event.createdAt), \(event.sessionID), \(event.paymentID), \(event.refundID), \(event.payoutID),
            \(event.depositID), \(event.transferID), \(event.amount))
            """,
            to: "webhook_events"
        )
        try await connection.write(
            """
            INSERT INTO webhook_deliveries (id, event_id, endpoint_id, status, attempts, created_at, next_attempt_at)
            SELECT 'whd_' || replace(gen_random_uuid()::TEXT, '-', ''), \(event.id), s.endpoint_id, 'PENDING', 0,
            \(now), \(now) FROM webhook_subscriptions s JOIN webhook_endpoints e ON e.id = s.endpoint_id
            WHERE s.user_id = \(event.userID) AND s.event_type IN (\(event.type.rawValue), '*')
            AND e.disabled_at IS NULL AND e.deleted_at IS NULL
            """,
            to: "webhook_deliveries"
        )
    }

    /// By the partial index of sessions whose expiry is not noted yet; rows locked elsewhere (a payment under way,
    /// another server's sweep) are skipped.
    package func expiredSessionsForUpdate(limit: Int) async throws -> [SessionRow] {
        try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.sessionColumns) FROM payment_sessions s
            WHERE s.status IN ('CREATED', 'ADVERTISING', 'LOCKED') AND s.expiry_noted_at IS NULL AND s.exp_at <= \(now)
            ORDER BY s.exp_at LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED
            """
        ).map { try SessionRow($0) }
    }

    /// One `COUNT(*)` of the user's endpoints that are not deleted.
    package func webhookEndpointCount(userID: String) async throws -> Int {
        Int(
            try await connection.value(
                "SELECT COUNT(*) FROM webhook_endpoints WHERE user_id = \(userID) AND deleted_at IS NULL",
                as: Int64.self
            ) ?? 0
        )
    }

    /// Two statements: the endpoint's row, created at ``now``, then one subscription row per event type.
    package func insert(webhookEndpoint row: WebhookEndpointRow) async throws {
        let endpoint = row.endpoint
        try await connection.execute(
            """
            INSERT INTO webhook_endpoints (id, user_id, url, events, secret, created_at) VALUES (\(endpoint.id),
            \(endpoint.userID), \(endpoint.url), \(endpoint.events.joined(separator: " ")), \(row.secret), \(now))
            """
        )
        try await connection.execute(
            """
            INSERT INTO webhook_subscriptions (user_id, event_type, endpoint_id)
            SELECT \(endpoint.userID), t, \(endpoint.id) FROM unnest(\(endpoint.events)::TEXT[]) AS t
            """
        )
    }

    /// Locked `FOR NO KEY UPDATE` when `forUpdate`: deliveries referencing it are still inserted meanwhile.
    package func webhookEndpoint(id: String, forUpdate: Bool) async throws -> WebhookEndpointRow? {
        try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.endpointColumns) FROM webhook_endpoints e
            JOIN users u ON u.id = e.user_id WHERE e.id = \(id) \(unescaped: forUpdate ? "FOR NO KEY UPDATE OF e" : "")
            """
        ).first.map { try WebhookEndpointRow($0) }
    }

    /// One statement per change, and for a delete a second that drops the endpoint's subscriptions, so no event fans
    /// out to it again; a second delete keeps the first one's time.
    package func update(webhookEndpoint id: String, _ change: WebhookEndpointChange) async throws {
        switch change {
        case .deleted:
            try await connection.execute(
                "UPDATE webhook_endpoints SET deleted_at = COALESCE(deleted_at, \(now)) WHERE id = \(id)"
            )
            // No event fans out to it again: its subscriptions go.
            try await connection.execute("DELETE FROM webhook_subscriptions WHERE endpoint_id = \(id)")
        case .secretRotated(let secret, let previous, let until):
            try await connection.execute(
                """
                UPDATE webhook_endpoints SET secret = \(secret), previous_secret = \(previous),
                previous_secret_until = \(until) WHERE id = \(id)
                """
            )
        case .disabled(let reason):
            try await connection.execute(
                "UPDATE webhook_endpoints SET disabled_at = \(now), disabled_reason = \(reason) WHERE id = \(id)"
            )
        case .enabled:
            try await connection.execute(
                """
                UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL
                WHERE id = \(id)
                """
            )
        case .attempted(let failingSince):
            try await connection.execute(
                "UPDATE webhook_endpoints SET failing_since = \(failingSince) WHERE id = \(id)"
            )
        }
    }

    /// One statement: every pending delivery to the endpoint failed, its lease voided, `reason` its last error.
    package func abandonWebhookDeliveries(endpointID: String, reason: String) async throws {
        try await connection.execute(
            """
            UPDATE webhook_deliveries SET status = 'FAILED', next_attempt_at = NULL, lease_token = NULL,
            lease_until = NULL, last_error = \(reason) WHERE endpoint_id = \(endpointID) AND status = 'PENDING'
            """
        )
    }

    /// Locked `FOR UPDATE OF d` when `forUpdate`; its event's type joined.
    package func webhookDelivery(id: String, forUpdate: Bool) async throws -> WebhookDeliveryRow? {
        try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.deliveryColumns) FROM webhook_deliveries d
            JOIN webhook_events v ON v.id = d.event_id WHERE d.id = \(id)
            \(unescaped: forUpdate ? "FOR UPDATE OF d" : "")
            """
        ).first.map { try WebhookDeliveryRow($0) }
    }

    /// `FOR UPDATE OF d SKIP LOCKED`: deliveries another server is claiming (or recording) are left to it.
    package func dueWebhookDeliveries(limit: Int, perEndpoint: Int) async throws -> [WebhookDeliveryRow] {
        try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.deliveryColumns) FROM webhook_deliveries d
            JOIN webhook_events v ON v.id = d.event_id JOIN webhook_endpoints e ON e.id = d.endpoint_id
            WHERE d.status = 'PENDING' AND d.next_attempt_at <= \(now)
            AND (d.lease_until IS NULL OR d.lease_until <= \(now)) AND e.disabled_at IS NULL AND e.deleted_at IS NULL
            AND (SELECT COUNT(*) FROM webhook_deliveries l WHERE l.endpoint_id = d.endpoint_id
                AND l.status = 'PENDING' AND l.lease_token IS NOT NULL AND l.lease_until > \(now)) < \(Int64(perEndpoint))
            ORDER BY d.next_attempt_at, d.seq LIMIT \(Int64(limit)) FOR UPDATE OF d SKIP LOCKED
            """
        ).map { try WebhookDeliveryRow($0) }
    }

    /// `FOR NO KEY UPDATE OF e SKIP LOCKED`, in id order.
    package func lockWebhookEndpoints(ids: [String]) async throws -> [WebhookEndpointRow] {
        guard !ids.isEmpty else { return [] }
        return try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.endpointColumns) FROM webhook_endpoints e
            JOIN users u ON u.id = e.user_id WHERE e.id = ANY(\(ids)) ORDER BY e.id FOR NO KEY UPDATE OF e SKIP LOCKED
            """
        ).map { try WebhookEndpointRow($0) }
    }

    /// A statement of its own, after the endpoints' locks: it sees every claim committed before they were taken.
    package func leasedWebhookDeliveries(endpointIDs: [String]) async throws -> [String: Int] {
        guard !endpointIDs.isEmpty else { return [:] }
        let rows = try await connection.rows(
            """
            SELECT endpoint_id, COUNT(*) FROM webhook_deliveries
            WHERE status = 'PENDING' AND lease_token IS NOT NULL AND lease_until > \(now)
            AND endpoint_id = ANY(\(endpointIDs)) GROUP BY endpoint_id
            """
        )
        var leased: [String: Int] = [:]
        for row in rows {
            let (id, count) = try row.decode((String, Int64).self)
            leased[id] = Int(count)
        }
        return leased
    }

    /// One statement for all of them (`id = ANY(…)`); none for no ids.
    package func update(webhookDeliveries ids: [String], _ change: WebhookDeliveryChange) async throws {
        guard !ids.isEmpty else { return }
        let statement: SQLFragment
        switch change {
        case .claimed(let token, let until):
            statement = """
                UPDATE webhook_deliveries SET lease_token = \(token), lease_until = \(until) WHERE id = ANY(\(ids))
                """
        case .delivered(let statusCode, let duration):
            statement = """
                UPDATE webhook_deliveries SET status = 'DELIVERED', attempts = attempts + 1, next_attempt_at = NULL,
                lease_token = NULL, lease_until = NULL, last_attempt_at = \(now),
                last_status_code = \(Int64(statusCode))::INTEGER, last_error = NULL, last_duration_ms = \(duration),
                delivered_at = \(now) WHERE id = ANY(\(ids))
                """
        case .attemptFailed(let statusCode, let error, let duration, let next):
            let status = next == nil ? WebhookDeliveryStatus.failed.rawValue : WebhookDeliveryStatus.pending.rawValue
            statement = """
                UPDATE webhook_deliveries SET status = \(status), attempts = attempts + 1, next_attempt_at = \(next),
                lease_token = NULL, lease_until = NULL, last_attempt_at = \(now),
                last_status_code = \(statusCode.map(Int64.init))::INTEGER, last_error = \(error),
                last_duration_ms = \(duration) WHERE id = ANY(\(ids))
                """
        case .requeued:
            statement = """
                UPDATE webhook_deliveries SET status = 'PENDING', next_attempt_at = \(now), lease_token = NULL,
                lease_until = NULL, delivered_at = NULL WHERE id = ANY(\(ids))
                """
        case .abandoned(let reason):
            statement = """
                UPDATE webhook_deliveries SET status = 'FAILED', next_attempt_at = NULL, lease_token = NULL,
                lease_until = NULL, last_error = \(reason) WHERE id = ANY(\(ids))
                """
        }
        try await connection.execute(statement.query)
    }

    /// One statement (`id = ANY(…)`), bodies included; none for no ids.
    package func webhookEvents(ids: [String]) async throws -> [WebhookEvent] {
        guard !ids.isEmpty else { return [] }
        return try await connection.rows(
            """
            SELECT \(unescaped: PostgresLedgerBackend.Connection.eventColumns) FROM webhook_events
            WHERE id = ANY(\(ids))
            """
        ).map { try WebhookEvent($0) }
    }

    /// An update where the body is still `NULL`, then a read of the body stored; `nil` for an unknown event.
    package func pinWebhookBody(eventID: String, body: Data) async throws -> Data? {
        try await connection.execute(
            "UPDATE webhook_events SET body = \(body) WHERE id = \(eventID) AND body IS NULL"
        )
        guard
            let row = try await connection.rows("SELECT body FROM webhook_events WHERE id = \(eventID)").first
        else { return nil }
        return try row.decode(Data?.self)
    }
}

extension WebhookEndpointRow {
    /// A row of ``PostgresLedgerBackend/Connection/endpointColumns``.
    init(_ row: PostgresRow) throws {
        let columns = row.makeRandomAccess()
        self.init(
            endpoint: WebhookEndpoint(
                id: try columns[0].decode(String.self),
                userID: try columns[1].decode(String.self),
                userEmail: try columns[2].decode(String.self),
                url: try columns[3].decode(String.self),
                events: try columns[4].decode(String.self).split(separator: " ").map(String.init),
                createdAt: try columns[5].decode(Int64.self),
                disabledAt: try columns[6].decode(Int64?.self),
                disabledReason: try columns[7].decode(String?.self),
                failingSince: try columns[8].decode(Int64?.self),
                previousSecretExpiresAt: try columns[9].decode(Int64?.self)
            ),
            secret: try columns[10].decode(String.self),
            previousSecret: try columns[11].decode(String?.self),
            deletedAt: try columns[12].decode(Int64?.self)
        )
    }
}

extension WebhookDeliveryRow {
    /// A row of ``PostgresLedgerBackend/Connection/deliveryColumns``.
    init(_ row: PostgresRow) throws {
        let columns = row.makeRandomAccess()
        self.init(
            delivery: WebhookDelivery(
                id: try columns[0].decode(String.self),
                eventID: try columns[1].decode(String.self),
                eventType: try WebhookEventType(stored: try columns[2].decode(String.self)),
                endpointID: try columns[3].decode(String.self),
                status: try WebhookDeliveryStatus(stored: try columns[4].decode(String.self)),
                attempts: Int(try columns[5].decode(Int64.self)),
                createdAt: try columns[6].decode(Int64.self),
                nextAttemptAt: try columns[7].decode(Int64?.self),
                lastAttemptAt: try columns[8].decode(Int64?.self),
                lastStatusCode: try columns[9].decode(Int64?.self).map(Int.init),
                lastError: try columns[10].decode(String?.self),
                lastDurationMilliseconds: try columns[11].decode(Int64?.self),
                deliveredAt: try columns[12].decode(Int64?.self)
            ),
            leaseToken: try columns[13].decode(String?.self),
            leaseUntil: try columns[14].decode(Int64?.self)
        )
    }
}

extension WebhookEvent {
    /// A row of ``PostgresLedgerBackend/Connection/eventColumns``.
    init(_ row: PostgresRow) throws {
        let columns = row.makeRandomAccess()
        self.init(
            id: try columns[0].decode(String.self),
            type: try WebhookEventType(stored: try columns[1].decode(String.self)),
            userID: try columns[2].decode(String.self),
            createdAt: try columns[3].decode(Int64.self),
            sessionID: try columns[4].decode(String?.self),
            paymentID: try columns[5].decode(String?.self),
            refundID: try columns[6].decode(String?.self),
            payoutID: try columns[7].decode(String?.self),
            depositID: try columns[8].decode(String?.self),
            transferID: try columns[9].decode(String?.self),
            amount: try columns[10].decode(Int64?.self),
            body: try columns[11].decode(Data?.self)
        )
    }
}
