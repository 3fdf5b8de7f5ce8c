import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuReceipts
import GotchuTesting
import HTTPTypes
import Hummingbird
import NIOCore
import Testing

/// A receipt's text is read one way by every reader: no key twice, no key a receipt lacks, its one spelling.
@Suite("Receipts read strictly", .timeLimit(.minutes(3)))
struct ReceiptStrictnessTests {
    /// The receipt's canonical text with `member` added before its closing brace.
    static func appending(_ member: String, to receipt: Receipt) -> String {
        String(decoding: receipt.canonicalJSON.dropLast(), as: UTF8.self) + "," + member + "}"
    }

    static let duplicate = #""amount_cents":999999"#
    static let unknown = #""note":"refunded in full""#

    @Test("A duplicate amount_cents or an unknown key is refused before the signature is looked at")
    func duplicateAndUnknownKeys() throws {
        let (signer, _) = ReceiptSigner.generate()
        let receipt = try ReceiptTests.sample(signer: signer)
        let keys = ReceiptKeySet(keys: [signer.publicKey])
        let canonical = receipt.canonicalJSON
        let parsed = try Receipt(strictJSON: canonical)
        #expect(parsed == receipt)
        try parsed.verify(against: keys)
        // Whitespace around the text is no part of it (a file's last newline).
        #expect(try Receipt(strictJSON: Array("\n".utf8) + canonical + Array(" \n".utf8)) == receipt)

        let doubled = Self.appending(Self.duplicate, to: receipt)
        #expect(doubled.contains(#""amount_cents":1250,"#))
        let error = #expect(throws: ReceiptError.self) { try Receipt(strictJSON: Array(doubled.utf8)) }
        #expect(
            error?.description.contains(#"the key "amount_cents" appears twice"#) == true,
            "\(String(describing: error))"
        )
        // The same key spelled with an escape is the same key.
        let escaped = Self.appending(#""amount\u005fcents":999999"#, to: receipt)
        #expect(throws: ReceiptError.self) { try Receipt(strictJSON: Array(escaped.utf8)) }

        let extra = Self.appending(Self.unknown, to: receipt)
        let unknown = #expect(throws: ReceiptError.self) { try Receipt(strictJSON: Array(extra.utf8)) }
        #expect(unknown?.description.contains(#"no field "note""#) == true, "\(String(describing: unknown))")
        // Decoded by any route, an unknown key is refused.
        #expect(throws: DecodingError.self) {
            try APIJSON.decoder().decode(Receipt.self, from: Data(extra.utf8))
        }
    }

    @Test("Another spelling of the same receipt is refused: spaces, a string amount, a fraction, keys out of order")
    func otherSpellings() throws {
        let receipt = try ReceiptTests.sample(signer: ReceiptSigner.generate().signer)
        let text = String(decoding: receipt.canonicalJSON, as: UTF8.self)
        let spellings = [
            text.replacingOccurrences(of: #""amount_cents":1250"#, with: #""amount_cents": 1250"#),
            text.replacingOccurrences(of: #""amount_cents":1250"#, with: #""amount_cents":"1250""#),
            text.replacingOccurrences(of: #""amount_cents":1250"#, with: #""amount_cents":1250.0"#),
            String(text.replacingOccurrences(of: #"{"amount_cents":1250,"#, with: "{").dropLast())
                + #","amount_cents":1250}"#,
            text.replacingOccurrences(of: #""currency":"USD""#, with: #""currency":"\u0055SD""#),
        ]
        for spelling in spellings {
            #expect(spelling != text)
            let error = #expect(throws: ReceiptError.self) { try Receipt(strictJSON: Array(spelling.utf8)) }
            #expect(error?.description.contains("not spelled as the ledger wrote it") == true, "\(spelling)")
        }
        for broken in ["", "null", "[]", text + "x", String(text.dropLast()), #"{"id":"#] {
            #expect(throws: ReceiptError.self) { try Receipt(strictJSON: Array(broken.utf8)) }
        }
    }

    @Test("An answer is checked whole: a receipt twice, or a receipt with a key twice, is refused")
    func answers() throws {
        let receipt = try ReceiptTests.sample(signer: ReceiptSigner.generate().signer)
        let canonical = String(decoding: receipt.canonicalJSON, as: UTF8.self)
        try Receipt.checkAnswer(Array(#"{"new_balance_cents":5,"ok":true,"receipt":\#(canonical)}"#.utf8))
        try Receipt.checkAnswer(Array(#"{"ok":true,"receipt":null}"#.utf8))
        try Receipt.checkAnswer(Array(#"{"ok":true}"#.utf8))
        let refused = [
            #"{"ok":true,"receipt":\#(canonical),"receipt":\#(canonical)}"#,
            #"{"ok":true,"receipt":\#(Self.appending(Self.duplicate, to: receipt))}"#,
            #"{"ok":true,"receipt":\#(Self.appending(Self.unknown, to: receipt))}"#,
            #"{"ok":true,"ok":false}"#,
            #"{"history":[{"a":1,"a":2}]}"#,
            String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
        ]
        for answer in refused {
            #expect(throws: ReceiptError.self, "\(answer)") { try Receipt.checkAnswer(Array(answer.utf8)) }
        }
    }

    @Test("ledger verify names a stored receipt with a key twice or an unknown key", arguments: StoreKind.available)
    func ledgerVerify(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 1_000)
            let receipt = try #require(try await payee.session(sid: sid).receipt)
            #expect(try await ledger.store.verify().isValid)
            for (member, expected) in [
                (Self.duplicate, #"the key "amount_cents" appears twice"#), (Self.unknown, #"no field "note""#),
            ] {
                try await ledger.execute(
                    "UPDATE receipts SET body = rtrim(body, '}') || ',\(member)}' WHERE session_id = '\(sid)'"
                )
                let failure = try #require(try await ledger.store.verify().failure)
                #expect(failure.hasPrefix("receipt \(receipt.id) of session \(sid): "), "\(failure)")
                #expect(failure.contains(expected), "\(failure)")
                try await ledger.execute(
                    "UPDATE receipts SET body = '\(String(decoding: receipt.canonicalJSON, as: UTF8.self))' "
                        + "WHERE session_id = '\(sid)'"
                )
                #expect(try await ledger.store.verify().isValid)
            }
        }
    }

    @Test(
        "gotchu receipt verify takes any JSON spelling of a receipt, and refuses a key twice, an unknown key or a non-integer amount"
    )
    func command() async throws {
        try await TestLedger.with(store: .sqlite) { ledger in
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let sid = try await paidSession(payer: payer, payee: payee, amountCents: 420)
            let receipt = try #require(try await payer.session(sid: sid).receipt)
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let keys = directory.url.appendingPathComponent("keys.json")
            try APIJSON.encoder().encode(try await payer.receiptKeys()).write(to: keys)
            let canonical = String(decoding: receipt.canonicalJSON, as: UTF8.self)
            let gotchu = try BuiltProducts.gotchu
            // Re-saved by another JSON library: indented, keys in reverse order, a character escaped.
            let fields = try #require(try JSONSerialization.jsonObject(with: receipt.canonicalJSON) as? [String: Any])
            var members: [String] = []
            for key in fields.keys.sorted(by: >) {
                let value = try JSONSerialization.data(
                    withJSONObject: try #require(fields[key]),
                    options: .fragmentsAllowed
                )
                let text = String(decoding: value, as: UTF8.self).replacingOccurrences(of: "USD", with: "U\\u0053D")
                members.append("    \"\(key)\" : " + text)
            }
            var resaved = "{\n" + members.joined(separator: ",\n")
            resaved += "\n}\n"
            let files: [(String, String, String?)] = [
                ("valid.json", canonical + "\n", nil),
                ("answer.json", #"{"ok":true,"receipt":\#(canonical)}"#, nil),
                ("resaved.json", resaved, nil),
                ("answer-resaved.json", "{ \"receipt\": \(resaved), \"ok\": true }", nil),
                (
                    "string-amount.json",
                    canonical.replacingOccurrences(of: #""amount_cents":420"#, with: #""amount_cents":"420""#),
                    "another type"
                ),
                (
                    "fraction-amount.json",
                    canonical.replacingOccurrences(of: #""amount_cents":420"#, with: #""amount_cents":420.0"#),
                    "a fraction or an exponent"
                ),
                ("doubled.json", Self.appending(Self.duplicate, to: receipt), #"the key "amount_cents" appears twice"#),
                ("unknown.json", Self.appending(Self.unknown, to: receipt), #"no field "note""#),
                (
                    "answer-doubled.json", #"{"receipt":\#(canonical),"receipt":{}}"#,
                    #"the key "receipt" appears twice"#
                ),
            ]
            for (name, text, expected) in files {
                let file = directory.url.appendingPathComponent(name)
                try Data(text.utf8).write(to: file)
                let run = try RunningCommand(gotchu, ["receipt", "verify", file.path, "--keys", keys.path])
                let status = try await run.waitForExit()
                if let expected {
                    #expect(status == 2, "\(name)")
                    #expect(run.lines.first?.hasPrefix("not a receipt: ") == true, "\(name): \(run.lines)")
                    #expect(run.lines.first?.contains(expected) == true, "\(name): \(run.lines)")
                } else {
                    #expect(status == 0, "\(name): \(run.lines)")
                    #expect(run.lines.first?.hasPrefix("valid: payment of $4.20") == true, "\(name): \(run.lines)")
                }
            }
        }
    }

    @Test("The client refuses an answer whose receipt has a key twice, before anyone trusts it")
    func client() async throws {
        let receipt = try ReceiptTests.sample(signer: ReceiptSigner.generate().signer)
        let body =
            #"{"sid":"s-1","status":"PAID","amount_cents":1250,"exp_at":"2030-01-01T00:00:00.000Z","#
            + #""receipt":\#(Self.appending(Self.duplicate, to: receipt))}"#
        let router = Router()
        router.get("/sessions/s-1") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
        }
        try await withLoopbackApplication(router) { url in
            let client = LedgerClient(baseURL: try #require(URL(string: url)), token: "t")
            let error = await #expect(throws: LedgerClientError.self) { try await client.session(sid: "s-1") }
            #expect(
                error?.description.contains(#"the key "amount_cents" appears twice"#) == true,
                "\(String(describing: error))"
            )
        }
    }
}
