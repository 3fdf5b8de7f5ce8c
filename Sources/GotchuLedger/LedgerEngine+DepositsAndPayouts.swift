import Foundation
package import GotchuCore

// Money in (an operator's deposit) and out (a user's payout, settled or failed by the operator), each a transfer
// between a wallet and a system account written once over the backend primitives. Lock order, as everywhere: the
// payout's row first (settle, fail), then wallets by id, then the chain's head.
extension LedgerEngine {
    /// Credits `amountCents` cents to the user with the address `email` from the deposits account, as `actor`, under
    /// the external `reference`, and records it in the audit log. A reference used before names the same deposit: with
    /// the same user and amount it is replayed (nothing written), otherwise refused.
    /// - Throws: ``LedgerError/Kind/invalidInput`` for a malformed address or reference; an amount the policy refuses;
    ///   ``LedgerError/Kind/unknownUser`` when no user has the address; ``LedgerError/Kind/emailUnconfirmed`` for an
    ///   unconfirmed address; ``LedgerError/Kind/idempotencyKeyReused`` for a reference used for another deposit.
    package func deposit(
        email: String,
        amountCents: Cents,
        reference: String,
        actor: String
    ) async throws -> DepositResult {
        let normalized = try LedgerUser.normalize(email: email).email
        try policy.validate(amount: amountCents)
        let reference = try OperatorText.reference(reference)
        let outcome = try await measuredTransaction { transaction in
            guard let user = try await transaction.user(email: normalized) else {
                throw LedgerError(.unknownUser, detail: "no user has the address \(normalized)")
            }
            // An address nobody proved to own takes no money.
            guard try await transaction.emailConfirmed(userID: user.id) != false else { throw Self.emailUnconfirmed }
            let deposit = DepositRow(
                id: Self.newID(),
                reference: reference,
                userID: user.id,
                amount: amountCents,
                actor: actor,
                createdAt: transaction.now
            )
            // A concurrent deposit with the same reference waits on the unique reference until the other commits,
            // then inserts nothing and reads the winner's row.
            let earlier: DepositRow?
            if let found = try await transaction.deposit(reference: reference) {
                earlier = found
            } else if try await transaction.insert(deposit: deposit) {
                earlier = nil
            } else {
                earlier = try await transaction.deposit(reference: reference)
                if earlier == nil { throw LedgerError(.unavailable, detail: "could not record the deposit; try again") }
            }
            if let earlier {
                try Self.requireSameDeposit(earlier, userID: user.id, email: normalized, amount: amountCents)
                let balance = try await transaction.wallet(userID: user.id)?.balance ?? 0
                return DepositResult(deposit: earlier, balance: balance, replayed: true)
            }
            let result = try await Self.transfer(
                transaction,
                from: .account(LedgerAccounts.depositsWalletID),
                to: .user(user.id),
                amount: amountCents,
                kinds: MoneyInOutEntries.deposit,
                reference: (MoneyInOutEntries.depositRefType, deposit.id)
            )
            try await Self.recordWebhookEvent(
                .depositReceived,
                userID: user.id,
                depositID: deposit.id,
                transfer: Self.eventTransfer(result.entries),
                transaction
            )
            try await transaction.insert(
                audit: AuditEntry(
                    actor: actor,
                    action: "deposit",
                    subject: normalized,
                    detail: "\(Money.format(amountCents)), reference \(reference), deposit \(deposit.id)",
                    at: transaction.now
                )
            )
            return DepositResult(deposit: deposit, balance: result.to, replayed: false)
        }
        if !outcome.replayed { webhookOutbox.notify() }
        return outcome
    }

    /// An earlier deposit under the same reference is the same deposit only with the same user and amount.
    private static func requireSameDeposit(
        _ earlier: DepositRow,
        userID: String,
        email: String,
        amount: Cents
    ) throws(LedgerError) {
        guard earlier.userID == userID, earlier.amount == amount else {
            let what =
                earlier.userID == userID
                ? "a deposit of \(Money.format(earlier.amount)), not \(Money.format(amount))"
                : "a deposit to another user than \(email)"
            throw LedgerError(
                .idempotencyKeyReused,
                detail: "the reference \(DisplayText.quoted(earlier.reference)) was used for \(what) "
                    + "(deposit \(earlier.id)); a new deposit needs a new reference"
            )
        }
    }

    /// Moves `amountCents` cents from the user's wallet into the payouts clearing account and records a pending
    /// payout, under the request's `idempotencyKey`; returns the answer and whether it replays an earlier request with
    /// the key. Money the user's live locks hold stays in the wallet.
    /// - Throws: an amount the policy refuses; ``LedgerError/Kind/insufficientFunds`` when the balance less the locked
    ///   amounts does not cover it; ``LedgerError/Kind/idempotencyKeyReused`` for a key used for another amount;
    ///   ``LedgerError/Kind/unknownUser`` for a user without a wallet.
    package func requestPayout(
        userID: String,
        amountCents: Cents,
        idempotencyKey: String
    ) async throws -> (payout: Payout, replayed: Bool) {
        try policy.validate(amount: amountCents)
        return try await measuredTransaction { transaction in
            // Serialized with this user's locks, so a lock taken meanwhile cannot count on money leaving now.
            try await transaction.lockPayer(userID)
            // The user's wallet next, locked: this user's payout requests run one at a time, so a retry running
            // alongside the first sees its row.
            guard let wallet = try await transaction.walletsForUpdate(accountIDs: [], userIDs: [userID]).first else {
                throw Self.unknownUser
            }
            if let earlier = try await transaction.payout(userID: userID, key: idempotencyKey) {
                guard earlier.amount == amountCents else {
                    throw LedgerError(
                        .idempotencyKeyReused,
                        detail: "this Idempotency-Key was first used for a payout of \(earlier.amount) cents; "
                            + "use a new key"
                    )
                }
                return (Payout(requested: earlier), true)
            }
            // Money the user's locked sessions count on stays: a lock means the payment can be made.
            let held = try await transaction.locksHeld(by: userID, excluding: "")
            try LockLimit.checkFunds(balance: wallet.balance, held: held.amount, amount: amountCents)
            var payout = PayoutRow(
                id: Self.newID(),
                userID: userID,
                idempotencyKey: idempotencyKey,
                amount: amountCents,
                balanceAfter: 0,
                status: .pending,
                createdAt: transaction.now
            )
            let result = try await Self.transfer(
                transaction,
                from: .user(userID),
                to: .account(LedgerAccounts.payoutsWalletID),
                amount: amountCents,
                kinds: MoneyInOutEntries.payout,
                reference: (MoneyInOutEntries.payoutRefType, payout.id)
            )
            payout.balanceAfter = result.from
            try await transaction.insert(payout: payout)
            return (Payout(requested: payout), false)
        }
    }

    /// The payouts in `status` (every one when `nil`), oldest first, at most `limit`, with their users' addresses;
    /// read outside a transaction.
    package func payouts(status: PayoutStatus?, limit: Int) async throws -> [PayoutListing] {
        try await backend.payouts(status: status, limit: limit)
    }

    /// Settles the pending payout with this id, as `actor`, under the external `reference` of the money sent: its
    /// amount leaves the clearing account for the settled-payouts account, and the audit log records it. Returns the
    /// payout as settled.
    /// - Throws: ``LedgerError/Kind/invalidInput`` for a malformed reference; ``LedgerError/Kind/notFound`` for an
    ///   unknown id; ``LedgerError/Kind/payoutNotPending`` for a payout settled or failed already.
    package func settlePayout(id: String, reference: String, actor: String) async throws -> PayoutRow {
        let reference = try OperatorText.reference(reference)
        return try await resolvePayout(id: id, to: .settled, actor: actor) { transaction, payout in
            let moved = try await Self.transfer(
                transaction,
                from: .account(LedgerAccounts.payoutsWalletID),
                to: .account(LedgerAccounts.payoutsSettledWalletID),
                amount: payout.amount,
                kinds: MoneyInOutEntries.settle,
                reference: (MoneyInOutEntries.payoutRefType, payout.id)
            )
            return (reference, nil, "\(Money.format(payout.amount)), reference \(reference)", moved.entries)
        }
    }

    /// Fails the pending payout with this id, as `actor`, for `reason`: its amount goes back to the user's wallet,
    /// and the audit log records it. Returns the payout as failed.
    /// - Throws: ``LedgerError/Kind/invalidInput`` for a malformed reason; ``LedgerError/Kind/notFound`` for an unknown
    ///   id; ``LedgerError/Kind/payoutNotPending`` for a payout settled or failed already.
    package func failPayout(id: String, reason: String, actor: String) async throws -> PayoutRow {
        let reason = try OperatorText.reason(reason)
        return try await resolvePayout(id: id, to: .failed, actor: actor) { transaction, payout in
            let moved = try await Self.transfer(
                transaction,
                from: .account(LedgerAccounts.payoutsWalletID),
                to: .user(payout.userID),
                amount: payout.amount,
                kinds: MoneyInOutEntries.payoutReturn,
                reference: (MoneyInOutEntries.payoutRefType, payout.id)
            )
            return (nil, reason, "\(Money.format(payout.amount)) back to the user, reason: \(reason)", moved.entries)
        }
    }

    /// Ends a pending payout in one transaction: its row locked first (so of two operators settling or failing it
    /// at once, the second sees the first's outcome and is refused), the money moved by `move`, the new status and
    /// the audit entry written with it.
    private func resolvePayout(
        id: String,
        to status: PayoutStatus,
        actor: String,
        _ move:
            @Sendable (Backend.Transaction, PayoutRow) async throws -> (
                reference: String?, reason: String?, detail: String, entries: [EntryRow]
            )
    ) async throws -> PayoutRow {
        let resolved = try await measuredTransaction { transaction in
            guard var payout = try await transaction.payout(id: id, forUpdate: true) else {
                throw LedgerError(.notFound, detail: "no payout \(DisplayText.quoted(id))")
            }
            try payout.requirePending(to: status == .settled ? "settle" : "fail")
            let (reference, reason, detail, entries) = try await move(transaction, payout)
            try await Self.recordWebhookEvent(
                status == .settled ? .payoutSettled : .payoutFailed,
                userID: payout.userID,
                payoutID: payout.id,
                transfer: Self.eventTransfer(entries),
                transaction
            )
            try await transaction.resolve(
                payout: id,
                status: status,
                reference: reference,
                reason: reason,
                actor: actor
            )
            try await transaction.insert(
                audit: AuditEntry(
                    actor: actor,
                    action: status == .settled ? "payout.settle" : "payout.fail",
                    subject: id,
                    detail: detail,
                    at: transaction.now
                )
            )
            payout.status = status
            payout.resolvedAt = transaction.now
            payout.reference = reference
            payout.reason = reason
            payout.resolvedBy = actor
            return payout
        }
        webhookOutbox.notify()
        return resolved
    }
}
