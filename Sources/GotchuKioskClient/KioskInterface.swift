public import GotchuDBus

/// The names of the kiosk's control interface, `io.gotchu.Kiosk1` at `/io/gotchu/Kiosk1`: declared here once, for
/// the kiosk that serves it and every point-of-sale that calls it.
///
/// Methods: `Charge(x amount_cents, s reference) → s id`, `ChargeSplit(x amount_cents, s reference, i shares) → s id`,
/// `ChargeWithTips(x amount_cents, s reference, i shares, ai tip_percents) → s id`, `Cancel(s id)`, `GetCharge(s id) → a{sv}`, `Refund(s id, x amount_cents) → s refund_id` (0 cents: whatever is
/// not refunded yet), `RefundPayment(s id, s payment_id, x amount_cents) → s refund_id`.
/// Properties: `State` (s), `CurrentCharge` (a{sv}, empty when there was none) and `CheckoutURL` (s, empty unless
/// a charge can be paid on a phone's browser).
/// Signals: `Advertising(s id, s eid)`, `Locked(s id)`, `SharePaid(s id, i shares_paid, i shares)`,
/// `PaymentSucceeded(s id, x amount_cents, s session_id)`, `Expired(s id)`, `Cancelled(s id)`,
/// `Error(s id, s reason)`, `Refunded(s id, s refund_id, x amount_cents)`.
public enum KioskInterface {
    /// The well-known bus name the kiosk owns.
    public static let busName = "io.gotchu.Kiosk1"
    /// The interface name.
    public static let name = "io.gotchu.Kiosk1"
    /// The object's path.
    public static let path = DBusObjectPath(rawValue: "/io/gotchu/Kiosk1")!

    /// The interface's methods.
    public enum Method: String, CaseIterable, Sendable {
        /// `Charge(x amount_cents, s reference) → s id`: starts a charge; only one is active at a time.
        case charge = "Charge"
        /// `ChargeSplit(x amount_cents, s reference, i shares) → s id`: starts a charge of `amount_cents` split into
        /// `shares` equal shares (1 to 50, each at least a cent; the cents that do not divide evenly go to the first
        /// shares), each paid by a payer of its own. `Charge` is `ChargeSplit` with one share.
        case chargeSplit = "ChargeSplit"
        /// `ChargeWithTips(x amount_cents, s reference, i shares, ai tip_percents) → s id`: `ChargeSplit` whose
        /// sessions suggest these tips to payers (1 to 5 different whole percents from 1 to 100, of what each
        /// pays) instead of the kiosk's `tip_percents`; an empty list suggests none. `Charge` and `ChargeSplit`
        /// suggest the kiosk's.
        case chargeWithTips = "ChargeWithTips"
        /// `Cancel(s id)`: cancels a charge that is not over yet.
        case cancel = "Cancel"
        /// `GetCharge(s id) → a{sv}`: a charge, as described in ``KioskClient/charge(_:)``.
        case getCharge = "GetCharge"
        /// `Refund(s id, x amount_cents) → s refund_ids`: returns money of a paid charge to its payer; 0 cents: all
        /// that is not refunded yet. Of a split charge, 0 refunds every payment's rest, each a refund of its own (the
        /// reply is their ids, separated by commas), and an amount must name its payment (`RefundPayment`).
        case refund = "Refund"
        /// `RefundPayment(s id, s payment_id, x amount_cents) → s refund_id`: returns money of one payment of a paid
        /// split charge (see ``ChargeKey/payments``) to its payer; 0 cents: all that is left of that payment.
        case refundPayment = "RefundPayment"
    }

    /// The interface's properties.
    public enum Property: String, CaseIterable, Sendable {
        /// `State` (s): `idle`, `creating`, `advertising`, `locked`, or how the last charge ended (`paid`, …).
        case state = "State"
        /// `CurrentCharge` (a{sv}): the current or last charge, empty when there was none.
        case currentCharge = "CurrentCharge"
        /// `CheckoutURL` (s): while a charge waits for payers (`advertising` or `locked`), the web checkout of the
        /// EID on the air, `PUBLIC_URL/p/EID`, for a point-of-sale that shows its own QR code or link; it changes
        /// with every new EID. Empty at other times, and when the ledger has no public URL.
        case checkoutURL = "CheckoutURL"
    }

    /// The keys of a charge's dictionary (`GetCharge`, `CurrentCharge`); a key whose value is not known yet is left
    /// out.
    public enum ChargeKey: String, CaseIterable, Sendable {
        /// `id` (s): the charge's id.
        case id
        /// `amount_cents` (x): the amount asked, the whole of it however many share it.
        case amountCents = "amount_cents"
        /// `shares` (i): into how many shares the amount is split (1: one payer).
        case shares
        /// `shares_paid` (i): how many shares are paid (1 for a paid charge that is not split); of a split charge
        /// that ended cancelled or expired, the shares paid before the ledger refunded them.
        case sharesPaid = "shares_paid"
        /// `paid_cents` (x): what the shares paid add up to, without tips.
        case paidCents = "paid_cents"
        /// `tip_cents` (x): the tips payers gave on top of their shares.
        case tipCents = "tip_cents"
        /// `refunded_cents` (x): what the ledger returned to payers, shares and tips: the refunds it made through
        /// `Refund` and `RefundPayment`, or what a split that ended cancelled or expired with shares paid returned.
        case refundedCents = "refunded_cents"
        /// `reference` (s): the point-of-sale's reference.
        case reference
        /// `state` (s): `creating`, `advertising`, `locked`, `paid`, `expired`, `cancelled` or `failed`.
        case state
        /// `session_id` (s): the ledger session advertised, once created.
        case sessionID = "session_id"
        /// `eid` (s): that session's EID.
        case eid
        /// `checkout_url` (s): that EID's web checkout, `PUBLIC_URL/p/EID`, when the ledger has a public URL.
        case checkoutURL = "checkout_url"
        /// `expires_at` (s, ISO 8601): when the charge stops waiting for payers.
        case expiresAt = "expires_at"
        /// `problem` (s): what keeps the charge from progressing, or why it failed.
        case problem
        /// `created_at` (s, ISO 8601): when the point-of-sale asked.
        case createdAt = "created_at"
        /// `updated_at` (s, ISO 8601): when the charge last changed.
        case updatedAt = "updated_at"
        /// `tip_percents` (ai): the tips the charge's sessions suggest to payers, in whole percent of what each pays;
        /// left out when it suggests none.
        case tipPercents = "tip_percents"
        /// `payments` (aa{sv}): of a split charge with shares paid, each payment as the ledger last reported it,
        /// oldest first, keyed by ``PaymentKey``; left out when there is none.
        case payments
    }

    /// The keys of one payment of a charge's `payments`.
    public enum PaymentKey: String, CaseIterable, Sendable {
        /// `payment_id` (s): what `RefundPayment` names.
        case paymentID = "payment_id"
        /// `share_numbers` (ai): the shares it paid (1 is the first).
        case shareNumbers = "share_numbers"
        /// `amount_cents` (x): what it paid for those shares, without the tip.
        case amountCents = "amount_cents"
        /// `tip_cents` (x): the tip paid with it.
        case tipCents = "tip_cents"
        /// `refunded_cents` (x): how much of it (shares and tip) was refunded.
        case refundedCents = "refunded_cents"
        /// `paid_at` (s, ISO 8601): when it was paid.
        case paidAt = "paid_at"
    }

    /// The interface's signals; the first argument of each is the charge's id.
    public enum Signal: String, CaseIterable, Sendable {
        /// `Advertising(s id, s eid)`: the kiosk advertises the charge's EID; a payer can pay.
        case advertising = "Advertising"
        /// `Locked(s id)`: a payer is paying.
        case locked = "Locked"
        /// `SharePaid(s id, i shares_paid, i shares)`: more shares of a split charge are paid, not all; the kiosk
        /// still advertises it for the rest. The last share is `PaymentSucceeded`.
        case sharePaid = "SharePaid"
        /// `PaymentSucceeded(s id, x amount_cents, s session_id)`: paid (of a split charge: every share).
        case paymentSucceeded = "PaymentSucceeded"
        /// `Expired(s id)`: the charge ended unpaid. The ledger refunds the shares of a split charge that were paid;
        /// the charge's `refunded_cents` says how much it returned.
        case expired = "Expired"
        /// `Cancelled(s id)`: the charge was cancelled (shares paid are refunded, as for `Expired`).
        case cancelled = "Cancelled"
        /// `Error(s id, s reason)`: a problem; the kiosk keeps trying unless the charge failed.
        case error = "Error"
        /// `Refunded(s id, s refund_id, x amount_cents)`: a refund of the charge, its receipt verified.
        case refunded = "Refunded"
    }

    /// The D-Bus errors the methods reply with, besides `org.freedesktop.DBus.Error.InvalidArgs` (a bad amount or
    /// reference) and `org.freedesktop.DBus.Error.Failed`.
    public enum ErrorName {
        /// Another charge is active.
        public static let busy: DBusError.Name = "io.gotchu.Kiosk1.Error.Busy"
        /// No charge has that id.
        public static let notFound: DBusError.Name = "io.gotchu.Kiosk1.Error.NotFound"
        /// The charge is already over.
        public static let alreadyFinal: DBusError.Name = "io.gotchu.Kiosk1.Error.AlreadyFinal"
        /// The charge was paid before it could be cancelled.
        public static let alreadyPaid: DBusError.Name = "io.gotchu.Kiosk1.Error.AlreadyPaid"
        /// The ledger has not confirmed the cancel yet; the kiosk keeps trying.
        public static let cancelPending: DBusError.Name = "io.gotchu.Kiosk1.Error.CancelPending"
        /// The charge is not paid, so there is nothing to refund.
        public static let notPaid: DBusError.Name = "io.gotchu.Kiosk1.Error.NotPaid"
        /// The ledger refused the refund (the message says why), or its receipt did not verify.
        public static let refundFailed: DBusError.Name = "io.gotchu.Kiosk1.Error.RefundFailed"
        /// The charge has no payment with that id (the message lists those it has).
        public static let unknownPayment: DBusError.Name = "io.gotchu.Kiosk1.Error.UnknownPayment"
    }
}
