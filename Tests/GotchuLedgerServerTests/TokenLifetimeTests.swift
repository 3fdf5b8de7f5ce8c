import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerServer
import JWTKit
import Testing

@Suite("Bearer tokens live no longer than the server issues them, and not before their time", .timeLimit(.minutes(10)))
struct TokenLifetimeTests {
    /// Signed with the test server's own secret, with whatever times and header a forger picks.
    private struct Claims: JWTPayload {
        var sub: SubjectClaim
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        var nbf: NotBeforeClaim?

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    private static func sign(
        _ userID: String,
        issuedAt: Date,
        expiresAt: Date,
        notBefore: Date? = nil,
        crit: [String]? = nil,
        fields: [String: String] = [:]
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: TestLedger.secret), digestAlgorithm: .sha256)
        var header = JWTHeader()
        for (name, value) in fields { header.fields[name] = .string(value) }
        if let crit {
            header.crit = crit
            for name in crit { header.fields[name] = .string("x") }
        }
        return try await keys.sign(
            Claims(
                sub: SubjectClaim(value: userID),
                iss: IssuerClaim(value: TokenAuthority.issuer),
                iat: IssuedAtClaim(value: issuedAt),
                exp: ExpirationClaim(value: expiresAt),
                nbf: notBefore.map { NotBeforeClaim(value: $0) }
            ),
            header: header
        )
    }

    private static func status(_ ledger: TestLedger, _ token: String) async throws -> (Int, ProblemKind?, String?) {
        let response = try await ledger.raw("GET", "/wallet/me", headers: ["Authorization": "Bearer \(token)"])
        return (response.status, TestLedger.problemKind(response.body), response.headers["content-type"])
    }

    @Test("A 100-year exp, an exp beyond the lifetime from iat, a future nbf or iat, any crit: 401 problem+json")
    func refusals() async throws {
        try await TestLedger.with { ledger in
            let user = try await ledger.store.login(email: "alice@example.com").id
            let now = ledger.clock.now()
            let hour: TimeInterval = 3600
            let lifetime = 12 * hour
            // Controls, signed the same way: a normal token, one at exactly the lifetime, a past nbf, and
            // clock skew within the leeway.
            let accepted = [
                try await Self.sign(user, issuedAt: now, expiresAt: now + hour),
                try await Self.sign(user, issuedAt: now, expiresAt: now + lifetime),
                try await Self.sign(user, issuedAt: now - hour, expiresAt: now + hour, notBefore: now - hour),
                try await Self.sign(user, issuedAt: now + 30, expiresAt: now + hour, notBefore: now + 30),
            ]
            for token in accepted {
                #expect(try await Self.status(ledger, token).0 == 200)
            }
            let refused = [
                ("100-year exp", try await Self.sign(user, issuedAt: now, expiresAt: now + 100 * 365 * 24 * hour)),
                (
                    "exp - iat over the lifetime",
                    try await Self.sign(user, issuedAt: now - hour, expiresAt: now + lifetime)
                ),
                ("iat long ago", try await Self.sign(user, issuedAt: now - 100 * 24 * hour, expiresAt: now + hour)),
                ("future iat", try await Self.sign(user, issuedAt: now + hour, expiresAt: now + 2 * hour)),
                (
                    "future nbf",
                    try await Self.sign(user, issuedAt: now, expiresAt: now + 2 * hour, notBefore: now + hour)
                ),
                (
                    "unknown crit",
                    try await Self.sign(user, issuedAt: now, expiresAt: now + hour, crit: ["urn:example:unknown"])
                ),
                ("empty crit", try await Self.sign(user, issuedAt: now, expiresAt: now + hour, crit: [])),
                ("expired", try await Self.sign(user, issuedAt: now - 2 * hour, expiresAt: now - hour)),
            ]
            for (name, token) in refused {
                let (status, kind, contentType) = try await Self.status(ledger, token)
                #expect(status == 401, "\(name)")
                #expect(kind == .unauthorized, "\(name)")
                #expect(contentType == "application/problem+json", "\(name)")
            }
        }
    }

    @Test("Every distinct header is judged: many acceptable ones, then crit twice, are answered each on its own")
    func headersJudgedEachTime() async throws {
        try await TestLedger.with { ledger in
            let user = try await ledger.store.login(email: "alice@example.com").id
            let now = ledger.clock.now()
            // More distinct acceptable headers than the server remembers, each presented twice.
            for index in 0..<12 {
                let token = try await Self.sign(user, issuedAt: now, expiresAt: now + 60, fields: ["x-n": "\(index)"])
                #expect(try await Self.status(ledger, token).0 == 200, "header \(index)")
                #expect(try await Self.status(ledger, token).0 == 200, "header \(index), again")
            }
            let critical = try await Self.sign(user, issuedAt: now, expiresAt: now + 60, crit: ["x-n"])
            #expect(try await Self.status(ledger, critical).0 == 401)
            #expect(try await Self.status(ledger, critical).0 == 401)
            #expect(try await Self.status(ledger, try await ledger.tokens.issue(userID: user)).0 == 200)
        }
    }

    @Test("A future nbf is honoured: the token works once its time has come")
    func notBeforeArrives() async throws {
        try await TestLedger.with { ledger in
            let user = try await ledger.store.login(email: "alice@example.com").id
            let now = ledger.clock.now()
            let token = try await Self.sign(user, issuedAt: now, expiresAt: now + 7200, notBefore: now + 3600)
            #expect(try await Self.status(ledger, token).0 == 401)
            ledger.clock.advance(seconds: 3600)
            #expect(try await Self.status(ledger, token).0 == 200)
        }
    }
}
