package import Foundation
package import GotchuCore

/// Times in the stores: milliseconds since 1970 on the store's clock.
package enum LedgerTime {
    package static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    package static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    package static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
}

extension LedgerUser {
    /// The domain of a stored address, for ``Counterparty/domain``; `nil` if it has no `@`.
    static func domain(ofEmail email: String) -> String? {
        guard let at = email.unicodeScalars.lastIndex(of: "@") else { return nil }
        let domain = String(email.unicodeScalars[email.unicodeScalars.index(after: at)...])
        return domain.isEmpty ? nil : domain
    }

    /// The e-mail address as stored (trimmed, lowercased) and the display name taken from it.
    static func normalize(email: String) throws(LedgerError) -> (email: String, displayName: String) {
        let normalized = email.trimmingCharacters(in: .whitespaces).lowercased()
        // Unicode scalars, not characters: "@" followed by a combining mark or an emoji modifier is one character.
        let scalars = normalized.unicodeScalars
        let parts = scalars.split(separator: "@", omittingEmptySubsequences: false)
        guard
            scalars.count <= 254, parts.count == 2, !parts[0].isEmpty, parts[1].contains("."),
            // White space as Unicode has it, plus the byte-order mark, which JSON Schema's \s counts too.
            !scalars.contains(where: { $0.properties.isWhitespace || $0 == "\u{FEFF}" })
        else {
            throw LedgerError(.invalidInput, detail: "email must look like name@example.com")
        }
        return (normalized, String(parts[0]))
    }
}

/// A session's status as stored (`payment_sessions.status`). Expiry is not stored: it is judged from `exp_at` at the
/// time of asking, as is the lapse of a lock.
package enum StoredSessionStatus: String, CaseIterable, Sendable {
    /// Made, not yet advertised (not written by this version).
    case created = "CREATED"
    /// Waiting for a payer.
    case advertising = "ADVERTISING"
    /// Locked by a payer, until `lock_exp_at`.
    case locked = "LOCKED"
    /// Paid.
    case paid = "PAID"
    /// Cancelled by the payee.
    case cancelled = "CANCELLED"

    /// The stored statuses of a session that may still be paid (unless it expired).
    package static let live: [StoredSessionStatus] = [.advertising, .locked]

    /// A status read from the database; a value no version writes is refused rather than guessed at.
    package init(stored: String) throws(LedgerError) {
        guard let status = Self(rawValue: stored) else {
            throw LedgerError(.inconsistent, detail: "a session has the unknown status \(stored)")
        }
        self = status
    }
}

/// Who owns a wallet (`wallet_accounts.kind`): a user, or the system (the funding account, which alone may go below
/// zero).
package enum WalletKind: String, Sendable, Hashable {
    /// A user's wallet, never below zero.
    case user = "USER"
    /// A system account.
    case system = "SYSTEM"
}

/// Where an idempotency key's request stands (`idempotency_keys.state`).
package enum IdempotencyState: String, Sendable {
    /// Admitted, not finished: no outcome yet.
    case inFlight = "IN_FLIGHT"
    /// Finished: the outcome is stored with the key.
    case done = "DONE"
}

/// A `payment_sessions` row and the rules read from it; both stores judge sessions with these same rules.
package struct SessionRow: Sendable, Hashable {
    /// The session id (`sid`).
    package var id: String
    /// The user the session's money goes to.
    package var payeeID: String
    /// The amount to pay, in cents, positive.
    package var amount: Cents
    /// The status as stored; ``status(now:)`` adds expiry and lock lapses.
    package var storedStatus: StoredSessionStatus
    /// When it stops taking payments: milliseconds since 1970 on the store's clock.
    package var expiresAt: Int64
    /// The payer that holds or last held its lock; kept after an unlock, so a retried unlock is told
    /// apart from a stranger's. `nil` if it was never locked.
    package var lockedBy: String?
    /// When the lock lapses or lapsed, in milliseconds since 1970 on the store's clock (an unlock sets it to the
    /// time of the unlock); `nil` if it was never locked.
    package var lockExpiresAt: Int64?
    /// The payer that paid it; `nil` until paid.
    package var paidBy: String?
    /// When it was paid, in milliseconds since 1970 on the store's clock; `nil` until paid.
    package var paidAt: Int64?
    /// Into how many shares it is split: 1 for one payer, who locks and pays the session itself; more, and each
    /// share is a ``ShareRow`` locked and paid on its own (and the session is never stored locked).
    package var shares: Int
    /// How many shares are paid (1 once a session of one share is paid).
    package var sharesPaid: Int
    /// What the paid shares add up to, without tips, in cents.
    package var paidCents: Cents
    /// The tips paid on top of the shares, in cents.
    package var tip: Cents
    /// When every payment of a cancelled or expired split was returned; `nil` until then.
    package var refundsSweptAt: Int64?
    /// The tips its terminal suggests to payers; ``TipPrompt/none`` when it asks for none.
    package var tipPrompt: TipPrompt
    /// The payee's order reference (``OrderReference``); `nil` when it gave none.
    package var reference: String?

    /// A row as read from the database (or about to be inserted: no lock, unpaid).
    package init(
        id: String,
        payeeID: String,
        amount: Cents,
        storedStatus: StoredSessionStatus,
        expiresAt: Int64,
        lockedBy: String? = nil,
        lockExpiresAt: Int64? = nil,
        paidBy: String? = nil,
        paidAt: Int64? = nil,
        shares: Int = 1,
        sharesPaid: Int = 0,
        paidCents: Cents = 0,
        tip: Cents = 0,
        refundsSweptAt: Int64? = nil,
        tipPrompt: TipPrompt = .none,
        reference: String? = nil
    ) {
        self.reference = reference
        self.id = id
        self.payeeID = payeeID
        self.amount = amount
        self.storedStatus = storedStatus
        self.expiresAt = expiresAt
        self.lockedBy = lockedBy
        self.lockExpiresAt = lockExpiresAt
        self.paidBy = paidBy
        self.paidAt = paidAt
        self.shares = shares
        self.sharesPaid = sharesPaid
        self.paidCents = paidCents
        self.tip = tip
        self.refundsSweptAt = refundsSweptAt
        self.tipPrompt = tipPrompt
    }

    /// Whether it is split into several shares.
    var isSplit: Bool { shares > 1 }

    /// The status at `now`: expiry and lock lapses are computed, not stored; a split with shares paid, live, is
    /// partially paid.
    func status(now: Int64) -> SessionStatus {
        switch storedStatus {
        case .paid: return .paid
        case .cancelled: return .cancelled
        case .created, .advertising, .locked:
            if now >= expiresAt { return .expired }
            if sharesPaid > 0 { return .partiallyPaid }
            return liveLockHolder(now: now) == nil ? .advertising : .locked
        }
    }

    /// Who holds a lock that has not lapsed, if anyone.
    func liveLockHolder(now: Int64) -> String? {
        guard storedStatus == .locked, let lockedBy, let lockExpiresAt, now < lockExpiresAt, now < expiresAt else {
            return nil
        }
        return lockedBy
    }

    /// Throws the matching problem unless the session can still be paid.
    func requireLive(now: Int64) throws(LedgerError) {
        switch status(now: now) {
        case .paid: throw LedgerError(.sessionAlreadyPaid, detail: "this session has already been paid")
        case .cancelled: throw LedgerError(.sessionCancelled, detail: "the payee cancelled this session")
        case .expired: throw LedgerError(.sessionExpired, detail: "this session has expired; ask for a new one")
        case .created, .advertising, .locked, .partiallyPaid: return
        }
    }

    /// The refusal of a payment by `payerID` at `now`, if any: the checks and their order are the same in every
    /// store.
    func requirePayable(by payerID: String, now: Int64) throws(LedgerError) {
        guard payeeID != payerID else { throw LedgerError(.ownSession, detail: "you cannot pay your own session") }
        if status(now: now) == .paid {
            throw LedgerError(.sessionAlreadyPaid, detail: "this session has already been paid")
        }
        try requireLive(now: now)
        switch liveLockHolder(now: now) {
        case payerID?: break
        case nil: throw LedgerError(.lockRequired, detail: "lock the session first (or again: your lock lapsed)")
        case _?: throw LedgerError(.sessionLocked, detail: "another payer holds this session")
        }
    }

    /// Whether `payerID` may release the session's lock at `now`: `true` when it holds a live lock (the caller then
    /// releases it), `false` when no lock is left to release and `payerID` was its last holder or paid the session,
    /// so a retried unlock answers ok without writing. Anyone else is refused; a live lock of another payer is
    /// left alone.
    func requireUnlockable(by payerID: String, now: Int64) throws(LedgerError) -> Bool {
        switch liveLockHolder(now: now) {
        case payerID?:
            return true
        case _?:
            throw LedgerError(.sessionLocked, detail: "another payer holds this session")
        case nil:
            guard lockedBy == payerID || paidBy == payerID else {
                throw LedgerError(.forbidden, detail: "only the payer that locked this session can unlock it")
            }
            return false
        }
    }

    /// The refusal of a lock by `payerID` at `now` (before the funds check), if any.
    func requireLockable(by payerID: String, now: Int64) throws(LedgerError) {
        guard payeeID != payerID else { throw LedgerError(.ownSession, detail: "you cannot lock your own session") }
        try requireLive(now: now)
        if let holder = liveLockHolder(now: now), holder != payerID {
            throw LedgerError(.sessionLocked, detail: "another payer holds this session; try again shortly")
        }
    }

    /// The session as its viewers see it at `now`, before its receipt and refunds are read.
    func view(now: Int64) -> SessionView {
        var view = SessionView(
            sid: id,
            status: status(now: now),
            amount: amount,
            expiresAt: LedgerTime.date(expiresAt),
            paidAt: paidAt.map(LedgerTime.date)
        )
        view.shares = shares
        view.sharesPaid = sharesPaid
        view.paid = paidCents
        view.tip = tip
        view.tipPrompt = tipPrompt
        view.reference = reference
        return view
    }
}

/// The session a payee made earlier under an `Idempotency-Key` of `POST /sessions/create` (its `create_key`), with
/// its current EID (the newest, once rotated).
package struct KeyedSession: Sendable, Hashable {
    /// The session id.
    package var sid: String
    /// The session's current EID, as stored (hex).
    package var eid: String
    /// The amount the session was created for, in cents.
    package var amount: Cents
    /// When the session expires: milliseconds since 1970 on the store's clock.
    package var expiresAt: Int64
    /// Into how many shares it was split.
    package var shares: Int
    /// The tips it suggests to payers.
    package var tipPrompt: TipPrompt
    /// Its order reference; `nil` when it has none.
    package var reference: String?

    /// A row as read from the database.
    package init(
        sid: String,
        eid: String,
        amount: Cents,
        expiresAt: Int64,
        shares: Int = 1,
        tipPrompt: TipPrompt = .none,
        reference: String? = nil
    ) {
        self.reference = reference
        self.shares = shares
        self.tipPrompt = tipPrompt
        self.sid = sid
        self.eid = eid
        self.amount = amount
        self.expiresAt = expiresAt
    }

    /// The first answer again for a retry of the same request; the key names one charge, so another amount, split,
    /// suggestion of tips or reference is refused.
    func replay(
        _ requested: SessionSplit,
        tipPrompt requestedTips: TipPrompt,
        reference requestedReference: String?,
        payee: Counterparty
    ) throws(LedgerError) -> NewSession {
        guard reference == requestedReference else {
            throw LedgerError(
                .idempotencyKeyReused,
                detail: "this Idempotency-Key was first used for a session "
                    + (reference.map { "with the reference " + DisplayText.quoted($0) } ?? "with no reference")
                    + "; use a new key"
            )
        }
        guard amount == requested.amount, shares == requested.shares, tipPrompt == requestedTips else {
            throw LedgerError(
                .idempotencyKeyReused,
                detail: "this Idempotency-Key was first used for a session of \(amount) cents"
                    + (shares > 1 ? " in \(shares) shares" : "")
                    + (tipPrompt == .none
                        ? " asking for no tip"
                        : " suggesting tips of " + tipPrompt.percents.map { "\($0)%" }.joined(separator: ", "))
                    + "; use a new key"
            )
        }
        guard let eid = EID(rawValue: eid) else {
            throw LedgerError(.inconsistent, detail: "session \(sid) has a malformed EID")
        }
        return NewSession(
            sid: sid,
            eid: eid,
            expiresAt: LedgerTime.date(expiresAt),
            shareCents: requested.allCents,
            tipPrompt: tipPrompt,
            reference: reference,
            payee: payee
        )
    }
}

/// An `idempotency_keys` row.
package struct IdempotencyRecord: Sendable, Hashable {
    /// The session the key's payment is for; a key reused for another session is refused.
    package var sid: String
    /// When the key was admitted or last taken up again, in milliseconds since 1970 on the store's
    /// clock: an in-flight key older than ``LedgerPolicy/inFlightTimeout`` is abandoned.
    package var updatedAt: Int64
    /// The payment's outcome, replayed to a retry; `nil` while in flight.
    package var outcome: SendOutcome?

    /// A row as read from the database.
    package init(
        sid: String,
        state: String,
        updatedAt: Int64,
        balance: Int64?,
        refusalKind: String?,
        refusalDetail: String?
    ) {
        self.sid = sid
        self.updatedAt = updatedAt
        if IdempotencyState(rawValue: state) == .done {
            if let balance {
                self.outcome = .paid(newBalanceCents: balance)
            } else {
                self.outcome = .refused(Self.refusal(kind: refusalKind, detail: refusalDetail))
            }
        }
    }

    /// A stored refusal read back. The kind is stored by its raw value (``LedgerError/Kind``); one this version does
    /// not know was written by a newer one, and is replayed as what it says rather than as a success.
    static func refusal(kind: String?, detail: String?) -> LedgerError {
        guard let kind, let known = LedgerError.Kind(rawValue: kind) else {
            return LedgerError(.inconsistent, detail: detail ?? "a refusal of an unknown kind (\(kind ?? "none"))")
        }
        return LedgerError(known, detail: detail ?? "")
    }

    /// The columns an outcome is stored in: the new balance, or the refusal's kind and detail.
    package static func columns(
        for outcome: SendOutcome
    ) -> (balance: Int64?, refusalKind: String?, refusalDetail: String?) {
        switch outcome {
        case .paid(let balance): return (balance, nil, nil)
        case .refused(let error): return (nil, error.kind.rawValue, error.detail)
        }
    }

    /// What ``LedgerEngine/beginSend(sid:payerID:idempotencyKey:)`` decides for an existing key at `now`; `nil`
    /// means the key was abandoned and the request may run again (the caller then refreshes `updated_at`).
    func admission(sid requested: String, now: Int64, inFlightTimeout: Int64) throws(LedgerError) -> SendAdmission? {
        guard sid == requested else {
            throw LedgerError(
                .idempotencyKeyReused,
                detail: "this Idempotency-Key was first used for another session; use a new key"
            )
        }
        if let outcome { return .replay(outcome) }
        guard now - updatedAt >= inFlightTimeout else {
            throw LedgerError(.idempotencyInFlight, detail: "the first request with this key is still running")
        }
        return nil
    }
}
