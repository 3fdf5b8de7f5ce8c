import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerAPI
import GotchuReceipts

/// The model test's splits and tips: creates with 1 to 5 shares (and refused counts), locks of several shares,
/// sends with tips (some refused), the sweep of cancelled and expired splits, and two operations racing; each answer
/// against the oracle's, and after every step each touched session as its payee sees it.
extension Driver {
    /// A create of a session of one share half of the time, else of 2 to 5 shares; now and then a share count
    /// the ledger refuses (0, 51, more shares than cents).
    mutating func create() async throws {
        let payee = user()
        var amount = Cents.random(in: 1...3_000, using: &random)
        var shares = Bool.random(using: &random) ? 1 : Int.random(in: 2...5, using: &random)
        switch Int.random(in: 0..<20, using: &random) {
        case 0: shares = [0, 51, -1][Int.random(in: 0..<3, using: &random)]
        case 1: amount = Cents.random(in: 1...4, using: &random)
        default: break
        }
        note("create u\(payee) \(amount) in \(shares)")
        let refusal = LedgerModel.createRefusal(amount: amount, shares: shares)
        var created: NewSession?
        let actual = await outcome {
            created = try await store.createSession(
                payeeID: users[payee].id,
                amountCents: amount,
                shares: shares,
                idempotencyKey: nil
            ).session
            return nil
        }
        try expect(actual, refusal.map { .refused($0) } ?? .ok(nil), "create")
        guard let created else { return }
        let expected = LedgerModel.shareAmounts(amount, shares)
        guard created.shareCents == expected else {
            throw DriverFailure(message: "create: share cents \(created.shareCents), model \(expected)")
        }
        model.created(created, payee: payee, amount: amount, shares: shares)
        sids.append(created.sid)
        touched.insert(created.sid)
    }

    /// How many shares a lock of `sid` asks for: mostly 1, of a split sometimes up to 3 (more than are free now and
    /// then), rarely a count out of range.
    mutating func shareCount(for sid: String) -> Int {
        switch Int.random(in: 0..<40, using: &random) {
        case 0: return [0, 51][Int.random(in: 0..<2, using: &random)]
        case 1: return 2
        case 2..<14 where model.sessions[sid]!.isSplit: return Int.random(in: 2...3, using: &random)
        default: return 1
        }
    }

    /// Someone holding a live lock on the session or on one of its shares, if anyone.
    func lockHolder(_ sid: String) -> Int? {
        let session = model.sessions[sid]!
        guard session.isSplit else { return model.holder(session) }
        return session.shares.lazy.compactMap { model.shareHolder($0) }.first
    }

    mutating func lock(_ sid: String, by payer: Int, shares count: Int) async throws {
        note("lock \(sid.prefix(8)) by u\(payer) shares \(count)")
        touched.insert(sid)
        var locked: LockedShares?
        let actual = await outcome {
            locked = try await store.lock(sid: sid, payerID: users[payer].id, shares: count)
            return locked?.amount
        }
        let expected = model.lock(sid, by: payer, shares: count)
        try expect(actual, expected, "lock")
        if case .ok = expected, model.sessions[sid]!.isSplit { saw("lock ok (split)") }
        if let locked, locked.shareNumbers != model.lastLockedShares {
            throw DriverFailure(message: "lock: shares \(locked.shareNumbers), model \(model.lastLockedShares)")
        }
    }

    /// A tip for what `payer` would pay now: mostly none, often some, sometimes all of it, now and then one the
    /// ledger refuses (negative, or a cent more than the amount).
    mutating func tip(_ sid: String, by payer: Int) -> Cents {
        let session = model.sessions[sid]!
        let held =
            session.isSplit
            ? session.shares.filter { model.shareHolder($0) == payer }.reduce(0) { $0 + $1.amount } : session.amount
        let amount = max(held, 1)
        switch Int.random(in: 0..<20, using: &random) {
        case 0: return -Cents.random(in: 1...100, using: &random)
        case 1: return amount + 1
        case 2: return amount
        case 3..<9: return Cents.random(in: 1...amount, using: &random)
        default: return 0
        }
    }

    /// Gives the model's newest payment, if the last send made one, the store's id for it, as the send's replay
    /// tells it (the id is also the receipt's).
    mutating func nameLastPayment(payer: Int, key: String) async throws {
        guard let payment = model.lastPayment else { return }
        model.lastPayment = nil
        let session = model.sessions[payment.sid]!
        saw(session.paidBy == nil ? "send ok (share)" : "send ok (last share)")
        if session.payments[payment.index].tip > 0 { saw("send ok (tip)") }
        let (receipt, paymentID) = try await store.sentPayment(
            sid: payment.sid,
            payerID: users[payer].id,
            idempotencyKey: key
        )
        guard let paymentID, receipt == nil || receipt?.id == paymentID else {
            throw DriverFailure(message: "send: payment \(paymentID ?? "none"), receipt \(receipt?.id ?? "none")")
        }
        let paid = model.sessions[payment.sid]!.payments[payment.index]
        if let receipt,
            receipt.amountCents != paid.amount || receipt.tipCents != paid.tip || receipt.shareNumbers != paid.numbers
        {
            throw DriverFailure(message: "send: receipt \(receipt), model \(paid)")
        }
        model.name(payment, paymentID)
    }

    /// The session as its payee sees it, against the model: status, counts, what was paid and refunded, and each
    /// payment of a split in order.
    func checkSession(_ sid: String) async throws {
        let session = model.sessions[sid]!
        let view = try await store.session(sid: sid, viewerID: users[session.payee].id)
        let expected = (
            model.status(session), model.sharesPaid(session), model.paidCents(session), model.paidTips(session),
            session.refunded
        )
        let got = (view.status, view.sharesPaid, view.paid, view.tip, view.refunded)
        guard got == expected, view.shares == max(session.shares.count, 1) else {
            throw DriverFailure(
                message: "session \(sid.prefix(8)) (status, shares paid, paid, tips, refunded): store \(got), "
                    + "model \(expected)"
            )
        }
        let payments = model.orderedPayments(session).map { session.payments[$0] }
        let mine = payments.map { "\($0.id.prefix(8)) \($0.numbers) \($0.amount)+\($0.tip) -\($0.refunded)" }
        let theirs = view.payments.map {
            "\($0.id.prefix(8)) \($0.shareNumbers) \($0.amount)+\($0.tip) -\($0.refunded)"
        }
        guard mine == theirs else {
            throw DriverFailure(message: "session \(sid.prefix(8)) payments: store \(theirs), model \(mine)")
        }
    }

    /// The sweep: every cancelled or expired split still owed its payments gets them back, each once. When every
    /// payee covers what it owes the outcome is the model's exactly; otherwise the order of the sweep decides which
    /// payee runs short first, so the store's outcome is read back and must be one the rules allow: each payment
    /// returned whole or not at all, a split's oldest first, and a sweep that answered without error returned them
    /// all. The balances after the step hold the store to what it says it returned.
    mutating func sweep() async throws {
        // The expiry sweep runs beside it in every server (LedgerModelTests+Webhooks.swift).
        try await noteExpiries()
        if let sid = model.owedSessions().first, Int.random(in: 0..<3, using: &random) == 0 {
            try await drain(model.sessions[sid]!.payee)
        }
        let owed = model.owedSessions()
        note("sweep (\(owed.count) owed)")
        touched.formUnion(owed)
        let certain = model.sweepCannotFail() && owed.count <= 100
        let actual = await outcome { Cents?.some(Cents(try await store.returnDueSharePayments(limit: 100))) }
        if certain {
            var returned = 0
            for sid in owed { returned += model.returnPayments(sid).returned }
            try expect(actual, .ok(Cents(returned)), "sweep")
            if returned > 0 { saw("sweep returned payments") }
            return
        }
        var returned = 0
        // What each user got back in this sweep as a payer: its balance when the sweep came to its own splits was
        // at least its balance now less that.
        var credited: [Int: Cents] = [:]
        var stoppedAt: [(payee: Int, owed: Cents)] = []
        for sid in owed {
            let session = model.sessions[sid]!
            let view = try await store.session(sid: sid, viewerID: users[session.payee].id)
            let refunded = Dictionary(uniqueKeysWithValues: view.payments.map { ($0.id, $0.refunded) })
            var stopped = false
            for index in model.orderedPayments(session) where !session.payments[index].returned {
                let payment = session.payments[index]
                let owed = payment.amount + payment.tip - payment.refunded
                let seen = refunded[payment.id]
                if seen == payment.refunded + owed && !stopped {
                    model.balances[session.payee] -= owed
                    model.balances[payment.payer] += owed
                    model.announce(.refundSucceeded, session.payee, owed)
                    model.sessions[sid]!.payments[index].refunded += owed
                    model.sessions[sid]!.payments[index].returned = true
                    model.sessions[sid]!.refunded += owed
                    credited[payment.payer, default: 0] += owed
                    returned += 1
                } else if seen == payment.refunded {
                    if !stopped { stoppedAt.append((session.payee, owed)) }
                    stopped = true
                } else {
                    throw DriverFailure(
                        message: "sweep: payment \(payment.id.prefix(8)) refunded \(seen ?? -1), owed \(owed) "
                            + "(returned in order: \(!stopped))"
                    )
                }
            }
            if !stopped { model.sessions[sid]!.swept = true }
        }
        // A split left owed must have found its payee short of its next payment: one whose payee covers it even
        // without what it got back in this sweep was passed over (a sweep must not let one stuck split hold back
        // the others).
        for (payee, owed) in stoppedAt where model.balances[payee] - credited[payee, default: 0] >= owed {
            throw DriverFailure(
                message: "sweep: a split of u\(payee) was left owed \(owed) though u\(payee) has "
                    + "\(model.balances[payee]) (\(credited[payee, default: 0]) of it returned in this sweep)"
            )
        }
        let whole = owed.allSatisfy { model.sessions[$0]!.swept }
        if returned > 0 { saw("sweep returned payments") }
        saw("sweep short")
        switch actual {
        case .ok(let count?) where whole && count == Cents(returned): break
        case .refused(.insufficientFunds) where !whole: break
        default:
            throw DriverFailure(message: "sweep: store \(actual), \(returned) returned, all returned: \(whole)")
        }
    }

    /// A payout of all `user` may take out now (what its live locks hold stays), so a split it owes runs short.
    mutating func drain(_ user: Int) async throws {
        let amount = model.balances[user] - model.locksHeld(by: user, excluding: "").amount
        guard amount > 0 else { return }
        let key = "payout-" + freshKey()
        note("drain u\(user) \(amount)")
        let expected = model.requestPayout(user, amount, key: key)
        var taken: String?
        let actual = await outcome {
            let (payout, _) = try await store.requestPayout(
                userID: users[user].id,
                amountCents: amount,
                idempotencyKey: key
            )
            taken = payout.id
            return Cents?.some(payout.balanceAfter)
        }
        try expect(actual, expected, "payout")
        if let taken { model.tookPayout(taken, user, amount, key: key) }
    }

    /// One of the operations a race runs.
    enum Operation: CustomStringConvertible {
        case lock(sid: String, payer: Int, shares: Int)
        case send(sid: String, payer: Int, key: String, tip: Cents)
        case cancel(sid: String, payee: Int)

        var description: String {
            switch self {
            case .lock(let sid, let payer, let shares): "lock \(sid.prefix(8)) by u\(payer) shares \(shares)"
            case .send(let sid, let payer, let key, let tip): "send \(sid.prefix(8)) by u\(payer) key \(key) tip \(tip)"
            case .cancel(let sid, let payee): "cancel \(sid.prefix(8)) by u\(payee)"
            }
        }
    }

    /// Two operations on one split at once: two payers sending their shares, a send racing the payee's cancel (the
    /// last share's send, often), or two locks. The store ran them in some order; the model must agree with one,
    /// answers and balances alike.
    mutating func race() async throws {
        let splits = sids.filter { model.sessions[$0]!.isSplit && model.closed(model.sessions[$0]!) == nil }
        guard !splits.isEmpty else { return }
        let sid = splits[Int.random(in: 0..<splits.count, using: &random)]
        let session = model.sessions[sid]!
        let holders = Array(Set(session.shares.compactMap { model.shareHolder($0) })).sorted()
        var payer = holders.first ?? user()
        if holders.isEmpty {
            // Someone takes a share first, so the race has a payment in it.
            try await lock(sid, by: payer, shares: 1)
            if model.shareHolder(model.sessions[sid]!.shares.first { $0.lockedBy == payer } ?? session.shares[0])
                != payer
            {
                payer = user()
            }
        }
        let operations: (Operation, Operation)
        switch Int.random(in: 0..<3, using: &random) {
        case 0 where holders.count >= 2:
            operations = (
                .send(sid: sid, payer: holders[0], key: freshKey(), tip: tip(sid, by: holders[0])),
                .send(sid: sid, payer: holders[1], key: freshKey(), tip: tip(sid, by: holders[1]))
            )
        case 2:
            // Two payers: one payer's two locks at once may end holding different shares in either order, with
            // the same answers (its second lock releases what its first took beyond it), which no answer tells.
            let first = user()
            let second = (first + Int.random(in: 1..<users.count, using: &random)) % users.count
            operations = (
                .lock(sid: sid, payer: first, shares: shareCount(for: sid)),
                .lock(sid: sid, payer: second, shares: shareCount(for: sid))
            )
        default:
            let payee = Int.random(in: 0..<6, using: &random) == 0 ? user() : session.payee
            operations = (
                .send(sid: sid, payer: payer, key: freshKey(), tip: tip(sid, by: payer)),
                .cancel(sid: sid, payee: payee)
            )
        }
        note("race: \(operations.0) | \(operations.1)")
        touched.insert(sid)
        let store = self.store
        let ids = users.map(\.id)
        let first = Task { await Self.run(operations.0, store, ids) }
        let second = Task { await Self.run(operations.1, store, ids) }
        let results = [await first.value, await second.value]
        let stored = try await balances.read()
        var mismatches: [String] = []
        for order in [[0, 1], [1, 0]] {
            var candidate = model
            var expected: [Outcome] = [Outcome(.ok(nil)), Outcome(.ok(nil))]
            var payments: [(sid: String, index: Int)?] = [nil, nil]
            for index in order {
                let operation = index == 0 ? operations.0 : operations.1
                expected[index] = Self.apply(operation, to: &candidate)
                payments[index] = candidate.lastPayment
                candidate.lastPayment = nil
            }
            let balancesMatch = users.indices.allSatisfy { stored[users[$0].id] == candidate.balances[$0] }
            guard results == expected, balancesMatch else {
                mismatches.append("order \(order): model \(expected), balances match: \(balancesMatch)")
                continue
            }
            model = candidate
            saw("race matched")
            for index in 0..<2 {
                guard case .send(_, let payer, let key, _) = index == 0 ? operations.0 : operations.1,
                    let payment = payments[index]
                else { continue }
                model.lastPayment = payment
                try await nameLastPayment(payer: payer, key: key)
            }
            return
        }
        throw DriverFailure(message: "race: store \(results) matches no order: \(mismatches)")
    }

    /// What an operation of a race answered: of a lock, also the shares it took (two locks of shares of one
    /// amount answer alike in either order, but take different shares).
    struct Outcome: Equatable, CustomStringConvertible {
        var expected: LedgerModel.Expected
        var shares: [Int] = []

        init(_ expected: LedgerModel.Expected, shares: [Int] = []) {
            self.expected = expected
            self.shares = shares
        }

        var description: String { shares.isEmpty ? "\(expected)" : "\(expected) \(shares)" }
    }

    private static func run(_ operation: Operation, _ store: any LedgerStore, _ ids: [String]) async -> Outcome {
        do {
            switch operation {
            case .lock(let sid, let payer, let shares):
                let locked = try await store.lock(sid: sid, payerID: ids[payer], shares: shares)
                return Outcome(.ok(locked.amount), shares: locked.shareNumbers)
            case .send(let sid, let payer, let key, let tip):
                switch try await store.send(sid: sid, payerID: ids[payer], idempotencyKey: key, tipCents: tip).0 {
                case .paid(let balance): return Outcome(.ok(balance))
                case .refused(let refusal): return Outcome(.refused(Problem(refusal).kind ?? .internalError))
                }
            case .cancel(let sid, let payee):
                try await store.cancel(sid: sid, payeeID: ids[payee])
                return Outcome(.ok(nil))
            }
        } catch let refusal as LedgerError {
            return Outcome(.refused(Problem(refusal).kind ?? .internalError))
        } catch {
            return Outcome(.refused(.internalError))
        }
    }

    private static func apply(_ operation: Operation, to model: inout LedgerModel) -> Outcome {
        switch operation {
        case .lock(let sid, let payer, let shares):
            let expected = model.lock(sid, by: payer, shares: shares)
            return Outcome(expected, shares: model.lastLockedShares)
        case .send(let sid, let payer, let key, let tip): return Outcome(model.send(sid, by: payer, key: key, tip: tip))
        case .cancel(let sid, let payee): return Outcome(model.cancel(sid, by: payee))
        }
    }
}
