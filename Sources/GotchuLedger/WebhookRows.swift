// The rows of the webhook tables as the backends read and write them, and the changes the engine makes to them.

/// A `webhook_endpoints` row: the endpoint with its secrets.
package struct WebhookEndpointRow: Sendable, Hashable {
    /// The endpoint as listed.
    package var endpoint: WebhookEndpoint
    /// The secret deliveries are signed with.
    package var secret: String
    /// The secret a rotation replaced; signed with too until ``WebhookEndpoint/previousSecretExpiresAt``.
    package var previousSecret: String?
    /// When its user deleted it; `nil` while it exists. A deleted endpoint is kept for its deliveries' history.
    package var deletedAt: Int64?

    /// A row as read from the database, or about to be inserted.
    package init(endpoint: WebhookEndpoint, secret: String, previousSecret: String? = nil, deletedAt: Int64? = nil) {
        self.endpoint = endpoint
        self.secret = secret
        self.previousSecret = previousSecret
        self.deletedAt = deletedAt
    }

    /// The secrets to sign with at `now`: the previous one only while it is still honoured.
    package func secrets(now: Int64) -> WebhookSigningSecrets {
        guard let previousSecret, let until = endpoint.previousSecretExpiresAt, now < until else {
            return WebhookSigningSecrets(current: secret, previous: nil)
        }
        return WebhookSigningSecrets(current: secret, previous: previousSecret)
    }

    /// Whether deliveries go to it: it exists and is enabled.
    package var isActive: Bool { deletedAt == nil && endpoint.disabledAt == nil }
}

/// A `webhook_deliveries` row: the delivery, and the lease a worker holds on it.
package struct WebhookDeliveryRow: Sendable, Hashable {
    /// The delivery.
    package var delivery: WebhookDelivery
    /// The token of the lease a worker holds or held; `nil` when none was taken since the last outcome or retry.
    package var leaseToken: String?
    /// When that lease lapses (or lapsed).
    package var leaseUntil: Int64?

    /// A row as read from the database.
    package init(delivery: WebhookDelivery, leaseToken: String?, leaseUntil: Int64?) {
        self.delivery = delivery
        self.leaseToken = leaseToken
        self.leaseUntil = leaseUntil
    }
}

/// A change of an endpoint's stored state, at the transaction's time.
package enum WebhookEndpointChange: Sendable, Hashable {
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
package enum WebhookDeliveryChange: Sendable, Hashable {
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
