import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger

/// The model test's deposits and payouts: each answer against the oracle's; the step's audit and the batch's
/// `ledger verify` (which checks every deposit and payout against its entries) follow as for every operation.
extension Driver {
    mutating func moneyInOutStep() async throws {
        switch Int.random(in: 0..<6, using: &random) {
        case 0, 1:
            try await deposit()
        case 2, 3:
            try await payout()
        case 4:
            try await resolvePayout()
        default:
            try await concurrentSettleAndFail()
        }
    }

    /// A deposit under a new reference, or again under an earlier one (same or another amount or user).
    private mutating func deposit() async throws {
        var user = user()
        var amount = Cents.random(in: 1...5_000, using: &random)
        var reference = "ref-" + freshKey()
        let earlier = model.moneyInOut.deposits.keys.sorted()
        if !earlier.isEmpty, Bool.random(using: &random) {
            reference = earlier[Int.random(in: 0..<earlier.count, using: &random)]
            let first = model.moneyInOut.deposits[reference]!
            // Mostly the same deposit again, sometimes another amount or user under its reference.
            switch Int.random(in: 0..<4, using: &random) {
            case 0: amount += 1
            case 1: user = (first.user + 1) % users.count
            default: (user, amount) = (first.user, first.amount)
            }
        }
        note("deposit u\(user) \(amount) \(reference)")
        let email = "user\(user)@model.example"
        let actual = await outcome {
            Cents?.some(
                try await store.deposit(email: email, amountCents: amount, reference: reference, actor: "model")
                    .balance
            )
        }
        try expect(actual, model.deposit(user, amount, reference: reference), "deposit")
    }

    /// A payout request under a new key, or again under one of the user's earlier keys.
    private mutating func payout() async throws {
        let user = user()
        var amount = Cents.random(in: 1...3_000, using: &random)
        var key = "payout-" + freshKey()
        let prefix = "\(user)/"
        let earlier = model.moneyInOut.payoutKeys.keys.filter { $0.hasPrefix(prefix) }.sorted()
        if !earlier.isEmpty, Int.random(in: 0..<3, using: &random) == 0 {
            key = String(earlier[Int.random(in: 0..<earlier.count, using: &random)].dropFirst(prefix.count))
            let first = model.moneyInOut.payouts[model.payoutID(user, key: key)!]!
            amount = Int.random(in: 0..<4, using: &random) == 0 ? first.amount + 1 : first.amount
        }
        note("payout u\(user) \(amount) key \(key)")
        let expected = model.requestPayout(user, amount, key: key)
        let isNew = model.payoutID(user, key: key) == nil
        var taken: String?
        let actual = await outcome {
            let (response, replayed) = try await store.requestPayout(
                userID: users[user].id,
                amountCents: amount,
                idempotencyKey: key
            )
            guard replayed != isNew else { throw DriverFailure(message: "payout: replayed \(replayed), new \(isNew)") }
            if !replayed { taken = response.id }
            return Cents?.some(response.balanceAfter)
        }
        try expect(actual, expected, "payout")
        if let taken { model.tookPayout(taken, user, amount, key: key) }
    }

    /// A payout picked at random (pending ones mostly), settled or failed.
    private mutating func pickPayout() -> String? {
        let all = model.moneyInOut.payouts.keys.sorted()
        let pending = all.filter { model.moneyInOut.payouts[$0]!.status == .pending }
        let pool = !pending.isEmpty && Int.random(in: 0..<4, using: &random) != 0 ? pending : all
        return pool.isEmpty ? nil : pool[Int.random(in: 0..<pool.count, using: &random)]
    }

    private mutating func resolvePayout() async throws {
        guard let id = pickPayout() else { return }
        let status: PayoutStatus = Bool.random(using: &random) ? .settled : .failed
        note("\(status == .settled ? "settle" : "fail") payout \(id.prefix(8))")
        let store = self.store
        let actual = await outcome { () -> Cents? in
            _ =
                status == .settled
                ? try await store.settlePayout(id: id, reference: "out-\(id.prefix(8))", actor: "model")
                : try await store.failPayout(id: id, reason: "model says no", actor: "model")
            return nil
        }
        try expect(actual, model.resolvePayout(id, to: status), "resolve payout")
    }

    /// Settle and fail of one payout at once: a pending one ends exactly one way, the other is refused.
    private mutating func concurrentSettleAndFail() async throws {
        guard let id = pickPayout() else { return }
        note("settle and fail payout \(id.prefix(8)) at once")
        let store = self.store
        let settle = Task { try await store.settlePayout(id: id, reference: "race", actor: "model") }
        let fail = Task { try await store.failPayout(id: id, reason: "race", actor: "model") }
        let outcomes = [await settle.result, await fail.result]
        let won = outcomes.compactMap { try? $0.get().status }
        let refused = outcomes.compactMap { outcome -> LedgerError? in
            guard case .failure(let error) = outcome else { return nil }
            return error as? LedgerError
        }
        guard refused.count + won.count == 2, refused.allSatisfy({ $0.kind == .payoutNotPending }) else {
            throw DriverFailure(message: "settle and fail: \(outcomes)")
        }
        if model.moneyInOut.payouts[id]!.status == .pending {
            guard won.count == 1 else {
                throw DriverFailure(message: "settle and fail of a pending payout: \(outcomes)")
            }
            try expect(model.resolvePayout(id, to: won[0]), .ok(nil), "settle and fail")
        } else {
            guard won.isEmpty else { throw DriverFailure(message: "settle and fail of an ended payout: \(outcomes)") }
        }
    }
}
