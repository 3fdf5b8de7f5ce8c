import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuReceipts
import GotchuTesting
import Testing

/// A payment's answer as the suites compare it: balance and replay, with a receipt present (checked on its own in
/// ``ReceiptTests``).
struct SignedAnswer: Equatable {
    var newBalanceCents: Cents
    var replayed: Bool
}

func == (answer: SendResult, expected: SignedAnswer) -> Bool {
    answer.newBalanceCents == expected.newBalanceCents && answer.replayed == expected.replayed
        && answer.receipt != nil
}

@Suite("Signed receipts", .timeLimit(.minutes(10)))
struct ReceiptTests {
    /// A receipt with fixed fields, for checks that need no ledger.
    static func sample(signer: ReceiptSigner) throws -> Receipt {
        try signer.sign(
            Receipt(
                id: "r-1",
                kind: .payment,
                sessionID: "s-1",
                amountCents: 1_250,
                currency: "USD",
                payeeID: "payee-1",
                payerReference: Receipt.payerReference(receiptID: "r-1", payerID: "payer-1"),
                entryIDs: ["e-1", "e-2"],
                issuedAtMilliseconds: 1_800_000_000_123,
                keyID: ""
            )
        )
    }

    @Test("The canonical bytes are the documented length-prefixed fields, in order")
    func canonicalBytes() throws {
        let receipt = try Self.sample(signer: ReceiptSigner.generate().signer)
        // Built here by hand from the README's description, not with the code under test.
        var expected: [UInt8] = []
        for field in [
            "gotchu-receipt-v1", "r-1", "payment", "s-1", "1250", "USD", "payee-1", receipt.payerReference, "2", "e-1",
            "e-2", "1800000000123", receipt.keyID,
        ] {
            let bytes = Array(field.utf8)
            expected += [0, 0, UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        }
        #expect(receipt.canonicalBytes == expected)
        #expect(receipt.payerReference.count == 43)
        #expect(!receipt.payerReference.contains("payer-1"))
    }

    @Test("A receipt verifies with its key; any field changed, another key, or a bad shape does not")
    func tamper() throws {
        let (signer, _) = ReceiptSigner.generate()
        let keys = ReceiptKeySet(keys: [signer.publicKey])
        let receipt = try Self.sample(signer: signer)
        try receipt.verify(against: keys)
        var altered: [Receipt] = []
        var copy = receipt
        copy.amountCents += 1
        altered.append(copy)
        copy = receipt
        copy.sessionID = "s-2"
        altered.append(copy)
        copy = receipt
        copy.entryIDs = ["e-2", "e-1"]
        altered.append(copy)
        copy = receipt
        copy.payeeID = "payee-2"
        altered.append(copy)
        copy = receipt
        copy.issuedAtMilliseconds += 1
        altered.append(copy)
        for receipt in altered {
            #expect(throws: ReceiptError.self) { try receipt.verify(against: keys) }
        }
        let other = ReceiptSigner.generate().signer
        #expect(throws: ReceiptError.self) { try receipt.verify(against: ReceiptKeySet(keys: [other.publicKey])) }
        var hostile = receipt
        hostile.id = "r\u{1B}[2J"
        #expect(throws: ReceiptError.self) { try hostile.verify(against: keys) }
        #expect(throws: ReceiptError.self) { try receipt.requireMatches(sessionID: "s-1", amountCents: 1) }
        try receipt.requireMatches(sessionID: "s-1", amountCents: 1_250)
    }

    @Test(
        "The send answer, its replay and the session status carry one receipt that verifies against the published keys",
        arguments: StoreKind.available
    )
    func paymentCarriesReceipt(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 250)
            try await payer.lock(sid: session.sid)
            let paid = try await payer.send(sid: session.sid, idempotencyKey: "k")
            let receipt = try #require(paid.receipt)
            let keys = try await LedgerClient(baseURL: ledger.url).receiptKeys()
            #expect(keys.keys.count == 1)
            #expect(keys.keys.first?.keyType == "OKP" && keys.keys.first?.curve == "Ed25519")
            try receipt.verify(against: keys)
            try receipt.requireMatches(sessionID: session.sid, amountCents: 250)
            #expect(receipt.currency == "USD")
            #expect(receipt.issuedAtMilliseconds == Int64(ledger.clock.now().timeIntervalSince1970 * 1000))
            let payerID = try await ledger.store.login(email: "payer@example.com").id
            #expect(receipt.payerReference == Receipt.payerReference(receiptID: receipt.id, payerID: payerID))
            let entries = try await payer.wallet().recent.map(\.id) + payee.wallet().recent.map(\.id)
            #expect(receipt.entryIDs.allSatisfy(entries.contains) && receipt.entryIDs.count == 2)

            let replay = try await payer.send(sid: session.sid, idempotencyKey: "k")
            #expect(replay.replayed)
            #expect(replay.receipt == receipt)
            #expect(try await payee.session(sid: session.sid).receipt == receipt)
            #expect(try await payer.session(sid: session.sid).receipt == receipt)

            // The trust a client keeps: pinned at first contact, in a file.
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let pins = directory.url.appendingPathComponent("pins/receipt-keys.json")
            let trust = ReceiptTrust(.pinned(file: pins))
            try await trust.verify(receipt, sessionID: session.sid, amountCents: 250, ledger: payer)
            let attributes = try FileManager.default.attributesOfItem(atPath: pins.path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            await #expect(throws: ReceiptError.self) {
                try await trust.verify(receipt, sessionID: session.sid, amountCents: 251, ledger: payer)
            }
        }
    }

    @Test(
        "A rotated key signs new payments; the old key stays published and its receipts still verify",
        arguments: StoreKind.available
    )
    func rotation(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            func pay(_ key: String) async throws -> Receipt {
                let session = try await payee.createSession(amountCents: 100)
                try await payer.lock(sid: session.sid)
                return try #require(try await payer.send(sid: session.sid, idempotencyKey: key).receipt)
            }
            let first = try await pay("1")
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let trust = ReceiptTrust(.pinned(file: directory.url.appendingPathComponent("pins.json")))
            try await trust.verify(first, sessionID: first.sessionID, amountCents: 100, ledger: payer)

            let new = try await ledger.store.rotateReceiptKey()
            let second = try await pay("2")
            #expect(second.keyID == new.keyID)
            #expect(second.keyID != first.keyID)
            let keys = try await LedgerClient(baseURL: ledger.url).receiptKeys()
            #expect(keys.keys.map(\.keyID) == [new.keyID, first.keyID])
            try first.verify(against: keys)
            try second.verify(against: keys)
            // The pinned trust learns the new key: the server still publishes the pinned one.
            try await trust.verify(second, sessionID: second.sessionID, amountCents: 100, ledger: payer)
            let verification = try await ledger.store.verify()
            #expect(verification.isValid, "\(verification)")
        }
    }

    @Test(
        "gotchu receipt verify: 0 for a valid receipt (server keys or a key file), 1 for an altered one, 2 for no receipt, 3 unchecked"
    )
    func command() async throws {
        try await TestLedger.with(store: .sqlite) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 420)
            try await payer.lock(sid: session.sid)
            let receipt = try #require(try await payer.send(sid: session.sid, idempotencyKey: "k").receipt)
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let file = directory.url.appendingPathComponent("receipt.json")
            try APIJSON.encoder().encode(receipt).write(to: file)
            let keys = directory.url.appendingPathComponent("keys.json")
            try APIJSON.encoder().encode(try await payer.receiptKeys()).write(to: keys)
            var altered = receipt
            altered.amountCents = 4_200
            let forged = directory.url.appendingPathComponent("forged.json")
            try APIJSON.encoder().encode(altered).write(to: forged)
            let environment = ["XDG_CONFIG_HOME": directory.url.path]

            let gotchu = try BuiltProducts.gotchu
            let server = ledger.url.absoluteString
            let valid = try RunningCommand(
                gotchu,
                ["receipt", "verify", file.path, "--server", server],
                environment: environment
            )
            #expect(try await valid.waitForExit() == 0)
            #expect(valid.lines.first?.hasPrefix("valid: payment of $4.20 USD") == true, "\(valid.lines)")
            let offline = try RunningCommand(gotchu, ["receipt", "verify", file.path, "--keys", keys.path])
            #expect(try await offline.waitForExit() == 0)
            let invalid = try RunningCommand(gotchu, ["receipt", "verify", forged.path, "--keys", keys.path])
            #expect(try await invalid.waitForExit() == 1)
            #expect(invalid.lines.first?.hasPrefix("invalid: the signature does not match") == true, "\(invalid.lines)")
            // Not a receipt at all, and a receipt that could not be checked, each with a status of its own.
            let garbage = try RunningCommand(gotchu, ["receipt", "verify", keys.path, "--keys", keys.path])
            #expect(try await garbage.waitForExit() == 2)
            #expect(garbage.lines.first?.hasPrefix("not a receipt: ") == true, "\(garbage.lines)")
            let missing = directory.url.appendingPathComponent("missing.json").path
            let unchecked = try RunningCommand(gotchu, ["receipt", "verify", file.path, "--keys", missing])
            #expect(try await unchecked.waitForExit() == 3)
            #expect(unchecked.lines.first?.hasPrefix("not checked: cannot read") == true, "\(unchecked.lines)")
        }
    }

    @Test("A pinned trust refuses a server that stopped publishing the pinned keys")
    func pinnedKeysGone() async throws {
        try await TestLedger.with(store: .sqlite) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let pins = directory.url.appendingPathComponent("pins.json")
            let stranger = ReceiptSigner.generate().signer
            try APIJSON.encoder().encode(ReceiptKeySet(keys: [stranger.publicKey])).write(to: pins)
            let receipt = try Self.sample(signer: ReceiptSigner.generate().signer)
            await #expect(throws: ReceiptError.self) {
                try await ReceiptTrust(.pinned(file: pins)).verify(
                    receipt,
                    sessionID: "s-1",
                    amountCents: 1_250,
                    ledger: payer
                )
            }
        }
    }
}
