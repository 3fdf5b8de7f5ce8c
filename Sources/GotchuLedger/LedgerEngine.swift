import Foundation
package import GotchuCore
package import GotchuReceipts
import Synchronization

/// The ledger's operations, each written once: what is read, what is checked in which order, and what is written,
/// over a ``LedgerBackend`` that supplies the database primitives. ``SQLiteLedgerStore`` and
/// ``PostgresLedgerStore`` are this engine over their backends.
///
/// Every mutation is one backend transaction; expiry and lock lapses are judged by the transaction's time. Rows a
/// decision depends on are read `forUpdate` in one global order (idempotency key, session, wallets by id), so on a
/// database with row locks each check holds at commit and no two transactions wait on each other in a cycle.
package struct LedgerEngine<Backend: LedgerBackend>: LedgerStore {
    package let policy: LedgerPolicy
    /// The database primitives.
    package let backend: Backend
    /// Where the changes this engine commits are published, for the event streams of this server.
    package let changes: SessionChanges
    /// The signing key last loaded, so a payment reads no key.
    private let signerCache = SignerCache()
    /// Payment receipts by session id, as committed. A stored receipt never changes, so the copy answers for the
    /// row: the payment's answer and every later status of the session skip reading and decoding it.
    private let paymentReceipts = BoundedCache<String, Receipt>(capacity: 1024)
    /// The split payments this server's sends made, by payer and idempotency key, as committed: the answer to a
    /// send (and to its replays) names its payment and carries its receipt.
    private let sharePayments = BoundedCache<String, String>(capacity: 1024)
    /// Told of every transaction, where the server keeps metrics.
    private let observerBox = ObserverBox()
    /// Woken once a transaction that wrote webhook events commits, for this server's delivery workers.
    package let webhookOutbox = WebhookOutboxSignal()

    /// The engine over `backend`, enforcing `policy`.
    package init(backend: Backend, policy: LedgerPolicy = LedgerPolicy()) {
        self.backend = backend
        self.policy = policy
        self.changes = SessionChanges()
    }

    /// Tells `observer` how long each transaction takes, by the operation that ran it. Copies of this engine share
    /// it.
    package func observe(_ observer: any LedgerStoreObserver) {
        observerBox.value.withLock { $0 = observer }
    }

    package func poolUsage() async -> LedgerPoolUsage? { await backend.poolUsage() }

    /// Runs `body` in one backend transaction, timed for the observer under the name of the operation calling it.
    func measuredTransaction<T: Sendable>(
        operation: String = #function,
        _ body: (Backend.Transaction) async throws -> T
    ) async throws -> T {
        guard let observer = observerBox.value.withLock({ $0 }) else { return try await backend.transaction(body) }
        // `#function` is `login(email:)`: the name alone is the label.
        let name = String(operation.prefix { $0 != "(" })
        let start = ContinuousClock.now
        do {
            let result = try await backend.transaction(body)
            observer.transaction(operation: name, duration: ContinuousClock.now - start, committed: true)
            return result
        } catch {
            observer.transaction(operation: name, duration: ContinuousClock.now - start, committed: false)
            throw error
        }
    }

    package func relayChanges() async throws {
        try await backend.relayChanges(to: changes)
    }

    package func migrate() async throws {
        try await backend.migrate()
        try await fillEmailSkeletons()
        try await chainUnchainedEntries()
        try await measuredTransaction { transaction in _ = try await Self.currentSigner(transaction) }
    }

    /// Chains the entries written before the chain existed, oldest first, in batches; the chain of a ledger upgraded
    /// to it starts from the upgrade's snapshot of those rows.
    private func chainUnchainedEntries() async throws {
        while true {
            let more = try await measuredTransaction { transaction in
                var head = try await transaction.chainHeadForUpdate()
                let entries = try await transaction.unchainedEntries(limit: 1_000)
                guard !entries.isEmpty else { return false }
                var hashes: [(seq: Int64, hash: String)] = []
                for entry in entries {
                    head.hash = LedgerChain.hash(previous: head.hash, entry: entry)
                    head.count += 1
                    hashes.append((entry.seq, head.hash))
                }
                try await transaction.setHashes(hashes)
                try await transaction.setChainHead(head)
                return true
            }
            if !more { return }
        }
    }

    // MARK: Users and wallets

    package func login(email: String) async throws -> LedgerUser {
        let (normalized, displayName) = try LedgerUser.normalize(email: email)
        return try await measuredTransaction { transaction in
            // Two first logins with one address race on the unique e-mail: the loser reads the winner's row.
            for _ in 0..<2 {
                if let user = try await transaction.user(email: normalized) {
                    guard !user.disabled else { throw Self.accountDisabled }
                    return user
                }
                try Self.checkNewAddress(normalized)
                let user = LedgerUser(id: Self.newID(), displayName: displayName)
                guard try await transaction.insert(user: user, email: normalized) else {
                    // Not the address itself (the next turn reads that one): another account's looks the same.
                    guard try await transaction.user(email: normalized) != nil else { throw Self.lookAlike }
                    continue
                }
                try await transaction.insertWallet(id: Self.newID(), userID: user.id)
                return user
            }
            throw LedgerError(.unavailable, detail: "could not create the user; try again")
        }
    }

    package func user(id: String) async throws -> LedgerUser? {
        try await backend.user(id: id)
    }

    package func wallet(userID: String, recentLimit: Int) async throws -> Wallet {
        guard let wallet = try await backend.wallet(userID: userID, recentLimit: recentLimit) else {
            throw Self.unknownUser
        }
        return wallet
    }

    package func fund(userID: String, amountCents: Cents) async throws -> Cents {
        try policy.validate(amount: amountCents)
        let balance = try await measuredTransaction { transaction in
            guard try await transaction.emailConfirmed(userID: userID) != false else { throw Self.emailUnconfirmed }
            return try await Self.devFund(userID: userID, amount: amountCents, transaction)
        }
        webhookOutbox.notify()
        return balance
    }

    /// A development funding of `userID` from the system funding account, with its `deposit.received` event, in the
    /// caller's transaction; returns the user's new balance.
    private static func devFund(
        userID: String,
        amount: Cents,
        _ transaction: Backend.Transaction
    ) async throws -> Cents {
        let reference = newID()
        let result = try await transfer(
            transaction,
            from: .account(LedgerAccounts.fundingWalletID),
            to: .user(userID),
            amount: amount,
            kinds: ("DEV_FUND_OUT", "DEV_FUND"),
            reference: ("funding", reference)
        )
        try await recordWebhookEvent(
            .depositReceived,
            userID: userID,
            depositID: reference,
            transfer: eventTransfer(result.entries),
            transaction
        )
        return result.to
    }

    /// Credits the user `count` times from the system funding account, each a transfer of its own with its own
    /// chained entries, all in one transaction: a large ledger for measuring `ledger verify`, written the way
    /// ``fund(userID:amountCents:)`` writes it, without a transaction per transfer.
    package func fund(userID: String, amountCents: Cents, times count: Int) async throws {
        try policy.validate(amount: amountCents)
        try await backend.transaction { transaction in
            for _ in 0..<count {
                _ = try await Self.devFund(userID: userID, amount: amountCents, transaction)
            }
        }
    }

    // MARK: Sessions

    package func createSession(
        payeeID: String,
        amountCents: Cents,
        shares: Int,
        tipPrompt: TipPrompt,
        reference: String?,
        idempotencyKey: String?
    ) async throws -> (session: NewSession, replayed: Bool) {
        try await createSession(
            id: Self.newID(),
            payeeID: payeeID,
            amountCents: amountCents,
            shares: shares,
            tipPrompt: tipPrompt,
            reference: reference,
            idempotencyKey: idempotencyKey
        )
    }

    /// ``createSession(payeeID:amountCents:shares:tipPrompt:reference:idempotencyKey:)`` with the session's id given:
    /// a charge a terminal signed names its session itself (``TerminalCharge/sessionID``).
    func createSession(
        id: String,
        payeeID: String,
        amountCents: Cents,
        shares: Int,
        tipPrompt: TipPrompt,
        reference: String?,
        idempotencyKey: String?
    ) async throws -> (session: NewSession, replayed: Bool) {
        try policy.validate(amount: amountCents)
        let reference = try reference.map(OperatorText.orderReference)
        let split = try SessionSplit(amount: amountCents, shares: shares)
        let lifetime = LedgerTime.milliseconds(policy.sessionLifetime)
        return try await measuredTransaction { transaction in
            // The payee's row in place of its wallet's (every user has one wallet): the same one read, with whether
            // its address was proved, without which it may not be paid, and how payers are shown it.
            guard let (confirmed, payeeRow) = try await transaction.payee(userID: payeeID) else {
                throw Self.unknownUser
            }
            guard confirmed else { throw Self.emailUnconfirmed }
            let payee = Counterparty(user: payeeRow)
            if let idempotencyKey,
                let earlier = try await transaction.keyedSession(payeeID: payeeID, key: idempotencyKey)
            {
                return (try earlier.replay(split, tipPrompt: tipPrompt, reference: reference, payee: payee), true)
            }
            let session = SessionRow(
                id: id,
                payeeID: payeeID,
                amount: amountCents,
                storedStatus: .advertising,
                expiresAt: transaction.now + lifetime,
                shares: split.shares,
                tipPrompt: tipPrompt,
                reference: reference
            )
            let eid = try await Self.allocateEID(transaction)
            // A concurrent create with the same key waits on the unique key until the other commits (then inserts
            // nothing) or rolls back (then inserts). Nothing after this takes another lock, so the wait cannot close
            // a cycle.
            guard try await transaction.insert(session: session, createKey: idempotencyKey) else {
                // The winner's committed row is visible to the next statement.
                guard let idempotencyKey,
                    let earlier = try await transaction.keyedSession(payeeID: payeeID, key: idempotencyKey)
                else {
                    throw LedgerError(.unavailable, detail: "could not create the session; try again")
                }
                return (try earlier.replay(split, tipPrompt: tipPrompt, reference: reference, payee: payee), true)
            }
            if split.shares > 1 {
                try await transaction.insert(
                    shares: split.allCents.enumerated().map { index, cents in
                        ShareRow(sessionID: session.id, number: index + 1, amount: cents)
                    }
                )
            }
            try await transaction.insert(eid: eid, sessionID: session.id)
            let created = NewSession(
                sid: session.id,
                eid: eid,
                expiresAt: LedgerTime.date(session.expiresAt),
                shareCents: split.allCents,
                tipPrompt: tipPrompt,
                reference: reference,
                payee: payee
            )
            return (created, false)
        }
    }

    /// Draws an EID no session was ever given. 40 random bits make a collision rare even over every EID handed out;
    /// retry rather than give one twice, so nothing heard on the air links a new session to an old one.
    private static func allocateEID(_ transaction: Backend.Transaction) async throws -> EID {
        for _ in 0..<16 {
            let eid = EID.random()
            // Two servers drawing the same EID at once: the lock makes the second see the first's row.
            try await transaction.lockEID(eid)
            if try await transaction.isAllocated(eid: eid) { continue }
            return eid
        }
        throw LedgerError(.unavailable, detail: "could not allocate a unique EID; try again")
    }

    package func resolve(eid: EID) async throws -> ResolvedSession {
        guard let found = try await backend.session(eid: eid) else {
            throw LedgerError(.sessionNotFound, detail: "no session advertises EID \(eid)")
        }
        let now = found.readAt
        if let retiredAt = found.retiredAt, now >= retiredAt + LedgerTime.milliseconds(policy.eidGrace) {
            throw LedgerError(.eidRetired, detail: "EID \(eid) was replaced by a newer one; scan again")
        }
        let session = found.session
        try session.requireLive(now: now)
        var next = session.amount
        if session.isSplit {
            // The share a payer locking now would get: the first free one (the first unpaid while all are held).
            let unpaid = try await backend.shares(sessionID: session.id).filter { $0.paymentID == nil }
            next = (unpaid.first { $0.liveLockHolder(now: now) == nil } ?? unpaid.first)?.amount ?? 0
        }
        return ResolvedSession(
            sid: session.id,
            amount: session.amount,
            payee: Counterparty(user: found.payee),
            shares: session.shares,
            sharesPaid: session.sharesPaid,
            shareCents: next,
            remaining: session.amount - session.paidCents,
            tipPrompt: session.tipPrompt,
            reference: session.reference
        )
    }

    package func rotateEID(sid: String, payeeID: String) async throws -> EIDRotation {
        let grace = LedgerTime.milliseconds(policy.eidGrace)
        let maximum = policy.maximumEIDsPerSession
        return try await changingSession(sid, .eidRotated) { transaction in
            // The session first, then the EID locks: the one order every transaction takes them in.
            let session = try await Self.session(sid, forUpdate: true, transaction)
            guard session.payeeID == payeeID else {
                throw LedgerError(.forbidden, detail: "only the payee can rotate a session's EID")
            }
            try session.requireLive(now: transaction.now)
            let eids = try await transaction.eids(sessionID: sid)
            guard eids.count < maximum else {
                throw LedgerError(
                    .eidLimitReached,
                    detail: "this session has had \(eids.count) EIDs, the most one session may have"
                )
            }
            let eid = try await Self.allocateEID(transaction)
            try await transaction.retireEIDs(sessionID: sid)
            try await transaction.insert(eid: eid, sessionID: sid)
            return EIDRotation(
                sid: sid,
                eid: eid,
                retired: eids.filter { $0.retiredAt == nil }.compactMap { EID(rawValue: $0.eid) },
                retiredResolveUntil: LedgerTime.date(transaction.now + grace),
                expiresAt: LedgerTime.date(session.expiresAt)
            )
        }
    }

    package func lock(sid: String, payerID: String, shares count: Int) async throws -> LockedShares {
        let lockLifetime = LedgerTime.milliseconds(policy.lockLifetime)
        let maximumLocks = policy.maximumLocksPerPayer
        guard (1...SessionSplit.maximumShares).contains(count) else {
            throw LedgerError(
                .invalidShares,
                detail: "shares must be a whole number from 1 to \(SessionSplit.maximumShares), got \(count)"
            )
        }
        return try await changingSession(sid) { transaction in
            try await transaction.lockPayer(payerID)
            let session = try await Self.session(sid, forUpdate: true, transaction)
            var taken = LockedShares(amount: session.amount, shareNumbers: [1])
            var release: [Int] = []
            // When the lock the payer already holds on this session ends, if it holds one.
            var held: Int64?
            if session.isSplit {
                let plan = try await Self.shareLock(session, count: count, payerID: payerID, transaction)
                taken = LockedShares(
                    amount: plan.take.reduce(0) { $0 + $1.amount },
                    shareNumbers: plan.take.map(\.number)
                )
                release = plan.release
                held = plan.heldUntil
            } else {
                if session.liveLockHolder(now: transaction.now) == payerID { held = session.lockExpiresAt }
                guard count == 1 else {
                    throw LedgerError(.noFreeShare, detail: "this session is not split: one payer pays it whole")
                }
                try session.requireLockable(by: payerID, now: transaction.now)
            }
            let others = try await transaction.locksHeld(by: payerID, excluding: sid)
            try LockLimit.check(held: others.count, maximum: maximumLocks)
            guard let wallet = try await transaction.wallet(userID: payerID) else { throw Self.unknownUser }
            try LockLimit.checkFunds(balance: wallet.balance, held: others.amount, amount: taken.amount)
            // Locking again renews nothing: a lock the payer holds on this session keeps the time it ends, so one
            // payer cannot keep others out of a session (or every share of a split) for its whole life.
            var until = min(transaction.now + lockLifetime, session.expiresAt)
            if let held { until = min(until, held) }
            if session.isSplit {
                if !release.isEmpty { try await transaction.update(shares: release, sessionID: sid, .release) }
                let lock = ShareChange.lock(payerID: payerID, until: until)
                try await transaction.update(shares: taken.shareNumbers, sessionID: sid, lock)
            } else {
                try await transaction.update(session: sid, .lock(payerID: payerID, until: until))
            }
            return taken
        }
    }

    package func unlock(sid: String, payerID: String) async throws {
        try await changingSession(sid) { transaction in
            let session = try await Self.session(sid, forUpdate: true, transaction)
            if session.isSplit {
                let shares = try await transaction.shares(sessionID: sid)
                let held = shares.filter { $0.liveLockHolder(now: transaction.now) == payerID }.map(\.number)
                guard held.isEmpty else {
                    try await transaction.update(shares: held, sessionID: sid, .release)
                    return
                }
                guard shares.contains(where: { $0.lockedBy == payerID || $0.paidBy == payerID }) else {
                    throw LedgerError(
                        .forbidden,
                        detail: "only a payer that locked shares of this session can unlock them"
                    )
                }
                return
            }
            guard try session.requireUnlockable(by: payerID, now: transaction.now) else { return }
            try await transaction.update(session: sid, .unlock)
        }
    }

    package func session(sid: String, viewerID: String) async throws -> SessionView {
        let now = try await backend.now()
        guard let session = try await backend.session(id: sid) else { throw Self.noSession(sid) }
        let shares = session.isSplit ? try await backend.shares(sessionID: sid) : []
        var viewers = [session.payeeID, session.liveLockHolder(now: now), session.paidBy].compactMap { $0 }
        viewers += shares.compactMap { $0.paidBy ?? $0.liveLockHolder(now: now) }
        guard viewers.contains(viewerID) else {
            throw LedgerError(.sessionNotFound, detail: "no session \(sid) is visible to you")
        }
        return try await view(of: session, shares: shares, viewerID: viewerID, now: now)
    }

    /// The session as `viewerID` sees it at `now` (its payee: every payment of a split; a payer: its own): with the
    /// payment's signed receipt and the refunded total once anything is paid.
    func view(
        of session: SessionRow,
        shares: [ShareRow]? = nil,
        viewerID: String,
        now: Int64
    ) async throws
        -> SessionView
    {
        var view = session.view(now: now)
        guard session.sharesPaid > 0 else { return view }
        view.refunded = try await backend.debitedCents(
            refType: "session",
            refID: session.id,
            entryType: LedgerVerifier.refundTypes.debit
        )
        guard session.isSplit else {
            view.receipt = try await receipt(sessionID: session.id)
            return view
        }
        var rows = shares ?? []
        if shares == nil { rows = try await backend.shares(sessionID: session.id) }
        let refunds = try await backend.refundedCentsByPayment(sessionID: session.id)
        for payment in SharePaymentRecord.grouping(rows)
        where viewerID == session.payeeID || viewerID == payment.payerID {
            view.payments.append(
                SessionPayment(
                    id: payment.id,
                    shareNumbers: payment.shareNumbers,
                    amount: payment.amount,
                    tip: payment.tip,
                    paidAt: LedgerTime.date(payment.paidAt),
                    refunded: refunds[payment.id] ?? 0,
                    receipt: try await receipt(paymentID: payment.id)
                )
            )
        }
        return view
    }

    package func watchedSession(sid: String, payeeID: String) async throws -> WatchedSession {
        let now = try await backend.now()
        guard let session = try await backend.session(id: sid), session.payeeID == payeeID else {
            throw LedgerError(.sessionNotFound, detail: "no session \(sid) of yours")
        }
        let status = session.status(now: now)
        let lockUntil = status == .locked ? session.lockExpiresAt : nil
        let view = try await view(of: session, viewerID: payeeID, now: now)
        return WatchedSession(
            session: view,
            now: LedgerTime.date(now),
            nextLapse: status.isLive ? LedgerTime.date(min(lockUntil ?? session.expiresAt, session.expiresAt)) : nil,
            stateID: WatchedSession.stateID(
                status,
                lockUntil: lockUntil,
                refundedCents: view.refunded,
                sharesPaid: session.sharesPaid
            )
        )
    }

    package func cancel(sid: String, payeeID: String) async throws {
        let sharesPaid = try await changingSession(sid) { transaction in
            let session = try await Self.session(sid, forUpdate: true, transaction)
            guard session.payeeID == payeeID else {
                throw LedgerError(.forbidden, detail: "only the payee can cancel a session")
            }
            if session.status(now: transaction.now) == .cancelled { return session.sharesPaid > 0 }
            try session.requireLive(now: transaction.now)
            try await transaction.update(session: sid, .cancelled)
            try await Self.recordWebhookEvent(.sessionCancelled, userID: payeeID, sessionID: sid, transaction)
            return session.sharesPaid > 0
        }
        webhookOutbox.notify()
        // The shares paid of a split go back now, one transaction each; should this fail (the payee's balance is
        // short, the database went away), the sweep every server runs returns them.
        if sharesPaid { _ = try? await returnSharePayments(sid: sid) }
    }

    // MARK: Payments

    /// Admits and runs a payment, replaying a stored outcome when there is one.
    ///
    /// No key is ever committed in flight: the admission, the transfer and the outcome commit together, and "in
    /// flight" is the transaction's lock on the key. A second request with the key while the first runs fails to take
    /// that lock and is told `idempotency-in-flight` (on SQLite it runs after the first and replays its outcome). If
    /// the server dies mid-payment, the database rolls its transaction back and drops the lock as soon as the
    /// connection closes, so a retry on any server runs the payment at once, while the payer's lock still holds.
    /// (The alternatives are weaker: keeping the session's lock alive while a key is in flight still leaves the retry
    /// waiting out the in-flight timeout, and recording which server owns a key needs a way to tell a dead server from
    /// a slow one, which the database already has for its own connections.) Keys committed in flight by
    /// ``beginSend(sid:payerID:idempotencyKey:)`` keep the in-flight timeout.
    package func send(
        sid: String,
        payerID: String,
        idempotencyKey: String,
        tipCents: Cents
    ) async throws -> (SendOutcome, Bool) {
        try await runPayment(
            sid: sid,
            payerID: payerID,
            idempotencyKey: idempotencyKey,
            tipCents: tipCents,
            target: .locked
        )
    }

    /// Pays what a page showed in one transaction (``ShownPayment``): the key is claimed (waiting for a request
    /// running under it, whose outcome is then replayed), the session or one free share of the amount shown is
    /// taken, and the payment is made, all or nothing; what it paid is read back from the caches the payment filled.
    package func pay(shown payment: ShownPayment) async throws -> ShownPaymentOutcome {
        let outcome: SendOutcome
        let replayed: Bool
        do {
            (outcome, replayed) = try await runPayment(
                sid: payment.sid,
                payerID: payment.payerID,
                idempotencyKey: payment.idempotencyKey,
                tipCents: payment.tipCents,
                target: .shown(amount: payment.amountCents, another: payment.another)
            )
        } catch let stop as ShownPaymentStop {
            return stop.outcome
        }
        switch outcome {
        case .paid(let balance):
            let (_, paymentID) = try await sentPayment(
                sid: payment.sid,
                payerID: payment.payerID,
                idempotencyKey: payment.idempotencyKey
            )
            return .paid(newBalanceCents: balance, paymentID: paymentID, replayed: replayed)
        case .refused(let refusal):
            return .refused(refusal)
        }
    }

    /// The one transaction of a payment under its key: admission (or the replay of the key's outcome), the payment
    /// of `target`, and the outcome written with the key.
    private func runPayment(
        sid: String,
        payerID: String,
        idempotencyKey: String,
        tipCents: Cents,
        target: PaymentTarget,
        operation: String = #function
    ) async throws -> (SendOutcome, Bool) {
        let inFlightTimeout = LedgerTime.milliseconds(policy.inFlightTimeout)
        // A page's taps wait for each other (one of them pays, the others replay it); an API client is told at once
        // that its first request still runs.
        let wait: Bool
        if case .shown = target { wait = true } else { wait = false }
        let result = try await signingSession(sid, operation: operation) { transaction, loaded in
            guard try await transaction.claimKey(userID: payerID, key: idempotencyKey, wait: wait) else {
                throw Self.inFlight
            }
            // The session is read locked at admission and reused for the payment, and the key's row, locked since
            // admission, is not read again: one round trip each fewer.
            let (admission, session) = try await Self.admit(
                sid: sid,
                payerID: payerID,
                idempotencyKey: idempotencyKey,
                inFlightTimeout: inFlightTimeout,
                lockingSession: true,
                transaction
            )
            if case .replay(let outcome) = admission { return (outcome, true) }
            return (
                try await complete(
                    sid: sid,
                    payerID: payerID,
                    idempotencyKey: idempotencyKey,
                    tip: tipCents,
                    target: target,
                    session: session,
                    loaded: loaded,
                    transaction
                ),
                false
            )
        }
        if case (.paid, false) = result { webhookOutbox.notify() }
        return result
    }

    /// Admits a payment request under its idempotency key and commits the key in flight without paying: a replay, a
    /// refusal (key reused with another session, still in flight, or a session that does not exist: then nothing is
    /// stored), or the go-ahead. What a server that died between admission and payment leaves behind, for the tests;
    /// ``send(sid:payerID:idempotencyKey:)`` admits and pays in one transaction.
    package func beginSend(sid: String, payerID: String, idempotencyKey: String) async throws -> SendAdmission {
        let inFlightTimeout = LedgerTime.milliseconds(policy.inFlightTimeout)
        return try await measuredTransaction { transaction in
            try await Self.admit(
                sid: sid,
                payerID: payerID,
                idempotencyKey: idempotencyKey,
                inFlightTimeout: inFlightTimeout,
                transaction
            ).admission
        }
    }

    /// The admission of a key inside the caller's transaction: a replay, a refusal, or the go-ahead with the key's
    /// row written in flight (and locked until the transaction ends).
    ///
    /// When `lockingSession`, the session a new key is admitted for is read locked (in the engine's lock order:
    /// after the key, before the wallets) and handed back, for the payment in the same transaction.
    private static func admit(
        sid: String,
        payerID: String,
        idempotencyKey: String,
        inFlightTimeout: Int64,
        lockingSession: Bool = false,
        _ transaction: Backend.Transaction
    ) async throws -> (admission: SendAdmission, session: SessionRow?) {
        var existing = try await transaction.idempotencyRecord(userID: payerID, key: idempotencyKey)
        var session: SessionRow?
        if existing == nil {
            // Refused before it starts: no key is kept for a session that does not exist (sessions are never
            // deleted, so this cannot change before the insert).
            session = try await Self.session(sid, forUpdate: lockingSession, transaction)
            // A concurrent first use of the same key waits on the primary key until the other commits.
            if try await transaction.insertInFlight(userID: payerID, key: idempotencyKey, sid: sid) {
                return (.proceed, lockingSession ? session : nil)
            }
            existing = try await transaction.idempotencyRecord(userID: payerID, key: idempotencyKey)
        }
        guard let record = existing else { throw inFlight }
        if let admission = try record.admission(sid: sid, now: transaction.now, inFlightTimeout: inFlightTimeout) {
            return (admission, nil)
        }
        try await transaction.touch(userID: payerID, key: idempotencyKey)
        return (.proceed, lockingSession ? session : nil)
    }

    /// The payment of a key admitted (and its row locked) in the caller's transaction, and its outcome written with
    /// the key (or the key released, for an outcome not to replay).
    /// - Parameter session: the session, read locked in this transaction, if it was.
    private func complete(
        sid: String,
        payerID: String,
        idempotencyKey: String,
        tip: Cents,
        target: PaymentTarget,
        session: SessionRow?,
        loaded: LoadedSigner,
        _ transaction: Backend.Transaction
    ) async throws -> SendOutcome {
        let outcome: SendOutcome
        var paymentID: String?
        do {
            let paid = try await pay(
                sid: sid,
                payerID: payerID,
                tip: tip,
                target: target,
                session: session,
                loaded: loaded,
                transaction
            )
            paymentID = paid.paymentID
            outcome = .paid(newBalanceCents: paid.balance)
        } catch let refusal as LedgerError {
            outcome = .refused(refusal)
        }
        guard outcome.isRecorded else {
            try await transaction.delete(userID: payerID, key: idempotencyKey)
            return outcome
        }
        // An upsert: the row may have been released meanwhile; what this transaction did is recorded either way.
        try await transaction.record(
            outcome: outcome,
            paymentID: paymentID,
            userID: payerID,
            key: idempotencyKey,
            sid: sid
        )
        if let paymentID { loaded.sharePayment.withLock { $0 = (payerID + " " + idempotencyKey, paymentID) } }
        return outcome
    }

    /// The payment itself, inside the caller's transaction, signed with its receipt in the same transaction: of
    /// the whole session, or of the shares of a split `target` names, with `tip` on top. Throws a ``LedgerError``
    /// for every business refusal, and a ``ShownPaymentStop`` for a shown payment that must leave nothing behind.
    /// - Returns: the payer's new balance, and the id of the payment when it paid shares of a split.
    private func pay(
        sid: String,
        payerID: String,
        tip: Cents,
        target: PaymentTarget,
        session locked: SessionRow?,
        loaded: LoadedSigner,
        _ transaction: Backend.Transaction
    ) async throws -> (balance: Cents, paymentID: String?) {
        let session: SessionRow
        if let locked {
            session = locked
        } else {
            session = try await Self.session(sid, forUpdate: true, transaction)
        }
        var shares: [ShareRow] = []
        var amount = session.amount
        switch (target, session.isSplit) {
        case (.locked, true):
            shares = try await Self.sharesToPay(session, payerID: payerID, transaction)
        case (.locked, false):
            try session.requirePayable(by: payerID, now: transaction.now)
        case (.shown(let shown, let another), true):
            shares = [
                try await Self.shownShare(session, amount: shown, another: another, payerID: payerID, transaction)
            ]
        case (.shown(let shown, _), false):
            try session.requireLockable(by: payerID, now: transaction.now)
            guard session.amount == shown else { throw ShownPaymentStop(outcome: .amountChanged(session.amount)) }
        }
        if session.isSplit { amount = shares.reduce(0) { $0 + $1.amount } }
        try SessionSplit.validate(tip: tip, paid: amount)
        let (total, overflow) = amount.addingReportingOverflow(tip)
        guard !overflow else { throw LedgerError(.invalidTip, detail: "the tip makes the amount overflow") }
        // Before anything is written: a refusal thrown after the transfer would be recorded as if nothing moved.
        let signer = policy.signsReceipts ? try await signer(transaction, loaded: loaded) : nil
        let result = try await Self.transfer(
            transaction,
            from: .user(payerID),
            to: .user(session.payeeID),
            amount: total,
            kinds: (LedgerVerifier.paymentTypes.debit, LedgerVerifier.paymentTypes.credit),
            reference: ("session", sid)
        )
        // A split's payment is named by an id of its own, which is also its receipt's.
        let paymentID = session.isSplit ? Self.newID() : nil
        if session.isSplit, let paymentID {
            try await Self.recordSharePayment(
                session,
                shares: shares,
                paymentID: paymentID,
                payerID: payerID,
                tip: tip,
                transaction
            )
        } else {
            try await transaction.update(session: sid, .paid(payerID: payerID, tip: tip))
        }
        try await Self.recordWebhookEvent(
            .paymentSucceeded,
            userID: session.payeeID,
            sessionID: sid,
            paymentID: paymentID,
            transfer: Self.eventTransfer(result.entries),
            transaction
        )
        if let signer {
            // A payment of one share without a tip keeps the first receipt format, byte for byte.
            let split = session.isSplit || tip > 0 ? (tip, session.shares, shares.map(\.number)) : nil
            let (_, _, receipt) = try await storeReceipt(
                .payment,
                id: paymentID,
                signer: signer,
                sid: sid,
                amount: amount,
                split: split.map { ($0.0, $0.1, $0.2.isEmpty ? [1] : $0.2) },
                payeeID: session.payeeID,
                payerID: payerID,
                entries: result.entries,
                transaction
            )
            loaded.paymentReceipt.withLock { $0 = receipt }
        }
        return (result.from, paymentID)
    }

    /// Signs the receipt of a payment or refund whose transfer wrote `entries`, and stores it in the same
    /// transaction; returns its id, the stored JSON and the receipt.
    func storeReceipt(
        _ kind: ReceiptKind,
        id given: String? = nil,
        signer: ReceiptSigner,
        sid: String,
        amount: Cents,
        split: (tipCents: Cents, shares: Int, shareNumbers: [Int])? = nil,
        payeeID: String,
        payerID: String,
        entries: [EntryRow],
        _ transaction: Backend.Transaction
    ) async throws -> (id: String, body: String, receipt: Receipt) {
        let id = given ?? Self.newID()
        let receipt = try signer.sign(
            Receipt(
                id: id,
                kind: kind,
                sessionID: sid,
                amountCents: amount,
                currency: policy.currency,
                payeeID: payeeID,
                payerReference: Receipt.payerReference(receiptID: id, payerID: payerID),
                entryIDs: entries.map(\.id),
                issuedAtMilliseconds: transaction.now,
                keyID: "",
                split: split
            )
        )
        let body = String(decoding: receipt.canonicalJSON, as: UTF8.self)
        try await transaction.insert(receipt: StoredReceipt(id: id, kind: kind.rawValue, sessionID: sid, body: body))
        return (id, body, receipt)
    }

    // MARK: Receipts

    /// The current signing key: the cached one while it is fresh, else the newest from the database, noted in
    /// `loaded` for the cache.
    private func signer(_ transaction: Backend.Transaction, loaded: LoadedSigner) async throws -> ReceiptSigner {
        let refresh = LedgerTime.milliseconds(policy.receiptKeyRefresh)
        if let signer = signerCache.signer(at: transaction.now, maximumAge: refresh) { return signer }
        let signer = try await Self.currentSigner(transaction)
        loaded.value.withLock { $0 = (signer, transaction.now) }
        return signer
    }

    /// ``changingSession(_:_:operation:_:)`` for a transaction that may sign a receipt: the key it loaded is cached
    /// only once it has committed. A key the transaction made itself (the ledger had none usable) is gone if it rolls
    /// back, and receipts signed with it would name a key no one can look up.
    func signingSession<T: Sendable>(
        _ sid: String,
        operation: String = #function,
        _ body: (Backend.Transaction, LoadedSigner) async throws -> T
    ) async throws -> T {
        let loaded = LoadedSigner()
        let result = try await changingSession(sid, operation: operation) { transaction in
            loaded.reset()
            return try await body(transaction, loaded)
        }
        if let (signer, at) = loaded.value.withLock({ $0 }) { signerCache.store(signer, at: at) }
        if let receipt = loaded.paymentReceipt.withLock({ $0 }) {
            // A split's receipts are many per session: each is found by its payment's id, which is the receipt's.
            paymentReceipts[(receipt.shares ?? 1) > 1 ? Self.paymentKey(receipt.id) : receipt.sessionID] = receipt
        }
        if let (key, paymentID) = loaded.sharePayment.withLock({ $0 }) { sharePayments[key] = paymentID }
        return result
    }

    /// The newest key with its private half, made first if there is none (a new ledger).
    private static func currentSigner(_ transaction: Backend.Transaction) async throws -> ReceiptSigner {
        if let signer = try await usableSigner(transaction) { return signer }
        try await transaction.lockReceiptKeys()
        // Another server may have made one while this one waited.
        if let signer = try await usableSigner(transaction) { return signer }
        return try await insertNewKey(transaction)
    }

    private static func usableSigner(_ transaction: Backend.Transaction) async throws -> ReceiptSigner? {
        guard let row = try await transaction.receiptKeys().first(where: { $0.retiredAt == nil }),
            let privateKey = row.privateKey
        else { return nil }
        guard let raw = Base64URL.decode(privateKey), let signer = try? ReceiptSigner(rawPrivateKey: raw),
            signer.keyID == row.id
        else {
            throw LedgerError(.inconsistent, detail: "receipt key \(row.id) has an unusable private key")
        }
        return signer
    }

    private static func insertNewKey(_ transaction: Backend.Transaction) async throws -> ReceiptSigner {
        let (signer, raw) = ReceiptSigner.generate()
        try await transaction.insert(
            receiptKey: ReceiptKeyRow(
                id: signer.keyID,
                publicKey: signer.publicKey.x,
                privateKey: Base64URL.encode(raw),
                createdAt: transaction.now,
                retiredAt: nil
            )
        )
        return signer
    }

    package func receipt(sessionID: String) async throws -> Receipt? {
        if let known = paymentReceipts[sessionID] { return known }
        guard let receipt = try await backend.receipt(sessionID: sessionID, kind: .payment)?.receipt() else {
            return nil
        }
        paymentReceipts[sessionID] = receipt
        return receipt
    }

    /// The receipt of split payment `paymentID` (its receipt has the payment's id), if the ledger signed one.
    package func receipt(paymentID: String) async throws -> Receipt? {
        let key = Self.paymentKey(paymentID)
        if let known = paymentReceipts[key] { return known }
        guard let receipt = try await backend.receipt(id: paymentID)?.receipt() else { return nil }
        paymentReceipts[key] = receipt
        return receipt
    }

    package func sentPayment(
        sid: String,
        payerID: String,
        idempotencyKey: String
    ) async throws -> (receipt: Receipt?, paymentID: String?) {
        if let known = paymentReceipts[sid] { return (known, nil) }
        var paymentID = sharePayments[payerID + " " + idempotencyKey]
        if paymentID == nil { paymentID = try await backend.paymentID(userID: payerID, key: idempotencyKey) }
        guard let paymentID else { return (try await receipt(sessionID: sid), nil) }
        return (try await receipt(paymentID: paymentID), paymentID)
    }

    private static func paymentKey(_ paymentID: String) -> String { "payment " + paymentID }

    package func receiptKeys() async throws -> ReceiptKeySet {
        ReceiptKeySet(keys: try await backend.receiptKeys().map(\.published))
    }

    package func rotateReceiptKey() async throws -> ReceiptPublicKey {
        let signer = try await measuredTransaction { transaction in
            try await transaction.lockReceiptKeys()
            let signer = try await Self.insertNewKey(transaction)
            try await transaction.retireReceiptKeys(except: signer.keyID)
            return signer
        }
        signerCache.clear()
        return signer.publicKey
    }

    package func verify() async throws -> LedgerVerification {
        LedgerVerifier.verify(try await backend.snapshot())
    }

    /// Moves `amount` between two wallets: both locked in id order, balances checked and computed here with
    /// overflow detection, one DEBIT and one CREDIT written.
    static func transfer(
        _ transaction: Backend.Transaction,
        from: WalletOwner,
        to: WalletOwner,
        amount: Cents,
        kinds: (debit: String, credit: String),
        reference: (type: String, id: String)
    ) async throws -> (from: Cents, to: Cents, entries: [EntryRow]) {
        let (accountIDs, userIDs) = WalletOwner.split([from, to])
        let wallets = try await transaction.walletsForUpdate(accountIDs: accountIDs, userIDs: userIDs)
        guard let source = wallets.first(where: from.owns), let target = wallets.first(where: to.owns) else {
            throw unknownUser
        }
        guard source.id != target.id else {
            throw LedgerError(.inconsistent, detail: "transfer between identical wallets")
        }
        if source.kind != .system {
            try LockLimit.checkFunds(balance: source.balance, held: 0, amount: amount)
        }
        let (newSource, sourceOverflow) = source.balance.subtractingReportingOverflow(amount)
        let (newTarget, targetOverflow) = target.balance.addingReportingOverflow(amount)
        guard !sourceOverflow, !targetOverflow else {
            throw LedgerError(.invalidAmount, detail: "the resulting balance would overflow")
        }
        try await transaction.setBalances([(source.id, newSource), (target.id, newTarget)])
        let transferID = newID()
        var entries = [
            EntryRow(
                id: newID(),
                transferID: transferID,
                walletID: source.id,
                direction: .debit,
                amount: amount,
                type: kinds.debit,
                refType: reference.type,
                refID: reference.id,
                createdAt: transaction.now,
                hash: ""
            ),
            EntryRow(
                id: newID(),
                transferID: transferID,
                walletID: target.id,
                direction: .credit,
                amount: amount,
                type: kinds.credit,
                refType: reference.type,
                refID: reference.id,
                createdAt: transaction.now,
                hash: ""
            ),
        ]
        // Last of the transfer's locks (after the wallets, in every transfer), held to commit: the chain grows one
        // transfer at a time, each on the head the previous one committed.
        var head = try await transaction.chainHeadForUpdate()
        for index in entries.indices {
            head.hash = LedgerChain.hash(previous: head.hash, entry: entries[index])
            head.count += 1
            entries[index].hash = head.hash
        }
        try await transaction.insert(entries: entries)
        try await transaction.setChainHead(head)
        return (newSource, newTarget, entries)
    }

    // MARK: Maintenance

    package func pruneIdempotencyKeys() async throws -> Int {
        let retention = LedgerTime.milliseconds(policy.idempotencyRetention)
        return try await measuredTransaction { transaction in
            try await transaction.deleteKeys(createdBefore: transaction.now - retention)
        }
    }

    package func audit() async throws -> LedgerAudit { try await backend.audit() }

    package func ping() async throws { try await backend.ping() }

    package func checkWritable() async throws { try await backend.checkWritable() }

    // MARK: Internals

    /// Runs `body` in one transaction that may change session `sid`, then tells the session's watchers: inside the
    /// transaction through the backend (a database notification, delivered to every server only if it commits) and,
    /// once it has committed, to this server's watchers directly. Every write to a session goes through here; a
    /// change watchers are told of by kind (a new EID: `.eidRotated`) passes its ``SessionNotice``. A notice for a
    /// transaction that changed nothing after all (a refused payment, a repeated unlock) costs each watcher one read.
    private func changingSession<T: Sendable>(
        _ sid: String,
        _ notice: SessionNotice = .changed,
        operation: String = #function,
        _ body: (Backend.Transaction) async throws -> T
    ) async throws -> T {
        let result = try await measuredTransaction(operation: operation) { transaction in
            let result = try await body(transaction)
            try await transaction.announce(sid: sid, notice)
            return result
        }
        changes.publish(sid: sid, notice)
        return result
    }

    static func session(
        _ sid: String,
        forUpdate: Bool,
        _ transaction: Backend.Transaction
    ) async throws -> SessionRow {
        guard let session = try await transaction.session(id: sid, forUpdate: forUpdate) else { throw noSession(sid) }
        return session
    }

    private static func noSession(_ sid: String) -> LedgerError {
        LedgerError(.sessionNotFound, detail: "no session \(sid)")
    }

    static var unknownUser: LedgerError { LedgerError(.unknownUser, detail: "unknown user; log in again") }

    private static var inFlight: LedgerError {
        LedgerError(.idempotencyInFlight, detail: "the first request with this key is still running")
    }

    static func newID() -> String { RandomUUID.make() }
}

/// The engine's observer, shared by its copies.
private final class ObserverBox: Sendable {
    let value = Mutex<(any LedgerStoreObserver)?>(nil)
}

/// What one signing transaction loaded or signed, for after it commits: the signing key it read from the database
/// (and when), and the payment receipt it stored. Emptied when the transaction's body starts, so what an attempt
/// rolled back and run again (a deadlock on PostgreSQL) loaded never outlives it.
final class LoadedSigner: Sendable {
    let value = Mutex<(signer: ReceiptSigner, at: Int64)?>(nil)
    let paymentReceipt = Mutex<Receipt?>(nil)
    /// The split payment a send made: its payer and key, and its id.
    let sharePayment = Mutex<(key: String, paymentID: String)?>(nil)

    func reset() {
        value.withLock { $0 = nil }
        paymentReceipt.withLock { $0 = nil }
        sharePayment.withLock { $0 = nil }
    }
}

/// The signing key an engine loaded, and when (on the store's clock), from a transaction that committed.
private final class SignerCache: Sendable {
    private let loaded = Mutex<(signer: ReceiptSigner, at: Int64)?>(nil)

    func signer(at now: Int64, maximumAge: Int64) -> ReceiptSigner? {
        loaded.withLock { loaded in
            guard let loaded, now >= loaded.at, now - loaded.at < maximumAge else { return nil }
            return loaded.signer
        }
    }

    func store(_ signer: ReceiptSigner, at now: Int64) { loaded.withLock { $0 = (signer, now) } }

    func clear() { loaded.withLock { $0 = nil } }
}

// MARK: Refunds

extension LedgerEngine {
    /// Returns `amountCents` of paid session `sid` from its payee to its payer (of a split: to the payer of payment
    /// `paymentID`), signed with a receipt of kind ``ReceiptKind/refund``; the same `idempotencyKey` with the same
    /// request replays the refund (`true`).
    ///
    /// The session's row is locked first, so the refunds of one session run one after another, each seeing the total
    /// of those before it: the total never exceeds what was paid (tips included), however many servers refund at
    /// once. That total is the sum of the session's refund entries in the ledger, not of the `refunds` rows; of a
    /// split, what one payer gets back is also held to what that payer paid, by its own entries. The payee's wallet
    /// must cover the amount. The refund, its transfer, its receipt and its key commit together, so a request that
    /// dies leaves nothing and its retry refunds once.
    package func refund(
        sid: String,
        payeeID: String,
        amountCents: Cents,
        paymentID: String?,
        idempotencyKey: String
    ) async throws -> (refund: Refund, replayed: Bool) {
        try policy.validate(amount: amountCents)
        let result = try await signingSession(sid) { transaction, loaded in
            let session = try await Self.session(sid, forUpdate: true, transaction)
            // After the session's lock: a concurrent first use of the key on this session has committed by now.
            if let earlier = try await transaction.refund(requestedBy: payeeID, key: idempotencyKey) {
                guard earlier.sessionID == sid, earlier.amount == amountCents, earlier.paymentID == paymentID else {
                    throw Self.refundKeyReused
                }
                return (try Refund(earlier, reference: session.reference), true)
            }
            guard session.payeeID == payeeID else {
                throw LedgerError(.forbidden, detail: "only the payee can refund a session")
            }
            guard session.storedStatus == .paid, let lastPayer = session.paidBy else {
                throw LedgerError(
                    .sessionNotPaid,
                    detail: "session \(sid) is \(session.status(now: transaction.now).rawValue); only a paid session"
                        + " can be refunded" + (session.isSplit ? " (a split once every share is)" : "")
                )
            }
            var payerID = lastPayer
            if session.isSplit {
                let payments = SharePaymentRecord.grouping(try await transaction.shares(sessionID: sid))
                guard let paymentID else {
                    throw LedgerError(
                        .invalidInput,
                        detail: "session \(sid) is split: name the payment to refund (payment_id), one of "
                            + payments.map(\.id).joined(separator: ", ")
                    )
                }
                guard let payment = payments.first(where: { $0.id == paymentID }) else {
                    throw LedgerError(.notFound, detail: "session \(sid) has no payment \(paymentID)")
                }
                let refunded = try await transaction.refundedCents(paymentID: paymentID)
                let paid = payment.amount + payment.tip
                guard amountCents <= paid - refunded else {
                    throw LedgerError(
                        .refundExceedsPayment,
                        detail: "\(refunded) of the \(paid) cents of payment \(paymentID) are refunded already; at "
                            + "most \(paid - refunded) more can be"
                    )
                }
                payerID = payment.payerID
            } else if paymentID != nil {
                throw LedgerError(.invalidInput, detail: "session \(sid) is not split: refund it without payment_id")
            }
            let row = try await refundTransfer(
                session: session,
                payerID: payerID,
                paymentID: paymentID,
                amountCents: amountCents,
                idempotencyKey: idempotencyKey,
                loaded: loaded,
                transaction
            )
            return (try Refund(row, reference: session.reference), false)
        }
        if !result.1 { webhookOutbox.notify() }
        return result
    }

    /// Moves `amountCents` of `session` (locked in this transaction) back from its payee to `payerID`, with its
    /// receipt and its `refunds` row under the payee's `idempotencyKey`: the one way money goes back, by hand or
    /// automatically. Refused if the session's refunds would pass what was paid into it (tips included), or, of a
    /// split, what `payerID` paid into it, both read from the entries.
    func refundTransfer(
        session: SessionRow,
        payerID: String,
        paymentID: String?,
        amountCents: Cents,
        idempotencyKey: String,
        loaded: LoadedSigner,
        _ transaction: Backend.Transaction
    ) async throws -> RefundRow {
        let sid = session.id
        // What the refund transfers moved back, from the entries: the refunds table beside them says which
        // request made each one, but a row deleted or edited there must not free money that already went back.
        let refunded = try await transaction.debitedCents(
            refType: "session",
            refID: sid,
            entryType: LedgerVerifier.refundTypes.debit
        )
        let paid = session.paidCents + session.tip
        let (total, overflow) = refunded.addingReportingOverflow(amountCents)
        guard !overflow, total <= paid else {
            throw LedgerError(
                .refundExceedsPayment,
                detail: refunded == paid
                    ? "all \(paid) cents paid are refunded already"
                    : "\(refunded) of the \(paid) cents paid are refunded already; at most \(paid - refunded) more can be"
            )
        }
        if session.isSplit {
            let paidByPayer = try await transaction.entryCents(
                refType: "session",
                refID: sid,
                entryType: LedgerVerifier.paymentTypes.debit,
                userID: payerID
            )
            let refundedToPayer = try await transaction.entryCents(
                refType: "session",
                refID: sid,
                entryType: LedgerVerifier.refundTypes.credit,
                userID: payerID
            )
            guard amountCents <= paidByPayer - refundedToPayer else {
                throw LedgerError(
                    .refundExceedsPayment,
                    detail: "this payer paid \(paidByPayer) cents into session \(sid) and was refunded "
                        + "\(refundedToPayer) already"
                )
            }
        }
        // Before anything is written, like a payment's.
        let signer = policy.signsReceipts ? try await signer(transaction, loaded: loaded) : nil
        let result = try await Self.transfer(
            transaction,
            from: .user(session.payeeID),
            to: .user(payerID),
            amount: amountCents,
            kinds: (LedgerVerifier.refundTypes.debit, LedgerVerifier.refundTypes.credit),
            reference: ("session", sid)
        )
        var receipt: (id: String, body: String, receipt: Receipt)?
        if let signer {
            receipt = try await storeReceipt(
                .refund,
                signer: signer,
                sid: sid,
                amount: amountCents,
                payeeID: session.payeeID,
                payerID: payerID,
                entries: result.entries,
                transaction
            )
        }
        let row = RefundRow(
            id: Self.newID(),
            sessionID: sid,
            amount: amountCents,
            requestedBy: session.payeeID,
            idempotencyKey: idempotencyKey,
            transferID: result.entries[0].transferID,
            receiptID: receipt?.id,
            receiptBody: receipt?.body,
            refundedTotal: total,
            createdAt: transaction.now,
            paymentID: paymentID
        )
        // A concurrent first use of the key on another session won: this one rolls back whole.
        guard try await transaction.insert(refund: row) else { throw Self.refundKeyReused }
        try await Self.recordWebhookEvent(
            .refundSucceeded,
            userID: session.payeeID,
            sessionID: sid,
            paymentID: paymentID,
            refundID: row.id,
            transfer: Self.eventTransfer(result.entries),
            transaction
        )
        return row
    }

    static var refundKeyReused: LedgerError {
        LedgerError(.idempotencyKeyReused, detail: "this Idempotency-Key was used for another refund")
    }
}

/// A store that can commit a payment's key in flight without paying
/// (``LedgerEngine/beginSend(sid:payerID:idempotencyKey:)``): for the tests that need what a server that died
/// mid-payment leaves behind, on a store they hold as `any LedgerStore`.
package protocol SendAdmitting: LedgerStore {
    /// Admits the payment request under its key and commits the key in flight, without paying.
    func beginSend(sid: String, payerID: String, idempotencyKey: String) async throws -> SendAdmission
}

extension LedgerEngine: SendAdmitting {}
