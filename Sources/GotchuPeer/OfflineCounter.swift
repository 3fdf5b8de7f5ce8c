import Foundation
public import GotchuCore
public import GotchuReceipts
import Synchronization

/// The GATT service of a terminal that cannot reach the ledger: it offers a charge it signed itself, takes the
/// receipt a payer's device brings back from the ledger, and says Paid only once that receipt verifies, offline,
/// against the ledger's receipt keys the terminal pinned while it was online and names this charge's session,
/// amount and payee. Money moves only on the ledger, so a receipt that does not verify changes nothing.
///
/// Characteristics (UUIDs in ``OfflineCounter/Characteristic``): `charge` (read: the charge's bytes,
/// ``TerminalCharge``), `receipt` (write: the receipt's canonical JSON in ``GattTransfer`` chunks; a receipt that
/// does not verify or does not name this charge is refused) and `state` (notify and read: one byte, 0 waiting, 1 paid).
public final class OfflineCounter: Sendable {
    /// The service's UUIDs.
    public enum Characteristic {
        /// The service.
        public static let service = BluetoothUUID("6f0c7a10-3e51-4c2b-9a4d-7c1e55b0a000")!
        /// Read: the charge.
        public static let charge = BluetoothUUID("6f0c7a10-3e51-4c2b-9a4d-7c1e55b0a001")!
        /// Write: the receipt, in chunks.
        public static let receipt = BluetoothUUID("6f0c7a10-3e51-4c2b-9a4d-7c1e55b0a002")!
        /// Notify and read: the terminal's state.
        public static let state = BluetoothUUID("6f0c7a10-3e51-4c2b-9a4d-7c1e55b0a003")!
    }

    /// What the state characteristic says.
    public enum State: UInt8, Sendable {
        /// Waiting for a receipt.
        case waiting = 0
        /// Paid: a receipt for the charge verified.
        case paid = 1
    }

    /// The longest receipt taken, in bytes.
    public static let maximumReceiptLength = 4_096

    /// The charge offered.
    public let charge: TerminalCharge
    private let payeeID: String
    private let receiptKeys: ReceiptKeySet
    private let progress = Mutex<(receivers: [String: GattTransfer.Receiver], receipt: Receipt?)>(([:], nil))
    private let paidStream: AsyncStream<Receipt>
    private let paidSink: AsyncStream<Receipt>.Continuation
    private let serving = Mutex<(any GattServing)?>(nil)

    /// A counter offering `charge`, paid to `payeeID` (the payee the terminal's key is enrolled under), whose
    /// receipts are checked against `receiptKeys`.
    public init(charge: TerminalCharge, payeeID: String, receiptKeys: ReceiptKeySet) {
        self.charge = charge
        self.payeeID = payeeID
        self.receiptKeys = receiptKeys
        (paidStream, paidSink) = AsyncStream.makeStream(of: Receipt.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The service to serve (``GattRadio/withGattService(_:_:)``).
    public var service: GattService {
        GattService(
            uuid: Characteristic.service,
            characteristics: [
                GattCharacteristic(uuid: Characteristic.charge, read: { [charge] _ in charge.encoded }),
                GattCharacteristic(
                    uuid: Characteristic.receipt,
                    write: { [self] chunk, peer throws(GattRefusal) in try await self.take(chunk, from: peer) }
                ),
                GattCharacteristic(
                    uuid: Characteristic.state,
                    read: { [self] _ in [self.receipt == nil ? State.waiting.rawValue : State.paid.rawValue] },
                    notifies: true
                ),
            ]
        )
    }

    /// Where notifications of the state go, once the service is served.
    public func served(by serving: any GattServing) {
        self.serving.withLock { $0 = serving }
    }

    /// The receipt that paid the charge, once one did.
    public var receipt: Receipt? { progress.withLock { $0.receipt } }

    /// Waits for the receipt that pays the charge.
    public func paid() async -> Receipt? {
        if let receipt { return receipt }
        for await receipt in paidStream { return receipt }
        return nil
    }

    /// Takes one chunk of a peer's receipt; once whole, checks it and says Paid.
    private func take(_ chunk: [UInt8], from peer: GattPeer) async throws(GattRefusal) {
        let message = try progress.withLock { progress throws(GattRefusal) in
            var receiver =
                progress.receivers[peer.id] ?? GattTransfer.Receiver(maximumLength: Self.maximumReceiptLength)
            defer { progress.receivers[peer.id] = receiver.isReceiving ? receiver : nil }
            return try receiver.receive(chunk)
        }
        guard let message else { return }
        let receipt = try check(message)
        let first = progress.withLock { progress in
            defer { progress.receipt = progress.receipt ?? receipt }
            return progress.receipt == nil
        }
        if first { paidSink.yield(receipt) }
        try? await serving.withLock { $0 }?.notify(Characteristic.state, [State.paid.rawValue])
    }

    /// The receipt in `message`, if it is the ledger's receipt of this charge's payment.
    private func check(_ message: [UInt8]) throws(GattRefusal) -> Receipt {
        do {
            let receipt = try Receipt(strictJSON: message)
            try receipt.verify(against: receiptKeys)
            try receipt.requireMatches(sessionID: charge.sessionID, amountCents: charge.amountCents)
            guard receipt.payeeID == payeeID else {
                throw ReceiptError("the receipt pays another payee")
            }
            return receipt
        } catch {
            throw .invalidValue("\(error)")
        }
    }
}
