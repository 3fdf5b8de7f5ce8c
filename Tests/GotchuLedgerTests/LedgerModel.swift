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
        var refunded: Cents = 0
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
    var refundKeys: [String: (sid: String, amount: Cents, total: Cents)] = [:]  // "user/key"

    init(users: Int, policy: LedgerPolicy, now: Int64) {
        self.policy = policy
        self.now = now
        self.balances = Array(repeating: 0, count: users)
    }

    private var lockLifetime: Int64 { milliseconds(policy.lockLifetime) }
    private var inFlightTimeout: Int64 { milliseconds(policy.inFlightTimeout) }

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
        return holder(session) == nil ? .advertising : .locked
    }

    mutating func fund(_ user: Int, _ amount: Cents) -> Expected {
        balances[user] += amount
        return .ok(balances[user])
    }

    mutating func created(_ session: NewSession, payee: Int, amount: Cents) {
        sessions[session.sid] = Session(
            sid: session.sid,
            eid: session.eid,
            payee: payee,
            amount: amount,
            expiresAt: now + milliseconds(policy.sessionLifetime)
        )
    }

    func resolve(_ sid: String) -> Expected {
        let session = sessions[sid]!
        if let kind = closed(session) { return .refused(kind) }
        return .ok(session.amount)
    }

    mutating func lock(_ sid: String, by payer: Int) -> Expected {
        var session = sessions[sid]!
        if session.payee == payer { return .refused(.ownSession) }
        if let kind = closed(session) { return .refused(kind) }
        if let holder = holder(session), holder != payer { return .refused(.sessionLocked) }
        let held = sessions.values.filter { $0.sid != sid && holder($0) == payer }
        if held.count >= policy.maximumLocksPerPayer { return .refused(.lockLimitReached) }
        // The balance covers this session and every other one the payer holds locked.
        let claimed = held.reduce(0) { $0 + $1.amount }
        if balances[payer] < claimed + session.amount { return .refused(.insufficientFunds) }
        session.lock = (payer, min(now + lockLifetime, session.expiresAt))
        sessions[sid] = session
        return .ok(nil)
    }

    /// The holder releases its lock; its last holder (or the payer of a paid session) is answered ok when no lock
    /// is left; another payer's live lock is left alone.
    mutating func unlock(_ sid: String, by payer: Int) -> Expected {
        var session = sessions[sid]!
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
    mutating func send(_ sid: String, by payer: Int, key: String) -> Expected {
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
        let outcome = pay(sid, by: payer)
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

    private mutating func pay(_ sid: String, by payer: Int) -> Expected {
        var session = sessions[sid]!
        if session.payee == payer { return .refused(.ownSession) }
        if let kind = closed(session) { return .refused(kind) }
        switch holder(session) {
        case payer?: break
        case nil: return .refused(.lockRequired)
        case _?: return .refused(.sessionLocked)
        }
        if balances[payer] < session.amount { return .refused(.insufficientFunds) }
        balances[payer] -= session.amount
        balances[session.payee] += session.amount
        session.paidBy = payer
        session.lock = nil
        sessions[sid] = session
        return .ok(balances[payer])
    }

    mutating func cancel(_ sid: String, by user: Int) -> Expected {
        var session = sessions[sid]!
        if session.payee != user { return .refused(.forbidden) }
        if session.cancelled { return .ok(nil) }
        if let kind = closed(session) { return .refused(kind) }
        session.cancelled = true
        sessions[sid] = session
        return .ok(nil)
    }

    /// The status `viewer` sees, or session-not-found when the session is not theirs to see.
    func view(_ sid: String, by viewer: Int) -> Result<SessionStatus, Problem> {
        let session = sessions[sid]!
        guard [session.payee, holder(session), session.paidBy].contains(viewer) else {
            return .failure(Problem(.sessionNotFound))
        }
        return .success(status(session))
    }
}

// MARK: Refunds

extension LedgerModel {
    /// A refund of `amount` by `user` under `key`: a replay of the same request, a refusal, or the money back to the
    /// payer; answers the session's refunded total. Refusals are not kept under the key.
    mutating func refund(_ sid: String, by user: Int, amount: Cents, key: String) -> Expected {
        let scoped = "\(user)/\(key)"
        if let earlier = refundKeys[scoped] {
            return earlier.sid == sid && earlier.amount == amount ? .ok(earlier.total) : .refused(.idempotencyKeyReused)
        }
        var session = sessions[sid]!
        if session.payee != user { return .refused(.forbidden) }
        guard let payer = session.paidBy else { return .refused(.sessionNotPaid) }
        if session.refunded + amount > session.amount { return .refused(.refundExceedsPayment) }
        if balances[user] < amount { return .refused(.insufficientFunds) }
        balances[user] -= amount
        balances[payer] += amount
        session.refunded += amount
        sessions[sid] = session
        refundKeys[scoped] = (sid, amount, session.refunded)
        return .ok(session.refunded)
    }
}
