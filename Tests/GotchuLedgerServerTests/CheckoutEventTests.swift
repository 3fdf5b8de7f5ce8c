import Foundation
import GotchuCore
import GotchuLedgerServer
import GotchuTesting
import Testing

/// The checkout page's live status: `GET /p/{eid}/events`, read as a browser's `EventSource` reads it.
@Suite("Web checkout live status", .timeLimit(.minutes(10)))
struct CheckoutEventTests {
    /// Opens the page's event stream with `cookie`; the head must say it is one.
    static func open(_ ledger: CheckoutLedger, eid: String, cookie: String?) async throws -> LoopbackConnection {
        let connection = try LoopbackConnection(port: ledger.port)
        var headers = ["Accept": "text/event-stream"]
        if let cookie { headers["Cookie"] = cookie }
        try connection.send("GET", "/p/\(eid)/events", headers: headers)
        let head = try await connection.readHead()
        try #require(head.status == 200)
        #expect(head.headers["content-type"] == "text/event-stream")
        #expect(head.headers["referrer-policy"] == "no-referrer")
        #expect(head.headers["cache-control"] == "no-store")
        return connection
    }

    /// The next event with a name (comments and `retry:` skipped): its name and data; `nil` once the stream ended.
    static func next(_ connection: LoopbackConnection) async throws -> (name: String, data: String)? {
        while let block = try await connection.nextEvent() {
            guard let name = block.first(where: { $0.hasPrefix("event: ") }) else { continue }
            let data = block.first { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) } ?? ""
            return (String(name.dropFirst(7)), data)
        }
        return nil
    }

    @Test(
        "It reports the terminal's new code, then a payment made elsewhere, then ends",
        arguments: StoreKind.available
    )
    func rotationThenPaidElsewhere(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await CheckoutPaymentTests.scene(ledger)
            let stream = try await Self.open(ledger, eid: scene.eid, cookie: scene.browser.cookie)
            let first = try #require(try await Self.next(stream))
            #expect(first.name == "advertising")
            #expect(first.data == #"{"status":"ADVERTISING","shares":1,"shares_paid":0}"#)
            _ = try await ledger.store.rotateEID(sid: scene.session.sid, payeeID: scene.payee.id)
            let rotated = try #require(try await Self.next(stream))
            #expect(rotated.name == "eid-rotated")
            // Past the old EID's grace the stream still follows the session.
            ledger.clock.advance(seconds: 11)
            let someone = try await ledger.user("someone@example.com", funded: 5000)
            try await ledger.store.lock(sid: scene.session.sid, payerID: someone.id)
            #expect(try await Self.next(stream)?.name == "locked")
            _ = try await ledger.store.send(sid: scene.session.sid, payerID: someone.id, idempotencyKey: "k")
            let paid = try #require(try await Self.next(stream))
            #expect(paid.name == "paid")
            #expect(paid.data == #"{"status":"PAID","shares":1,"shares_paid":1}"#)
            #expect(try await Self.next(stream) == nil)
        }
    }

    @Test("It reports each share paid of a split, and a cancel, then ends", arguments: StoreKind.available)
    func sharesThenCancelled(store: StoreKind) async throws {
        try await CheckoutLedger.with(store: store) { ledger in
            let scene = try await CheckoutPaymentTests.scene(ledger, cents: 3000, shares: 3)
            let stream = try await Self.open(ledger, eid: scene.eid, cookie: scene.browser.cookie)
            #expect(try await Self.next(stream)?.name == "advertising")
            let friend = try await ledger.user("friend@example.com", funded: 5000)
            try await ledger.store.lock(sid: scene.session.sid, payerID: friend.id)
            _ = try await ledger.store.send(sid: scene.session.sid, payerID: friend.id, idempotencyKey: "k")
            let shared = try #require(try await Self.next(stream))
            #expect(shared.name == "share-paid")
            #expect(shared.data == #"{"status":"PARTIALLY_PAID","shares":3,"shares_paid":1}"#)
            try await ledger.store.cancel(sid: scene.session.sid, payeeID: scene.payee.id)
            #expect(try await Self.next(stream)?.name == "cancelled")
            #expect(try await Self.next(stream) == nil)
        }
    }

    @Test("Anyone may follow the page's session when anyone may resolve; no one unsigned when resolving needs a login")
    func access() async throws {
        try await CheckoutLedger.with(resolve: .public) { ledger in
            let payee = try await ledger.user("shop@example.com")
            let session = try await ledger.store.createSession(payeeID: payee.id, amountCents: 100, idempotencyKey: nil)
            let stream = try await Self.open(ledger, eid: session.session.eid.rawValue, cookie: nil)
            #expect(try await Self.next(stream)?.name == "advertising")
            #expect(try await ledger.browser().get("/p/0123456789/events").status == 404)
        }
        try await CheckoutLedger.with { ledger in
            let payee = try await ledger.user("shop@example.com")
            let session = try await ledger.store.createSession(payeeID: payee.id, amountCents: 100, idempotencyKey: nil)
            #expect(try await ledger.browser().get("/p/\(session.session.eid)/events").status == 401)
        }
    }
}
