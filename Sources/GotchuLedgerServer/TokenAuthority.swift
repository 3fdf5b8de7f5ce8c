import Crypto
public import Foundation
import GotchuAPI
import GotchuCore
import GotchuReceipts
import JWTKit

/// Issues and checks the bearer tokens of the ledger API: HS256 JWTs with subject, issuer, issue and expiry times.
///
/// The algorithm is pinned: a token whose header names anything but `HS256` (`none`, `HS512`, RSA…), or asks for
/// extensions through `crit` (none is understood), is refused before its signature is looked at. A token is
/// accepted only within the lifetime this authority issues: not before its `nbf` or `iat`, not after its `exp`, and
/// never one whose `exp` lies further from its `iat` or from now than that lifetime, so a token signed with the
/// secret but a far `exp` does not outlive the rule. Its three segments must be canonical base64url
/// (``CompactJWS/isCanonical(_:)``): a token has one spelling, not four that decode alike.
public struct TokenAuthority: Sendable {
    /// The `iss` claim written and required.
    public static let issuer = "gotchu-ledger"

    /// The clock skew tolerated between the servers that issue and check a token, in seconds.
    public static let leewaySeconds: Double = 60

    private let keys: JWTKeyCollection
    /// The secret, from which keys for other purposes are derived.
    private let secret: SymmetricKey
    /// Token header segments already found acceptable. Every token an authority issues carries the same header, so
    /// it is parsed once, not on every request (Foundation's JSON parse cost more than the signature check). Headers
    /// come from clients, so the set is small.
    private let acceptedHeaders = BoundedCache<String, Bool>(capacity: 8)
    /// Tokens whose signature and issuer were checked, with their claims: a client sends the same token on every
    /// request for its life, and checking it (an HMAC and a JSON parse) was a visible share of a small request's time.
    /// Only a token that passed enters, keyed by its whole text, signature included.
    private let verified = BoundedCache<String, VerifiedClaims>(capacity: 4096)
    /// How long an issued token is valid.
    public let lifetime: Duration
    private let clock: @Sendable () -> Date

    /// Creates an authority for `secret` (at least 32 bytes).
    /// - Parameters:
    ///   - lifetime: how long an issued token is valid (default 12 hours).
    ///   - clock: the clock expiry is judged by.
    public init(
        secret: String,
        lifetime: Duration = .seconds(12 * 3600),
        clock: @escaping @Sendable () -> Date = Date.init
    ) async throws {
        guard secret.utf8.count >= 32 else {
            throw TokenAuthorityError.secretTooShort
        }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        self.keys = keys
        self.secret = SymmetricKey(data: Data(secret.utf8))
        self.lifetime = lifetime
        self.clock = clock
    }

    /// A 256-bit key for `purpose`, derived from the secret (HKDF-SHA256): every server sharing the secret derives
    /// the same one, and no two purposes, nor the tokens, share a key.
    func derivedKey(for purpose: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: secret, info: Data(purpose.utf8), outputByteCount: 32)
    }

    /// A new token for `userID`.
    public func issue(userID: String) async throws -> String {
        let now = clock()
        let claims = TokenClaims(
            sub: SubjectClaim(value: userID),
            iss: IssuerClaim(value: Self.issuer),
            iat: IssuedAtClaim(value: now),
            exp: ExpirationClaim(value: now.addingTimeInterval(Double(lifetime.components.seconds)))
        )
        return try await keys.sign(claims)
    }

    /// The user id in `token`, or `nil` when the token is malformed (not three segments of canonical base64url),
    /// forged, of another algorithm or issuer, has critical extensions, is not valid yet, has expired, or claims a
    /// longer life than this authority gives.
    public func userID(from token: String) async -> String? {
        await bearer(of: token)?.userID
    }

    /// The user id and issue time of `token`, under the same checks as ``userID(from:)``: the issue time lets the
    /// caller refuse a token issued before its user's tokens were revoked (a logout).
    public func bearer(of token: String) async -> (userID: String, issuedAt: Date)? {
        let claims: VerifiedClaims
        if let known = verified[token] {
            claims = known
        } else {
            guard CompactJWS.isCanonical(token), hasAcceptableHeader(token),
                let decoded = try? await keys.verify(token, as: TokenClaims.self)
            else { return nil }
            claims = VerifiedClaims(
                userID: decoded.sub.value,
                issued: decoded.iat.value,
                expires: decoded.exp.value,
                notBefore: decoded.nbf?.value
            )
            verified[token] = claims
        }
        // Time is judged on every use, a token's signature once.
        let now = clock()
        let longest = Double(lifetime.components.seconds) + Self.leewaySeconds
        guard now < claims.expires,
            claims.issued <= now.addingTimeInterval(Self.leewaySeconds),
            claims.expires.timeIntervalSince(claims.issued) <= longest,
            claims.expires.timeIntervalSince(now) <= longest
        else { return nil }
        if let notBefore = claims.notBefore, notBefore > now.addingTimeInterval(Self.leewaySeconds) { return nil }
        return (claims.userID, claims.issued)
    }

    /// Whether the header names HS256 and no `crit` extensions (RFC 7515 §4.1.11: a token whose critical extensions
    /// are not understood must be refused; this authority understands none).
    private func hasAcceptableHeader(_ token: String) -> Bool {
        let header = String(token.prefix { $0 != "." })
        if acceptedHeaders[header] != nil { return true }
        guard Self.isAcceptable(header: header) else { return false }
        acceptedHeaders[header] = true
        return true
    }

    private static func isAcceptable(header: String) -> Bool {
        guard let data = Base64URL.decode(header),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return false }
        return object["alg"] as? String == "HS256" && object["crit"] == nil
    }
}

/// The claims of a token whose signature and issuer were checked.
private struct VerifiedClaims: Sendable {
    var userID: String
    var issued: Date
    var expires: Date
    var notBefore: Date?
}

/// Why a token authority could not be made.
public enum TokenAuthorityError: Error, CustomStringConvertible {
    /// HS256 needs a secret of at least 32 bytes to be worth its name.
    case secretTooShort

    public var description: String {
        switch self {
        case .secretTooShort: return "the JWT secret must be at least 32 bytes long"
        }
    }
}

private struct TokenClaims: JWTPayload {
    var sub: SubjectClaim
    var iss: IssuerClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    var nbf: NotBeforeClaim?

    func verify(using algorithm: some JWTAlgorithm) async throws {
        guard iss.value == TokenAuthority.issuer else {
            throw JWTError.claimVerificationFailure(failedClaim: iss, reason: "unknown issuer")
        }
    }
}
