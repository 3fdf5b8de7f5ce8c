import Foundation
import GotchuCore
import Synchronization

/// One payment from the web checkout: the same store calls as the API's payers make (lock, then send with an
/// idempotency key), with the key bound to the page view the payer tapped Pay on. Taps on one page view (a double tap,
/// a reload that posts again) all get that payment's outcome, and the ledger pays at most once for them.
struct CheckoutPayment: Sendable {
    /// What the payer asked for, as the page's form said it.
    var sid: String
    var payerID: String
    /// The page view's id: the idempotency key is `checkout:` and it, scoped to the payer by the store.
    var view: String
    /// What the page showed the payer would pay, before a tip; a lock that would take another amount is refused.
    var amountCents: Cents
    var tipCents: Cents

    /// How a payment from the page ended.
    enum Outcome: Sendable {
        /// Paid, by this page view (now or by an earlier tap); the payment's id when it paid shares of a split.
        case paid(paymentID: String?)
        /// The ledger refused it; nothing moved.
        case refused(LedgerError)
        /// The lock would take another amount than the page showed (another payer took the share shown meanwhile);
        /// nothing moved, and the lock was released.
        case amountChanged(Cents)
    }

    /// The key the ledger keeps the payment's outcome under.
    var idempotencyKey: String { "checkout:" + view }

    /// How many times a send still in flight for this key (another server runs it) is asked again, a fifth of a
    /// second apart, before the payer is told it is under way.
    static let inFlightRetries = 25

    /// Pays: first a send without a lock, which answers at once for a page view that paid (or was refused for good)
    /// already, and pays outright where the payer's lock from an earlier tap still holds; then, when the ledger wants
    /// a lock, the lock and the send. A lock left over by a payment that turned out to be refused, or replayed, is
    /// released, so it blocks no one.
    func run(store: some LedgerStore) async throws -> Outcome {
        if let first = try await send(store) { return first.outcome }
        let locked: LockedShares
        do {
            locked = try await store.lock(sid: sid, payerID: payerID, shares: 1)
        } catch let refusal as LedgerError {
            return .refused(refusal)
        }
        guard locked.amount == amountCents else {
            try? await store.unlock(sid: sid, payerID: payerID)
            return .amountChanged(locked.amount)
        }
        guard let second = try await send(store) else {
            // The lock lapsed between the two calls: a refusal the payer may simply try again.
            return .refused(LedgerError(.lockRequired, detail: "the lock lapsed before the payment; try again"))
        }
        if second.leftLock { try? await store.unlock(sid: sid, payerID: payerID) }
        return second.outcome
    }

    /// One send under the page view's key: its outcome and whether a lock of the payer's may be left behind (a
    /// replay or a refusal); `nil` when the ledger wants a lock first.
    private func send(_ store: some LedgerStore) async throws -> (outcome: Outcome, leftLock: Bool)? {
        var retries = Self.inFlightRetries
        while true {
            do {
                let (outcome, replayed) = try await store.send(
                    sid: sid,
                    payerID: payerID,
                    idempotencyKey: idempotencyKey,
                    tipCents: tipCents
                )
                switch outcome {
                case .paid:
                    let (_, paymentID) = try await store.sentPayment(
                        sid: sid,
                        payerID: payerID,
                        idempotencyKey: idempotencyKey
                    )
                    return (.paid(paymentID: paymentID), replayed)
                case .refused(let refusal) where refusal.kind == .lockRequired:
                    return nil
                case .refused(let refusal):
                    return (.refused(refusal), true)
                }
            } catch let refusal as LedgerError where refusal.kind == .idempotencyInFlight && retries > 0 {
                retries -= 1
                try await Task.sleep(for: .milliseconds(200))
            } catch let refusal as LedgerError {
                return (.refused(refusal), true)
            }
        }
    }
}

/// The payments from the checkout running in this process, by payer and page view: a second tap while the first
/// still runs waits for the first's outcome instead of racing it. (Across servers the idempotency key keeps them to
/// one payment.)
final class CheckoutPayments: Sendable {
    private let running = Mutex<[String: Task<CheckoutPayment.Outcome, any Error>]>([:])

    /// The outcome of `payment`: run now, or the one already running for its payer and page view.
    func outcome(of payment: CheckoutPayment, store: some LedgerStore) async throws -> CheckoutPayment.Outcome {
        let key = payment.payerID + " " + payment.view
        let task = running.withLock { running in
            if let task = running[key] { return task }
            let task = Task { try await payment.run(store: store) }
            running[key] = task
            return task
        }
        defer { running.withLock { running in if running[key] == task { running[key] = nil } } }
        return try await task.value
    }
}
