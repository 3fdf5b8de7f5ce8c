import Crypto
import Foundation
import GotchuCore
import GotchuLedger
import GotchuLedgerTesting
import GotchuReceipts
import Testing

/// Terminals' enrolled keys in the store, with no server: enrolled once under one payee, listed, found by the id
/// their charges name, and revoked by their payee only.
@Suite("Terminals in the store", .timeLimit(.minutes(10)))
struct TerminalStoreTests {
    @Test(
        "A key is enrolled once under one payee, found by its key id, listed, and revoked by its payee only",
        arguments: StoreKind.available
    )
    func enrolment(store kind: StoreKind) async throws {
        let clock = ManualClock()
        try await TestStore.with(kind, clock: clock) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let shop = try await store.login(email: "shop@example.com")
                let other = try await store.login(email: "other@example.com")
                let key = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
                let terminal = try await store.enrollTerminal(payeeID: shop.id, name: "counter 1", publicKey: key)
                #expect(terminal.payeeID == shop.id && terminal.name == "counter 1" && terminal.publicKey == key)
                #expect(terminal.id.hasPrefix("term_") && terminal.revokedAt == nil)
                // The id a charge signed with the key names.
                let keyID = TerminalChargeKeyID.text(key)
                #expect(terminal.keyID == keyID)
                #expect(try await store.terminal(keyID: keyID) == terminal)
                #expect(try await store.terminal(keyID: "ed25519-0000000000000000") == nil)

                // A key is enrolled once, whoever asks again.
                for payee in [shop, other] {
                    await #expect {
                        _ = try await store.enrollTerminal(payeeID: payee.id, name: "again", publicKey: key)
                    } throws: { error in
                        (error as? LedgerError)?.kind == .invalidInput && "\(error)".contains("enrolled already")
                    }
                }
                // Names people read, and keys that are keys.
                let fresh = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
                for name in ["", " counter", String(repeating: "x", count: 65), "till\u{202E}1", "a\u{7}b"] {
                    await #expect(throws: LedgerError.self) {
                        _ = try await store.enrollTerminal(payeeID: shop.id, name: name, publicKey: fresh)
                    }
                }
                for bad in [Data(), Data(repeating: 1, count: 31), Data(repeating: 1, count: 33)] {
                    await #expect(throws: LedgerError.self) {
                        _ = try await store.enrollTerminal(payeeID: shop.id, name: "bad", publicKey: bad)
                    }
                }
                await #expect(throws: LedgerError.self) {
                    _ = try await store.enrollTerminal(payeeID: "no-such-user", name: "ghost", publicKey: fresh)
                }

                clock.advance(seconds: 1)
                let second = try await store.enrollTerminal(payeeID: shop.id, name: "counter 2", publicKey: fresh)
                #expect(try await store.terminals(payeeID: shop.id) == [terminal, second])
                #expect(try await store.terminals(payeeID: other.id).isEmpty)

                // Another payee cannot revoke it, nor tell it exists.
                await #expect {
                    _ = try await store.revokeTerminal(id: terminal.id, payeeID: other.id)
                } throws: { error in
                    (error as? LedgerError)?.kind == .notFound
                }
                clock.advance(seconds: 1)
                let revoked = try await store.revokeTerminal(id: terminal.id, payeeID: shop.id)
                #expect(revoked.revokedAt == Int64(clock.now().timeIntervalSince1970 * 1000))
                clock.advance(seconds: 5)
                // Revoking again keeps the first time.
                #expect(try await store.revokeTerminal(id: terminal.id, payeeID: shop.id) == revoked)
                #expect(try await store.terminal(keyID: keyID)?.revokedAt == revoked.revokedAt)
                #expect(try await store.terminals(payeeID: shop.id).map(\.revokedAt) == [revoked.revokedAt, nil])
            }
        }
    }
}

/// The key id the ledger files a terminal's key under is the one its charges carry.
enum TerminalChargeKeyID {
    static func text(_ rawPublicKey: Data) -> String {
        "ed25519-" + TerminalCharge.keyID(rawPublicKey: rawPublicKey).map { String(format: "%02x", $0) }.joined()
    }
}
