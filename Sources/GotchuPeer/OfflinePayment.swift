public import GotchuAPI
public import GotchuCore
public import GotchuLedgerClient
public import GotchuReceipts

/// A payer's side of a payment to a terminal that cannot reach the ledger: over a GATT link to its
/// ``OfflineCounter``, the payer's device reads the signed charge, asks the ledger what it is, pays it once its payer
/// agrees, and writes the ledger's receipt back to the terminal, which says Paid once the receipt verifies.
public enum OfflinePayment {
    /// How it ended.
    public enum Outcome: Sendable, Hashable {
        /// Paid, and the terminal took the receipt.
        case paid(Receipt, newBalanceCents: Cents)
        /// The payer said no; nothing was paid.
        case declined
    }

    /// Why it stopped.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The terminal's charge is not one (malformed bytes).
        case badCharge(String)
        /// The ledger says the charge cannot be paid now (`expired`, `revoked`).
        case notPayable(String)
        /// Paid on the ledger, but the terminal did not take the receipt: write it again on the next connection.
        case receiptRefused(Receipt, String)

        public var description: String {
            switch self {
            case .badCharge(let reason): "the terminal offers no valid charge: \(reason)"
            case .notPayable(let status): "the charge cannot be paid: it is \(status)"
            case .receiptRefused(_, let reason): "paid, but the terminal refused the receipt: \(reason)"
            }
        }
    }

    /// Pays the charge the terminal at the other end of `link` offers: read, resolved on `ledger`, confirmed by
    /// `confirm` (the question a payer answers), paid under `idempotencyKey` (the same key again after a lost answer),
    /// and its receipt written back to the terminal.
    /// - Throws: ``Failure``, a ``LedgerClientError`` from the ledger, or a ``GattError`` from the link.
    public static func pay(
        over link: any GattConnection,
        ledger: LedgerClient,
        idempotencyKey: String,
        tipCents: Cents = 0,
        confirm: @Sendable (TerminalCharge, ChargeResponse) async -> Bool
    ) async throws -> Outcome {
        let bytes = try await link.read(OfflineCounter.Characteristic.charge)
        let charge: TerminalCharge
        do {
            charge = try TerminalCharge(encoded: bytes)
        } catch {
            throw Failure.badCharge(error.description)
        }
        let resolved = try await ledger.resolveCharge(charge.encoded)
        // A charge paid already may be this payer's own payment whose answer was lost: paying again under the same
        // key replays it, and anyone else is refused by the ledger.
        guard resolved.status == "payable" || resolved.status == "paid" else {
            throw Failure.notPayable(resolved.status)
        }
        guard await confirm(charge, resolved) else { return .declined }
        let paid = try await ledger.payCharge(charge.encoded, idempotencyKey: idempotencyKey, tipCents: tipCents)
        guard let receipt = paid.balance.receipt else {
            throw Failure.notPayable("paid without a receipt (the ledger signs none)")
        }
        try await deliver(receipt, over: link)
        return .paid(receipt, newBalanceCents: paid.balance.newBalanceCents)
    }

    /// Writes `receipt` to the terminal in chunks that fit the link, and waits until it says Paid.
    /// - Throws: ``Failure/receiptRefused(_:_:)`` when the terminal refuses it.
    public static func deliver(_ receipt: Receipt, over link: any GattConnection) async throws {
        let states = try await link.notifications(OfflineCounter.Characteristic.state)
        do {
            for chunk in GattTransfer.chunks(of: Array(receipt.canonicalJSON), mtu: await link.mtu()) {
                try await link.write(chunk, to: OfflineCounter.Characteristic.receipt)
            }
        } catch GattError.refused(let reason) {
            throw Failure.receiptRefused(receipt, reason)
        }
        // The terminal may have said Paid before this subscription saw it: its state is read as well.
        if try await link.read(OfflineCounter.Characteristic.state) == [OfflineCounter.State.paid.rawValue] { return }
        for try await state in states where state == [OfflineCounter.State.paid.rawValue] { return }
        throw GattError.disconnected
    }
}
