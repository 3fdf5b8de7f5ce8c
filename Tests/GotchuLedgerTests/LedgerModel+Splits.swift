import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger

/// The oracle's group splits and tips, from the contract (splits-contract): shares locked and paid one payer at a
/// time, the odd cents to the first shares, tips to the payee, and a cancelled or expired split's payments returned
/// whole, each once.
extension LedgerModel {
    /// One share of a split.
    struct Share {
        var number: Int
        var amount: Cents
        /// Its last lock holder, kept after a release or a payment, as the stores keep `locked_by`.
        var lockedBy: Int?
        /// When that lock lapses (a release sets it to the time of the release).
        var until: Int64 = 0
        /// The index of the payment that paid it, in ``Session/payments``.
        var payment: Int?
    }

    /// One send of a split: the shares it paid, its tip and what went back of it.
    struct SharePayment {
        /// The store's id, once the driver has read it (``name(_:_:)``).
        var id = ""
        var payer: Int
        var numbers: [Int]
        var amount: Cents
        var tip: Cents
        var paidAt: Int64
        var refunded: Cents = 0
        /// Whether the sweep (or a cancel) returned it.
        var returned = false
    }

    /// The shares of `amount` split `count` ways, the first first: equal, the remainder one cent each to the first.
    static func shareAmounts(_ amount: Cents, _ count: Int) -> [Cents] {
        let base = amount / Cents(count)
        let remainder = Int(amount % Cents(count))
        return (0..<count).map { base + ($0 < remainder ? 1 : 0) }
    }

    /// Whether a create of `amount` in `shares` shares is refused, and why.
    static func createRefusal(amount: Cents, shares: Int) -> ProblemKind? {
        guard (1...50).contains(shares), amount >= Cents(shares) else { return .invalidShares }
        return nil
    }

    /// Who holds a live lock on this unpaid share, if anyone (whatever its session's state, as the stores read it).
    func shareHolder(_ share: Share) -> Int? {
        guard share.payment == nil, let holder = share.lockedBy, now < share.until else { return nil }
        return holder
    }

    func sharesPaid(_ session: Session) -> Int {
        session.isSplit ? session.shares.filter { $0.payment != nil }.count : (session.paidBy == nil ? 0 : 1)
    }

    /// What the paid shares add up to, without tips.
    func paidCents(_ session: Session) -> Cents {
        session.isSplit
            ? session.payments.reduce(0) { $0 + $1.amount } : (session.paidBy == nil ? 0 : session.amount)
    }

    /// The tips paid into the session.
    func paidTips(_ session: Session) -> Cents {
        session.isSplit ? session.payments.reduce(0) { $0 + $1.tip } : session.tip
    }

    /// The payments of a split in the stores' order: by the time paid, then by first share.
    func orderedPayments(_ session: Session) -> [Int] {
        session.payments.indices.sorted {
            (session.payments[$0].paidAt, session.payments[$0].numbers[0])
                < (session.payments[$1].paidAt, session.payments[$1].numbers[0])
        }
    }

    /// What a resolve of a live split tells: the next free share's amount (the first unpaid while all are held)
    /// and what is left to pay.
    func resolvedShares(_ sid: String) -> (shares: Int, paid: Int, next: Cents, remaining: Cents) {
        let session = sessions[sid]!
        guard session.isSplit else { return (1, 0, session.amount, session.amount) }
        let unpaid = session.shares.filter { $0.payment == nil }
        let next = (unpaid.first { shareHolder($0) == nil } ?? unpaid.first)?.amount ?? 0
        return (session.shares.count, sharesPaid(session), next, session.amount - paidCents(session))
    }

    /// Names the payment the last send made with the store's id for it.
    mutating func name(_ payment: (sid: String, index: Int), _ id: String) {
        sessions[payment.sid]!.payments[payment.index].id = id
    }

    /// Unlock of a split: releases the payer's live share locks; a payer that held or paid one is answered ok when
    /// it holds none; anyone else is refused.
    mutating func unlockShares(_ sid: String, by payer: Int) -> Expected {
        var session = sessions[sid]!
        let held = session.shares.filter { shareHolder($0) == payer }.map(\.number)
        if !held.isEmpty {
            for number in held { session.shares[number - 1].until = now }
            sessions[sid] = session
            return .ok(nil)
        }
        let known = session.shares.contains {
            $0.lockedBy == payer || $0.payment.map { session.payments[$0].payer } == payer
        }
        return known ? .ok(nil) : .refused(.forbidden)
    }

    /// A payment of the shares `payer` holds locked, with `tip` on its first; the last share pays the session.
    mutating func payShares(_ sid: String, by payer: Int, tip: Cents) -> Expected {
        let session = sessions[sid]!
        if session.payee == payer { return .refused(.ownSession) }
        if let kind = closed(session) { return .refused(kind) }
        let mine = session.shares.filter { shareHolder($0) == payer }
        if mine.isEmpty { return .refused(.lockRequired) }
        return payShares(sid, mine, by: payer, tip: tip)
    }

    /// A payment of `mine` by `payer`, checked as far as the tip and the funds.
    mutating func payShares(_ sid: String, _ mine: [Share], by payer: Int, tip: Cents) -> Expected {
        var session = sessions[sid]!
        let amount = mine.reduce(0) { $0 + $1.amount }
        if tip < 0 || tip > amount { return .refused(.invalidTip) }
        if balances[payer] < amount + tip { return .refused(.insufficientFunds) }
        balances[payer] -= amount + tip
        balances[session.payee] += amount + tip
        announce(.paymentSucceeded, session.payee, amount + tip)
        let index = session.payments.count
        session.payments.append(
            SharePayment(payer: payer, numbers: mine.map(\.number), amount: amount, tip: tip, paidAt: now)
        )
        for share in mine { session.shares[share.number - 1].payment = index }
        if session.shares.allSatisfy({ $0.payment != nil }) { session.paidBy = payer }
        sessions[sid] = session
        lastPayment = (sid, index)
        return .ok(balances[payer])
    }

    /// Whether the split's payments are owed back: cancelled or expired with shares paid, not all returned yet.
    func isOwedRefunds(_ session: Session) -> Bool {
        session.isSplit && !session.swept && sharesPaid(session) > 0 && session.paidBy == nil
            && (session.cancelled || now >= session.expiresAt)
    }

    /// Returns a cancelled or expired split's payments, oldest first, each whole (what was not refunded of it), while
    /// the payee's balance covers the next; marks it swept once all are. Answers how many it returned and whether
    /// it stopped short (`insufficient-funds`).
    mutating func returnPayments(_ sid: String) -> (returned: Int, refusal: ProblemKind?) {
        guard isOwedRefunds(sessions[sid]!) else { return (0, nil) }
        var session = sessions[sid]!
        var returned = 0
        defer { sessions[sid] = session }
        for index in orderedPayments(session) where !session.payments[index].returned {
            let payment = session.payments[index]
            let owed = payment.amount + payment.tip - payment.refunded
            guard owed > 0 else { continue }
            if balances[session.payee] < owed { return (returned, .insufficientFunds) }
            balances[session.payee] -= owed
            balances[payment.payer] += owed
            announce(.refundSucceeded, session.payee, owed)
            session.payments[index].refunded += owed
            session.payments[index].returned = true
            session.refunded += owed
            returned += 1
        }
        session.swept = true
        return (returned, nil)
    }

    /// The splits a sweep returns now, in the stores' order (by expiry; ties in any order).
    func owedSessions() -> [String] {
        sessions.values.filter(isOwedRefunds).sorted { ($0.expiresAt, $0.sid) < ($1.expiresAt, $1.sid) }.map(\.sid)
    }

    /// Whether every owed payment can be returned whatever the order of the sweep: each payee's balance covers
    /// all it owes (a payee's balance only falls by its own returns, and may rise by others').
    func sweepCannotFail() -> Bool {
        var owed: [Int: Cents] = [:]
        for sid in owedSessions() {
            let session = sessions[sid]!
            for payment in session.payments where !payment.returned {
                owed[session.payee, default: 0] += payment.amount + payment.tip - payment.refunded
            }
        }
        return owed.allSatisfy { balances[$0.key] >= $0.value }
    }
}
