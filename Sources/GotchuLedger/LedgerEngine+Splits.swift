import GotchuCore
import GotchuReceipts

// Group splits: the rules that only a session of several shares has. Lock, send, cancel and refund call these from
// their one transaction each, so a split and a single payer share every other check, lock order and write.

extension LedgerEngine {
    /// The shares `payerID` takes of split `session` (locked in this transaction) when it asks for `count`: the
    /// first free ones, its own live locks first among equals; the rest of its live locks are released. `heldUntil`
    /// is when the first of the live locks it holds already ends, if it holds any.
    static func shareLock(
        _ session: SessionRow,
        count: Int,
        payerID: String,
        _ transaction: Backend.Transaction
    ) async throws -> (take: [ShareRow], release: [Int], heldUntil: Int64?) {
        guard payerID != session.payeeID else {
            throw LedgerError(.ownSession, detail: "you cannot lock your own session")
        }
        try session.requireLive(now: transaction.now)
        let shares = try await transaction.shares(sessionID: session.id)
        let free = ShareRow.free(shares, for: payerID, now: transaction.now)
        guard !free.isEmpty else {
            throw LedgerError(
                .noFreeShare,
                detail: "every unpaid share of this session is locked by other payers; try again shortly"
            )
        }
        guard count <= free.count else {
            throw LedgerError(
                .noFreeShare,
                detail: "only \(free.count) of the \(session.shares) shares \(free.count == 1 ? "is" : "are") free, "
                    + "not \(count)"
            )
        }
        let take = Array(free.prefix(count))
        let release = free.dropFirst(count).filter { $0.liveLockHolder(now: transaction.now) == payerID }
        let heldUntil = free.filter { $0.liveLockHolder(now: transaction.now) == payerID }
            .compactMap(\.lockExpiresAt).min()
        return (take, release.map(\.number), heldUntil)
    }

    /// The shares `payerID` pays of split `session` (locked in this transaction): those it holds live locks on.
    static func sharesToPay(
        _ session: SessionRow,
        payerID: String,
        _ transaction: Backend.Transaction
    ) async throws -> [ShareRow] {
        guard payerID != session.payeeID else {
            throw LedgerError(.ownSession, detail: "you cannot pay your own session")
        }
        if session.storedStatus == .paid {
            throw LedgerError(.sessionAlreadyPaid, detail: "every share of this session has been paid")
        }
        try session.requireLive(now: transaction.now)
        let mine = try await transaction.shares(sessionID: session.id).filter {
            $0.liveLockHolder(now: transaction.now) == payerID
        }
        guard !mine.isEmpty else {
            throw LedgerError(.lockRequired, detail: "lock a share first (or again: your lock lapsed)")
        }
        return mine
    }

    /// Writes the payment `paymentID` of `shares` by `payerID`, with `tip` on its first share, and the session's
    /// new totals: paid once its last share is.
    static func recordSharePayment(
        _ session: SessionRow,
        shares: [ShareRow],
        paymentID: String,
        payerID: String,
        tip: Cents,
        _ transaction: Backend.Transaction
    ) async throws {
        let numbers = shares.map(\.number)
        try await transaction.update(
            shares: [numbers[0]],
            sessionID: session.id,
            .paid(paymentID: paymentID, payerID: payerID, tip: tip)
        )
        if numbers.count > 1 {
            try await transaction.update(
                shares: Array(numbers.dropFirst()),
                sessionID: session.id,
                .paid(paymentID: paymentID, payerID: payerID, tip: 0)
            )
        }
        try await transaction.update(
            session: session.id,
            .sharesPaid(
                count: numbers.count,
                amount: shares.reduce(0) { $0 + $1.amount },
                tip: tip,
                payerID: payerID,
                complete: session.sharesPaid + numbers.count == session.shares
            )
        )
    }

    /// Returns every payment of split session `sid` that was cancelled or expired with shares paid, one transaction
    /// per payment (each with its refund receipt), then marks the session swept; returns how many it refunded.
    ///
    /// Each refund is a refund of the payee's under the key `auto-refund:PAYMENT`, so however many servers sweep
    /// at once, and however often one is killed mid-sweep and restarted, each payment is returned once: the second
    /// finds the first's row under the session's lock. A payment refunded by hand in part is returned the rest.
    package func returnSharePayments(sid: String) async throws -> Int {
        var refunded = 0
        while true {
            let returned: Bool = try await signingSession(sid) { transaction, loaded in
                let session = try await Self.session(sid, forUpdate: true, transaction)
                let status = session.status(now: transaction.now)
                guard session.refundsSweptAt == nil, session.sharesPaid > 0,
                    status == .cancelled || status == .expired
                else { return false }
                let shares = try await transaction.shares(sessionID: sid)
                for payment in SharePaymentRecord.grouping(shares) {
                    let key = Self.automaticRefundKey(paymentID: payment.id)
                    if try await transaction.refund(requestedBy: session.payeeID, key: key) != nil { continue }
                    let owed =
                        payment.amount + payment.tip - (try await transaction.refundedCents(paymentID: payment.id))
                    guard owed > 0 else { continue }
                    _ = try await refundTransfer(
                        session: session,
                        payerID: payment.payerID,
                        paymentID: payment.id,
                        amountCents: owed,
                        idempotencyKey: key,
                        loaded: loaded,
                        transaction
                    )
                    return true
                }
                try await transaction.update(session: sid, .refundsSwept)
                return false
            }
            guard returned else { return refunded }
            webhookOutbox.notify()
            refunded += 1
        }
    }

    /// Returns the payments of every split session that is cancelled or expired and still owed its refunds, up to
    /// `limit` sessions; returns how many payments it refunded. Every server runs it every second.
    ///
    /// A session that cannot be returned now (its payee's balance is short) does not hold back the others: each is
    /// tried, and the first failure is thrown once all were.
    package func returnDueSharePayments(limit: Int = 100) async throws -> Int {
        let now = try await backend.now()
        var refunded = 0
        var failure: (any Error)?
        for sid in try await backend.sessionsOwedRefunds(now: now, limit: limit) {
            do {
                refunded += try await returnSharePayments(sid: sid)
            } catch {
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
        return refunded
    }

    /// The idempotency key of the automatic refund of payment `paymentID`.
    static func automaticRefundKey(paymentID: String) -> String { "auto-refund:" + paymentID }
}
