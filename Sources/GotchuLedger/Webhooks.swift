public import Foundation
public import GotchuCore
public import GotchuReceipts
import Synchronization

// Webhooks as the ledger keeps them: the endpoints a user registers, the events its money movements write (in the
// movement's own transaction: an outbox), and one delivery per event and subscribed endpoint, which a delivery
// worker claims, attempts and records. Nothing here speaks HTTP or JSON: the server renders and sends.

extension WebhookEventType {
    /// A type as stored; a value this version does not write is refused rather than guessed at.
    public init(stored: String) throws(LedgerError) {
        guard let type = Self(rawValue: stored) else {
            throw LedgerError(.inconsistent, detail: "a webhook event has the unknown type \(stored)")
        }
        self = type
    }
}

/// A URL a user registered to receive its events, as listed (never with its secrets).
public struct WebhookEndpoint: Sendable, Hashable {
    /// The endpoint's id: `we_` and 32 hexadecimal digits.
    public var id: String
    /// The user whose events it receives.
    public var userID: String
    /// The user's e-mail address, for operators' listings.
    public var userEmail: String
    /// Where events are sent, as registered.
    public var url: String
    /// The event types it receives, sorted: ``WebhookEventType`` raw values, or ``WebhookEventType/all`` alone.
    public var events: [String]
    /// When it was registered: milliseconds since 1970 on the store's clock.
    public var createdAt: Int64
    /// When it was disabled (an operator, or 3 days of failures); `nil` while enabled.
    public var disabledAt: Int64?
    /// Why it was disabled.
    public var disabledReason: String?
    /// When its attempts began failing without a success since; `nil` while the last attempt succeeded.
    public var failingSince: Int64?
    /// Until when the secret a rotation replaced is still signed with, beside the new one; `nil` when none is.
    public var previousSecretExpiresAt: Int64?

    /// An endpoint as read from the database.
    public init(
        id: String,
        userID: String,
        userEmail: String,
        url: String,
        events: [String],
        createdAt: Int64,
        disabledAt: Int64? = nil,
        disabledReason: String? = nil,
        failingSince: Int64? = nil,
        previousSecretExpiresAt: Int64? = nil
    ) {
        self.id = id
        self.userID = userID
        self.userEmail = userEmail
        self.url = url
        self.events = events
        self.createdAt = createdAt
        self.disabledAt = disabledAt
        self.disabledReason = disabledReason
        self.failingSince = failingSince
        self.previousSecretExpiresAt = previousSecretExpiresAt
    }

    /// Whether it receives events of `type`.
    public func subscribes(to type: WebhookEventType) -> Bool {
        events.contains(WebhookEventType.all) || events.contains(type.rawValue)
    }
}

/// The secrets a delivery to an endpoint is signed with: its current one, and during a rotation the one it replaced.
public struct WebhookSigningSecrets: Sendable, Hashable {
    /// The current secret (`whsec_…`).
    public var current: String
    /// The secret a rotation replaced, while it is still honoured (``WebhookSecrets/rotationOverlap``); `nil` after.
    public var previous: String?

    /// The secrets as the store read them.
    public init(current: String, previous: String?) {
        self.current = current
        self.previous = previous
    }
}

/// An event: something that happened to a user's money or sessions, written in the same transaction as the
/// movement itself, with the ids the data it is sent with is read from.
public struct WebhookEvent: Sendable, Hashable {
    /// The event's id: `evt_` and 32 hexadecimal digits; every delivery of it (and every retry) carries it.
    public var id: String
    /// What happened.
    public var type: WebhookEventType
    /// The user whose endpoints receive it: the payee of a payment, refund, cancel or expiry; the user paid out or
    /// credited.
    public var userID: String
    /// When it happened: the time of its transaction, in milliseconds since 1970 on the store's clock.
    public var createdAt: Int64
    /// The session paid, refunded, cancelled or expired.
    public var sessionID: String?
    /// Of a split: the payment made (`payment.succeeded`) or refunded (`refund.succeeded`).
    public var paymentID: String?
    /// The refund (`refund.succeeded`).
    public var refundID: String?
    /// The payout settled or failed.
    public var payoutID: String?
    /// The deposit credited (`deposit.received`): a deposit's id, or a development funding's reference id.
    public var depositID: String?
    /// The transfer that moved the money; `nil` for a cancel or an expiry, which move none.
    public var transferID: String?
    /// What that transfer moved, in cents (a payment's amount with its tip); `nil` when none moved.
    public var amount: Cents?
    /// The body rendered once for every delivery of it (``LedgerStore/pinWebhookBody(eventID:body:)``); `nil` until
    /// then.
    public var body: Data?

    /// An event as written or read.
    public init(
        id: String,
        type: WebhookEventType,
        userID: String,
        createdAt: Int64,
        sessionID: String? = nil,
        paymentID: String? = nil,
        refundID: String? = nil,
        payoutID: String? = nil,
        depositID: String? = nil,
        transferID: String? = nil,
        amount: Cents? = nil,
        body: Data? = nil
    ) {
        self.id = id
        self.type = type
        self.userID = userID
        self.createdAt = createdAt
        self.sessionID = sessionID
        self.paymentID = paymentID
        self.refundID = refundID
        self.payoutID = payoutID
        self.depositID = depositID
        self.transferID = transferID
        self.amount = amount
        self.body = body
    }
}

/// Money an event says entered a wallet from outside.
public struct WebhookDeposit: Sendable, Hashable {
    /// The deposit's id, or a development funding's reference id.
    public var id: String
    /// The amount credited, in cents.
    public var amount: Cents
    /// The operator's external reference of a deposit; `nil` for a development funding.
    public var reference: String?
    /// When it was credited: milliseconds since 1970 on the store's clock.
    public var createdAt: Int64

    /// A deposit as an event names it.
    public init(id: String, amount: Cents, reference: String?, createdAt: Int64) {
        self.id = id
        self.amount = amount
        self.reference = reference
        self.createdAt = createdAt
    }
}

/// What an event is sent with, as the ledger's domain values (the server renders them as its API's objects).
public enum WebhookEventData: Sendable, Hashable {
    /// `payment.succeeded`, `session.cancelled`, `session.expired`: the session as its payee sees it now; of a
    /// payment, also the id of a split's payment and the payment's receipt.
    case session(SessionView, paymentID: String?, receipt: Receipt?)
    /// `refund.succeeded`: the refund, with its receipt.
    case refund(Refund)
    /// `payout.settled`, `payout.failed`: the payout as it ended.
    case payout(PayoutRow)
    /// `deposit.received`.
    case deposit(WebhookDeposit)
}

/// An event and what it is sent with.
public struct WebhookEventDetail: Sendable, Hashable {
    /// The event.
    public var event: WebhookEvent
    /// Its data.
    public var data: WebhookEventData

    /// An event read with its data.
    public init(event: WebhookEvent, data: WebhookEventData) {
        self.event = event
        self.data = data
    }
}

/// Where a delivery stands (`webhook_deliveries.status`).
public enum WebhookDeliveryStatus: String, CaseIterable, Sendable, Hashable {
    /// Not delivered yet: due at its next attempt.
    case pending = "PENDING"
    /// An attempt was answered 2xx.
    case delivered = "DELIVERED"
    /// Given up (or its endpoint deleted); a retry makes it pending again.
    case failed = "FAILED"

    /// A status as stored; a value this version does not write is refused rather than guessed at.
    public init(stored: String) throws(LedgerError) {
        guard let status = Self(rawValue: stored) else {
            throw LedgerError(.inconsistent, detail: "a webhook delivery has the unknown status \(stored)")
        }
        self = status
    }
}

/// One event on its way to one endpoint.
public struct WebhookDelivery: Sendable, Hashable {
    /// The delivery's id: `whd_` and 32 hexadecimal digits.
    public var id: String
    /// The event delivered.
    public var eventID: String
    /// The event's type.
    public var eventType: WebhookEventType
    /// The endpoint it goes to.
    public var endpointID: String
    /// Where it stands.
    public var status: WebhookDeliveryStatus
    /// How many attempts were recorded.
    public var attempts: Int
    /// When it was written (with its event): milliseconds since 1970 on the store's clock.
    public var createdAt: Int64
    /// When it is due next; `nil` unless pending.
    public var nextAttemptAt: Int64?
    /// When the last attempt was recorded.
    public var lastAttemptAt: Int64?
    /// The HTTP status the last attempt was answered with; `nil` when it got none (a timeout, a refused connection).
    public var lastStatusCode: Int?
    /// Why the last attempt failed; `nil` after a success.
    public var lastError: String?
    /// How long the last attempt took, in milliseconds.
    public var lastDurationMilliseconds: Int64?
    /// When it was delivered.
    public var deliveredAt: Int64?

    /// A delivery as read from the database.
    public init(
        id: String,
        eventID: String,
        eventType: WebhookEventType,
        endpointID: String,
        status: WebhookDeliveryStatus,
        attempts: Int,
        createdAt: Int64,
        nextAttemptAt: Int64?,
        lastAttemptAt: Int64? = nil,
        lastStatusCode: Int? = nil,
        lastError: String? = nil,
        lastDurationMilliseconds: Int64? = nil,
        deliveredAt: Int64? = nil
    ) {
        self.id = id
        self.eventID = eventID
        self.eventType = eventType
        self.endpointID = endpointID
        self.status = status
        self.attempts = attempts
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt
        self.lastAttemptAt = lastAttemptAt
        self.lastStatusCode = lastStatusCode
        self.lastError = lastError
        self.lastDurationMilliseconds = lastDurationMilliseconds
        self.deliveredAt = deliveredAt
    }
}

/// A delivery a worker claimed: leased to it alone until ``leaseUntil``, with what it needs to send it.
public struct ClaimedWebhookDelivery: Sendable, Hashable {
    /// The delivery, as it was before this claim.
    public var delivery: WebhookDelivery
    /// This attempt's number: the attempts recorded so far and one.
    public var attempt: Int
    /// The token the attempt is recorded with (``LedgerStore/recordWebhookAttempt(deliveryID:leaseToken:outcome:)``).
    public var leaseToken: String
    /// When the lease lapses and another worker may claim the delivery: milliseconds since 1970 on the store's clock.
    public var leaseUntil: Int64
    /// The event, with its pinned body if it has one.
    public var event: WebhookEvent
    /// The endpoint.
    public var endpoint: WebhookEndpoint
    /// What to sign with.
    public var secrets: WebhookSigningSecrets
    /// The store's time of the claim.
    public var now: Int64

    /// A claim as the engine made it.
    public init(
        delivery: WebhookDelivery,
        attempt: Int,
        leaseToken: String,
        leaseUntil: Int64,
        event: WebhookEvent,
        endpoint: WebhookEndpoint,
        secrets: WebhookSigningSecrets,
        now: Int64
    ) {
        self.delivery = delivery
        self.attempt = attempt
        self.leaseToken = leaseToken
        self.leaseUntil = leaseUntil
        self.event = event
        self.endpoint = endpoint
        self.secrets = secrets
        self.now = now
    }
}

/// How an attempt to deliver ended.
public enum WebhookAttemptOutcome: Sendable, Hashable {
    /// Answered with a 2xx status.
    case delivered(statusCode: Int, duration: Duration)
    /// Anything else: the status (if any), why, and when to try again from now on the store's clock (`nil`: never,
    /// the delivery is marked failed).
    case failed(statusCode: Int?, error: String, duration: Duration, retryAfter: Duration?)
}

/// What recording an attempt did.
public struct WebhookAttemptResult: Sendable, Hashable {
    /// Whether it was recorded: `false` when the lease it was made under is no longer the delivery's (it lapsed and
    /// another worker claimed the delivery, or its user retried it meanwhile).
    public var recorded: Bool
    /// Since when the endpoint has been failing, after this attempt.
    public var failingSince: Int64?
    /// Whether this attempt disabled the endpoint (it had been failing for ``LedgerPolicy/webhookDisableAfter``).
    public var endpointDisabled: Bool

    /// A result as the engine reports it.
    public init(recorded: Bool, failingSince: Int64?, endpointDisabled: Bool) {
        self.recorded = recorded
        self.failingSince = failingSince
        self.endpointDisabled = endpointDisabled
    }
}

/// The ids and secrets of webhooks, and the checks of what a user registers.
public enum WebhookSecrets {
    /// The prefix of every endpoint secret.
    public static let prefix = "whsec_"
    /// How long a rotated-away secret is still signed with, beside the new one.
    public static let rotationOverlap: Duration = .seconds(24 * 3600)
    /// The longest URL an endpoint may have, in bytes.
    public static let maximumURLLength = 2048
    /// The longest error text kept of an attempt, in Unicode scalars.
    public static let maximumErrorLength = 500

    /// A new endpoint secret: `whsec_` and 43 base64url characters (256 random bits).
    public static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return prefix + Base64URL.encode(Data(bytes))
    }

    /// A new id: `prefix` and 32 lowercase hexadecimal digits (128 random bits).
    public static func id(_ prefix: String) -> String {
        var generator = SystemRandomNumberGenerator()
        return prefix + RandomUUID.make(using: &generator).replacingOccurrences(of: "-", with: "")
    }

    /// The URL if it is one an endpoint may have as far as the ledger can tell: 1 to ``maximumURLLength`` bytes of
    /// printable ASCII without spaces, `http://` or `https://` and a host. Whether it may be reached is the server's
    /// to check.
    public static func validate(url: String) throws(LedgerError) -> String {
        guard url.utf8.count <= maximumURLLength else {
            throw LedgerError(.invalidInput, detail: "url must be at most \(maximumURLLength) bytes")
        }
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw LedgerError(.invalidInput, detail: "url must be printable ASCII without spaces")
        }
        let lowered = url.lowercased()
        guard let scheme = ["https://", "http://"].first(where: lowered.hasPrefix),
            lowered.count > scheme.count
        else {
            throw LedgerError(.invalidInput, detail: "url must start with https:// (or http://) and name a host")
        }
        return url
    }

    /// The event types of a subscription, sorted and without repeats: each a ``WebhookEventType`` raw value, or
    /// ``WebhookEventType/all`` alone.
    public static func validate(events: [String]) throws(LedgerError) -> [String] {
        guard !events.isEmpty else {
            throw LedgerError(.invalidInput, detail: "events must name at least one event type, or \"*\"")
        }
        let unique = Set(events)
        if unique.contains(WebhookEventType.all) {
            guard unique.count == 1 else {
                throw LedgerError(.invalidInput, detail: "events: \"*\" takes every type; list no other beside it")
            }
            return [WebhookEventType.all]
        }
        if let unknown = unique.sorted().first(where: { WebhookEventType(rawValue: $0) == nil }) {
            throw LedgerError(
                .invalidInput,
                detail: "events: unknown event type \(DisplayText.quoted(unknown)); known: "
                    + WebhookEventType.allCases.map(\.rawValue).sorted().joined(separator: ", ") + ", or \"*\""
            )
        }
        return unique.sorted()
    }

    /// An attempt's error text as kept: at most ``maximumErrorLength`` scalars, control characters replaced.
    static func storedError(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars.prefix(maximumErrorLength) {
            scalars.append(DisplayText.isUnsafe(scalar) ? "?" : scalar)
        }
        return String(scalars)
    }
}

/// Wakes the delivery workers of this server when a transaction that wrote webhook events commits, so a delivery
/// need not wait for their next poll. Other servers' events are found by that poll.
public final class WebhookOutboxSignal: Sendable {
    private let continuations = Mutex<[Int: AsyncStream<Void>.Continuation]>([:])
    private let next = Atomic<Int>(0)

    /// A signal nobody listens to yet.
    public init() {}

    /// A wake-up each time events commit from now on, the newest one kept while the listener is busy; ends when the
    /// listener stops iterating.
    public func wakeups() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let key = next.add(1, ordering: .relaxed).newValue
        continuations.withLock { $0[key] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: key) }
        }
        return stream
    }

    /// Wakes every listener.
    public func notify() {
        continuations.withLock { continuations in
            for continuation in continuations.values { continuation.yield() }
        }
    }
}
