import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerClient
import GotchuLedgerServer
import Testing

/// A charge's order reference: kept with the session on create, answered by create, resolve, status and refunds,
/// carried in both sides' wallet entries and on the checkout's pages as quoted text, refused with nothing written
/// when it is not printable text, and part of what a create's idempotency key names.
@Suite("Order references: from create to the payee's history", .timeLimit(.minutes(10)))
struct OrderReferenceTests {
    @Test(
        "A reference comes back in create, resolve, status, the refund and both wallets' entries; none stays none",
        arguments: StoreKind.available
    )
    func travels(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let payer = try await ledger.client("payer@example.com", funded: 10_000)
            let reference = "Table 7 · order #1017"
            let created = try await payee.createSession(amountCents: 1_250, reference: reference)
            #expect(created.reference == reference)
            let resolved = try await payer.resolve(eid: created.eid)
            #expect(resolved.reference == reference)
            // The terminal is told the payee's name as payers are shown it.
            #expect(created.payeeDisplay == resolved.payeeDisplay && created.payeeDisplay?.name == "shop")
            try await payer.lock(sid: created.sid)
            _ = try await payer.send(sid: created.sid, idempotencyKey: "pay-1")
            #expect(try await payee.session(sid: created.sid).reference == reference)
            let refund = try await payee.refund(sid: created.sid, amountCents: 250, idempotencyKey: "refund-1")
            #expect(refund.refund.reference == reference)

            let plain = try await payee.createSession(amountCents: 300)
            #expect(plain.reference == nil)
            try await payer.lock(sid: plain.sid)
            _ = try await payer.send(sid: plain.sid, idempotencyKey: "pay-2")
            #expect(try await payee.session(sid: plain.sid).reference == nil)

            // Both sides' histories: the payment and the refund under the reference, the other session under none.
            for client in [payee, payer] {
                let entries = try await client.walletEntries(limit: 50).entries
                let named = entries.filter { $0.sessionID == created.sid }
                #expect(named.count == 2 && named.allSatisfy { $0.reference == reference }, "\(named)")
                #expect(entries.filter { $0.sessionID == plain.sid }.allSatisfy { $0.reference == nil })
                #expect(entries.filter { $0.sessionID == nil }.allSatisfy { $0.reference == nil })
            }
            // On the wire an entry always has the key, `null` for none.
            let auth = ["Authorization": "Bearer \(payee.token!)"]
            let raw = try await ledger.raw("GET", "/wallet/entries", headers: auth)
            let object = try JSONSerialization.jsonObject(with: raw.body) as? [String: Any]
            let first = try #require((object?["entries"] as? [[String: Any]])?.first)
            #expect(first.keys.contains("reference"))
        }
    }

    @Test(
        "A reference that is not printable text, or too long, is refused 400 naming it, and nothing is written",
        arguments: StoreKind.available
    )
    func refused(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let before = try await SplitValidationTests.rows(ledger)
            let bad = [
                "", " order", "order ", "order\n7", "a\u{202E}b", "\u{200B}", "tab\there", "a\u{7}", "x\u{2800}",
                String(repeating: "x", count: OrderReference.maximumLength + 1),
            ]
            for text in bad {
                let refusal = await #expect(throws: LedgerClientError.self) {
                    try await payee.createSession(amountCents: 500, reference: text)
                }
                #expect(refusal?.problemKind == .badRequest, "\(text.debugDescription)")
                #expect("\(refusal!)".contains("reference"), "\(text.debugDescription): \(refusal!)")
            }
            // Not a string at all: the body's shape.
            let auth = ["Authorization": "Bearer \(payee.token!)"]
            for body in [#"{"amount_cents":500,"reference":17}"#, #"{"amount_cents":500,"reference":["a"]}"#] {
                let answer = try await ledger.raw("POST", "/sessions/create", body: body, headers: auth)
                #expect(answer.status == 400, "\(body)")
            }
            #expect(try await SplitValidationTests.rows(ledger) == before)
            // The longest accepted, and one in another script, are kept as sent.
            let longest = String(repeating: "é", count: OrderReference.maximumLength)
            #expect(try await payee.createSession(amountCents: 500, reference: longest).reference == longest)
            #expect(try await payee.createSession(amountCents: 500, reference: "注文 42").reference == "注文 42")
        }
    }

    @Test(
        "A create retried under its key with another reference, or none, is refused; the same one is replayed",
        arguments: StoreKind.available
    )
    func replay(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("shop@example.com")
            let first = try await payee.createSession(amountCents: 900, reference: "order 1", idempotencyKey: "k-1")
            let again = try await payee.createSession(amountCents: 900, reference: "order 1", idempotencyKey: "k-1")
            #expect(again.sid == first.sid && again.reference == "order 1")
            for other in ["order 2", nil] as [String?] {
                let refusal = await #expect(throws: LedgerClientError.self) {
                    try await payee.createSession(amountCents: 900, reference: other, idempotencyKey: "k-1")
                }
                #expect(refusal?.problemKind == .idempotencyKeyReused, "\(other ?? "none")")
            }
            let plain = try await payee.createSession(amountCents: 900, idempotencyKey: "k-2")
            let refusal = await #expect(throws: LedgerClientError.self) {
                try await payee.createSession(amountCents: 900, reference: "order 1", idempotencyKey: "k-2")
            }
            #expect(refusal?.problemKind == .idempotencyKeyReused)
            #expect(try await payee.session(sid: plain.sid).reference == nil)
        }
    }

    @Test(
        "The checkout shows the reference as quoted text on the pay page and the receipt page, markup escaped",
        arguments: StoreKind.available
    )
    func checkoutPages(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let reference = "<b>order</b> \"17\" & co"
            let scene = try await CheckoutPaymentTests.scene(ledger, reference: reference)
            let page = try await scene.browser.get(scene.page)
            #expect(page.status == 200)
            #expect(page.element("reference") == "Reference " + DisplayText.quoted(reference))
            #expect(!page.body.contains("<b>order</b>"))
            let paid = try await scene.browser.submit(page, to: "\(scene.page)/pay")
            let location = try #require(paid.headers["location"])
            let receipt = try await scene.browser.get("\(scene.page)/\(location)")
            #expect(receipt.element("outcome") == "Paid")
            #expect(receipt.element("reference") == "Reference " + DisplayText.quoted(reference))

            // A session without one shows no such line.
            let (plain, _) = try await ledger.store.createSession(
                payeeID: scene.payee.id,
                amountCents: 300,
                idempotencyKey: nil
            )
            let plainPage = try await scene.browser.get("/p/\(plain.eid.rawValue)")
            #expect(plainPage.status == 200 && plainPage.element("reference") == nil)
        }
    }
}
