public import Foundation
public import GotchuCore

/// `POST /webhooks/endpoints`: where to send events, and which.
public struct WebhookEndpointRequest: Codable, Hashable, Sendable {
    /// An `https` URL (`http` only for hosts the server allows).
    public var url: String
    /// Event types (``WebhookEventType`` raw values), or `["*"]` for all.
    public var events: [String]

    /// A registration of `url` for `events`.
    public init(url: String, events: [String]) {
        self.url = url
        self.events = events
    }
}

/// A webhook endpoint as the API shows it; its signing secret only in the answer that made or rotated it.
public struct WebhookEndpointResponse: Codable, Hashable, Sendable {
    /// The endpoint's id (`we_…`).
    public var id: String
    /// Where deliveries go.
    public var url: String
    /// The event types it receives (`*` for all), sorted.
    public var events: [String]
    /// The signing secret (`whsec_…`): present only in the answers of `POST /webhooks/endpoints` and
    /// `POST /webhooks/endpoints/{id}/rotate-secret`, never again.
    public var secret: String?
    /// `enabled`, or `disabled` (by the operator, or after failing for days; nothing is delivered to it then).
    public var status: String
    /// Why it was disabled.
    public var disabledReason: String?
    /// Since when its deliveries have been failing without a success in between; absent while they succeed.
    public var failingSince: Date?
    /// Until when the secret rotated away is still signed with, beside the new one.
    public var previousSecretExpiresAt: Date?
    /// When it was registered.
    public var createdAt: Date

    /// An endpoint as the server sends it.
    public init(
        id: String,
        url: String,
        events: [String],
        secret: String? = nil,
        status: String,
        disabledReason: String? = nil,
        failingSince: Date? = nil,
        previousSecretExpiresAt: Date? = nil,
        createdAt: Date
    ) {
        self.id = id
        self.url = url
        self.events = events
        self.secret = secret
        self.status = status
        self.disabledReason = disabledReason
        self.failingSince = failingSince
        self.previousSecretExpiresAt = previousSecretExpiresAt
        self.createdAt = createdAt
    }

    enum CodingKeys: String, CodingKey {
        case id, url, events, secret, status
        case disabledReason = "disabled_reason"
        case failingSince = "failing_since"
        case previousSecretExpiresAt = "previous_secret_expires_at"
        case createdAt = "created_at"
    }
}

/// `GET /webhooks/endpoints`: the caller's endpoints, oldest first.
public struct WebhookEndpointsResponse: Codable, Hashable, Sendable {
    /// The endpoints, without their secrets.
    public var endpoints: [WebhookEndpointResponse]

    /// A list as the server sends it.
    public init(endpoints: [WebhookEndpointResponse]) { self.endpoints = endpoints }
}

/// One event's delivery to one endpoint, and how its attempts went.
public struct WebhookDeliveryResponse: Codable, Hashable, Sendable {
    /// The delivery's id (`whd_…`), which `POST /webhooks/deliveries/{id}/retry` takes.
    public var id: String
    /// The event's id (`evt_…`): the same in every attempt, the receiver's key to drop duplicates.
    public var eventID: String
    /// The event's type.
    public var eventType: String
    /// The endpoint's id.
    public var endpointID: String
    /// `pending` (an attempt is due at `next_attempt_at`), `delivered` (a 2xx answer) or `failed` (given up).
    public var status: String
    /// How many attempts were made.
    public var attempts: Int
    /// When the last attempt was made.
    public var lastAttemptAt: Date?
    /// The HTTP status of the last attempt's answer; absent when it got none.
    public var lastStatusCode: Int?
    /// Why the last attempt failed (a status, a refused address, a timeout…).
    public var lastError: String?
    /// When the next attempt is due, while pending.
    public var nextAttemptAt: Date?
    /// When it was delivered.
    public var deliveredAt: Date?
    /// When the event happened.
    public var createdAt: Date

    /// A delivery as the server sends it.
    public init(
        id: String,
        eventID: String,
        eventType: String,
        endpointID: String,
        status: String,
        attempts: Int,
        lastAttemptAt: Date? = nil,
        lastStatusCode: Int? = nil,
        lastError: String? = nil,
        nextAttemptAt: Date? = nil,
        deliveredAt: Date? = nil,
        createdAt: Date
    ) {
        self.id = id
        self.eventID = eventID
        self.eventType = eventType
        self.endpointID = endpointID
        self.status = status
        self.attempts = attempts
        self.lastAttemptAt = lastAttemptAt
        self.lastStatusCode = lastStatusCode
        self.lastError = lastError
        self.nextAttemptAt = nextAttemptAt
        self.deliveredAt = deliveredAt
        self.createdAt = createdAt
    }

    enum CodingKeys: String, CodingKey {
        case id, status, attempts
        case eventID = "event_id"
        case eventType = "event_type"
        case endpointID = "endpoint_id"
        case lastAttemptAt = "last_attempt_at"
        case lastStatusCode = "last_status_code"
        case lastError = "last_error"
        case nextAttemptAt = "next_attempt_at"
        case deliveredAt = "delivered_at"
        case createdAt = "created_at"
    }
}

/// `GET /webhooks/endpoints/{id}/deliveries`: an endpoint's latest deliveries, newest first.
public struct WebhookDeliveriesResponse: Codable, Hashable, Sendable {
    /// The deliveries.
    public var deliveries: [WebhookDeliveryResponse]

    /// A list as the server sends it.
    public init(deliveries: [WebhookDeliveryResponse]) { self.deliveries = deliveries }
}

/// `POST /webhooks/endpoints/{id}/test`: how the endpoint answered a signed `webhook.test` event sent to it alone,
/// at once (nothing is stored or retried).
public struct WebhookTestResponse: Codable, Hashable, Sendable {
    /// The test event's id (`evt_…`, new for every test).
    public var eventID: String
    /// Whether the endpoint answered 2xx.
    public var delivered: Bool
    /// The HTTP status it answered; absent when it gave none.
    public var statusCode: Int?
    /// Why it failed (a status and the start of its body, a refused address, a timeout…); absent when delivered.
    public var error: String?
    /// How long the attempt took, in milliseconds.
    public var durationMilliseconds: Int64

    /// A test's outcome as the server sends it.
    public init(eventID: String, delivered: Bool, statusCode: Int?, error: String?, durationMilliseconds: Int64) {
        self.eventID = eventID
        self.delivered = delivered
        self.statusCode = statusCode
        self.error = error
        self.durationMilliseconds = durationMilliseconds
    }

    enum CodingKeys: String, CodingKey {
        case delivered, error
        case eventID = "event_id"
        case statusCode = "status_code"
        case durationMilliseconds = "duration_ms"
    }
}

/// The `data` of a `webhook.test` event: which endpoint was tested, and that nothing happened.
public struct WebhookTestData: Codable, Hashable, Sendable {
    /// The type of a test event, which no endpoint subscribes to: it is sent only when asked for, to one endpoint.
    public static let eventType = "webhook.test"

    /// The endpoint tested.
    public var endpointID: String
    /// A sentence for a person reading the receiver's log.
    public var message: String

    /// The data of a test of `endpointID`.
    public init(endpointID: String, message: String) {
        self.endpointID = endpointID
        self.message = message
    }

    enum CodingKeys: String, CodingKey {
        case message
        case endpointID = "endpoint_id"
    }
}

/// The `data` of a `deposit.received` event.
public struct WebhookDepositData: Codable, Hashable, Sendable {
    /// The deposit's id.
    public var depositID: String
    /// The amount credited, in cents.
    public var amountCents: Cents
    /// The operator's reference of the money that came in (a bank transfer's), if any.
    public var reference: String?
    /// When it was credited.
    public var createdAt: Date

    /// A deposit as an event carries it.
    public init(depositID: String, amountCents: Cents, reference: String?, createdAt: Date) {
        self.depositID = depositID
        self.amountCents = amountCents
        self.reference = reference
        self.createdAt = createdAt
    }

    enum CodingKeys: String, CodingKey {
        case reference
        case depositID = "deposit_id"
        case amountCents = "amount_cents"
        case createdAt = "created_at"
    }
}

/// `DELETE /webhooks/endpoints/{id}`: the endpoint is gone; nothing more is delivered to it.
public struct WebhookEndpointDeletedResponse: Codable, Hashable, Sendable {
    /// The deleted endpoint's id.
    public var id: String
    /// Always true.
    public var deleted: Bool

    /// The answer for endpoint `id`.
    public init(id: String) {
        self.id = id
        self.deleted = true
    }
}
