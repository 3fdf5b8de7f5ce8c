import Foundation
import GotchuAPI
public import GotchuCore
public import GotchuLedgerClient
import GotchuReceipts

/// Finishes payments the journal left pending (a crash, a lost response): each is sent again with its own key, so
/// the ledger either runs it once or replays the outcome it already has.
public struct PaymentResumer: Sendable {
    /// What became of one pending payment.
    public enum Result: Sendable, Hashable {
        /// It is paid (now, or it already was: the ledger replayed the outcome).
        case paid(PaymentJournal.Entry, newBalanceCents: Cents, replayed: Bool)
        /// It was refused for good; no money moved.
        case failed(PaymentJournal.Entry, reason: String)
        /// The ledger could not be reached; it stays pending for the next run.
        case stillPending(PaymentJournal.Entry, reason: String)
    }

    private let ledger: LedgerClient
    private let journal: PaymentJournal
    private let receiptTrust: ReceiptTrust?

    /// Creates a resumer for the journal's entries on `ledger`'s server.
    /// - Parameter receiptTrust: the keys a payment's receipt must verify against before it counts as paid; `nil`
    ///   believes the ledger's answer as it is.
    public init(ledger: LedgerClient, journal: PaymentJournal, receiptTrust: ReceiptTrust? = nil) {
        self.ledger = ledger
        self.journal = journal
        self.receiptTrust = receiptTrust
    }

    /// Throws unless the receipt verifies (amount and tip), when receipts are checked.
    private func checkReceipt(_ receipt: Receipt?, of entry: PaymentJournal.Entry) async throws(ReceiptError) {
        guard let receiptTrust else { return }
        try await receiptTrust.verify(
            receipt,
            sessionID: entry.sid,
            amountCents: entry.amountCents,
            tipCents: entry.tipCents,
            ledger: ledger
        )
    }

    /// Throws unless one of the receipts verifies for the entry: a split session's payer sees its own payments, and
    /// the one this entry made is among them.
    private func checkAnyReceipt(_ receipts: [Receipt?], of entry: PaymentJournal.Entry) async throws(ReceiptError) {
        var last = ReceiptError("the ledger's answer carries no receipt")
        for receipt in receipts {
            do {
                try await checkReceipt(receipt, of: entry)
                return
            } catch {
                last = error
            }
        }
        throw last
    }

    /// Resumes every pending entry for this server.
    public func resumeAll() async throws -> [Result] {
        var results: [Result] = []
        for entry in try journal.unfinished() where entry.server == ledger.baseURL.absoluteString {
            results.append(try await resume(entry))
        }
        return results
    }

    private func resume(_ entry: PaymentJournal.Entry) async throws -> Result {
        do {
            let result = try await sendRelockingOnce(entry)
            try await checkReceipt(result.receipt, of: entry)
            try journal.markPaid(key: entry.key, newBalanceCents: result.newBalanceCents)
            return .paid(entry, newBalanceCents: result.newBalanceCents, replayed: result.replayed)
        } catch let error where (error as? LedgerClientError)?.problemKind == .sessionAlreadyPaid {
            // Its key may have been pruned (kept 24 h): the session is visible to its payer only if we paid it.
            if let status = try? await ledger.session(sid: entry.sid), status.status == .paid,
                let wallet = try? await ledger.wallet()
            {
                do {
                    try await checkAnyReceipt(
                        status.payments.isEmpty ? [status.receipt] : status.payments.map(\.receipt),
                        of: entry
                    )
                } catch {
                    let reason = "the ledger says paid, but its receipt does not verify: \(error)"
                    try journal.markFailed(key: entry.key, reason: reason)
                    return .failed(entry, reason: reason)
                }
                try journal.markPaid(key: entry.key, newBalanceCents: wallet.availableCents)
                return .paid(entry, newBalanceCents: wallet.availableCents, replayed: true)
            }
            try journal.markFailed(key: entry.key, reason: "\(error)")
            return .failed(entry, reason: "\(error)")
        } catch let error as ReceiptError {
            let reason = "the ledger answered paid, but its receipt does not verify: \(error)"
            try journal.markFailed(key: entry.key, reason: reason)
            return .failed(entry, reason: reason)
        } catch let error where Self.isFinal(error) {
            try journal.markFailed(key: entry.key, reason: "\(error)")
            await releaseLock(entry.sid, after: error)
            return .failed(entry, reason: "\(error)")
        } catch {
            return .stillPending(entry, reason: "\(error)")
        }
    }

    /// Gives back the lock a refused resume may hold (the crashed run's, or the one taken to resend), so the session
    /// is free for the next payer at once rather than when the lock lapses. Best effort: the lock lapses anyway.
    private func releaseLock(_ sid: String, after refusal: any Error) async {
        switch (refusal as? LedgerClientError)?.problemKind {
        // The session is over or gone: there is no lock to release.
        case .sessionExpired?, .sessionCancelled?, .sessionAlreadyPaid?, .sessionNotFound?: return
        default: try? await ledger.unlock(sid: sid)
        }
    }

    /// The key was never run if the lock lapsed before it reached the ledger: lock again (as many shares of a
    /// split) and send the same key, unless the shares free now cost another amount than the one confirmed.
    private func sendRelockingOnce(_ entry: PaymentJournal.Entry) async throws(LedgerClientError) -> SendResult {
        let tip = entry.tipCents > 0 ? entry.tipCents : nil
        do {
            return try await ledger.send(sid: entry.sid, idempotencyKey: entry.key, tipCents: tip)
        } catch let error where error.problemKind == .lockRequired {
            let lock = try await ledger.lock(sid: entry.sid, shares: entry.shares > 1 ? entry.shares : nil)
            if lock.amountCents > 0, lock.amountCents != entry.amountCents {
                throw .problem(
                    Problem(
                        .noFreeShare,
                        detail: "the shares free now cost \(Money.format(lock.amountCents)), not the "
                            + "\(Money.format(entry.amountCents)) confirmed"
                    )
                )
            }
            return try await ledger.send(sid: entry.sid, idempotencyKey: entry.key, tipCents: tip)
        }
    }

    /// Whether a failure is the ledger's final word on a payment (nothing moved, nothing will under this key), as
    /// opposed to an unknown outcome worth retrying with the same key.
    public static func isFinal(_ error: any Error) -> Bool {
        guard let error = error as? LedgerClientError else { return false }
        switch error {
        case .problem(let problem):
            switch problem.kind {
            // A lapsed token says nothing about the payment: log in again and resume.
            case .idempotencyInFlight?, .internalError?, .unavailable?, .unauthorized?, nil: return false
            default: return true
            }
        case .transport, .unexpectedResponse, .notLoggedIn, .invalidURL: return false
        }
    }
}
