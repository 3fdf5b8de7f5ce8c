/// What happened, as a webhook event's `type` names it and an endpoint subscribes to it. The raw values are stored
/// and sent.
public enum WebhookEventType: String, CaseIterable, Codable, Sendable, Hashable, Comparable {
    /// A session, or shares of a split, were paid (to the event's user, the payee); `data` is the session as its
    /// payee sees it, with the payment's receipt.
    case paymentSucceeded = "payment.succeeded"
    /// Money of a paid session went back to a payer: a payee's refund, or a cancelled or expired split's return;
    /// `data` is the refund, with its receipt.
    case refundSucceeded = "refund.succeeded"
    /// The payee cancelled a live session; `data` is the session.
    case sessionCancelled = "session.cancelled"
    /// A session's lifetime ended before it was paid in full; `data` is the session.
    case sessionExpired = "session.expired"
    /// An operator settled a payout of the event's user: its money left the ledger; `data` is the payout.
    case payoutSettled = "payout.settled"
    /// An operator failed a payout of the event's user: its money went back to the wallet; `data` is the payout.
    case payoutFailed = "payout.failed"
    /// Money entered the event's user's wallet from outside (an operator's deposit, or a development funding);
    /// `data` is the deposit.
    case depositReceived = "deposit.received"

    /// `*` in an endpoint's `events`: every type, those added later too.
    public static let all = "*"

    /// Ordered by their names.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}
