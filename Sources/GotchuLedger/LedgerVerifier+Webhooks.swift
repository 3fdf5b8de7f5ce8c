import GotchuCore

// `ledger verify`'s check of the webhook outbox: every money movement since the outbox began has exactly one event,
// and every event announces a movement (or a cancel or expiry) that happened, to the user it concerns.

extension LedgerVerifier {
    /// The event each kind of money movement writes, by the type of its transfer's debit entry.
    static let webhookEventOfMovement: [String: WebhookEventType] = [
        paymentTypes.debit: .paymentSucceeded,
        refundTypes.debit: .refundSucceeded,
        MoneyInOutEntries.settle.debit: .payoutSettled,
        MoneyInOutEntries.payoutReturn.debit: .payoutFailed,
        MoneyInOutEntries.deposit.debit: .depositReceived,
        "DEV_FUND_OUT": .depositReceived,
    ]

    /// A webhook event that does not match the ledger, described.
    struct WebhookEventMismatch: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Checks the events of `snapshot` against its transfers (by id, in `order`), its sessions and its payouts.
    /// - Returns: the line for the checks passed, or the first mismatch.
    static func verifyWebhookEvents(
        _ snapshot: LedgerSnapshot,
        transfers: [String: [StoredEntry]],
        order: [String]
    ) -> Result<String, WebhookEventMismatch> {
        let owners = Dictionary(snapshot.wallets.map { ($0.id, $0.userID) }, uniquingKeysWith: { first, _ in first })
        let sessions = Dictionary(snapshot.sessions.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let payouts = Dictionary(snapshot.payouts.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var announced: [String: String] = [:]
        var sessionEvents: Set<String> = []
        for event in snapshot.webhookEvents {
            let name = "webhook event \(event.id) (\(event.type.rawValue))"
            guard let transferID = event.transferID else {
                guard event.type == .sessionCancelled || event.type == .sessionExpired else {
                    return .failure(WebhookEventMismatch("\(name) names no transfer"))
                }
                guard let sid = event.sessionID, let session = sessions[sid], session.payeeID == event.userID else {
                    return .failure(WebhookEventMismatch("\(name) does not name a session of its user"))
                }
                // An expiry's session stays stored live (its expiry is a time, not a status), expired by then.
                let expired =
                    StoredSessionStatus.live.contains(session.storedStatus) || session.storedStatus == .created
                let fits =
                    event.type == .sessionCancelled
                    ? session.storedStatus == .cancelled : expired && session.expiresAt <= event.createdAt
                guard fits else {
                    return .failure(
                        WebhookEventMismatch("\(name): session \(sid) is \(session.storedStatus.rawValue)")
                    )
                }
                guard sessionEvents.insert("\(event.type.rawValue) \(sid)").inserted else {
                    return .failure(WebhookEventMismatch("\(name): session \(sid) has that event twice"))
                }
                continue
            }
            let entries = transfers[transferID] ?? []
            guard let debit = entries.first(where: { $0.direction == .debit }),
                let credit = entries.first(where: { $0.direction == .credit })
            else { return .failure(WebhookEventMismatch("\(name) names the unknown transfer \(transferID)")) }
            guard webhookEventOfMovement[debit.type] == event.type, event.amount == debit.amount else {
                return .failure(
                    WebhookEventMismatch(
                        "\(name) names transfer \(transferID), a \(debit.type) of \(debit.amount) cents, as "
                            + "\(event.amount.map { "\($0) cents" } ?? "no amount")"
                    )
                )
            }
            if let other = announced.updateValue(event.id, forKey: transferID) {
                return .failure(WebhookEventMismatch("transfer \(transferID) has two events, \(other) and \(event.id)"))
            }
            // The user it goes to, and the row it names, are the transfer's.
            let concerned: String?
            let named: String?
            switch event.type {
            case .paymentSucceeded:
                concerned = owners[credit.walletID] ?? nil
                named = event.sessionID
            case .refundSucceeded:
                concerned = owners[debit.walletID] ?? nil
                named = event.sessionID
            case .payoutSettled:
                concerned = event.payoutID.flatMap { payouts[$0]?.userID }
                named = event.payoutID
            case .payoutFailed:
                concerned = owners[credit.walletID] ?? nil
                named = event.payoutID
            case .depositReceived:
                concerned = owners[credit.walletID] ?? nil
                named = event.depositID
            case .sessionCancelled, .sessionExpired:
                concerned = nil
                named = nil
            }
            guard concerned == event.userID, named == debit.refID else {
                return .failure(
                    WebhookEventMismatch("\(name) does not go to the user, or name the row, of transfer \(transferID)")
                )
            }
        }
        var movements = 0
        if let start = snapshot.webhookOutboxStart {
            for id in order {
                let entries = transfers[id] ?? []
                guard let debit = entries.first(where: { $0.direction == .debit }), debit.seq >= start,
                    webhookEventOfMovement[debit.type] != nil
                else { continue }
                guard announced[id] != nil else {
                    return .failure(
                        WebhookEventMismatch(
                            "transfer \(id) (\(debit.type), \(debit.amount) cents) has no webhook event"
                        )
                    )
                }
                movements += 1
            }
        }
        return .success(
            "webhook events: \(snapshot.webhookEvents.count), each announcing what happened to its user; "
                + "\(movements) money movements since the outbox began, each with exactly one"
        )
    }
}
