import CryptoExtras
import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuTesting
import Hummingbird
import JWTKit
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import GotchuOIDC

/// An issuer on a loopback port: its discovery document and its key set (which a test may replace, as an issuer
/// rotating its keys does), counting the fetches of the key set.
final class TestIssuer: Sendable {
    private let keySet = Mutex("{\"keys\": []}")
    private let fetches = Mutex(0)

    func publish(_ jwks: String) { keySet.withLock { $0 = jwks } }
    var fetchCount: Int { fetches.withLock { $0 } }

    /// Serves the issuer while `body` runs; `body` gets the issuer URL (a path under the server).
    func serve<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        let router = Router()
        let base = Mutex("")
        router.get("/realm/.well-known/openid-configuration") { _, _ -> String in
            let issuer = base.withLock { $0 } + "/realm"
            return #"{"issuer": "\#(issuer)", "jwks_uri": "\#(issuer)/certs"}"#
        }
        router.get("/realm/certs") { _, _ -> String in
            self.fetches.withLock { $0 += 1 }
            return self.keySet.withLock { $0 }
        }
        return try await withLoopbackApplication(router) { url in
            base.withLock { $0 = url }
            return try await body(url + "/realm")
        }
    }
}

/// A signing key of the issuer's and its public JWK.
struct IssuerKey: Sendable {
    let kid: String
    let keys: JWTKeyCollection
    let jwk: String
    /// The PEM of the public key (what an attacker has).
    let publicPEM: String

    static func rsa(kid: String) async throws -> IssuerKey {
        let key = try Insecure.RSA.PrivateKey(backing: try _RSA.Signing.PrivateKey(keySize: .bits2048))
        let (modulus, exponent) = try key.publicKey.getKeyPrimitives()
        let keys = JWTKeyCollection()
        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        return IssuerKey(
            kid: kid,
            keys: keys,
            jwk:
                #"{"kty": "RSA", "kid": "\#(kid)", "use": "sig", "alg": "RS256", "n": "\#(modulus.base64URL)", "e": "\#(exponent.base64URL)"}"#,
            publicPEM: key.publicKey.pemRepresentation
        )
    }

    static func ec(kid: String) async throws -> IssuerKey {
        let key = ES256PrivateKey()
        let parameters = try #require(key.publicKey.parameters)
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: kid))
        return IssuerKey(
            kid: kid,
            keys: keys,
            jwk: #"{"kty": "EC", "kid": "\#(kid)", "crv": "P-256", "x": "\#(parameters.x)", "y": "\#(parameters.y)"}"#,
            publicPEM: key.publicKey.pemRepresentation
        )
    }

    func sign(_ claims: AccessClaims) async throws -> String {
        try await keys.sign(claims, kid: JWKIdentifier(string: kid))
    }
}

/// The claims of a test access token.
struct AccessClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim
    var name: String?

    init(issuer: String, subject: String, audience: String = "gotchu", now: Date, lifetime: Double = 300) {
        iss = IssuerClaim(value: issuer)
        sub = SubjectClaim(value: subject)
        aud = AudienceClaim(value: [audience])
        iat = IssuedAtClaim(value: now)
        exp = ExpirationClaim(value: now.addingTimeInterval(lifetime))
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

@Suite("OpenID Connect access tokens, verified against the issuer's keys", .timeLimit(.minutes(5)))
struct OIDCTests {
    @Test(arguments: StoreKind.available)
    func externalTokens(store kind: StoreKind) async throws {
        let issuer = TestIssuer()
        let rsa = try await IssuerKey.rsa(kid: "r1")
        let ec = try await IssuerKey.ec(kid: "e1")
        issuer.publish(
            #"{"keys": [\#(rsa.jwk), \#(ec.jwk), {"kty": "oct", "kid": "s1", "k": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}"#
        )
        try await issuer.serve { issuerURL in
            try await TestLedger.with(
                store: kind,
                identities: { clock in
                    OIDCVerifier(.init(issuer: issuerURL, audience: "gotchu"), clock: { clock.now() })
                }
            ) { ledger in
                func wallet(_ token: String) async throws -> (status: Int, walletID: String?) {
                    let answer = try await ledger.raw(
                        "GET",
                        "/wallet/me",
                        headers: ["Authorization": "Bearer \(token)"]
                    )
                    let wallet = try? APIJSON.decoder().decode(WalletResponse.self, from: answer.body)
                    return (answer.status, wallet?.walletID)
                }
                let now = ledger.clock.now()
                var aliceClaims = AccessClaims(issuer: issuerURL, subject: "alice-123", now: now)
                aliceClaims.name = "Alice's Bakery"

                // Provisioned on first use, the same user after, whichever of the issuer's keys signed.
                let first = try await wallet(try await rsa.sign(aliceClaims))
                #expect(first.status == 200)
                #expect(try await wallet(try await rsa.sign(aliceClaims)).walletID == first.walletID)
                #expect(try await wallet(try await ec.sign(aliceClaims)).walletID == first.walletID)
                let bob = try await wallet(try await ec.sign(AccessClaims(issuer: issuerURL, subject: "bob", now: now)))
                #expect(bob.status == 200 && bob.walletID != first.walletID)
                #expect(issuer.fetchCount == 1)

                // The user acts like any other: a session shows the name the issuer gave.
                let alice = LedgerClient(baseURL: ledger.url, token: try await rsa.sign(aliceClaims))
                let created = try await alice.createSession(amountCents: 450)
                let payer = try await ledger.client("payer@example.com")
                #expect(try await payer.resolve(eid: created.eid).payeeDisplay.name == "Alice's Bakery")

                // The payer sees the issuer's host as the payee's domain; an operator disables the account by the
                // address `admin user list` shows, and its tokens stop at once.
                let resolved = try await payer.resolve(eid: created.eid)
                #expect(resolved.payeeDisplay.domain == "127.0.0.1")
                let bobAccount = try #require(
                    try await ledger.store.users().first { $0.email.hasSuffix("@127.0.0.1") && $0.displayName == "bob" }
                )
                try await ledger.store.disableUser(email: bobAccount.email, actor: "test")
                let bobAgain = try await ec.sign(AccessClaims(issuer: issuerURL, subject: "bob", now: now))
                #expect(try await wallet(bobAgain).status == 401)

                // Refused: another audience, another issuer, expired, unsigned, and HS256 with the public key as
                // the secret (an attacker has it).
                let refused: [(String, String)] = [
                    (
                        "wrong audience",
                        try await rsa.sign(
                            AccessClaims(issuer: issuerURL, subject: "alice-123", audience: "other", now: now)
                        )
                    ),
                    (
                        "wrong issuer",
                        try await rsa.sign(AccessClaims(issuer: issuerURL + "x", subject: "alice-123", now: now))
                    ),
                    (
                        "expired",
                        try await rsa.sign(
                            AccessClaims(issuer: issuerURL, subject: "alice-123", now: now.addingTimeInterval(-600))
                        )
                    ),
                    ("alg none", try Self.unsigned(aliceClaims, kid: "r1")),
                    ("HS256 with the public key", try await Self.hmac(aliceClaims, secret: rsa.publicPEM, kid: "r1")),
                    (
                        "HS256 with the published oct key",
                        try await Self.hmac(aliceClaims, secret: "0123456789abcdef0123456789abcdef", kid: "s1")
                    ),
                    ("another key under a published kid", try await IssuerKey.rsa(kid: "r1").sign(aliceClaims)),
                ]
                for (label, token) in refused {
                    let answer = try await ledger.raw(
                        "GET",
                        "/wallet/me",
                        headers: ["Authorization": "Bearer \(token)"]
                    )
                    #expect(answer.status == 401, "\(label)")
                }

                // Rotation: the issuer replaces r1 with r2. Within the minimum interval an unknown kid fetches
                // nothing, however often it comes.
                let rotated = try await IssuerKey.rsa(kid: "r2")
                issuer.publish(#"{"keys": [\#(rotated.jwk)]}"#)
                let fetchesBefore = issuer.fetchCount
                for _ in 0..<5 { #expect(try await wallet(try await rotated.sign(aliceClaims)).status == 401) }
                #expect(issuer.fetchCount == fetchesBefore)
                // After it, the unknown kid fetches the keys once: the new key works, the retired one no longer.
                ledger.clock.advance(seconds: 61)
                aliceClaims = AccessClaims(issuer: issuerURL, subject: "alice-123", now: ledger.clock.now())
                #expect(try await wallet(try await rotated.sign(aliceClaims)).walletID == first.walletID)
                #expect(issuer.fetchCount == fetchesBefore + 1)
                #expect(try await wallet(try await rsa.sign(aliceClaims)).status == 401)
                #expect(issuer.fetchCount == fetchesBefore + 1)
            }
        }
    }

    @Test("gotchu server --oidc-issuer --oidc-audience accepts the issuer's tokens, found by discovery")
    func serverCommand() async throws {
        let issuer = TestIssuer()
        let key = try await IssuerKey.ec(kid: "e1")
        issuer.publish(#"{"keys": [\#(key.jwk)]}"#)
        try await issuer.serve { issuerURL in
            let processes = try GotchuProcesses()
            defer { processes.remove() }
            let (server, url) = try await processes.startServer([
                "--oidc-issuer", issuerURL, "--oidc-audience", "gotchu",
            ])
            defer { _ = try? server.stopNow() }
            let token = try await key.sign(AccessClaims(issuer: issuerURL, subject: "carol", now: Date()))
            let carol = LedgerClient(baseURL: URL(string: url)!, token: token)
            #expect(try await carol.wallet().availableCents == 0)
            let stranger = try await key.sign(
                AccessClaims(issuer: issuerURL, subject: "carol", audience: "another-app", now: Date())
            )
            #expect(
                await problemKind { try await LedgerClient(baseURL: URL(string: url)!, token: stranger).wallet() }
                    == .unauthorized
            )
        }
    }

    /// `claims` under `alg: none`, with no signature.
    static func unsigned(_ claims: AccessClaims, kid: String) throws -> String {
        let header = Data(#"{"alg":"none","typ":"JWT","kid":"\#(kid)"}"#.utf8).base64URL
        return header + "." + (try JSONEncoder().encode(claims)).base64URL + "."
    }

    /// `claims` signed with HS256 and `secret`.
    static func hmac(_ claims: AccessClaims, secret: String, kid: String) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        return try await keys.sign(claims, kid: JWKIdentifier(string: kid))
    }
}
