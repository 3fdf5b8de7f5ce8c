import Crypto
import Foundation
import GotchuReceipts
import Testing

@Suite(.timeLimit(.minutes(10))) struct TerminalChargeTests {
    static let key = Curve25519.Signing.PrivateKey()
    static let now = Date(timeIntervalSince1970: 1_795_000_000)

    static func charge(reference: String = "table 4") throws -> TerminalCharge {
        try TerminalCharge.make(
            amountCents: 1250,
            currency: "USD",
            reference: reference,
            now: now,
            lifetime: .seconds(300),
            key: key
        )
    }

    @Test func aChargeReadsBackFromItsBytesAndVerifiesAgainstItsKeyOnly() throws {
        let charge = try Self.charge()
        let read = try TerminalCharge(encoded: charge.encoded)
        #expect(read == charge)
        #expect(read.verify(publicKey: Self.key.publicKey))
        #expect(!read.verify(publicKey: Curve25519.Signing.PrivateKey().publicKey))
        #expect(read.amountCents == 1250 && read.currency == "USD" && read.reference == "table 4")
        #expect(read.expiresAtMilliseconds - read.createdAtMilliseconds == 300_000)
        #expect(read.createdAtMilliseconds == 1_795_000_000_000)
        #expect(read.keyIDText.hasPrefix("ed25519-") && read.keyIDText.count == 24)
        #expect(read.nonceText.count == 32)
        #expect(read.confirmationCode.count == 2 && read.confirmationCode.allSatisfy(\.isNumber))
        // Two charges never share a nonce, nor a session.
        let other = try Self.charge()
        #expect(other.nonce != charge.nonce && other.sessionID != charge.sessionID)
        // The session is a UUID of version 8 and the RFC variant, the same for the same charge.
        let sid = Array(charge.sessionID)
        #expect(sid.count == 36 && sid[14] == "8" && "89ab".contains(sid[19]) && read.sessionID == charge.sessionID)
        #expect(sid.filter { $0 == "-" }.count == 4 && charge.sessionID == charge.sessionID.lowercased())
    }

    @Test func theLongestChargeFitsOneRead() throws {
        let charge = try Self.charge(reference: String(repeating: "x", count: 64))
        #expect(charge.encoded.count == TerminalCharge.maximumLength)
        #expect(TerminalCharge.maximumLength <= 512)
        #expect(try Self.charge(reference: "").encoded.count == 53 + 64)
    }

    @Test func everyChangedByteIsRefusedOrFailsTheSignature() throws {
        let bytes = try Self.charge().encoded
        for index in bytes.indices {
            var changed = bytes
            changed[index] ^= 0x01
            if let read = try? TerminalCharge(encoded: changed) {
                #expect(!read.verify(publicKey: Self.key.publicKey), "byte \(index)")
            }
        }
    }

    @Test func malformedBytesAreRefusedWithTheirReason() throws {
        let bytes = try Self.charge().encoded
        var wrongVersion = bytes
        wrongVersion[0] = 2
        var longerReference = bytes
        longerReference[52] += 1
        var lowerCurrency = bytes
        lowerCurrency[33] = UInt8(ascii: "u")
        var zeroAmount = bytes
        for index in 25..<33 { zeroAmount[index] = 0 }
        var expired = bytes
        for index in 44..<52 { expired[index] = bytes[index - 8] }
        var control = bytes
        control[53] = 0x07
        var notUTF8 = bytes
        notUTF8[53] = 0xFF
        let cases: [([UInt8], String)] = [
            ([], "shorter"), (Array(bytes.dropLast()), "length"), (bytes + [0], "length"),
            (bytes + [UInt8](repeating: 0, count: 200), "longer"), (wrongVersion, "version"),
            (longerReference, "length"), (lowerCurrency, "currency"), (zeroAmount, "amount"), (expired, "expires"),
            (control, "printable"), (notUTF8, "UTF-8"),
        ]
        for (malformed, reason) in cases {
            #expect {
                _ = try TerminalCharge(encoded: malformed)
            } throws: { error in
                "\(error)".contains(reason)
            }
        }
    }

    @Test func aTerminalCannotSignWhatNoChargeMayHold() {
        for (amount, currency, reference) in [
            (0, "USD", ""), (-5, "USD", ""), (100, "usd", ""), (100, "US", ""), (100, "USD", "\u{202E}evil"),
            (100, "USD", String(repeating: "é", count: 33)),
        ] as [(Int64, String, String)] {
            #expect(throws: TerminalChargeError.self) {
                _ = try TerminalCharge.make(
                    amountCents: amount,
                    currency: currency,
                    reference: reference,
                    now: Self.now,
                    lifetime: .seconds(60),
                    key: Self.key
                )
            }
        }
    }
}
