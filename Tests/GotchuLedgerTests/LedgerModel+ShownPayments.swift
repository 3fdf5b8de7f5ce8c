import GotchuAPI
import GotchuCore

/// The oracle's payments of what a page showed (the web checkout's Pay): the session, or one free share of a split
/// of exactly the amount shown, taken and paid at once; a refusal that must leave nothing behind keeps no key.
extension LedgerModel {
    /// What a shown payment answers.
    enum ShownExpected: Equatable, CustomStringConvertible {
        case outcome(Expected)
        case amountChanged(Cents)
        /// The payer paid a share before: the index of that payment in the session's payments.
        case paidBefore(Int)

        var description: String {
            switch self {
            case .outcome(let expected): "\(expected)"
            case .amountChanged(let cents): "amount changed to \(cents)"
            case .paidBefore(let index): "paid before (payment \(index))"
            }
        }
    }

    /// A shown payment of `amount` (with `tip` on top) under `key`: the idempotency layer of a send, then the
    /// payment.
    mutating func payShown(
        _ sid: String,
        by payer: Int,
        key: String,
        amount: Cents,
        tip: Cents,
        another: Bool
    ) -> ShownExpected {
        let scoped = "\(payer)/\(key)"
        switch keys[scoped] {
        case .done(let first, let outcome):
            return .outcome(first == sid ? outcome : .refused(.idempotencyKeyReused))
        case .inFlight(let first, let since):
            if first != sid { return .outcome(.refused(.idempotencyKeyReused)) }
            if now - since < inFlightTimeout { return .outcome(.refused(.idempotencyInFlight)) }
        case nil:
            break
        }
        lastPayment = nil
        let result = takeShown(sid, by: payer, amount: amount, tip: tip, another: another)
        if case .outcome(let outcome) = result {
            keys[scoped] = Self.isRecorded(outcome) ? .done(sid: sid, outcome: outcome) : nil
        }
        return result
    }

    private mutating func takeShown(
        _ sid: String,
        by payer: Int,
        amount: Cents,
        tip: Cents,
        another: Bool
    ) -> ShownExpected {
        let session = sessions[sid]!
        if session.payee == payer { return .outcome(.refused(.ownSession)) }
        if let kind = closed(session) { return .outcome(.refused(kind)) }
        guard session.isSplit else {
            if let holder = holder(session), holder != payer { return .outcome(.refused(.sessionLocked)) }
            if session.amount != amount { return .amountChanged(session.amount) }
            return .outcome(payWhole(sid, by: payer, tip: tip))
        }
        if !another, let paid = session.shares.first(where: { $0.payment.map { session.payments[$0].payer } == payer })
        {
            return .paidBefore(paid.payment!)
        }
        let free = session.shares.filter { $0.payment == nil && (shareHolder($0) ?? payer) == payer }
        guard let first = free.first else { return .outcome(.refused(.noFreeShare)) }
        let matching = free.filter { $0.amount == amount }
        guard let share = matching.first(where: { shareHolder($0) == payer }) ?? matching.first else {
            return .amountChanged(first.amount)
        }
        return .outcome(payShares(sid, [share], by: payer, tip: tip))
    }
}
