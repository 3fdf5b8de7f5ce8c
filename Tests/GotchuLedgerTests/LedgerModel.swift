import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger

/// An in-memory oracle of the ledger's rules, written from the API's contract (DESIGN.md) rather than from either
/// store: what each operation must answer, and what every balance must be afterwards.
struct LedgerModel {
    struct Session {
        var sid: String
        var eid: EID
        var payee: Int
        var amount: Cents
        var expiresAt: Int64
        var paidBy: Int?
        var cancelled = false
        var lock: (payer: Int, until: Int64)?
        /// Refunded so far, by hand or (a split's payments) automatically, tips included.
        var refunded: Cents = 0
        /// The tip paid with a session of one share.
        var tip: Cents = 0
        /// The shares of a split, the first first; empty for a session of one share (LedgerModel+Splits.swift).
        var shares: [Share] = []
        /// A split's payments, in the order they were made.
        var payments: [SharePayment] = []
        /// Whether every payment of a cancelled or expired split was returned (the store's `refunds_swept_at`).
        var swept = false

        var isSplit: Bool { !shares.isEmpty }
    }

    enum Key {
        case inFlight(sid: String, since: Int64)
        case done(sid: String, outcome: Expected)
    }

    /// What an operation must answer: success (with a balance where there is one) or a problem kind.
    enum Expected: Equatable, CustomStringConvertible {
        case ok(Cents?)
        case refused(ProblemKind)

        var description: String {
            switch self {
            case .ok(let balance?): "ok(\(balance))"
            case .ok(nil): "ok"
            case .refused(let kind): "refused(\(kind.rawValue))"
            }
        }
    }

    var policy: LedgerPolicy
    var now: Int64
    var balances: [Cents]
    var sessions: [String: Session] = [:]
    var keys: [String: Key] = [:]  // "user/key"
    /// Deposits and payouts (LedgerModel+MoneyInOut.swift).
    var moneyInOut = MoneyInOutModel()
    var refundKeys: [String: (sid: String, amount: Cents, paymentID: String?, total: Cents)] = [:]  // "user/key"
    /// The shares the last successful lock took.
    var lastLockedShares: [Int] = []
    /// The split payment the last send made (its session and index), to be named by the store's id.
    var lastPayment: (sid: String, index: Int)?
    /// The webhook events the store must have written, one per money movement, cancel and noted expiry
    /// (LedgerModelTests+Webhooks.swift).
    var events: [String] = []
    /// The sessions whose expiry was noted, with its event.
    var expiryNoted: Set<String> = []

    init(users: Int, policy: LedgerPolicy, now: Int64) {
        self.policy = policy
        self.now = now
        self.balances = Array(repeating: 0, count: users)
    }

    var lockLifetime: Int64 { milliseconds(policy.lockLifetime) }
    var inFlightTimeout: Int64 { milliseconds(policy.inFlightTimeout) }

    func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    func isExpired(_ session: Session) -> Bool {
        session.paidBy == nil && !session.cancelled && now >= session.expiresAt
    }

    func holder(_ session: Session) -> Int? {
        guard session.paidBy == nil, !session.cancelled, let lock = session.lock, now < lock.until,
            now < session.expiresAt
        else { return nil }
        return lock.payer
    }

    /// Paid, cancelled or expired, in that order of precedence; `nil` while the session can still be paid.
    func closed(_ session: Session) -> ProblemKind? {
        if session.paidBy != nil { return .sessionAlreadyPaid }
        if session.cancelled { return .sessionCancelled }
        if isExpired(session) { return .sessionExpired }
        return nil
    }

    func status(_ session: Session) -> SessionStatus {
        if session.paidBy != nil { return .paid }
        if session.cancelled { return .cancelled }
        if isExpired(session) { return .expired }
        // A split is never locked as a whole: its shares are.
        if session.isSplit { return sharesPaid(session) > 0 ? .partiallyPaid : .advertising }
        return holder(session) == nil ? .advertising : .locked
    }

    mutating func fund(_ user: Int, _ amount: Cents) -> Expected {
        balances[user] += amount
        announce(.depositReceived, user, amount)
        return .ok(balances[user])
    }

    mutating func created(_ session: NewSession, payee: Int, amount: Cents, shares: Int = 1) {
        var new = Session(
            sid: session.sid,
            eid: session.eid,
            payee: payee,
            amount: amount,
            expiresAt: now + milliseconds(policy.sessionLifetime)
        )
        if shares > 1 {
            new.shares = Self.shareAmounts(amount, shares).enumerated().map { Share(number: $0 + 1, amount: $1) }
        }
        sessions[session.sid] = new
    }

    func resolve(_ sid: String) -> Expected {
        let session = sessions[sid]!
        if let kind = closed(session) { return .refused(kind) }
        return .ok(session.amount)
    }

    /// A lock of `count` shares (of a session of one share: the session, `count` 1 only); answers what the payer
    /// will pay for what it took, and ``lastLockedShares`` says which shares.
    mutating func lock(_ sid: String, by payer: Int, shares count: Int = 1) -> Expected {
        lastLockedShares = []
        if !(1...50).contains(count) { return .refused(.invalidShares) }
        var session = sessions[sid]!
        var take: [Int] = [1]
        var release: [Int] = []
        var amount = session.amount
        if session.isSplit {
            if session.payee == payer { return .refused(.ownSession) }
            if let kind = closed(session) { return .refused(kind) }
            let free = session.shares.filter { $0.payment == nil && (shareHolder($0) ?? payer) == payer }
            if free.isEmpty || count > free.count { return .refused(.noFreeShare) }
            take = free.prefix(count).map(\.number)
            release = free.dropFirst(count).filter { shareHolder($0) == payer }.map(\.number)
            amount = free.prefix(count).reduce(0) { $0 + $1.amount }
        } else {
            if count != 1 { return .refused(.noFreeShare) }
            if session.payee == payer { return .refused(.ownSession) }
            if let kind = closed(session) { return .refused(kind) }
            if let holder = holder(session), holder != payer { return .refused(.sessionLocked) }
        }
        let held = locksHeld(by: payer, excluding: sid)
        if held.count >= policy.maximumLocksPerPayer { return .refused(.lockLimitReached) }
        // The balance covers what this lock takes and every other lock the payer holds.
        if balances[payer] < held.amount + amount { return .refused(.insufficientFunds) }
        // Locking again renews nothing: a lock the payer holds keeps its end.
        var until = min(now + lockLifetime, session.expiresAt)
        let ownEnd =
            session.isSplit
            ? session.shares.filter { shareHolder($0) == payer }.map(\.until).min()
            : (holder(session) == payer ? session.lock?.until : nil)
        if let ownEnd { until = min(until, ownEnd) }
        if session.isSplit {
            for number in release { session.shares[number - 1].until = now }
            for number in take {
                session.shares[number - 1].lockedBy = payer
                session.shares[number - 1].until = until
            }
        } else {
            session.lock = (payer, until)
        }
        sessions[sid] = session
        lastLockedShares = take
        return .ok(amount)
    }

    /// The live locks `payer` holds on sessions other than `sid` and on shares of other live splits: each share
    /// counts as a lock of its own, as the stores count them.
    func locksHeld(by payer: Int, excluding sid: String) -> (count: Int, amount: Cents) {
        var count = 0
        var amount: Cents = 0
        for session in sessions.values where session.sid != sid {
            if session.isSplit {
                guard session.paidBy == nil, !session.cancelled, now < session.expiresAt else { continue }
                for share in session.shares where shareHolder(share) == payer {
                    count += 1
                    amount += share.amount
                }
            } else if holder(session) == payer {
                count += 1
                amount += session.amount
            }
        }
        return (count, amount)
    }

    /// The holder releases its lock; its last holder (or the payer of a paid session) is answered ok when no lock
    /// is left; another payer's live lock is left alone.
    mutating func unlock(_ sid: String, by payer: Int) -> Expected {
        var session = sessions[sid]!
        if session.isSplit { return unlockShares(sid, by: payer) }
        switch holder(session) {
        case payer?:
            session.lock = (payer, now)
            sessions[sid] = session
            return .ok(nil)
        case _?:
            return .refused(.sessionLocked)
        case nil:
            return session.lock?.payer == payer || session.paidBy == payer ? .ok(nil) : .refused(.forbidden)
        }
    }

    /// A send with `key`: the idempotency layer first, then the payment.
    mutating func send(_ sid: String, by payer: Int, key: String, tip: Cents = 0) -> Expected {
        let scoped = "\(payer)/\(key)"
        switch keys[scoped] {
        case .done(let first, let outcome):
            return first == sid ? outcome : .refused(.idempotencyKeyReused)
        case .inFlight(let first, let since):
            if first != sid { return .refused(.idempotencyKeyReused) }
            if now - since < inFlightTimeout { return .refused(.idempotencyInFlight) }
        case nil:
            break
        }
        let outcome = pay(sid, by: payer, tip: tip)
        // Refusals the payer can remedy (a fresh lock, another payer's lock lapsing) release the key instead.
        keys[scoped] = Self.isRecorded(outcome) ? .done(sid: sid, outcome: outcome) : nil
        return outcome
    }

    /// Whether an outcome is kept under its key: success and the refusals no retry can change.
    static func isRecorded(_ outcome: Expected) -> Bool {
        switch outcome {
        case .ok: true
        case .refused(let kind):
            [.sessionAlreadyPaid, .sessionCancelled, .sessionExpired, .ownSession, .insufficientFunds].contains(kind)
        }
    }

    /// A send whose server died after admitting the key and before paying: the key stays in flight.
    mutating func admitOnly(_ sid: String, by payer: Int, key: String) {
        keys["\(payer)/\(key)"] = .inFlight(sid: sid, since: now)
    }

    private mutating func pay(_ sid: String, by payer: Int, tip: Cents) -> Expected {
        lastPayment = nil
        let session = sessions[sid]!
        if session.isSplit { return payShares(sid, by: payer, tip: tip) }
        if session.payee == payer { return .refused(.ownSession) }
        if let kind = closed(session) { return .refused(kind) }
        switch holder(session) {
        case payer?: break
        case nil: return .refused(.lockRequired)
        case _?: return .refused(.sessionLocked)
        }
        return payWhole(sid, by: payer, tip: tip)
    }

    /// A payment of a session that is not split, checked as far as the tip and the funds.
    mutating func payWhole(_ sid: String, by payer: Int, tip: Cents) -> Expected {
        var session = sessions[sid]!
        if tip < 0 || tip > session.amount { return .refused(.invalidTip) }
        if balances[payer] < session.amount + tip { return .refused(.insufficientFunds) }
        balances[payer] -= session.amount + tip
        balances[session.payee] += session.amount + tip
        announce(.paymentSucceeded, session.payee, session.amount + tip)
        session.paidBy = payer
        session.tip = tip
        session.lock = nil
        sessions[sid] = session
        return .ok(balances[payer])
    }

    /// A cancel by `user`: a split with shares paid returns them at once, each payment while the payee's balance
    /// covers it (the rest wait for the sweep).
    mutating func cancel(_ sid: String, by user: Int) -> Expected {
        var session = sessions[sid]!
        if session.payee != user { return .refused(.forbidden) }
        if session.cancelled {
            if sharesPaid(session) > 0 { _ = returnPayments(sid) }
            return .ok(nil)
        }
        if let kind = closed(session) { return .refused(kind) }
        session.cancelled = true
        announce(.sessionCancelled, user, nil)
        sessions[sid] = session
        if sharesPaid(session) > 0 { _ = returnPayments(sid) }
        return .ok(nil)
    }

    /// The status `viewer` sees, or session-not-found when the session is not theirs to see.
    func view(_ sid: String, by viewer: Int) -> Result<SessionStatus, Problem> {
        let session = sessions[sid]!
        let payers = session.shares.map { share in
            share.payment.map { session.payments[$0].payer } ?? shareHolder(share)
        }
        guard ([session.payee, holder(session), session.paidBy] + payers).contains(viewer) else {
            return .failure(Problem(.sessionNotFound))
        }
        return .success(status(session))
    }
}

// MARK: Refunds

extension LedgerModel {
    /// A refund of `amount` by `user` under `key`: a replay of the same request, a refusal, or the money back to the
    /// payer; answers the session's refunded total. Refusals are not kept under the key.
    mutating func refund(
        _ sid: String,
        by user: Int,
        amount: Cents,
        paymentID: String? = nil,
        key: String
    ) -> Expected {
        let scoped = "\(user)/\(key)"
        if let earlier = refundKeys[scoped] {
            return earlier.sid == sid && earlier.amount == amount && earlier.paymentID == paymentID
                ? .ok(earlier.total) : .refused(.idempotencyKeyReused)
        }
        var session = sessions[sid]!
        if session.payee != user { return .refused(.forbidden) }
        guard var payer = session.paidBy else { return .refused(.sessionNotPaid) }
        var payment: Int?
        if session.isSplit {
            guard let paymentID else { return .refused(.badRequest) }
            guard let index = session.payments.firstIndex(where: { $0.id == paymentID }) else {
                return .refused(.notFound)
            }
            let paid = session.payments[index]
            if amount > paid.amount + paid.tip - paid.refunded { return .refused(.refundExceedsPayment) }
            payer = paid.payer
            payment = index
        } else if paymentID != nil {
            return .refused(.badRequest)
        }
        if session.refunded + amount > session.amount + paidTips(session) { return .refused(.refundExceedsPayment) }
        if balances[user] < amount { return .refused(.insufficientFunds) }
        balances[user] -= amount
        balances[payer] += amount
        announce(.refundSucceeded, user, amount)
        session.refunded += amount
        if let payment { session.payments[payment].refunded += amount }
        sessions[sid] = session
        refundKeys[scoped] = (sid, amount, paymentID, session.refunded)
        return .ok(session.refunded)
    }
}
