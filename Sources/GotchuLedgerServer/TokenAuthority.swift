public import Foundation
import GotchuAPI
import JWTKit

/// Issues and checks the bearer tokens of the ledger API: HS256 JWTs with subject, issuer, issue and expiry times.
///
/// The algorithm is pinned: a token whose header names anything but `HS256` (`none`, `HS512`, RSA…) is refused
/// before its signature is looked at.
public struct TokenAuthority: Sendable {
    /// The `iss` claim written and required.
    public static let issuer = "gotchu-ledger"

    private let keys: JWTKeyCollection
    private let lifetime: Duration
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
        self.lifetime = lifetime
        self.clock = clock
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

    /// The user id in `token`, or `nil` when the token is malformed, forged, of another algorithm or issuer, or
    /// expired.
    public func userID(from token: String) async -> String? {
        guard Self.headerAlgorithm(of: token) == "HS256",
            let claims = try? await keys.verify(token, as: TokenClaims.self)
        else { return nil }
        guard (try? claims.exp.verifyNotExpired(currentDate: clock())) != nil else { return nil }
        return claims.sub.value
    }

    private static func headerAlgorithm(of token: String) -> String? {
        guard let header = token.split(separator: ".", omittingEmptySubsequences: false).first,
            let data = Data(base64URLEncoded: String(header)),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["alg"] as? String
    }
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

    func verify(using algorithm: some JWTAlgorithm) async throws {
        guard iss.value == TokenAuthority.issuer else {
            throw JWTError.claimVerificationFailure(failedClaim: iss, reason: "unknown issuer")
        }
    }
}

extension Data {
    fileprivate init?(base64URLEncoded text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self.init(base64Encoded: base64)
    }
}
