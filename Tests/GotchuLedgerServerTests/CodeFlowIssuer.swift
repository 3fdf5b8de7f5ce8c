import Crypto
import Foundation
import GotchuReceipts
import Hummingbird
import JWTKit
import Logging
import ServiceLifecycle
import Synchronization

/// An OpenID Connect issuer on a loopback port that signs browsers in with the authorization code flow and PKCE:
/// its authorization endpoint signs in at once whoever the test says is signed in at the issuer and redirects back
/// with a code bound to the request's `code_challenge`, `nonce`, `redirect_uri` and `client_id`; its token endpoint
/// takes each code once, checks the `code_verifier` against the challenge (and the client secret when one is set),
/// and answers with an ID token really signed with the issuer's key. A test may make the issuer misbehave: sign
/// with another key, alter the token after signing, put another nonce in it, or answer the authorization request
/// with an error.
final class CodeFlowIssuer: Sendable {
    /// How the issuer misbehaves.
    enum Fault: Sendable, Equatable {
        /// Signs with a key it does not publish.
        case foreignKey
        /// Alters the token's claims after signing.
        case tampered
        /// Puts another nonce in the token.
        case wrongNonce
        /// Issues the token for another client.
        case wrongAudience
        /// Answers the authorization request with `error=access_denied`.
        case accessDenied
    }

    /// A code handed out and not yet redeemed.
    private struct Grant: Sendable {
        var challenge: String
        var method: String
        var nonce: String
        var redirectURI: String
        var clientID: String
        var subject: String
    }

    let key: IssuerKey
    let clientID: String
    /// Required of the client at the token endpoint, when set.
    let clientSecret: String?
    /// What the discovery document lists under `token_endpoint_auth_methods_supported`, if anything.
    let authMethods: [String]?
    private let grants = Mutex<[String: Grant]>([:])
    private let redeemed = Mutex<Set<String>>([])
    private let state = Mutex<(subject: String, name: String?, fault: Fault?)>(("alice-123", "Alice", nil))
    private let tokenRequests = Mutex<[[String: String]]>([])
    private let authorizationRequests = Mutex<[[String: String]]>([])
    private let clock = Mutex<@Sendable () -> Date>(Date.init)

    init(key: IssuerKey, clientID: String = "gotchu-web", clientSecret: String? = nil, authMethods: [String]? = nil) {
        self.key = key
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.authMethods = authMethods
    }

    /// Issues tokens by `clock` (the relying party's, which a test moves).
    func useClock(_ clock: @escaping @Sendable () -> Date) { self.clock.withLock { $0 = clock } }
    /// Who is signed in at the issuer.
    func signIn(subject: String, name: String?) { state.withLock { $0 = (subject, name, $0.fault) } }
    /// Makes the issuer misbehave, or behave again with `nil`.
    func misbehave(_ fault: Fault?) { state.withLock { $0.fault = fault } }
    /// The forms the token endpoint was sent.
    var tokenForms: [[String: String]] { tokenRequests.withLock { $0 } }
    /// The queries the authorization endpoint was sent.
    var authorizationQueries: [[String: String]] { authorizationRequests.withLock { $0 } }

    /// Serves the issuer while `body` runs; `body` gets the issuer URL (a path under the server).
    func serve<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        let router = Router()
        let base = Mutex("")
        let issuer: @Sendable () -> String = { base.withLock { $0 } + "/realm" }
        router.get("/realm/.well-known/openid-configuration") { _, _ -> Response in
            var document: [String: Any] = [
                "issuer": issuer(),
                "jwks_uri": issuer() + "/certs",
                "authorization_endpoint": issuer() + "/auth?tenant=shop",
                "token_endpoint": issuer() + "/token",
                "code_challenge_methods_supported": ["plain", "S256"],
            ]
            if let methods = self.authMethods { document["token_endpoint_auth_methods_supported"] = methods }
            return Self.json(try JSONSerialization.data(withJSONObject: document))
        }
        router.get("/realm/certs") { _, _ -> Response in
            Self.json(Data(#"{"keys": [\#(self.key.jwk)]}"#.utf8))
        }
        router.get("/realm/auth") { request, _ -> Response in
            var query: [String: String] = [:]
            for (name, value) in request.uri.queryParameters { query[String(name)] = String(value) }
            self.authorizationRequests.withLock { $0.append(query) }
            guard let redirect = query["redirect_uri"], var back = URLComponents(string: redirect) else {
                return Response(status: .badRequest)
            }
            let signedIn = self.state.withLock { $0 }
            if signedIn.fault == .accessDenied {
                back.queryItems = [
                    URLQueryItem(name: "error", value: "access_denied"),
                    URLQueryItem(name: "error_description", value: "The user <b>declined</b>"),
                    URLQueryItem(name: "state", value: query["state"]),
                ]
            } else {
                guard query["response_type"] == "code", query["client_id"] == self.clientID,
                    query["tenant"] == "shop", query["scope"]?.split(separator: " ").contains("openid") == true,
                    let challenge = query["code_challenge"], let method = query["code_challenge_method"],
                    let nonce = query["nonce"], query["state"] != nil
                else { return Response(status: .badRequest) }
                let code = Base64URL.encode(SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) })
                self.grants.withLock {
                    $0[code] = Grant(
                        challenge: challenge,
                        method: method,
                        nonce: nonce,
                        redirectURI: redirect,
                        clientID: self.clientID,
                        subject: signedIn.subject
                    )
                }
                back.queryItems = [
                    URLQueryItem(name: "code", value: code), URLQueryItem(name: "state", value: query["state"]),
                ]
            }
            var headers = HTTPFields()
            headers[.location] = back.string
            return Response(status: .seeOther, headers: headers)
        }
        router.post("/realm/token") { request, _ -> Response in
            let text = String(buffer: try await request.body.collect(upTo: 64 * 1024))
            var form: [String: String] = [:]
            for pair in text.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                func decode(_ part: Substring) -> String {
                    part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
                }
                form[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
            }
            self.tokenRequests.withLock { $0.append(form) }
            func refuse(_ error: String, _ status: HTTPResponse.Status = .badRequest) -> Response {
                Self.json(Data(#"{"error": "\#(error)"}"#.utf8), status: status)
            }
            if let secret = self.clientSecret {
                let basic = request.headers[.authorization].flatMap { header -> String? in
                    guard header.hasPrefix("Basic "), let data = Data(base64Encoded: String(header.dropFirst(6))) else {
                        return nil
                    }
                    // RFC 6749 §2.3.1: each part form-encoded before they were joined.
                    let parts = String(decoding: data, as: UTF8.self).split(separator: ":", maxSplits: 1)
                    return parts.map { $0.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
                        .joined(separator: ":")
                }
                let expected = self.clientID + ":" + secret
                guard basic == expected || (basic == nil && form["client_secret"] == secret) else {
                    return refuse("invalid_client", .unauthorized)
                }
            }
            guard form["grant_type"] == "authorization_code", let code = form["code"] else {
                return refuse("unsupported_grant_type")
            }
            // A code is redeemed once: a second use is refused, as real issuers do.
            let grant = self.grants.withLock { $0.removeValue(forKey: code) }
            let replayed = self.redeemed.withLock { !$0.insert(code).inserted }
            guard let grant, !replayed else { return refuse("invalid_grant") }
            guard form["client_id"] == grant.clientID, form["redirect_uri"] == grant.redirectURI,
                grant.method == "S256", let verifier = form["code_verifier"],
                Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8)))) == grant.challenge
            else { return refuse("invalid_grant") }
            let fault = self.state.withLock { $0.fault }
            let name = self.state.withLock { $0.name }
            var claims = IDClaims(
                issuer: issuer(),
                subject: grant.subject,
                audience: fault == .wrongAudience ? "another-app" : grant.clientID,
                nonce: fault == .wrongNonce ? "not-the-nonce" : grant.nonce,
                now: self.clock.withLock { $0 }()
            )
            claims.name = name
            var token: String
            switch fault {
            case .foreignKey:
                let foreign = try await IssuerKey.rsa(kid: self.key.kid)
                token = try await foreign.keys.sign(claims, kid: JWKIdentifier(string: self.key.kid))
            default:
                token = try await self.key.keys.sign(claims, kid: JWKIdentifier(string: self.key.kid))
            }
            if fault == .tampered {
                // Another subject in the payload, the signature left as it was.
                var parts = token.split(separator: ".").map(String.init)
                claims.sub = .init(value: "mallory")
                parts[1] = Base64URL.encode(try JSONEncoder().encode(claims))
                token = parts.joined(separator: ".")
            }
            let answer: [String: Any] = [
                "access_token": "opaque-access-token", "token_type": "Bearer", "expires_in": 300, "id_token": token,
            ]
            return Self.json(try JSONSerialization.data(withJSONObject: answer))
        }
        return try await withLoopbackApplication(router) { url in
            base.withLock { $0 = url }
            return try await body(url + "/realm")
        }
    }

    private static func json(_ data: Data, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// The claims of a test ID token.
struct IDClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim
    var nonce: String
    var name: String?

    init(issuer: String, subject: String, audience: String, nonce: String, now: Date) {
        iss = IssuerClaim(value: issuer)
        sub = SubjectClaim(value: subject)
        aud = AudienceClaim(value: [audience])
        iat = IssuedAtClaim(value: now)
        exp = ExpirationClaim(value: now.addingTimeInterval(300))
        self.nonce = nonce
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
