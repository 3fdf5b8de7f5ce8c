package import Foundation
package import GotchuCore

/// One refund the kiosk asks the ledger for, written to the ``KioskStore`` before it is sent, under the idempotency
/// key it is sent with: a refund interrupted by a crash is sent again with the same key after the restart, so the
/// ledger makes it once (a replay answers the refund it made).
package struct KioskRefund: Hashable, Sendable {
    /// Where the refund is.
    package enum State: String, Hashable, Sendable {
        /// Written, not yet answered by the ledger (or answered with a receipt that did not verify): sent again,
        /// with the same key, until it is answered.
        case pending
        /// The ledger made it and its receipt verified.
        case done
        /// The ledger refused it (the problem says why); nothing was refunded.
        case refused
    }

    /// The idempotency key it is sent with; unique.
    package var key: String
    /// The kiosk charge refunded.
    package var chargeID: String
    /// That charge's ledger session.
    package var sessionID: String
    /// The payment refunded, of a split charge; `nil` otherwise.
    package var paymentID: String?
    /// How much, in cents.
    package var amountCents: Cents
    /// Where it is.
    package var state: State
    /// The ledger's id of the refund, once made.
    package var refundID: String?
    /// Why the ledger refused it, or why it is still pending.
    package var problem: String?
    /// When it was asked.
    package var createdAt: Date
    /// When it last changed.
    package var updatedAt: Date

    /// Creates a pending refund under a new key.
    package init(
        chargeID: String,
        sessionID: String,
        paymentID: String?,
        amountCents: Cents,
        at date: Date,
        key: String = "kiosk-refund-" + UUID().uuidString.lowercased()
    ) {
        self.key = key
        self.chargeID = chargeID
        self.sessionID = sessionID
        self.paymentID = paymentID
        self.amountCents = amountCents
        self.state = .pending
        self.createdAt = date
        self.updatedAt = date
    }
}

/// What a refund request of the point-of-sale becomes: the refunds to send, one for each payment it covers.
package enum KioskRefundPlan {
    /// Why a request cannot be planned.
    package enum Refusal: Error, Hashable, Sendable {
        /// The charge has no payment with this id.
        case unknownPayment(String, known: [String])
        /// A charge that is not split is refunded without naming a payment.
        case notSplit
        /// An amount of a split charge must name the payment it comes out of.
        case paymentRequired(known: [String])
        /// Nothing of what was asked is left to refund.
        case nothingLeft(paymentID: String?)
    }

    /// The refunds that carry out a request for `amountCents` (`nil`: all that is left) of payment `paymentID` (`nil`:
    /// of the whole charge) of a paid charge with `payments` (empty for a charge that is not split) and, when it is
    /// not split, `refundableCents` left. All that is left of a split charge is every payment's rest, each a refund
    /// of its own. Returns (payment id, cents) pairs.
    package static func refunds(
        paymentID: String?,
        amountCents: Cents?,
        split: Bool,
        payments: [KioskPayment],
        refundableCents: Cents
    ) throws(Refusal) -> [(paymentID: String?, cents: Cents)] {
        let known = payments.map(\.paymentID)
        guard split else {
            guard paymentID == nil else { throw .notSplit }
            let cents = amountCents ?? refundableCents
            guard cents > 0 else { throw .nothingLeft(paymentID: nil) }
            return [(nil, cents)]
        }
        if let paymentID {
            guard let payment = payments.first(where: { $0.paymentID == paymentID }) else {
                throw .unknownPayment(paymentID, known: known)
            }
            let cents = amountCents ?? payment.refundableCents
            guard cents > 0 else { throw .nothingLeft(paymentID: paymentID) }
            return [(paymentID, cents)]
        }
        guard amountCents == nil else { throw .paymentRequired(known: known) }
        let rest = payments.filter { $0.refundableCents > 0 }.map { ($0.paymentID as String?, $0.refundableCents) }
        guard !rest.isEmpty else { throw .nothingLeft(paymentID: nil) }
        return rest
    }
}
