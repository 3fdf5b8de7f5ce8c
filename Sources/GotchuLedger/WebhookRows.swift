// The rows of the webhook tables as the backends read and write them, and the changes the engine makes to them.

/// A `webhook_endpoints` row: the endpoint with its secrets.
public struct WebhookEndpointRow: Sendable, Hashable {
    /// The endpoint as listed.
    public var endpoint: WebhookEndpoint
    /// The secret deliveries are signed with.
    public var secret: String
    /// The secret a rotation replaced; signed with too until ``WebhookEndpoint/previousSecretExpiresAt``.
    public var previousSecret: String?
    /// When its user deleted it; `nil` while it exists. A deleted endpoint is kept for its deliveries' history.
    public var deletedAt: Int64?

    /// A row as read from the database, or about to be inserted.
    public init(endpoint: WebhookEndpoint, secret: String, previousSecret: String? = nil, deletedAt: Int64? = nil) {
        self.endpoint = endpoint
        self.secret = secret
        self.previousSecret = previousSecret
        self.deletedAt = deletedAt
    }

    /// The secrets to sign with at `now`: the previous one only while it is still honoured.
    public func secrets(now: Int64) -> WebhookSigningSecrets {
        guard let previousSecret, let until = endpoint.previousSecretExpiresAt, now < until else {
            return WebhookSigningSecrets(current: secret, previous: nil)
        }
        return WebhookSigningSecrets(current: secret, previous: previousSecret)
    }

    /// Whether deliveries go to it: it exists and is enabled.
    public var isActive: Bool { deletedAt == nil && endpoint.disabledAt == nil }
}

/// A `webhook_deliveries` row: the delivery, and the lease a worker holds on it.
public struct WebhookDeliveryRow: Sendable, Hashable {
    /// The delivery.
    public var delivery: WebhookDelivery
    /// The token of the lease a worker holds or held; `nil` when none was taken since the last outcome or retry.
    public var leaseToken: String?
    /// When that lease lapses (or lapsed).
    public var leaseUntil: Int64?

    /// A row as read from the database.
    public init(delivery: WebhookDelivery, leaseToken: String?, leaseUntil: Int64?) {
        self.delivery = delivery
        self.leaseToken = leaseToken
        self.leaseUntil = leaseUntil
    }
}

/// A change of an endpoint's stored state, at the transaction's time.
public enum WebhookEndpointChange: Sendable, Hashable {
    /// Deleted by its user.
    case deleted
    /// Given a new secret; the old one is kept as the previous until `previousUntil`.
    case secretRotated(secret: String, previous: String, previousUntil: Int64)
    /// Disabled, for `reason`.
    case disabled(reason: String)
    /// Enabled again, its failures forgotten.
    case enabled
    /// An attempt to it ended: `failingSince` is when its failures began (`nil`: the attempt succeeded).
    case attempted(failingSince: Int64?)
}

/// A change of deliveries' stored state, at the transaction's time.
public enum WebhookDeliveryChange: Sendable, Hashable {
    /// Leased to a worker under `token` until `until`.
    case claimed(token: String, until: Int64)
    /// An attempt was answered 2xx: delivered.
    case delivered(statusCode: Int, durationMilliseconds: Int64)
    /// An attempt failed; tried again at `nextAttemptAt`, or (`nil`) never: failed.
    case attemptFailed(statusCode: Int?, error: String, durationMilliseconds: Int64, nextAttemptAt: Int64?)
    /// Made pending again and due now, by its user or an operator; the attempts made stay counted.
    case requeued
    /// Given up without an attempt (its endpoint was deleted), saying why.
    case abandoned(reason: String)
}
