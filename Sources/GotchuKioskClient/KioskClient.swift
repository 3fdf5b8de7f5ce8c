public import GotchuDBus

/// A point-of-sale's side of the kiosk's control interface (``KioskInterface``): asks the `gotchu kiosk` daemon for
/// charges, cancels and refunds them, and follows them by their signals.
///
/// ```swift
/// import GotchuDBus
/// import GotchuKioskClient
///
/// let connection = try await DBusConnection.connect(to: .system)
/// let kiosk = KioskClient(connection: connection)
/// let events = try await kiosk.events()  // before charging, so no step is missed
/// let id = try await kiosk.charge(amountCents: 1250, reference: "order 1017")
/// for await event in events where event.chargeID == id {
///     if case .paymentSucceeded(_, let cents, _) = event { print("paid \(cents) cents"); break }
/// }
/// ```
///
/// Refusals are thrown as `DBusError`s named in ``KioskInterface/ErrorName``; a kiosk that is not running answers
/// `org.freedesktop.DBus.Error.ServiceUnknown`. On the system bus, the bus policy lets members of the `gotchu-pos`
/// group call the kiosk.
public struct KioskClient: Sendable {
    /// The bus connection the kiosk is reached on.
    public let connection: DBusConnection
    /// How long a method call may wait for the kiosk's reply (a refund waits for the ledger's signed receipt).
    public var timeout: Duration

    /// A client talking to the kiosk on `connection`.
    public init(connection: DBusConnection, timeout: Duration = .seconds(30)) {
        self.connection = connection
        self.timeout = timeout
    }

    /// Starts a charge of `amountCents` (1 or more) and returns its id; the kiosk then advertises it to payers.
    /// - Parameter reference: the point-of-sale's own reference, such as an order number (may be empty).
    /// - Parameter shares: into how many equal shares to split the amount, each paid by a payer of its own (1 to 50,
    ///   each at least a cent; the cents that do not divide evenly go to the first shares). One share calls
    ///   `Charge`, which kiosks that predate splits serve too; more call `ChargeSplit`. The kiosk signals
    ///   ``KioskInterface/Signal/sharePaid`` as shares are paid, and `PaymentSucceeded` once all are.
    /// - Parameter tipPercents: the tips the charge's sessions suggest to payers, in whole percent of what each pays
    ///   (`[]`: none); `nil` leaves it to the kiosk's `tip_percents`. Given, it calls `ChargeWithTips`.
    /// - Throws: ``KioskInterface/ErrorName/busy`` while another charge is active; `InvalidArgs` for a bad amount,
    ///   reference, number of shares or list of tips; `org.freedesktop.DBus.Error.UnknownMethod` from a kiosk that
    ///   predates splits, for more than one share (or tip prompts, for tips).
    public func charge(
        amountCents: Int64,
        reference: String = "",
        shares: Int = 1,
        tipPercents: [Int]? = nil
    ) async throws -> String {
        let reply: [DBusValue]
        if let tipPercents {
            let percents = tipPercents.map { DBusValue.int32(Int32(clamping: $0)) }
            reply = try await call(
                .chargeWithTips,
                [
                    .int64(amountCents), .string(reference), .int32(Int32(clamping: shares)),
                    .array(DBusArray(elementType: .int32, elements: percents)),
                ]
            )
        } else if shares == 1 {
            reply = try await call(.charge, [.int64(amountCents), .string(reference)])
        } else {
            reply = try await call(
                .chargeSplit,
                [.int64(amountCents), .string(reference), .int32(Int32(clamping: shares))]
            )
        }
        guard let id = reply.first.flatMap({ String(dbusValue: $0) }) else {
            throw DBusError(.failed, "the kiosk answered Charge without an id")
        }
        return id
    }

    /// Cancels the charge with `id`.
    /// - Throws: ``KioskInterface/ErrorName/alreadyPaid`` or ``KioskInterface/ErrorName/alreadyFinal`` when it
    ///   ended first; ``KioskInterface/ErrorName/cancelPending`` while the ledger has not confirmed the cancel (the
    ///   kiosk keeps trying; ``charge(_:)`` tells the end); ``KioskInterface/ErrorName/notFound``.
    public func cancel(_ id: String) async throws { _ = try await call(.cancel, [.string(id)]) }

    /// Refunds money of the paid charge with `id` to its payer and returns the refund's id. The kiosk answers once
    /// the ledger's signed receipt of the refund verifies, and signals ``KioskInterface/Signal/refunded`` for it.
    /// - Parameter amountCents: how much; 0 refunds all that is not refunded yet: of a split charge, every
    ///   payment's rest, each a refund of its own (the ids come back separated by commas). An amount of a split
    ///   charge names its payment: ``refund(_:paymentID:amountCents:)``.
    /// - Throws: ``KioskInterface/ErrorName/notPaid``, ``KioskInterface/ErrorName/refundFailed`` (the message says
    ///   why), ``KioskInterface/ErrorName/notFound``.
    public func refund(_ id: String, amountCents: Int64 = 0) async throws -> String {
        let reply = try await call(.refund, [.string(id), .int64(amountCents)])
        guard let refundID = reply.first.flatMap({ String(dbusValue: $0) }) else {
            throw DBusError(.failed, "the kiosk answered Refund without a refund id")
        }
        return refundID
    }

    /// Refunds money of one payment of the paid split charge with `id` (its `payment_id`, from the charge's
    /// `payments`) to that payment's payer and returns the refund's id, once its receipt verifies.
    /// - Parameter amountCents: how much; 0 refunds all that is left of that payment (its shares and tip).
    /// - Throws: ``KioskInterface/ErrorName/unknownPayment`` (the message lists the charge's payments),
    ///   ``KioskInterface/ErrorName/notPaid``, ``KioskInterface/ErrorName/refundFailed``,
    ///   ``KioskInterface/ErrorName/notFound``; `org.freedesktop.DBus.Error.UnknownMethod` from a kiosk that
    ///   predates it.
    public func refund(_ id: String, paymentID: String, amountCents: Int64 = 0) async throws -> String {
        let reply = try await call(.refundPayment, [.string(id), .string(paymentID), .int64(amountCents)])
        guard let refundID = reply.first.flatMap({ String(dbusValue: $0) }) else {
            throw DBusError(.failed, "the kiosk answered RefundPayment without a refund id")
        }
        return refundID
    }

    /// The charge with `id`: `id`, `amount_cents` (x), `shares` and `shares_paid` (i), `paid_cents`, `tip_cents`
    /// and `refunded_cents` (x), `reference`, `state` (`creating`, `advertising`, `locked`, `paid`, `expired`,
    /// `cancelled` or `failed`), `created_at` and `updated_at` (ISO 8601), and when known `session_id`, `eid`,
    /// `checkout_url`, `expires_at`, `problem` and, of a split, `payments` (see ``KioskInterface/ChargeKey``).
    /// - Throws: ``KioskInterface/ErrorName/notFound``.
    public func charge(_ id: String) async throws -> [String: DBusVariant] {
        let reply = try await call(.getCharge, [.string(id)])
        guard let charge = reply.first.flatMap({ [String: DBusVariant](dbusValue: $0) }) else {
            throw DBusError(.failed, "the kiosk answered GetCharge with something else than a dictionary")
        }
        return charge
    }

    /// The kiosk's `State` property (see ``KioskInterface/Property/state``).
    public func state() async throws -> String {
        guard let state = try await property(.state).decode(as: String.self) else {
            throw DBusError(.failed, "the kiosk's State is not a string")
        }
        return state
    }

    /// The kiosk's `CurrentCharge` property: the current or last charge as ``charge(_:)`` describes it, empty when
    /// there was none.
    public func currentCharge() async throws -> [String: DBusVariant] {
        guard let charge = try await property(.currentCharge).decode(as: [String: DBusVariant].self) else {
            throw DBusError(.failed, "the kiosk's CurrentCharge is not a dictionary")
        }
        return charge
    }

    /// The kiosk's `CheckoutURL` property: the web checkout of the EID on the air while a charge waits for payers,
    /// for a QR code of the point-of-sale's own; empty otherwise (see ``KioskInterface/Property/checkoutURL``).
    public func checkoutURL() async throws -> String {
        guard let url = try await property(.checkoutURL).decode(as: String.self) else {
            throw DBusError(.failed, "the kiosk's CheckoutURL is not a string")
        }
        return url
    }

    /// The kiosk's signals, raw, from now on. Subscribe before ``charge(amountCents:reference:)`` so that no step is
    /// missed; a kiosk that restarts between two steps does not repeat them, so a client that must know the end
    /// also asks ``charge(_:)`` now and then.
    public func signals() async throws -> AsyncStream<DBusMessage> {
        try await connection.signals(
            matching: DBusMatchRule(
                sender: KioskInterface.busName,
                interface: KioskInterface.name,
                path: KioskInterface.path
            )
        )
    }

    /// The kiosk's signals as ``KioskSignal``s, from now on; see ``signals()``.
    public func events() async throws -> AsyncStream<KioskSignal> {
        let messages = try await signals()
        return AsyncStream { continuation in
            let task = Task {
                for await message in messages {
                    if let signal = KioskSignal(message) { continuation.yield(signal) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private func call(_ method: KioskInterface.Method, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await connection.call(
            destination: KioskInterface.busName,
            path: KioskInterface.path,
            interface: KioskInterface.name,
            method: method.rawValue,
            arguments,
            timeout: timeout
        )
    }

    private func property(_ property: KioskInterface.Property) async throws -> DBusValue {
        let reply = try await connection.call(
            destination: KioskInterface.busName,
            path: KioskInterface.path,
            interface: "org.freedesktop.DBus.Properties",
            method: "Get",
            [.string(KioskInterface.name), .string(property.rawValue)],
            timeout: timeout
        )
        guard let value = reply.first?.decode(as: DBusVariant.self)?.value else {
            throw DBusError(.failed, "the kiosk answered Get without a variant")
        }
        return value
    }
}

/// One signal of the kiosk, decoded (see ``KioskInterface/Signal``).
public enum KioskSignal: Hashable, Sendable {
    /// The kiosk advertises the charge's EID; a payer can pay.
    case advertising(chargeID: String, eid: String)
    /// A payer is paying.
    case locked(chargeID: String)
    /// `sharesPaid` of the `shares` of a split charge are paid, not all; the kiosk still advertises it.
    case sharePaid(chargeID: String, sharesPaid: Int, shares: Int)
    /// The charge was paid, in the ledger's session `sessionID`.
    case paymentSucceeded(chargeID: String, amountCents: Int64, sessionID: String)
    /// The charge ended unpaid.
    case expired(chargeID: String)
    /// The charge was cancelled.
    case cancelled(chargeID: String)
    /// A problem; the kiosk keeps trying unless the charge failed (``KioskClient/charge(_:)`` tells).
    case error(chargeID: String, reason: String)
    /// A refund of the charge, its receipt verified.
    case refunded(chargeID: String, refundID: String, amountCents: Int64)

    /// The signal `message` if it is one of the kiosk's, well formed.
    public init?(_ message: DBusMessage) {
        guard message.interface == KioskInterface.name, let member = message.member,
            let signal = KioskInterface.Signal(rawValue: member), let id = message.argument(0, as: String.self)
        else { return nil }
        switch signal {
        case .advertising:
            guard let eid = message.argument(1, as: String.self) else { return nil }
            self = .advertising(chargeID: id, eid: eid)
        case .locked: self = .locked(chargeID: id)
        case .sharePaid:
            guard let paid = message.argument(1, as: Int32.self), let shares = message.argument(2, as: Int32.self)
            else { return nil }
            self = .sharePaid(chargeID: id, sharesPaid: Int(paid), shares: Int(shares))
        case .paymentSucceeded:
            guard let cents = message.argument(1, as: Int64.self), let session = message.argument(2, as: String.self)
            else { return nil }
            self = .paymentSucceeded(chargeID: id, amountCents: cents, sessionID: session)
        case .expired: self = .expired(chargeID: id)
        case .cancelled: self = .cancelled(chargeID: id)
        case .error:
            guard let reason = message.argument(1, as: String.self) else { return nil }
            self = .error(chargeID: id, reason: reason)
        case .refunded:
            guard let refundID = message.argument(1, as: String.self), let cents = message.argument(2, as: Int64.self)
            else { return nil }
            self = .refunded(chargeID: id, refundID: refundID, amountCents: cents)
        }
    }

    /// The id of the charge the signal is about.
    public var chargeID: String {
        switch self {
        case .advertising(let id, _), .locked(let id), .sharePaid(let id, _, _), .paymentSucceeded(let id, _, _),
            .expired(let id), .cancelled(let id), .error(let id, _), .refunded(let id, _, _):
            id
        }
    }

    /// Whether the charge is over: paid, expired or cancelled. (A failed charge is signalled as ``error(chargeID:reason:)``;
    /// its state says it failed.)
    public var endsCharge: Bool {
        switch self {
        case .paymentSucceeded, .expired, .cancelled: true
        default: false
        }
    }
}
