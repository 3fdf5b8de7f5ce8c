import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import JWTKit
import Testing

@Suite("Bad input gets a clear 4xx and changes nothing", .timeLimit(.minutes(10)))
struct ValidationTests {
    @Test(
        "Amounts: 0, negative, fractional, string, overflow, over the cap, missing → 400 invalid-amount",
        arguments: [
            (#"{"amount_cents":0}"#, "at least 1 cent"),
            (#"{"amount_cents":-5}"#, "at least 1 cent"),
            (#"{"amount_cents":12.5}"#, "whole number of cents"),
            (#"{"amount_cents":"1250"}"#, "not a string"),
            (#"{"amount_cents":1e30}"#, "out of range"),
            (#"{"amount_cents":92233720368547758070}"#, "out of range"),
            (#"{"amount_cents":100000000001}"#, "at most 100000000000"),
            (#"{"amount_cents":null}"#, "is required"),
            (#"{}"#, "is required"),
            (#"{"amount_cents":true}"#, "integer number of cents"),
        ]
    )
    func amounts(body: String, message: String) async throws {
        try await TestLedger.with { ledger in
            let payee = try await ledger.client("payee@example.com")
            let auth = ["Authorization": "Bearer \(payee.token!)"]
            for path in ["/sessions/create", "/dev/fund"] {
                let response = try await ledger.raw("POST", path, body: body, headers: auth)
                #expect(response.status == 400)
                let problem = try APIJSON.decoder().decode(Problem.self, from: response.body)
                #expect(problem.kind == .invalidAmount)
                #expect(problem.detail?.contains(message) == true, "\(path) \(body): \(problem.detail ?? "")")
                #expect(response.headers["content-type"] == "application/problem+json")
            }
            #expect(try await payee.wallet().availableCents == 0)
            #expect(try await ledger.store.audit().entryCount == 0)
        }
    }

    @Test("The largest allowed amount is accepted, and the cap is configurable", arguments: StoreKind.available)
    func cap(store: StoreKind) async throws {
        var policy = LedgerPolicy()
        policy.maximumAmount = 5_000
        try await TestLedger.with(store: store, policy: policy) { ledger in
            let payee = try await ledger.client("payee@example.com")
            _ = try await payee.createSession(amountCents: 5_000)
            #expect(await problemKind { try await payee.createSession(amountCents: 5_001) } == .invalidAmount)
        }
    }

    @Test(
        "Malformed JSON, wrong types, huge bodies and bad EIDs are refused; unknown fields are ignored",
        arguments: StoreKind.available
    )
    func bodies(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            let auth = ["Authorization": "Bearer \(payee.token!)"]
            let cases: [(String, String, Int, ProblemKind)] = [
                ("/sessions/resolve", "{not json", 400, .badRequest),
                ("/sessions/resolve", "[1,2]", 400, .badRequest),
                ("/sessions/resolve", "", 400, .badRequest),
                ("/sessions/resolve", #"{"eid":12345}"#, 400, .badRequest),
                ("/sessions/resolve", #"{"eid":"A1B2C3D4E5"}"#, 400, .badRequest),
                ("/sessions/resolve", #"{"eid":"a1b2c3d4e"}"#, 400, .badRequest),
                ("/sessions/resolve", #"{"eid":"a1b2c3d4e5","extra":[1]}"#, 404, .sessionNotFound),
                ("/sessions/lock", #"{"sid":null}"#, 400, .badRequest),
                ("/sessions/lock", #"{"sid":"no-such-session"}"#, 400, .badRequest),
                ("/sessions/lock", #"{"sid":"00000000-0000-4000-8000-00000000000g"}"#, 400, .badRequest),
                ("/sessions/lock", #"{"sid":"00000000-0000-4000-8000-000000000000"}"#, 404, .sessionNotFound),
                ("/sessions/unlock", #"{"sid":"0000000000004000800000000000000000"}"#, 400, .badRequest),
                ("/sessions/cancel", #"{"sid":"00000000-0000-4000-8000-0000000000000"}"#, 400, .badRequest),
                ("/auth/dev-login", #"{"email":"not-an-email"}"#, 400, .badRequest),
                ("/auth/dev-login", #"{"email":["a@b.c"]}"#, 400, .badRequest),
                ("/sessions/resolve", String(repeating: " ", count: 16 * 1024 + 1), 413, .bodyTooLarge),
            ]
            for (path, body, status, kind) in cases {
                let response = try await ledger.raw("POST", path, body: body, headers: auth)
                #expect(response.status == status, "\(path) \(body.prefix(40))")
                #expect(TestLedger.problemKind(response.body) == kind, "\(path) \(body.prefix(40))")
            }
            let unknown = try await ledger.raw("GET", "/no/such/route")
            #expect(unknown.status == 404 && TestLedger.problemKind(unknown.body) == .notFound)
        }
    }

    @Test("Without --dev, /auth/dev-login and /dev/fund do not exist", arguments: StoreKind.available)
    func productionRoutes(store: StoreKind) async throws {
        try await TestLedger.with(store: store, developmentMode: false) { ledger in
            let login = try await ledger.raw("POST", "/auth/dev-login", body: #"{"email":"a@example.com"}"#)
            #expect(login.status == 404)
            let user = try await ledger.store.login(email: "a@example.com")
            let token = try await ledger.tokens.issue(userID: user.id)
            let fund = try await ledger.raw(
                "POST",
                "/dev/fund",
                body: #"{"amount_cents":100}"#,
                headers: ["Authorization": "Bearer \(token)"]
            )
            #expect(fund.status == 404)
            let health = try await ledger.raw("GET", "/healthz")
            #expect(health.status == 200)
        }
    }

    @Test("An e-mail whose \"@\" is followed by a combining mark or emoji modifier is still split at the \"@\"")
    func emailScalars() async throws {
        try await TestLedger.with { ledger in
            // Split at the "@", the domain is what follows: not letters, digits, hyphens and dots.
            for email in ["a@\u{1F3FB}b.co", "a@\u{0301}b.co"] {
                let response = try await ledger.raw("POST", "/auth/dev-login", body: #"{"email":"\#(email)"}"#)
                #expect(response.status == 400, "\(email)")
                let problem = try APIJSON.decoder().decode(Problem.self, from: response.body)
                #expect(problem.detail?.contains("the domain of email") == true, "\(email)")
            }
            let twoAts = try await ledger.raw("POST", "/auth/dev-login", body: "{\"email\":\"a@\u{0301}b@c.co\"}")
            #expect(twoAts.status == 400)
        }
    }
}

@Suite("Bearer tokens", .timeLimit(.minutes(10)))
struct TokenTests {
    @Test(
        "Missing, malformed, forged, wrong-algorithm, wrong-issuer and expired tokens get 401",
        arguments: StoreKind.available
    )
    func refusals(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let alice = try await ledger.client("alice@example.com")
            let valid = try #require(alice.token)
            let parts = valid.split(separator: ".").map(String.init)
            let forgedAuthority = try await TokenAuthority(secret: String(repeating: "x", count: 40))
            let forged = try await forgedAuthority.issue(
                userID: try await ledger.store.login(email: "alice@example.com").id
            )
            // Signed with the server's own secret, differing only in the issuer; the control passes.
            let aliceID = try await ledger.store.login(email: "alice@example.com").id
            let wrongIssuer = try await ForeignToken.sign(
                userID: aliceID,
                issuer: "someone-else",
                now: ledger.clock.now()
            )
            let control = try await ForeignToken.sign(
                userID: aliceID,
                issuer: TokenAuthority.issuer,
                now: ledger.clock.now()
            )
            #expect(
                try await ledger.raw("GET", "/wallet/me", headers: ["Authorization": "Bearer \(control)"]).status == 200
            )
            let noneHeader = Data(#"{"alg":"none","typ":"JWT"}"#.utf8).base64URL
            let hs512Header = Data(#"{"alg":"HS512","typ":"JWT"}"#.utf8).base64URL
            let tokens = [
                "",
                "garbage",
                "a.b.c",
                forged,
                wrongIssuer,
                "\(noneHeader).\(parts[1]).",
                "\(hs512Header).\(parts[1]).\(parts[2])",
                "\(parts[0]).\(parts[1]).\(parts[2].dropLast(2))AA",
            ]
            for token in tokens {
                let response = try await ledger.raw("GET", "/wallet/me", headers: ["Authorization": "Bearer \(token)"])
                #expect(response.status == 401, "token \(token.prefix(30))")
                #expect(TestLedger.problemKind(response.body) == .unauthorized)
            }
            #expect(try await ledger.raw("GET", "/wallet/me").status == 401)
            #expect(try await ledger.raw("GET", "/wallet/me", headers: ["Authorization": "Basic abc"]).status == 401)
            #expect(try await alice.wallet().availableCents == 0)

            ledger.clock.advance(seconds: 12 * 3600 - 1)
            #expect(try await alice.wallet().availableCents == 0)
            ledger.clock.advance(seconds: 1)
            #expect(await problemKind { try await alice.wallet() } == .unauthorized)
        }
    }

    @Test("A short secret is refused")
    func shortSecret() async {
        await #expect(throws: TokenAuthorityError.self) { try await TokenAuthority(secret: "short") }
    }
}

extension Data {
    var base64URL: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Tokens signed with the test server's secret but written outside ``TokenAuthority``.
private struct ForeignToken: JWTPayload {
    var sub: SubjectClaim
    var iss: IssuerClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {}

    static func sign(userID: String, issuer: String, now: Date) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: TestLedger.secret), digestAlgorithm: .sha256)
        return try await keys.sign(
            ForeignToken(
                sub: SubjectClaim(value: userID),
                iss: IssuerClaim(value: issuer),
                iat: IssuedAtClaim(value: now),
                exp: ExpirationClaim(value: now.addingTimeInterval(3600))
            )
        )
    }
}
