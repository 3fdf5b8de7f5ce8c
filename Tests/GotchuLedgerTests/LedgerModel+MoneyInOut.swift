import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger

/// The oracle's deposits and payouts: what each must answer, and what it does to the balances.
struct MoneyInOutModel {
    struct Deposit {
        var user: Int
        var amount: Cents
    }

    struct Payout {
        var user: Int
        var amount: Cents
        var balanceAfter: Cents
        var status: PayoutStatus
    }

    /// Deposits by external reference.
    var deposits: [String: Deposit] = [:]
    /// Payouts by the store's id.
    var payouts: [String: Payout] = [:]
    /// Payout ids by "user/key".
    var payoutKeys: [String: String] = [:]
}

extension LedgerModel {
    /// A deposit under `reference`: the first credits the user; the same again answers the balance now; another
    /// user or amount under it is refused.
    mutating func deposit(_ user: Int, _ amount: Cents, reference: String) -> Expected {
        if let earlier = moneyInOut.deposits[reference] {
            guard earlier.user == user, earlier.amount == amount else { return .refused(.idempotencyKeyReused) }
            return .ok(balances[user])
        }
        moneyInOut.deposits[reference] = MoneyInOutModel.Deposit(user: user, amount: amount)
        balances[user] += amount
        announce(.depositReceived, user, amount)
        return .ok(balances[user])
    }

    /// The payout already taken under the user's `key`, if any.
    func payoutID(_ user: Int, key: String) -> String? { moneyInOut.payoutKeys["\(user)/\(key)"] }

    /// A payout request: the first answer again for the same key and amount; a refusal stores nothing. The money the
    /// user's live locks (on sessions and on shares) count on stays.
    func requestPayout(_ user: Int, _ amount: Cents, key: String) -> Expected {
        if let id = payoutID(user, key: key), let earlier = moneyInOut.payouts[id] {
            return earlier.amount == amount ? .ok(earlier.balanceAfter) : .refused(.idempotencyKeyReused)
        }
        let held = locksHeld(by: user, excluding: "").amount
        return balances[user] < held + amount ? .refused(.insufficientFunds) : .ok(balances[user] - amount)
    }

    /// Records the payout the store took (after ``requestPayout(_:_:key:)`` said it would).
    mutating func tookPayout(_ id: String, _ user: Int, _ amount: Cents, key: String) {
        balances[user] -= amount
        moneyInOut.payoutKeys["\(user)/\(key)"] = id
        moneyInOut.payouts[id] = MoneyInOutModel.Payout(
            user: user,
            amount: amount,
            balanceAfter: balances[user],
            status: .pending
        )
    }

    /// Settles (the money leaves) or fails (the money returns) a pending payout; anything else is refused.
    mutating func resolvePayout(_ id: String, to status: PayoutStatus) -> Expected {
        guard var payout = moneyInOut.payouts[id] else { return .refused(.notFound) }
        guard payout.status == .pending else { return .refused(.payoutNotPending) }
        payout.status = status
        if status == .failed { balances[payout.user] += payout.amount }
        announce(status == .settled ? .payoutSettled : .payoutFailed, payout.user, payout.amount)
        moneyInOut.payouts[id] = payout
        return .ok(nil)
    }
}
