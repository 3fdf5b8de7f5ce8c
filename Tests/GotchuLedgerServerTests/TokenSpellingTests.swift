import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuOIDC
import GotchuReceipts
import JWTKit
import Testing

/// Other spellings of a token's or a signature's bytes: the same bytes decoded leniently, refused all the same.
@Suite("Tokens and signatures have one spelling: canonical base64url", .timeLimit(.minutes(10)))
struct TokenSpellingTests {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

    /// `segment` with its last character replaced by each other one that differs only in the bits no byte uses
    /// (none when the length leaves no such bits), and with `=` and `==` appended.
    static func respellings(of segment: Substring) -> [String] {
        let unused = [0: 0, 2: 4, 3: 2][segment.count % 4] ?? 0
        var spellings = ["\(segment)=", "\(segment)=="]
        guard unused > 0, let last = segment.last, let value = alphabet.firstIndex(of: last) else { return spellings }
        for low in 1..<(1 << unused) {
            spellings.append("\(segment.dropLast())\(alphabet[value | low])")
        }
        return spellings
    }

    /// `token` with segment `index` replaced by each of its respellings.
    static func variants(of token: String, segment index: Int) -> [String] {
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        return respellings(of: segments[index]).map { spelling in
            var changed = segments.map(String.init)
            changed[index] = spelling
            return changed.joined(separator: ".")
        }
    }

    @Test("Base64URL decodes only what it encodes: no other last character, no padding, no lone character")
    func base64URLIsCanonical() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<40 {
            let bytes = (0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let encoded = Base64URL.encode(bytes)
            #expect(Base64URL.isCanonical(encoded))
            #expect(Base64URL.decode(encoded) == Data(bytes))
            let respellings = Self.respellings(of: Substring(encoded))
            #expect(respellings.count == [0: 2, 1: 17, 2: 5][length % 3])
            for spelling in respellings {
                #expect(!Base64URL.isCanonical(spelling), "\(spelling) for \(bytes)")
                #expect(Base64URL.decode(spelling) == nil, "\(spelling) for \(bytes)")
            }
        }
        for text in ["A", "AAAAA", "AA+A", "AA/A", "AA A", "AAé", "AA.A"] {
            #expect(!Base64URL.isCanonical(text) && Base64URL.decode(text) == nil, "\(text)")
        }
    }

    @Test("The ledger's own token, respelled in any segment, is refused; the token as issued is accepted")
    func issuedToken() async throws {
        let authority = try await TokenAuthority(secret: TestLedger.secret)
        let token = try await authority.issue(userID: "alice")
        #expect(await authority.userID(from: token) == "alice")
        // The HS256 signature is 32 bytes, 43 characters: its last one carries two bits no byte uses.
        let signatureVariants = Self.variants(of: token, segment: 2)
        #expect(signatureVariants.count == 5)
        for index in 0..<3 {
            for variant in Self.variants(of: token, segment: index) {
                #expect(await authority.userID(from: variant) == nil, "\(variant)")
            }
        }
        for variant in [token + ".", "." + token, token.replacingOccurrences(of: ".", with: ".."), ""] {
            #expect(await authority.userID(from: variant) == nil, "\(variant)")
        }
        // Still accepted after the refusals (they did not poison the cache), and from a fresh authority too.
        #expect(await authority.userID(from: token) == "alice")
        #expect(await (try TokenAuthority(secret: TestLedger.secret)).userID(from: token) == "alice")
    }

    @Test("A respelled bearer token is answered 401 by the server")
    func overHTTP() async throws {
        try await TestLedger.with { ledger in
            let client = try await ledger.client("alice@example.com")
            let token = try #require(client.token)
            let good = try await ledger.raw("GET", "/wallet/me", headers: ["Authorization": "Bearer \(token)"])
            #expect(good.status == 200)
            for variant in Self.variants(of: token, segment: 2) {
                let answer = try await ledger.raw("GET", "/wallet/me", headers: ["Authorization": "Bearer \(variant)"])
                #expect(answer.status == 401, "\(variant)")
            }
        }
    }

    @Test("An issuer's access token, its signature respelled, is refused by the OIDC verifier")
    func oidcToken() async throws {
        for key in [try await IssuerKey.ec(kid: "ec-1"), try await IssuerKey.rsa(kid: "rsa-1")] {
            let issuer = "https://id.example.com/realm"
            let now = Date()
            let verifier = OIDCVerifier(
                .init(issuer: issuer, audience: "gotchu", jwksURL: URL(string: "https://id.example.com/certs")),
                clock: { now },
                fetch: { _ in Data(#"{"keys": [\#(key.jwk)]}"#.utf8) }
            )
            let token = try await key.sign(AccessClaims(issuer: issuer, subject: "user-1", now: now))
            #expect(await verifier.identity(from: token)?.subject == "user-1")
            // ES256: 64 bytes, RSA-2048: 256 bytes; 86 and 342 characters, four unused bits each.
            let variants = Self.variants(of: token, segment: 2)
            #expect(variants.count == 17)
            for variant in variants + Self.variants(of: token, segment: 0) {
                #expect(await verifier.identity(from: variant) == nil, "\(key.kid): \(variant)")
            }
        }
    }
}
