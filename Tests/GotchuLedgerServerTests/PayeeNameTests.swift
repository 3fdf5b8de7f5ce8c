import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import Testing

@Suite("Payee names: checked where they enter, told apart where they are shown", .timeLimit(.minutes(10)))
struct PayeeNameTests {
    @Test(
        "Hostile e-mail addresses are refused at login with 400 problem+json saying why, and no user is made",
        arguments: [
            (String(repeating: "\u{8}", count: 11) + "$5.00\u{2800}to\u{2800}coffee@example.com", "U+0008"),
            ("$5.00\u{2800}to\u{2800}coffee@example.com", "U+2800"),
            ("bob\u{202E}moc@example.com", "U+202E"),
            ("b\u{200B}ob@example.com", "U+200B"),
            ("\u{2066}bob\u{2069}@example.com", "U+2066"),
            ("bob\u{1B}[2J@example.com", "U+001B"),
            ("bob\u{00A0}@example.com", "U+00A0"),
            ("b\u{3164}ob@example.com", "U+3164"),
            ("bob\u{FEFF}@example.com", "U+FEFF"),
            ("bob@exam\u{200D}ple.com", "U+200D"),
            ("bob smith@example.com", "name@example.com"),
            (String(repeating: "b", count: 65) + "@example.com", "at most 64 characters"),
            ("bob@" + String(repeating: "a", count: 250) + ".com", "at most 254 characters"),
            ("bob@еxample.com", "xn--"),  // Cyrillic "е": a look-alike domain
            ("bob@example", "xn--"),
            ("bob@example..com", "xn--"),
            ("bob@exa_mple.com", "xn--"),
            ("a@\u{1F3FB}b.co", "xn--"),
            ("a@\u{0301}b.co", "xn--"),
        ]
    )
    func refused(email: String, message: String) async throws {
        try await TestLedger.with { ledger in
            let body = String(decoding: try APIJSON.encoder().encode(DevLoginRequest(email: email)), as: UTF8.self)
            let response = try await ledger.raw("POST", "/auth/dev-login", body: body)
            #expect(response.status == 400)
            #expect(response.headers["content-type"] == "application/problem+json")
            let problem = try APIJSON.decoder().decode(Problem.self, from: response.body)
            #expect(problem.kind == .badRequest)
            #expect(problem.detail?.contains(message) == true, "\(problem.detail ?? "")")
            #expect(try await ledger.store.audit().entryCount == 0)
        }
    }

    @Test(
        "Addresses are trimmed, lowercased and normalised to NFC: one user per address however it is typed",
        arguments: StoreKind.available
    )
    func normalised(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let composed = try await ledger.anonymous.devLogin(email: "Jos\u{E9}@Example.COM")
            let decomposed = try await ledger.anonymous.devLogin(email: "  jose\u{301}@example.com ")
            #expect(composed.userID == decomposed.userID)

            var payee = ledger.anonymous
            payee.token = decomposed.token
            let session = try await payee.createSession(amountCents: 100)
            let payer = try await ledger.client("payer@example.com")
            let resolved = try await payer.resolve(eid: session.eid)
            #expect(resolved.payeeDisplay.name == "jos\u{E9}")
            #expect(resolved.payeeDisplay.name.unicodeScalars.count == 4)
            #expect(resolved.payeeDisplay.domain == "example.com")
        }
    }

    @Test("Two payees named bob are told apart by their domain in the resolve answer", arguments: StoreKind.available)
    func sameNameOtherDomain(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payer = try await ledger.client("alice@example.com")
            var domains: [String?] = []
            for email in ["bob@example.com", "bob@attacker.test"] {
                let payee = try await ledger.client(email)
                let session = try await payee.createSession(amountCents: 500)
                let resolved = try await payer.resolve(eid: session.eid)
                #expect(resolved.payeeDisplay.name == "bob")
                domains.append(resolved.payeeDisplay.domain)
                // And on the wire: an optional member beside the name.
                let raw = try await ledger.raw(
                    "POST",
                    "/sessions/resolve",
                    body: #"{"eid":"\#(session.eid)"}"#,
                    headers: ["Authorization": "Bearer \(payer.token!)"]
                )
                let object = try JSONSerialization.jsonObject(with: raw.body) as? [String: Any]
                let display = object?["payee_display"] as? [String: Any]
                #expect(display?["domain"] as? String == domains.last ?? nil)
            }
            #expect(domains == ["example.com", "attacker.test"])
        }
    }

    @Test("A name stored before the checks existed reaches payers cleaned: no control or bidi character, bounded")
    func storedBeforeChecks() async throws {
        try await TestLedger.with { ledger in
            // The store itself takes what an older server let in; only the HTTP edge checks.
            let hostile =
                String(repeating: "\u{8}", count: 11) + "$5.00\u{2800}to\u{202E}" + String(repeating: "x", count: 100)
            let user = try await ledger.store.login(email: hostile + "@example.com")
            let token = try await ledger.tokens.issue(userID: user.id)
            var payee = ledger.anonymous
            payee.token = token
            let session = try await payee.createSession(amountCents: 50_000)
            let payer = try await ledger.client("alice@example.com")
            let name = try await payer.resolve(eid: session.eid).payeeDisplay.name
            #expect(!name.unicodeScalars.contains { DisplayText.isUnsafe($0) })
            #expect(name.hasPrefix(String(repeating: "\u{FFFD}", count: 11) + "$5.00\u{FFFD}to\u{FFFD}"))
            #expect(name.unicodeScalars.count == 64)
            // Printable ASCII only, but longer than a name may be now: still bounded.
            let long = try await ledger.store.login(email: String(repeating: "y", count: 100) + "@example.com")
            payee.token = try await ledger.tokens.issue(userID: long.id)
            let longSession = try await payee.createSession(amountCents: 100)
            #expect(
                try await payer.resolve(eid: longSession.eid).payeeDisplay.name == String(repeating: "y", count: 64)
            )
        }
    }
}
