package import GotchuCore

/// Something that happened to a charge, in the order it happened; the point-of-sale hears each as a D-Bus signal.
package struct KioskEvent: Hashable, Sendable {
    /// What happened.
    package enum Kind: Hashable, Sendable {
        /// The charge's EID is on the air (again, or for a new session).
        case advertising
        /// A payer holds the session.
        case locked
        /// More shares of a split charge are paid (``KioskCharge/sharesPaid`` of ``KioskCharge/shares``), not all:
        /// the charge is still advertised for the rest. The last share makes it ``paid``.
        case sharePaid
        /// The charge was paid.
        case paid
        /// The charge expired unpaid.
        case expired
        /// The charge was cancelled.
        case cancelled
        /// The ledger refused the charge; it is over.
        case failed(reason: String)
        /// Something keeps the charge from progressing; the kiosk retries.
        case problem(reason: String)
        /// Money of the paid charge went back to a payer: the ledger made refund `refundID` and its receipt verified.
        case refunded(refundID: String, amountCents: Cents)
    }

    /// What happened.
    package var kind: Kind
    /// The charge right after it happened.
    package var charge: KioskCharge

    /// Creates an event.
    package init(_ kind: Kind, _ charge: KioskCharge) {
        self.kind = kind
        self.charge = charge
    }

    /// The events that tell how a charge went from `old` to `new`.
    static func between(_ old: KioskCharge?, _ new: KioskCharge) -> [KioskEvent] {
        var events: [KioskEvent] = []
        if let problem = new.problem, problem != old?.problem, !new.state.isFinal {
            events.append(KioskEvent(.problem(reason: problem), new))
        }
        if new.sharesPaid > (old?.sharesPaid ?? 0), new.sharesPaid < new.shares, !new.state.isFinal {
            events.append(KioskEvent(.sharePaid, new))
        }
        let changed = new.state != old?.state || new.sessionID != old?.sessionID
        guard changed else { return events }
        switch new.state {
        case .creating: break
        case .advertising: events.append(KioskEvent(.advertising, new))
        case .locked: events.append(KioskEvent(.locked, new))
        case .paid: events.append(KioskEvent(.paid, new))
        case .expired: events.append(KioskEvent(.expired, new))
        case .cancelled: events.append(KioskEvent(.cancelled, new))
        case .failed: events.append(KioskEvent(.failed(reason: new.problem ?? "refused by the ledger"), new))
        }
        return events
    }
}
