public import GotchuDBus

/// The names of the kiosk's control interface, `io.gotchu.Kiosk1` at `/io/gotchu/Kiosk1`: declared here once, for
/// the kiosk that serves it and every point-of-sale that calls it.
///
/// Methods: `Charge(x amount_cents, s reference) → s id`, `Cancel(s id)`, `GetCharge(s id) → a{sv}`,
/// `Refund(s id, x amount_cents) → s refund_id` (0 cents: whatever is not refunded yet).
/// Properties: `State` (s) and `CurrentCharge` (a{sv}, empty when there was none).
/// Signals: `Advertising(s id, s eid)`, `Locked(s id)`, `PaymentSucceeded(s id, x amount_cents, s session_id)`,
/// `Expired(s id)`, `Cancelled(s id)`, `Error(s id, s reason)`, `Refunded(s id, s refund_id, x amount_cents)`.
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
        /// `Cancel(s id)`: cancels a charge that is not over yet.
        case cancel = "Cancel"
        /// `GetCharge(s id) → a{sv}`: a charge, as described in ``KioskClient/charge(_:)``.
        case getCharge = "GetCharge"
        /// `Refund(s id, x amount_cents) → s refund_id`: returns money of a paid charge to its payer.
        case refund = "Refund"
    }

    /// The interface's properties.
    public enum Property: String, CaseIterable, Sendable {
        /// `State` (s): `idle`, `creating`, `advertising`, `locked`, or how the last charge ended (`paid`, …).
        case state = "State"
        /// `CurrentCharge` (a{sv}): the current or last charge, empty when there was none.
        case currentCharge = "CurrentCharge"
    }

    /// The interface's signals; the first argument of each is the charge's id.
    public enum Signal: String, CaseIterable, Sendable {
        /// `Advertising(s id, s eid)`: the kiosk advertises the charge's EID; a payer can pay.
        case advertising = "Advertising"
        /// `Locked(s id)`: a payer is paying.
        case locked = "Locked"
        /// `PaymentSucceeded(s id, x amount_cents, s session_id)`: paid.
        case paymentSucceeded = "PaymentSucceeded"
        /// `Expired(s id)`: the charge ended unpaid.
        case expired = "Expired"
        /// `Cancelled(s id)`: the charge was cancelled.
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
    }
}
