import Crypto
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuReceipts
import Testing

/// A charge a terminal signed offline, carried by a payer's device to the ledger: resolved and paid once, its
/// receipt naming the session the terminal derives from the charge; forged, foreign, revoked and expired charges
/// refused with their reasons, nothing moved.
@Suite("Charges a terminal signed offline", .timeLimit(.minutes(10)))
struct ChargeTests {
    /// A payee with an enrolled terminal key, a payer with $50.00, and a charge of $12.50 signed with the key.
    struct Counter {
        var payer: LedgerClient
        var payee: LedgerClient
        var key: Curve25519.Signing.PrivateKey
        var terminal: TerminalResponse
        /// The ledger's clock, which the terminal's agrees with.
        var now: Date

        func charge(
            _ cents: Cents = 1250,
            lifetime: Duration = .seconds(300),
            ago: TimeInterval = 0
        ) throws
            -> TerminalCharge
        {
            try TerminalCharge.make(
                amountCents: cents,
                currency: "USD",
                reference: "table 4",
                now: now.addingTimeInterval(-ago),
                lifetime: lifetime,
                key: key
            )
        }
    }

    func counter(_ ledger: TestLedger) async throws -> Counter {
        let payer = try await ledger.client("payer@example.com", funded: 5_000)
        let payee = try await ledger.client("shop@example.com")
        let key = Curve25519.Signing.PrivateKey()
        let terminal = try await payee.enrollTerminal(name: "stall 1", publicKey: key.publicKey.rawRepresentation)
        return Counter(payer: payer, payee: payee, key: key, terminal: terminal, now: ledger.clock.now())
    }

    static func problem(_ error: any Error) -> Problem? {
        if case .problem(let problem) = error as? LedgerClientError { return problem }
        return nil
    }

    @Test(
        "A payer resolves a charge and pays it once; retries replay it, the receipt names the charge's session, and a second payer is refused",
        arguments: StoreKind.available
    )
    func paysOnce(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let counter = try await counter(ledger)
            let charge = try counter.charge()
            let resolved = try await counter.payer.resolveCharge(charge.encoded)
            #expect(resolved.sid == charge.sessionID && resolved.amountCents == 1250 && resolved.currency == "USD")
            #expect(resolved.status == "payable" && resolved.terminalName == "stall 1")
            #expect(resolved.payeeDisplay.name == "shop" && resolved.reference == "table 4")
            #expect(resolved.confirmationCode == charge.confirmationCode)

            let paid = try await counter.payer.payCharge(charge.encoded, idempotencyKey: "c1", tipCents: 50)
            #expect(!paid.replayed && paid.balance.newBalanceCents == 5_000 - 1_300)
            // What the terminal checks offline: the ledger's key signed it, for its charge's session and amount.
            let receipt = try #require(paid.balance.receipt)
            try receipt.verify(against: try await counter.payer.receiptKeys())
            try receipt.requireMatches(sessionID: charge.sessionID, amountCents: 1250)

            let again = try await counter.payer.payCharge(charge.encoded, idempotencyKey: "c1", tipCents: 50)
            #expect(again.replayed && again.balance.receipt == receipt)
            #expect(try await counter.payer.resolveCharge(charge.encoded).status == "paid")
            #expect(try await counter.payee.wallet().availableCents == 1_300)

            let other = try await ledger.client("other@example.com", funded: 5_000)
            await #expect {
                _ = try await other.payCharge(charge.encoded, idempotencyKey: "o1")
            } throws: { error in
                Self.problem(error)?.kind == .sessionAlreadyPaid
            }
            #expect(try await other.wallet().availableCents == 5_000)
        }
    }

    @Test(
        "Forged, tampered, unenrolled, revoked, expired and unaffordable charges are refused with their reasons and move nothing",
        arguments: StoreKind.available
    )
    func refusals(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let counter = try await counter(ledger)
            func refused(_ bytes: [UInt8], _ kind: ProblemKind, key: String) async {
                await #expect {
                    _ = try await counter.payer.payCharge(bytes, idempotencyKey: key)
                } throws: { error in
                    Self.problem(error)?.kind == kind
                }
            }
            // Tampered: the amount changed after signing.
            var tampered = try counter.charge().encoded
            tampered[32] ^= 0x01
            await refused(tampered, .badRequest, key: "t")
            // Signed by a key no terminal enrolled.
            let stranger = try TerminalCharge.make(
                amountCents: 100,
                currency: "USD",
                now: counter.now,
                lifetime: .seconds(60),
                key: Curve25519.Signing.PrivateKey()
            )
            await refused(stranger.encoded, .notFound, key: "s")
            // Not a charge at all, and another currency.
            await refused([1, 2, 3], .badRequest, key: "g")
            let euros = try TerminalCharge.make(
                amountCents: 100,
                currency: "EUR",
                now: counter.now,
                lifetime: .seconds(60),
                key: counter.key
            )
            await refused(euros.encoded, .badRequest, key: "e")
            // Expired (made an hour ago, for a minute), and more than the payer has.
            let old = try counter.charge(lifetime: .seconds(60), ago: 3600)
            await refused(old.encoded, .sessionExpired, key: "x")
            await refused(try counter.charge(1_000_000).encoded, .insufficientFunds, key: "f")
            // The payee paying its own terminal's charge.
            await #expect {
                _ = try await counter.payee.payCharge(try counter.charge().encoded, idempotencyKey: "own")
            } throws: { error in
                Self.problem(error)?.kind == .ownSession
            }
            // Revoked: its charges are refused from then on.
            let fresh = try counter.charge()
            _ = try await counter.payee.revokeTerminal(id: counter.terminal.id)
            #expect(try await counter.payer.resolveCharge(fresh.encoded).status == "revoked")
            await refused(fresh.encoded, .forbidden, key: "r")
            #expect(try await counter.payer.wallet().availableCents == 5_000)
            #expect(try await counter.payee.wallet().availableCents == 0)
        }
    }
}
