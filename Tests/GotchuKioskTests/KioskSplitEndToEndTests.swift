import Foundation
import GotchuAPI
import GotchuCore
import GotchuDBus
import GotchuKioskClient
import GotchuLedgerClient
import GotchuTesting
import Testing

/// A payer of the test: a funded account on the ledger that pays shares of the session an EID names.
struct SplitPayer {
    var client: LedgerClient

    static func funded(_ email: String, cents: Cents, url: String) async throws -> SplitPayer {
        var client = LedgerClient(baseURL: URL(string: url)!)
        client.token = try await client.devLogin(email: email).token
        _ = try await client.fund(amountCents: cents)
        return SplitPayer(client: client)
    }

    /// Locks `shares` of the next free shares of the session advertised as `eid` and pays them, with `tipCents`.
    @discardableResult
    func pay(eid: EID, shares: Int = 1, tipCents: Cents = 0) async throws -> SendResult {
        let sid = try await client.resolve(eid: eid).sid
        try await client.lock(sid: sid, shares: shares == 1 ? nil : shares)
        return try await client.send(sid: sid, idempotencyKey: UUID().uuidString, tipCents: tipCents)
    }

    var balance: Cents { get async throws { try await client.wallet().availableCents } }
}

@Suite(
    "Split charges end to end: gotchu kiosk, gotchu charge --split, a real ledger",
    .serialized,
    .timeLimit(.minutes(4))
)
struct KioskSplitEndToEndTests {
    typealias Key = KioskInterface.ChargeKey

    @Test("Four payers pay a split charge share by share; the point-of-sale sees each, then the whole with tips")
    func paidByFourPayers() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, port) = try await daemon.startKiosk()
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        let signals = try await connection.kiosk.events()

        let pos = try daemon.processes.start(
            ["charge", "10.01", "--split", "4", "--reference", "table 9", "--bus", daemon.bus.address],
            user: "pos"
        )
        let accepted = try await pos.waitForLine { $0.hasPrefix("charge ") }
        #expect(accepted.hasSuffix(": $10.01 in 4 shares of $2.51 or $2.50"), "\(accepted)")
        let waiting = try await pos.waitForLine { $0.hasPrefix("waiting for a payer (EID ") }
        let eid = try #require(EID(rawValue: String(waiting.dropFirst("waiting for a payer (EID ".count).dropLast())))

        let alice = try await SplitPayer.funded("alice@example.com", cents: 5_000, url: daemon.url)
        let bob = try await SplitPayer.funded("bob@example.com", cents: 5_000, url: daemon.url)
        let carol = try await SplitPayer.funded("carol@example.com", cents: 5_000, url: daemon.url)
        let first = try await alice.pay(eid: eid, tipCents: 50)
        #expect(first.paymentID != nil)
        _ = try await pos.waitForLine { $0 == "1 of 4 shares paid" }
        // Bob pays for a friend too.
        try await bob.pay(eid: eid, shares: 2)
        _ = try await pos.waitForLine { $0 == "3 of 4 shares paid" }
        try await carol.pay(eid: eid)
        #expect(try await pos.waitForExit() == 0)
        #expect(
            pos.lines.contains { $0.hasPrefix("paid: $10.01 in 4 shares + $0.50 in tips (session ") },
            "\(pos.lines)"
        )
        #expect(try await alice.balance == 5_000 - 251 - 50)
        #expect(try await bob.balance == 5_000 - 500)

        var seen: [KioskSignal] = []
        for await signal in signals {
            seen.append(signal)
            if signal.endsCharge { break }
        }
        let id = try #require(seen.first?.chargeID)
        let sharesPaid = seen.compactMap { signal -> Int? in
            if case .sharePaid(_, let paid, 4) = signal { paid } else { nil }
        }
        #expect(sharesPaid == [1, 3])
        guard case .paymentSucceeded(id, 1_001, let sid) = seen.last else {
            Issue.record("the charge did not end paid: \(seen)")
            return
        }
        let charge = try await connection.kiosk.charge(id)
        #expect(
            charge[Key.state.rawValue, as: String.self] == "paid"
                && charge[Key.sessionID.rawValue, as: String.self] == sid
        )
        #expect(
            charge[Key.shares.rawValue, as: Int32.self] == 4 && charge[Key.sharesPaid.rawValue, as: Int32.self] == 4
        )
        #expect(
            charge[Key.paidCents.rawValue, as: Int64.self] == 1_001
                && charge[Key.tipCents.rawValue, as: Int64.self] == 50
        )

        // The display's status says the same.
        let status = try LoopbackConnection(port: port)
        try status.send("GET", "/status", headers: ["Connection": "close"])
        let shown = try APIJSON.decoder().decode(
            KioskStatusShown.self,
            from: Data(try await status.readResponse().body)
        )
        #expect(shown.charge.sharesPaid == 4 && shown.charge.shares == 4 && shown.charge.tipCents == 50)
        await connection.close()
        #expect(try await kiosk.stop() == 0)
    }

    @Test("Cancelled with a share paid: the ledger refunds it and its tip; `gotchu charge --cancel` says how much")
    func cancelledAfterAShare() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, _) = try await daemon.startKiosk()
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        let signals = try await connection.kiosk.events()
        let id = try await connection.kiosk.charge(amountCents: 900, reference: "", shares: 3)
        var iterator = signals.makeAsyncIterator()
        let eid = try await advertisedEID(of: id, &iterator)
        let payer = try await SplitPayer.funded("dave@example.com", cents: 2_000, url: daemon.url)
        try await payer.pay(eid: eid, tipCents: 100)
        #expect(try await payer.balance == 2_000 - 300 - 100)
        var counted = false
        while !counted, let signal = await iterator.next(), signal.chargeID != id || !signal.endsCharge {
            counted = signal == .sharePaid(chargeID: id, sharesPaid: 1, shares: 3)
        }
        #expect(counted)

        let cancel = try daemon.processes.start(["charge", "--cancel", id, "--bus", daemon.bus.address], user: "pos")
        #expect(try await cancel.waitForExit() == 3)
        #expect(cancel.lines.last == "cancelled; $4.00 refunded to the payers of the shares paid", "\(cancel.lines)")
        let charge = try await connection.kiosk.charge(id)
        #expect(charge[Key.state.rawValue, as: String.self] == "cancelled")
        #expect(
            charge[Key.sharesPaid.rawValue, as: Int32.self] == 1
                && charge[Key.refundedCents.rawValue, as: Int64.self] == 400
        )
        #expect(try await payer.balance == 2_000)
        await connection.close()
        #expect(try await kiosk.stop() == 0)
    }

    @Test("Expired on the ledger with a share paid: not renewed; the charge ends expired once the ledger refunded it")
    func expiredAfterAShare() async throws {
        let daemon = try await KioskDaemon.start(serverOptions: ["--session-lifetime", "4"])
        defer { daemon.stop() }
        let (kiosk, _) = try await daemon.startKiosk()
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        let signals = try await connection.kiosk.events()
        let id = try await connection.kiosk.charge(amountCents: 1_000, reference: "", shares: 2)
        var iterator = signals.makeAsyncIterator()
        let eid = try await advertisedEID(of: id, &iterator)
        let payer = try await SplitPayer.funded("erin@example.com", cents: 2_000, url: daemon.url)
        try await payer.pay(eid: eid, tipCents: 20)
        var ended: KioskSignal?
        while ended == nil, let signal = await iterator.next() {
            guard signal.chargeID == id else { continue }
            if case .advertising = signal { Issue.record("a split with a share paid was advertised again: \(signal)") }
            if signal.endsCharge { ended = signal }
        }
        #expect(ended == .expired(chargeID: id))
        let charge = try await connection.kiosk.charge(id)
        #expect(charge[Key.state.rawValue, as: String.self] == "expired")
        #expect(
            charge[Key.sharesPaid.rawValue, as: Int32.self] == 1
                && charge[Key.refundedCents.rawValue, as: Int64.self] == 520
        )
        #expect(try await payer.balance == 2_000)
        await connection.close()
        #expect(try await kiosk.stop() == 0)
    }
}

/// The EID charge `id` is advertised with, from its signals; throws if it fails or ends first.
private func advertisedEID(
    of id: String,
    _ iterator: inout AsyncStream<KioskSignal>.Iterator
) async throws -> EID {
    while let signal = await iterator.next() {
        guard signal.chargeID == id else { continue }
        switch signal {
        case .advertising(_, let eid): return try #require(EID(rawValue: eid))
        case .error(_, let reason): throw TestingError("charge \(id): \(reason)")
        default: if signal.endsCharge { throw TestingError("charge \(id) ended first: \(signal)") }
        }
    }
    throw TestingError("the kiosk's signals ended")
}

/// The part of the display's `/status` the tests read.
private struct KioskStatusShown: Decodable {
    struct Charge: Decodable {
        var shares: Int
        var sharesPaid: Int
        var tipCents: Cents

        enum CodingKeys: String, CodingKey {
            case shares
            case sharesPaid = "shares_paid"
            case tipCents = "tip_cents"
        }
    }

    var charge: Charge
}
