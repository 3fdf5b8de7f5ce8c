import Foundation
import GotchuAPI
import GotchuDBus
import GotchuKiosk
import GotchuKioskClient
import GotchuLedgerClient
import GotchuReceipts
import GotchuTesting
import Testing

@Suite("Refunds through the kiosk, over D-Bus", .serialized, .timeLimit(.minutes(3)))
struct KioskRefundTests {
    @Test(
        "A paid charge is refunded in part, then the rest; Refunded carries each verified refund; refusals are clear"
    )
    func refundOverDBus() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, _) = try await daemon.startKiosk()
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        let signals = try await connection.kiosk.events()

        let pos = try daemon.processes.start(
            ["charge", "12.50", "--reference", "order 1018", "--bus", daemon.bus.address],
            user: "pos"
        )
        let started = try await pos.waitForLine { $0.hasPrefix("charge ") }
        let id = String(try #require(started.split(separator: " ").dropFirst().first?.dropLast()))
        _ = try await pos.waitForLine { $0.hasPrefix("waiting for a payer") }
        try await daemon.pay(as: "carol")
        #expect(try await pos.waitForExit() == 0)

        // Part of it, through the point-of-sale's command.
        let partial = try await daemon.processes.run(
            ["charge", "--refund", id, "--amount", "5.00", "--bus", daemon.bus.address],
            user: "pos"
        )
        #expect(partial.contains { $0.hasPrefix("refunded $5.00 of charge \(id)") }, "\(partial)")
        // The rest, straight over D-Bus (0 cents: all that is not refunded yet).
        let restID = try await connection.kiosk.refund(id, amountCents: 0)

        var refunded: [(refundID: String, cents: Int64)] = []
        for await case .refunded(let chargeID, let refundID, let cents) in signals {
            #expect(chargeID == id)
            refunded.append((refundID, cents))
            if refunded.count == 2 { break }
        }
        #expect(refunded.map(\.cents) == [500, 750])
        #expect(refunded.last?.refundID == restID)

        // Nothing is left: the ledger's reason comes back as the D-Bus error's message.
        await #expect {
            _ = try await connection.kiosk.refund(id, amountCents: 1)
        } throws: { error in
            let error = error as? DBusError
            return error?.name == KioskInterface.ErrorName.refundFailed
                && error?.message.contains("refund-exceeds-payment") == true
        }
        let refused = try daemon.processes.start(
            ["charge", "--refund", id, "--amount", "1.00", "--bus", daemon.bus.address],
            user: "pos"
        )
        #expect(try await refused.waitForExit() == 1)
        #expect(refused.lines.contains { $0.hasPrefix("not refunded:") }, "\(refused.lines)")

        await #expect {
            _ = try await connection.kiosk.refund("no-such-charge", amountCents: 100)
        } throws: { error in
            (error as? DBusError)?.name == KioskInterface.ErrorName.notFound
        }
        await #expect {
            _ = try await connection.kiosk.refund(id, amountCents: -5)
        } throws: { error in
            (error as? DBusError)?.name == .invalidArgs
        }
        // A charge that is not paid has nothing to refund.
        let unpaid = try await connection.kiosk.charge(amountCents: 300)
        await #expect {
            _ = try await connection.kiosk.refund(unpaid, amountCents: 100)
        } throws: { error in
            (error as? DBusError)?.name == KioskInterface.ErrorName.notPaid
        }
        await connection.close()
    }

    @Test("A refund counts only once its receipt verifies against the kiosk's keys; the rest is computed by default")
    func refundReceiptChecked() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let base = URL(string: url)!
        var payer = LedgerClient(baseURL: base)
        payer.token = try await payer.devLogin(email: "payer@example.com").token
        _ = try await payer.fund(amountCents: 1_000)
        let trusting = KioskLedger(
            baseURL: base,
            credentials: .email("shop@example.com"),
            receiptTrust: ReceiptTrust(.pinned(file: processes.directory.url.appendingPathComponent("pins.json")))
        )
        let misled = KioskLedger(
            baseURL: base,
            credentials: .email("shop@example.com"),
            receiptTrust: ReceiptTrust(.fixed(ReceiptKeySet(keys: [ReceiptSigner.generate().signer.publicKey])))
        )
        let created = try await trusting.createSession(amountCents: 300, idempotencyKey: "k-1")
        try await payer.lock(sid: created.sid)
        _ = try await payer.send(sid: created.sid, idempotencyKey: "p-1")

        let first = try await trusting.refund(sid: created.sid, amountCents: 100, idempotencyKey: "r-1")
        #expect(first.amountCents == 100 && first.receipt?.kind == .refund)
        do {
            _ = try await misled.refund(sid: created.sid, amountCents: 50, idempotencyKey: "r-2")
            Issue.record("a refund receipt signed by an untrusted key was believed")
        } catch {
            #expect("\(error)".contains("receipt does not verify"), "\(error)")
        }
        // Without an amount: what is left of the 300 after 100 and 50.
        let rest = try await trusting.refund(sid: created.sid, amountCents: nil, idempotencyKey: "r-3")
        #expect(rest.amountCents == 150 && rest.refundedCents == 300)
        #expect(try await payer.wallet().availableCents == 1_000)
    }
}
