import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuPeer
import GotchuReceipts
import GotchuSimulatedRadio
import GotchuTesting
import Synchronization
import Testing

/// A terminal that cannot reach the ledger and a payer whose device can, over GATT on the simulated air, with a real
/// ledger server: the payer reads the signed charge, the ledger pays it, and the terminal says Paid on the receipt it
/// checks offline; what is not the receipt of its charge changes nothing.
@Suite("Offline terminal, online payer, over GATT", .timeLimit(.minutes(10)))
struct OfflinePaymentTests {
    static func peer(_ name: String, at x: Double) -> SimulatedPeer {
        SimulatedPeer(name: name, at: Position(x: x, y: 0))
    }

    static func sighting(_ source: String) -> Sighting {
        Sighting(eid: EID(rawValue: "0ff11e0001")!, rssi: -50, txPower: 0, time: .zero, source: source)
    }

    @Test(
        "The payer reads the charge, confirms, pays once; the terminal takes the ledger's receipt; forged, foreign and malformed receipts are refused"
    )
    func paysAnOfflineTerminal() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let fixture = try await OfflineCounterFixture.start(processes)
        defer { _ = try? fixture.server.stopNow() }
        let (payer, payee) = (fixture.payer, fixture.payee)
        let first = try fixture.counter(reference: "crêpe")
        let second = try fixture.counter(reference: "crêpe")

        let air = SimulatedAir(seed: 11, clock: .realTime)
        let terminal = await air.addPeer(Self.peer("terminal", at: 0))
        let otherTerminal = await air.addPeer(Self.peer("terminal 2", at: 3))
        let phone = await air.addPeer(Self.peer("phone", at: 0.5))
        let asked = Asked()

        let receipt = try await terminal.withGattService(first.service) { serving in
            first.served(by: serving)
            let link = try await phone.connect(
                to: Self.sighting("terminal"),
                service: OfflineCounter.Characteristic.service,
                timeout: .seconds(5)
            )
            // Garbage, and a message that is not a receipt, are refused and change nothing.
            await #expect(throws: GattError.self) {
                try await link.write([0x00, 1, 2], to: OfflineCounter.Characteristic.receipt)
            }
            for chunk in GattTransfer.chunks(of: Array(#"{"id":"x"}"#.utf8), mtu: await link.mtu()) {
                await #expect(throws: GattError.self) {
                    try await link.write(chunk, to: OfflineCounter.Characteristic.receipt)
                }
            }
            #expect(try await link.read(OfflineCounter.Characteristic.state) == [0])

            let outcome = try await OfflinePayment.pay(over: link, ledger: payer, idempotencyKey: "offline-1") {
                charge,
                resolved in
                asked.record(
                    "Pay \(resolved.amountCents) \(resolved.currency) to \(resolved.payeeDisplay.name) at \(resolved.terminalName), code \(resolved.confirmationCode), \(resolved.reference ?? "")"
                )
                return charge.amountCents == resolved.amountCents
            }
            guard case .paid(let receipt, let balance) = outcome else {
                Issue.record("not paid: \(outcome)")
                throw CancellationError()
            }
            #expect(balance == 3_750)
            #expect(receipt.sessionID == first.charge.sessionID && receipt.amountCents == 1250)
            #expect(first.receipt == receipt)
            #expect(await first.paid() == receipt)
            #expect(try await link.read(OfflineCounter.Characteristic.state) == [1])

            // Sent again under the same key (a lost answer): the ledger replays it, nothing moves twice.
            let again = try await OfflinePayment.pay(over: link, ledger: payer, idempotencyKey: "offline-1") { _, _ in
                true
            }
            #expect(again == .paid(receipt, newBalanceCents: 3_750))
            await link.disconnect()
            return receipt
        }
        #expect(
            asked.lines == ["Pay 1250 USD to bob at stall 1, code \(first.charge.confirmationCode), crêpe"]
        )

        // Another charge's terminal refuses that receipt: it names another session.
        try await otherTerminal.withGattService(second.service) { serving in
            second.served(by: serving)
            let link = try await phone.connect(
                to: Self.sighting("terminal 2"),
                service: OfflineCounter.Characteristic.service,
                timeout: .seconds(5)
            )
            await #expect {
                try await OfflinePayment.deliver(receipt, over: link)
            } throws: { error in
                guard case .receiptRefused = error as? OfflinePayment.Failure else { return false }
                return true
            }
            #expect(second.receipt == nil)
            await link.disconnect()
        }
        #expect(try await payer.wallet().availableCents == 3_750)
        #expect(try await payee.wallet().availableCents == 1_250)
    }
}

/// The questions the payer was asked.
final class Asked: Sendable {
    private let asked = Mutex<[String]>([])
    func record(_ line: String) { asked.withLock { $0.append(line) } }
    var lines: [String] { asked.withLock { $0 } }
}
