package import GotchuCore

/// Why the kiosk refused a request from the point-of-sale.
package enum KioskError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Another charge is active; only one runs at a time.
    case busy(activeID: String)
    /// The amount is not a positive number of cents the ledger could take.
    case invalidAmount(Cents)
    /// The number of shares is not 1 to ``maximumShares``, or more than the amount has cents (each share is at
    /// least a cent).
    case invalidShares(Int, amountCents: Cents)
    /// The reference is too long or has control characters.
    case invalidReference(String)
    /// The tips asked for are not 1 to 5 different whole percents from 1 to 100 (``TipPrompt``): why.
    case invalidTips(String)
    /// No charge has this id.
    case notFound(id: String)
    /// The charge is already over; it cannot be cancelled.
    case alreadyFinal(KioskCharge)
    /// Cancelling needs the ledger's word and the ledger could not be reached; the kiosk keeps trying.
    case cancelPending(reason: String)
    /// The state directory could not be written.
    case storage(String)
    /// Only a paid charge can be refunded.
    case notPaid(KioskCharge)
    /// The ledger refused the refund, could not be reached, or its receipt did not verify.
    case refundFailed(reason: String)
    /// The charge has no payment with this id; `known` lists those it has.
    case unknownPayment(chargeID: String, paymentID: String, known: [String])
    /// The refund names a payment, but the charge is not split: it is refunded without one.
    case notSplit(chargeID: String)
    /// An amount of a split charge must come out of one payment; `known` lists them.
    case paymentRequired(chargeID: String, known: [String])

    /// The most shares a charge may be split into (the ledger's limit).
    package static let maximumShares = 50

    package var description: String {
        switch self {
        case .busy(let id): "charge \(id) is still active; cancel it or wait until it ends"
        case .invalidAmount(let cents): "the amount must be a positive number of cents, not \(cents)"
        case .invalidShares(let shares, let cents):
            (1...Self.maximumShares).contains(shares)
                ? "\(cents) cents cannot be split into \(shares) shares of at least one cent"
                : "the number of shares must be 1 to \(Self.maximumShares), not \(shares)"
        case .invalidReference(let reason): "invalid reference: \(reason)"
        case .invalidTips(let reason): "invalid tips: \(reason)"
        case .notFound(let id): "no charge \(id)"
        case .alreadyFinal(let charge): "charge \(charge.id) is already \(charge.state.rawValue)"
        case .cancelPending(let reason):
            "cancel requested, but the ledger has not confirmed it yet (\(reason)); the kiosk keeps trying"
        case .storage(let reason): "cannot write the kiosk's state: \(reason)"
        case .notPaid(let charge): "charge \(charge.id) is \(charge.state.rawValue); only a paid charge can be refunded"
        case .refundFailed(let reason): "the refund failed: \(reason)"
        case .unknownPayment(let id, let payment, let known):
            "charge \(id) has no payment \(DisplayText.quoted(payment))"
                + (known.isEmpty ? "" : "; its payments: \(known.joined(separator: ", "))")
        case .notSplit(let id): "charge \(id) is not split: refund it without naming a payment"
        case .paymentRequired(let id, let known):
            "charge \(id) is split: name the payment an amount comes out of (one of \(known.joined(separator: ", "))), "
                + "or refund all of every payment with 0"
        }
    }
}
