package import Foundation
import GotchuCore
import GotchuReceipts

// Webhooks: the outbox every money movement writes into (in its own transaction), the endpoints users register,
// and the deliveries workers claim and record. Lock order, as everywhere, is one: a delivery's row before its
// endpoint's; a claim waits for no row (it skips what another transaction holds), so no two transactions of these
// can wait on each other in a cycle.
extension LedgerEngine {
    // MARK: The outbox

    /// Writes an event in the caller's transaction, with one delivery per subscribed endpoint of `userID`: what
    /// every money movement (and every cancel and expiry) calls once, after its own writes, so the event commits
    /// exactly when the movement does.
    static func recordWebhookEvent(
        _ type: WebhookEventType,
        userID: String,
        sessionID: String? = nil,
        paymentID: String? = nil,
        refundID: String? = nil,
        payoutID: String? = nil,
        depositID: String? = nil,
        transfer: (id: String, amount: Cents)? = nil,
        _ transaction: Backend.Transaction
    ) async throws {
        try await transaction.insert(
            webhookEvent: WebhookEvent(
                id: WebhookSecrets.id("evt_"),
                type: type,
                userID: userID,
                createdAt: transaction.now,
                sessionID: sessionID,
                paymentID: paymentID,
                refundID: refundID,
                payoutID: payoutID,
                depositID: depositID,
                transferID: transfer?.id,
                amount: transfer?.amount
            )
        )
    }

    /// The transfer of `entries` (one transfer's two entries), as an event names it.
    static func eventTransfer(_ entries: [EntryRow]) -> (id: String, amount: Cents)? {
        entries.first.map { ($0.transferID, $0.amount) }
    }

    /// Notes up to `limit` sessions whose expiry passed unpaid and uncancelled, each with its `session.expired`
    /// event, in one transaction (none when a read outside one finds no expiry due); returns how many, and wakes the
    /// outbox when there were any.
    package func markExpiredSessions(limit: Int) async throws -> Int {
        guard limit > 0, try await backend.sessionExpiriesDue(now: try await backend.now()) else { return 0 }
        let count = try await measuredTransaction { transaction in
            let sessions = try await transaction.expiredSessionsForUpdate(limit: limit)
            for session in sessions {
                try await transaction.update(session: session.id, .expiryNoted)
                try await Self.recordWebhookEvent(
                    .sessionExpired,
                    userID: session.payeeID,
                    sessionID: session.id,
                    transaction
                )
            }
            return sessions.count
        }
        if count > 0 { webhookOutbox.notify() }
        return count
    }

    // MARK: Endpoints

    /// Checks the URL and event types, then, under the user's lock (so two creates at once cannot both find room under
    /// ``LedgerPolicy/maximumWebhookEndpoints``), inserts the endpoint with a new secret, returned here and nowhere
    /// else. `invalidInput` for a malformed URL or event type or past the cap; `unknownUser` for an unknown user.
    package func createWebhookEndpoint(
        userID: String,
        url: String,
        events: [String]
    ) async throws -> (endpoint: WebhookEndpoint, secret: String) {
        let url = try WebhookSecrets.validate(url: url)
        let events = try WebhookSecrets.validate(events: events)
        let maximum = policy.maximumWebhookEndpoints
        return try await measuredTransaction { transaction in
            // The user's own lock, so two creates at once cannot both find room under the cap.
            try await transaction.lockPayer(userID)
            guard try await transaction.user(id: userID) != nil else { throw Self.unknownUser }
            guard try await transaction.webhookEndpointCount(userID: userID) < maximum else {
                throw LedgerError(
                    .invalidInput,
                    detail: "a user may have at most \(maximum) webhook endpoints; delete one first"
                )
            }
            let secret = WebhookSecrets.generate()
            let id = WebhookSecrets.id("we_")
            try await transaction.insert(
                webhookEndpoint: WebhookEndpointRow(
                    endpoint: WebhookEndpoint(
                        id: id,
                        userID: userID,
                        userEmail: "",
                        url: url,
                        events: events,
                        createdAt: transaction.now
                    ),
                    secret: secret
                )
            )
            guard let stored = try await transaction.webhookEndpoint(id: id, forUpdate: false) else {
                throw LedgerError(.inconsistent, detail: "webhook endpoint \(id) was not stored")
            }
            return (stored.endpoint, secret)
        }
    }

    /// One read outside a transaction: the endpoints of `userID`, oldest first, without their secrets.
    package func webhookEndpoints(userID: String) async throws -> [WebhookEndpoint] {
        try await backend.webhookEndpoints(userID: userID).map(\.endpoint)
    }

    /// For an operator, one read outside a transaction: the endpoints of the user with this address (normalized
    /// first), or of every user when `nil`, oldest first. `unknownUser` when no user has the address.
    package func webhookEndpoints(email: String?) async throws -> [WebhookEndpoint] {
        guard let email else { return try await backend.webhookEndpoints(userID: nil).map(\.endpoint) }
        let normalized = try LedgerUser.normalize(email: email).email
        guard let user = try await backend.credentials(email: normalized)?.user else {
            throw LedgerError(.unknownUser, detail: "no user has the address \(normalized)")
        }
        return try await backend.webhookEndpoints(userID: user.id).map(\.endpoint)
    }

    /// Deletes an endpoint of `userID` in one transaction: its pending deliveries fail first ("the endpoint was
    /// deleted"), then it is marked deleted and its subscriptions go. `notFound` for an id that is unknown, deleted
    /// or another user's.
    package func deleteWebhookEndpoint(id: String, userID: String) async throws {
        try await measuredTransaction { transaction in
            // Read unlocked: the deliveries go first (a delivery's row before its endpoint's, the one order).
            _ = try await Self.ownEndpoint(id, userID: userID, forUpdate: false, transaction)
            try await transaction.abandonWebhookDeliveries(endpointID: id, reason: "the endpoint was deleted")
            try await transaction.update(webhookEndpoint: id, .deleted)
        }
    }

    /// Gives an endpoint of `userID` a new secret under the endpoint's lock, returned here and nowhere else; the one
    /// it replaces is still signed with for ``WebhookSecrets/rotationOverlap``. `notFound` as for a delete.
    package func rotateWebhookSecret(
        id: String,
        userID: String
    ) async throws -> (endpoint: WebhookEndpoint, secret: String) {
        let overlap = LedgerTime.milliseconds(WebhookSecrets.rotationOverlap)
        return try await measuredTransaction { transaction in
            let row = try await Self.ownEndpoint(id, userID: userID, forUpdate: true, transaction)
            // A rotation while the secret before is still honoured would drop that one at once, from under
            // receivers that have not switched yet: refused until its overlap ends, and nothing changes.
            if row.previousSecret != nil, let until = row.endpoint.previousSecretExpiresAt, transaction.now < until {
                throw LedgerError(
                    .invalidInput,
                    detail:
                        "the secret was rotated less than \(WebhookSecrets.rotationOverlap.components.seconds / 3600) "
                        + "hours ago, and the one before it is still honoured until "
                        + LedgerTime.date(until).formatted(.iso8601)
                        + "; rotate again after that (or delete the endpoint and register it anew)"
                )
            }
            let secret = WebhookSecrets.generate()
            let until = transaction.now + overlap
            try await transaction.update(
                webhookEndpoint: id,
                .secretRotated(secret: secret, previous: row.secret, previousUntil: until)
            )
            var endpoint = row.endpoint
            endpoint.previousSecretExpiresAt = until
            return (endpoint, secret)
        }
    }

    /// One read outside a transaction: what deliveries to the endpoint are signed with at the store's time.
    /// `notFound` for an unknown or deleted endpoint.
    package func webhookSecrets(endpointID: String) async throws -> WebhookSigningSecrets {
        guard let row = try await backend.webhookEndpoint(id: endpointID), row.deletedAt == nil else {
            throw Self.noEndpoint(endpointID)
        }
        return row.secrets(now: try await backend.now())
    }

    /// Disables an endpoint under its lock, as `actor`, for `reason` (`invalidInput` for one
    /// ``OperatorText/reason(_:)`` refuses), with an audit entry; one disabled already is returned as it is.
    /// `notFound` for an unknown or deleted endpoint.
    package func disableWebhookEndpoint(id: String, actor: String, reason: String) async throws -> WebhookEndpoint {
        let reason = try OperatorText.reason(reason)
        return try await measuredTransaction { transaction in
            guard var row = try await transaction.webhookEndpoint(id: id, forUpdate: true), row.deletedAt == nil else {
                throw Self.noEndpoint(id)
            }
            guard row.endpoint.disabledAt == nil else { return row.endpoint }
            try await transaction.update(webhookEndpoint: id, .disabled(reason: reason))
            try await transaction.insert(
                audit: AuditEntry(
                    actor: actor,
                    action: "webhook.disable",
                    subject: id,
                    detail: "\(row.endpoint.userEmail): \(reason)",
                    at: transaction.now
                )
            )
            row.endpoint.disabledAt = transaction.now
            row.endpoint.disabledReason = reason
            return row.endpoint
        }
    }

    /// Enables a disabled endpoint under its lock, its failing time forgotten, as `actor`, with an audit entry (one
    /// enabled already is returned as it is), and wakes the outbox so its pending deliveries resume. `notFound` for
    /// an unknown or deleted endpoint.
    package func enableWebhookEndpoint(id: String, actor: String) async throws -> WebhookEndpoint {
        let endpoint = try await measuredTransaction { transaction in
            guard var row = try await transaction.webhookEndpoint(id: id, forUpdate: true), row.deletedAt == nil else {
                throw Self.noEndpoint(id)
            }
            guard row.endpoint.disabledAt != nil else { return row.endpoint }
            try await transaction.update(webhookEndpoint: id, .enabled)
            try await transaction.insert(
                audit: AuditEntry(
                    actor: actor,
                    action: "webhook.enable",
                    subject: id,
                    detail: row.endpoint.userEmail,
                    at: transaction.now
                )
            )
            row.endpoint.disabledAt = nil
            row.endpoint.disabledReason = nil
            row.endpoint.failingSince = nil
            return row.endpoint
        }
        webhookOutbox.notify()
        return endpoint
    }

    /// The endpoint `id` of `userID`, not deleted; `notFound` otherwise, whichever the reason.
    private static func ownEndpoint(
        _ id: String,
        userID: String,
        forUpdate: Bool,
        _ transaction: Backend.Transaction
    ) async throws -> WebhookEndpointRow {
        guard let row = try await transaction.webhookEndpoint(id: id, forUpdate: forUpdate),
            row.endpoint.userID == userID, row.deletedAt == nil
        else { throw noEndpoint(id) }
        return row
    }

    private static func noEndpoint(_ id: String) -> LedgerError {
        LedgerError(.notFound, detail: "no webhook endpoint \(DisplayText.quoted(id))")
    }

    // MARK: Deliveries

    /// Two reads outside a transaction: up to `limit` (kept within 1...1000) deliveries to the endpoint, newest first;
    /// of `userID`'s endpoints only (`nil`: an operator's look at any, deleted ones too). `notFound` for an endpoint
    /// that is unknown, deleted or another user's.
    package func webhookDeliveries(endpointID: String, userID: String?, limit: Int) async throws -> [WebhookDelivery] {
        guard let row = try await backend.webhookEndpoint(id: endpointID),
            userID == nil || (row.endpoint.userID == userID && row.deletedAt == nil)
        else { throw Self.noEndpoint(endpointID) }
        return try await backend.webhookDeliveries(endpointID: endpointID, limit: min(max(limit, 1), 1000))
    }

    /// Makes a delivery pending again and due now under its lock, voiding any lease, and wakes the outbox; of
    /// `userID`'s endpoints only (`nil`: an operator). `notFound` for an unknown delivery or another user's;
    /// `invalidInput` when its endpoint is deleted.
    package func retryWebhookDelivery(id: String, userID: String?) async throws -> WebhookDelivery {
        let delivery = try await measuredTransaction { transaction in
            let noDelivery = LedgerError(.notFound, detail: "no webhook delivery \(DisplayText.quoted(id))")
            guard var row = try await transaction.webhookDelivery(id: id, forUpdate: true) else { throw noDelivery }
            guard let endpoint = try await transaction.webhookEndpoint(id: row.delivery.endpointID, forUpdate: false)
            else {
                throw LedgerError(.inconsistent, detail: "webhook delivery \(id) names an unknown endpoint")
            }
            if let userID, endpoint.endpoint.userID != userID { throw noDelivery }
            guard endpoint.deletedAt == nil else {
                throw LedgerError(.invalidInput, detail: "the endpoint of webhook delivery \(id) was deleted")
            }
            // A disabled endpoint gets no deliveries: requeued, this one would wait unseen. Its operator enables the
            // endpoint again, and then every pending delivery of it resumes.
            guard endpoint.endpoint.disabledAt == nil else {
                throw LedgerError(
                    .invalidInput,
                    detail: "the endpoint of webhook delivery \(id) is disabled; its deliveries resume once the "
                        + "ledger's operator enables it again (gotchu admin webhooks enable)"
                )
            }
            try await transaction.update(webhookDeliveries: [id], .requeued)
            row.delivery.status = .pending
            row.delivery.nextAttemptAt = transaction.now
            row.delivery.deliveredAt = nil
            return row.delivery
        }
        webhookOutbox.notify()
        return delivery
    }

    /// Returns none without a transaction when a read outside one finds nothing due. Otherwise takes up to four times
    /// `limit` due deliveries as candidates (so one endpoint's backlog leaves room for the others'), locks their
    /// endpoints, counts each one's live leases under that lock, and leases up to `limit` of them to active endpoints,
    /// at most `perEndpoint` in flight per endpoint, under one token until `lease` from now.
    package func claimWebhookDeliveries(
        limit: Int,
        perEndpoint: Int,
        lease: Duration
    ) async throws -> [ClaimedWebhookDelivery] {
        guard limit > 0, perEndpoint > 0 else { return [] }
        // A read first: with nothing due (the usual poll), no transaction (on SQLite, no turn at the writer).
        guard try await backend.webhookDeliveriesDue(now: try await backend.now()) else { return [] }
        let leaseMilliseconds = max(LedgerTime.milliseconds(lease), 1)
        return try await measuredTransaction { transaction in
            // More candidates than wanted, so one endpoint's backlog leaves room for the others'.
            let due = try await transaction.dueWebhookDeliveries(limit: min(limit * 4, 1000), perEndpoint: perEndpoint)
            guard !due.isEmpty else { return [] }
            // Each endpoint's count of deliveries in flight is read under its lock: two servers claiming at once take
            // turns per endpoint (or one skips it this time), so neither passes its limit.
            let locked = try await transaction.lockWebhookEndpoints(
                ids: Array(Set(due.map(\.delivery.endpointID))).sorted()
            )
            let endpoints = Dictionary(locked.map { ($0.endpoint.id, $0) }, uniquingKeysWith: { first, _ in first })
            var inFlight = try await transaction.leasedWebhookDeliveries(endpointIDs: endpoints.keys.sorted())
            var taken: [WebhookDeliveryRow] = []
            for row in due where taken.count < limit {
                let endpointID = row.delivery.endpointID
                guard let endpoint = endpoints[endpointID], endpoint.isActive,
                    inFlight[endpointID, default: 0] < perEndpoint
                else { continue }
                inFlight[endpointID, default: 0] += 1
                taken.append(row)
            }
            guard !taken.isEmpty else { return [] }
            let token = RandomUUID.make()
            let until = transaction.now + leaseMilliseconds
            try await transaction.update(
                webhookDeliveries: taken.map(\.delivery.id),
                .claimed(token: token, until: until)
            )
            let events = Dictionary(
                try await transaction.webhookEvents(ids: Array(Set(taken.map(\.delivery.eventID))).sorted())
                    .map { ($0.id, $0) },
                uniquingKeysWith: { first, _ in first }
            )
            return try taken.map { row in
                guard let event = events[row.delivery.eventID], let endpoint = endpoints[row.delivery.endpointID]
                else {
                    throw LedgerError(
                        .inconsistent,
                        detail: "webhook delivery \(row.delivery.id) names an unknown event"
                    )
                }
                return ClaimedWebhookDelivery(
                    delivery: row.delivery,
                    attempt: row.delivery.attempts + 1,
                    leaseToken: token,
                    leaseUntil: until,
                    event: event,
                    endpoint: endpoint.endpoint,
                    secrets: endpoint.secrets(now: transaction.now),
                    now: transaction.now
                )
            }
        }
    }

    /// Records how an attempt ended, under the delivery's lock and then its endpoint's, when the lease is still the
    /// delivery's and it is pending (otherwise nothing is recorded). A success ends the endpoint's failing time; a
    /// failure starts or continues it, and one past ``LedgerPolicy/webhookDisableAfter`` disables an active endpoint,
    /// with an audit entry by `gotchu`.
    package func recordWebhookAttempt(
        deliveryID: String,
        leaseToken: String,
        outcome: WebhookAttemptOutcome
    ) async throws -> WebhookAttemptResult {
        let disableAfter = LedgerTime.milliseconds(policy.webhookDisableAfter)
        return try await measuredTransaction { transaction in
            guard let row = try await transaction.webhookDelivery(id: deliveryID, forUpdate: true),
                row.leaseToken == leaseToken, row.delivery.status == .pending
            else { return WebhookAttemptResult(recorded: false, failingSince: nil, endpointDisabled: false) }
            let endpointID = row.delivery.endpointID
            guard let endpoint = try await transaction.webhookEndpoint(id: endpointID, forUpdate: true) else {
                throw LedgerError(.inconsistent, detail: "webhook delivery \(deliveryID) names an unknown endpoint")
            }
            switch outcome {
            case .delivered(let statusCode, let duration):
                try await transaction.update(
                    webhookDeliveries: [deliveryID],
                    .delivered(statusCode: statusCode, durationMilliseconds: LedgerTime.milliseconds(duration))
                )
                if endpoint.endpoint.failingSince != nil {
                    try await transaction.update(webhookEndpoint: endpointID, .attempted(failingSince: nil))
                }
                return WebhookAttemptResult(recorded: true, failingSince: nil, endpointDisabled: false)
            case .failed(let statusCode, let error, let duration, let retryAfter):
                try await transaction.update(
                    webhookDeliveries: [deliveryID],
                    .attemptFailed(
                        statusCode: statusCode,
                        error: WebhookSecrets.storedError(error),
                        durationMilliseconds: LedgerTime.milliseconds(duration),
                        nextAttemptAt: retryAfter.map { transaction.now + max(LedgerTime.milliseconds($0), 0) }
                    )
                )
                let since = endpoint.endpoint.failingSince ?? transaction.now
                if endpoint.endpoint.failingSince == nil {
                    try await transaction.update(webhookEndpoint: endpointID, .attempted(failingSince: since))
                }
                guard endpoint.isActive, transaction.now - since >= disableAfter else {
                    return WebhookAttemptResult(recorded: true, failingSince: since, endpointDisabled: false)
                }
                let days = Double(transaction.now - since) / 86_400_000
                let reason = "every attempt failed for \(String(format: "%.1f", days)) days"
                try await transaction.update(webhookEndpoint: endpointID, .disabled(reason: reason))
                try await transaction.insert(
                    audit: AuditEntry(
                        actor: Self.webhookActor,
                        action: "webhook.disable",
                        subject: endpointID,
                        detail: "\(endpoint.endpoint.userEmail): \(reason)",
                        at: transaction.now
                    )
                )
                return WebhookAttemptResult(recorded: true, failingSince: since, endpointDisabled: true)
            }
        }
    }

    /// The actor of the audit entries the ledger writes by itself (an endpoint disabled after failing too long).
    static var webhookActor: String { "gotchu" }

    // MARK: Events

    /// Reads outside a transaction the event and the row it names: the session as its payee sees it now (with the
    /// payment's receipt for `payment.succeeded`), the refund, the payout or the deposit (a development funding's
    /// taken from the event). `notFound` for an unknown event; `inconsistent` when the row it names is missing.
    package func webhookEvent(id: String) async throws -> WebhookEventDetail {
        guard let event = try await backend.webhookEvent(id: id) else {
            throw LedgerError(.notFound, detail: "no webhook event \(DisplayText.quoted(id))")
        }
        let missing = LedgerError(.inconsistent, detail: "webhook event \(id) names a row that does not exist")
        switch event.type {
        case .paymentSucceeded, .sessionCancelled, .sessionExpired:
            guard let sid = event.sessionID, let session = try await backend.session(id: sid) else { throw missing }
            let now = try await backend.now()
            let view = try await view(of: session, viewerID: session.payeeID, now: now)
            var receipt: Receipt?
            if event.type == .paymentSucceeded {
                if let paymentID = event.paymentID {
                    receipt = try await self.receipt(paymentID: paymentID)
                } else {
                    receipt = try await self.receipt(sessionID: sid)
                }
            }
            return WebhookEventDetail(event: event, data: .session(view, paymentID: event.paymentID, receipt: receipt))
        case .refundSucceeded:
            guard let refundID = event.refundID, let row = try await backend.refund(id: refundID) else { throw missing }
            let reference = try await backend.session(id: row.sessionID)?.reference
            return WebhookEventDetail(event: event, data: .refund(try Refund(row, reference: reference)))
        case .payoutSettled, .payoutFailed:
            guard let payoutID = event.payoutID, let row = try await backend.payout(id: payoutID) else { throw missing }
            return WebhookEventDetail(event: event, data: .payout(row))
        case .depositReceived:
            guard let depositID = event.depositID else { throw missing }
            let deposit: WebhookDeposit
            if let row = try await backend.deposit(id: depositID) {
                deposit = WebhookDeposit(
                    id: row.id,
                    amount: row.amount,
                    reference: row.reference,
                    createdAt: row.createdAt
                )
            } else {
                // A development funding: no row of its own; the event says what its transfer moved.
                deposit = WebhookDeposit(
                    id: depositID,
                    amount: event.amount ?? 0,
                    reference: nil,
                    createdAt: event.createdAt
                )
            }
            return WebhookEventDetail(event: event, data: .deposit(deposit))
        }
    }

    /// Stores the body every delivery of the event sends, in a transaction of its own, unless one is stored already;
    /// returns the one stored. `notFound` for an unknown event.
    package func pinWebhookBody(eventID: String, body: Data) async throws -> Data {
        guard
            let stored = try await measuredTransaction({ transaction in
                try await transaction.pinWebhookBody(eventID: eventID, body: body)
            })
        else { throw LedgerError(.notFound, detail: "no webhook event \(DisplayText.quoted(eventID))") }
        return stored
    }
}
