import AsyncHTTPClient
package import Crypto
import Foundation
import GotchuCore
import GotchuReceipts
package import HTTPTypes
import JWTKit
import NIOCore
import NIOHTTP1

/// Browser sign-in at the configured OpenID Connect issuer: the authorization code flow with PKCE (`S256`).
///
/// ``start(returnPath:redirectURI:)`` sends the browser to the issuer's authorization endpoint, and gives it a
/// short-lived cookie holding what the way back is checked against: the `state`, the `nonce`, the PKCE verifier, the
/// redirect URI and the page to return to, sealed (ChaCha20-Poly1305) with a key every server sharing the JWT secret
/// derives alike, so the issuer's redirect may reach any of them. ``finish(code:state:cookie:)`` checks the
/// returned `state` against the cookie's, exchanges the code at the token endpoint with the verifier (and the client
/// secret, for a confidential client), and verifies the ID token: the issuer's signature, `iss`, `aud` holding the
/// client id, `exp`, `iat`, and the cookie's `nonce`.
package struct OIDCSignIn: Sendable {
    /// The issuer's keys and discovery document, shared with the bearer tokens' checks.
    package let verifier: OIDCVerifier
    /// Seals the pending sign-in's cookie.
    package let key: SymmetricKey

    /// A sign-in through `verifier`'s issuer, its cookies sealed with `key`.
    package init(verifier: OIDCVerifier, key: SymmetricKey) {
        self.verifier = verifier
        self.key = key
    }

    /// How long a sign-in may take at the issuer: the cookie's life.
    package static let lifetime: Duration = .seconds(600)
    /// The largest answer read from the token endpoint.
    package static let maximumTokenResponseSize = 64 * 1024
    /// The path the issuer sends the browser back to, under the server's public URL.
    package static let callbackPath = "/p/oidc/callback"
    /// What the sealing key is derived for.
    package static let keyPurpose = "gotchu oidc sign-in state v1"

    /// The pending sign-in's cookie: `__Host-` and `Secure` when the redirect URI is https, `HttpOnly`, and
    /// `SameSite=Lax`, since the issuer's redirect back is a cross-site top-level GET, on which a `Strict` cookie
    /// would not be sent.
    package static func cookieName(secure: Bool) -> String { secure ? "__Host-gotchu-signin" : "gotchu-signin" }

    /// Where the browser goes to sign in, and the `Set-Cookie` value that remembers it.
    package struct Start: Sendable {
        /// The issuer's authorization endpoint with the request's parameters.
        package var location: String
        /// The `Set-Cookie` header's value.
        package var cookie: String
    }

    /// The issuer's user and the page the sign-in started from.
    package struct Finish: Sendable {
        /// Who signed in.
        package var identity: OIDCVerifier.Identity
        /// The same-origin checkout path to return to.
        package var returnPath: String
    }

    /// Begins a sign-in that returns to `returnPath` (a same-origin `/p/…` path).
    /// - Parameter redirectURI: `PUBLIC_URL/p/oidc/callback`, as registered at the issuer.
    package func start(returnPath: String, redirectURI: String) async throws(OIDCSignInError) -> Start {
        guard Self.isReturnPath(returnPath) else {
            throw OIDCSignInError(
                .badRequest,
                "The page to return to is not a payment page of this ledger.",
                reason: "the return path is not a checkout path"
            )
        }
        let discovery = try await endpoints()
        guard var components = URLComponents(string: discovery.authorization) else {
            throw OIDCSignInError(
                .badGateway,
                "The sign-in service cannot be used now. Sign in with your e-mail address and password instead.",
                reason: "the issuer's authorization_endpoint is not a URL"
            )
        }
        let pending = PendingSignIn(
            state: Self.randomToken(),
            nonce: Self.randomToken(),
            verifier: Self.randomToken(),
            redirectURI: redirectURI,
            returnPath: returnPath,
            expires: Int64(verifier.clock().timeIntervalSince1970) + Self.lifetime.components.seconds
        )
        let parameters = [
            URLQueryItem(name: "response_type", value: "code"),
            URLQueryItem(name: "client_id", value: verifier.configuration.signInClientID),
            URLQueryItem(name: "redirect_uri", value: redirectURI),
            URLQueryItem(name: "scope", value: "openid email profile"),
            URLQueryItem(name: "state", value: pending.state),
            URLQueryItem(name: "nonce", value: pending.nonce),
            URLQueryItem(name: "code_challenge", value: PKCE.challenge(for: pending.verifier)),
            URLQueryItem(name: "code_challenge_method", value: "S256"),
        ]
        // The endpoint's own query (a tenant, say) stays; ours follow, form-encoded.
        var query = components.percentEncodedQuery.map { $0.isEmpty ? [] : [$0] } ?? []
        query += parameters.map { Self.formEncode($0.name) + "=" + Self.formEncode($0.value ?? "") }
        components.percentEncodedQuery = query.joined(separator: "&")
        guard let location = components.string else {
            throw OIDCSignInError(
                .badGateway,
                "The sign-in service cannot be used now. Sign in with your e-mail address and password instead.",
                reason: "the issuer's authorization_endpoint is not a URL"
            )
        }
        let secure = redirectURI.lowercased().hasPrefix("https:")
        let value = try pending.sealed(with: key)
        return Start(location: location, cookie: Self.cookie(value, secure: secure, maxAge: Self.lifetime))
    }

    /// Ends the sign-in the issuer sent back with `code` and `state`, against the pending sign-in's `cookie`.
    package func finish(code: String, state: String, cookie: String?) async throws(OIDCSignInError) -> Finish {
        guard let cookie else {
            throw OIDCSignInError(
                .badRequest,
                "No sign-in is pending in this browser: it took longer than \(Self.lifetime.components.seconds / 60) "
                    + "minutes, or cookies are off. Go back to the payment and sign in again.",
                reason: "no pending sign-in cookie"
            )
        }
        guard let pending = PendingSignIn(sealed: cookie, key: key) else {
            throw OIDCSignInError(
                .badRequest,
                "This sign-in was not begun here. Go back to the payment and sign in again.",
                reason: "the pending sign-in's cookie does not open with the key"
            )
        }
        guard Int64(verifier.clock().timeIntervalSince1970) < pending.expires else {
            throw OIDCSignInError(
                .badRequest,
                "The sign-in took too long. Go back to the payment and sign in again.",
                reason: "the pending sign-in expired"
            )
        }
        guard Self.constantTimeEqual(state, pending.state) else {
            throw OIDCSignInError(
                .badRequest,
                "The answer from the sign-in service does not belong to the sign-in this browser began. Go back to the "
                    + "payment and sign in again.",
                reason: "state differs from the pending sign-in's"
            )
        }
        guard Self.isReturnPath(pending.returnPath) else {
            throw OIDCSignInError(
                .badRequest,
                "The page to return to is not a payment page of this ledger.",
                reason: "the return path is not a checkout path"
            )
        }
        let discovery = try await endpoints()
        let idToken = try await exchange(code: code, pending: pending, discovery: discovery)
        let identity = try await verifier.identity(fromIDToken: idToken, nonce: pending.nonce)
        return Finish(identity: identity, returnPath: pending.returnPath)
    }

    /// The `Set-Cookie` value that removes the pending sign-in's cookie.
    package static func clearingCookie(secure: Bool) -> String { cookie("", secure: secure, maxAge: .zero) }

    private static func cookie(_ value: String, secure: Bool, maxAge: Duration) -> String {
        let attributes = ["Path=/", "Max-Age=\(maxAge.components.seconds)", "HttpOnly", "SameSite=Lax"]
        return "\(cookieName(secure: secure))=\(value); "
            + (attributes + (secure ? ["Secure"] : [])).joined(separator: "; ")
    }

    // MARK: The issuer

    /// The issuer's endpoints of the code flow and how the client proves itself at the token endpoint.
    package struct Endpoints: Sendable {
        var authorization: String
        var token: URL
        /// Sends the client secret in the form (`client_secret_post`) rather than as Basic credentials.
        var secretInForm: Bool
    }

    /// The endpoints of the issuer's discovery document: both https (http only on loopback), and `S256` supported
    /// if the document lists the methods.
    package func endpoints() async throws(OIDCSignInError) -> Endpoints {
        let document: DiscoveryDocument
        do {
            document = try await verifier.discovery()
        } catch {
            throw OIDCSignInError(
                .badGateway,
                "The sign-in service cannot be reached. Try again in a moment, or sign in with your e-mail address "
                    + "and password.",
                reason: error.description
            )
        }
        guard let authorization = document.authorizationEndpoint.flatMap(URL.init(string:)),
            OIDCVerifier.isTrustworthy(authorization),
            let token = document.tokenEndpoint.flatMap(URL.init(string:)), OIDCVerifier.isTrustworthy(token)
        else {
            throw OIDCSignInError(
                .badGateway,
                "The sign-in service cannot be used here. Sign in with your e-mail address and password instead.",
                reason: "the discovery document names no https authorization_endpoint and token_endpoint"
            )
        }
        if let methods = document.codeChallengeMethodsSupported, !methods.contains("S256") {
            throw OIDCSignInError(
                .badGateway,
                "The sign-in service cannot be used here. Sign in with your e-mail address and password instead.",
                reason: "the issuer does not list S256 among its code_challenge_methods_supported"
            )
        }
        let methods = document.tokenEndpointAuthMethodsSupported ?? []
        let secretInForm =
            !methods.isEmpty && !methods.contains("client_secret_basic")
            && methods.contains("client_secret_post")
        return Endpoints(authorization: authorization.absoluteString, token: token, secretInForm: secretInForm)
    }

    /// The ID token the token endpoint gives for `code`.
    private func exchange(
        code: String,
        pending: PendingSignIn,
        discovery: Endpoints
    ) async throws(OIDCSignInError) -> String {
        let configuration = verifier.configuration
        var form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", pending.redirectURI),
            ("code_verifier", pending.verifier),
            ("client_id", configuration.signInClientID),
        ]
        var request = HTTPClientRequest(url: discovery.token.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        if let secret = configuration.clientSecret {
            if discovery.secretInForm {
                form.append(("client_secret", secret))
            } else {
                // RFC 6749 §2.3.1: each part form-encoded before they are joined.
                let credentials = Self.formEncode(configuration.signInClientID) + ":" + Self.formEncode(secret)
                request.headers.add(
                    name: "Authorization",
                    value: "Basic " + Data(credentials.utf8).base64EncodedString()
                )
            }
        }
        let body = form.map { Self.formEncode($0.0) + "=" + Self.formEncode($0.1) }.joined(separator: "&")
        request.body = .bytes(ByteBuffer(string: body))
        let status: HTTPResponseStatus
        let data: Data
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            status = response.status
            data = Data(try await response.body.collect(upTo: Self.maximumTokenResponseSize).readableBytesView)
        } catch {
            throw OIDCSignInError(
                .badGateway,
                "The sign-in service did not answer. Go back to the payment and try again.",
                reason: "the token endpoint failed: \(error)"
            )
        }
        let answer = try? JSONDecoder().decode(TokenResponse.self, from: data)
        guard status == .ok, let idToken = answer?.idToken, !idToken.isEmpty else {
            let error = [answer?.error, answer?.errorDescription].compactMap { $0 }.joined(separator: ": ")
            throw OIDCSignInError(
                .badRequest,
                "The sign-in service refused to complete the sign-in. Go back to the payment and sign in again.",
                reason: "the token endpoint answered \(status.code)" + (error.isEmpty ? "" : " (\(error.prefix(200)))")
                    + (status == .ok ? " without an id_token" : "")
            )
        }
        return idToken
    }

    // MARK: Helpers

    /// Whether `path` may be returned to after sign-in: a checkout page of this server, `/p/` and letters, digits,
    /// `-`, `_` and `/` only (no `//`, no dot segments, no scheme or host), so no answer can send the browser
    /// elsewhere.
    package static func isReturnPath(_ path: String) -> Bool {
        guard path.hasPrefix("/p/"), path.utf8.count <= 200, !path.contains("//") else { return false }
        return path.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "/"):
                return true
            default:
                return false
            }
        }
    }

    /// 256 random bits, base64url.
    package static func randomToken() -> String {
        Base64URL.encode(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
    }

    /// `application/x-www-form-urlencoded` of one name or value: unreserved characters as they are, every other
    /// byte of the UTF-8 as `%XX` (a space too, which no decoder reads differently).
    package static func formEncode(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                encoded += String(format: "%%%02X", byte)
            }
        }
        return encoded
    }

    /// Whether `a` and `b` are equal, in a time that does not depend on where they first differ.
    package static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

/// Proof Key for Code Exchange (RFC 7636) with the `S256` method.
enum PKCE {
    /// The `code_challenge` of `verifier`: base64url of its SHA-256.
    static func challenge(for verifier: String) -> String {
        Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
    }
}

/// A sign-in begun in this browser and not finished: what its cookie holds, sealed.
struct PendingSignIn: Codable, Sendable, Equatable {
    /// The `state` sent to the issuer, which must come back.
    var state: String
    /// The `nonce` sent to the issuer, which its ID token must hold.
    var nonce: String
    /// The PKCE code verifier.
    var verifier: String
    /// The `redirect_uri` sent, which the code exchange repeats.
    var redirectURI: String
    /// The checkout page to return to.
    var returnPath: String
    /// When the sign-in must be finished, in seconds since 1970.
    var expires: Int64

    init(state: String, nonce: String, verifier: String, redirectURI: String, returnPath: String, expires: Int64) {
        self.state = state
        self.nonce = nonce
        self.verifier = verifier
        self.redirectURI = redirectURI
        self.returnPath = returnPath
        self.expires = expires
    }

    /// The cookie value: base64url of the ChaCha20-Poly1305 sealed box of this JSON.
    func sealed(with key: SymmetricKey) throws(OIDCSignInError) -> String {
        do {
            let box = try ChaChaPoly.seal(try JSONEncoder().encode(self), using: key)
            return Base64URL.encode(box.combined)
        } catch {
            throw OIDCSignInError(.internalServerError, "The sign-in could not begin.", reason: "sealing: \(error)")
        }
    }

    /// The pending sign-in a cookie value holds, `nil` when it was not sealed with `key` or was altered.
    init?(sealed text: String, key: SymmetricKey) {
        guard text.utf8.count <= 2048, Base64URL.isCanonical(text), let data = Base64URL.decode(text),
            let box = try? ChaChaPoly.SealedBox(combined: data),
            let plain = try? ChaChaPoly.open(box, using: key),
            let pending = try? JSONDecoder().decode(PendingSignIn.self, from: plain)
        else { return nil }
        self = pending
    }
}

/// Why a browser sign-in at the issuer failed: what the person is told, with the status of the page, and the reason
/// the log gets.
package struct OIDCSignInError: Error, CustomStringConvertible, Sendable {
    /// The page's status.
    package var status: HTTPResponse.Status
    /// What the person is told.
    package var message: String
    /// What the log gets.
    package var reason: String

    package init(_ status: HTTPResponse.Status, _ message: String, reason: String? = nil) {
        self.status = status
        self.message = message
        self.reason = reason ?? message
    }

    package var description: String { reason }
}

/// What the server reads of the token endpoint's answer.
private struct TokenResponse: Decodable {
    var idToken: String?
    var error: String?
    var errorDescription: String?

    enum CodingKeys: String, CodingKey {
        case idToken = "id_token"
        case error
        case errorDescription = "error_description"
    }
}

extension OIDCVerifier {
    /// The identity in the ID token `token` the issuer gave browser sign-in: signed with one of the issuer's keys
    /// (as its access tokens are), naming the issuer as `iss`, the client id among its `aud` (and as `azp` when that
    /// is present or `aud` names others), within its `exp` and issued within the sign-in's lifetime, with a
    /// non-empty `sub`, and holding `nonce`.
    func identity(fromIDToken token: String, nonce: String) async throws(OIDCSignInError) -> Identity {
        func refused(_ reason: String) -> OIDCSignInError {
            OIDCSignInError(
                .badRequest,
                "The sign-in service's answer could not be verified. Go back to the payment and sign in again.",
                reason: reason
            )
        }
        guard let claims = await verifiedPayload(token, as: IDTokenClaims.self) else {
            throw refused("the ID token is not signed by one of the issuer's keys")
        }
        let clientID = configuration.signInClientID
        let now = clock()
        let leeway = Self.leewaySeconds
        guard claims.iss.value == configuration.issuer else { throw refused("the ID token names another issuer") }
        guard claims.aud.value.contains(clientID) else { throw refused("the ID token is not for this client") }
        if claims.azp != nil || claims.aud.value.count > 1 {
            guard claims.azp == clientID else { throw refused("the ID token was issued to another party (azp)") }
        }
        guard now < claims.exp.value.addingTimeInterval(leeway),
            claims.nbf.map({ $0.value <= now.addingTimeInterval(leeway) }) ?? true,
            claims.iat.value <= now.addingTimeInterval(leeway),
            claims.iat.value > now.addingTimeInterval(-OIDCSignIn.lifetime.seconds - leeway)
        else { throw refused("the ID token has expired or is not valid now") }
        guard let tokenNonce = claims.nonce, OIDCSignIn.constantTimeEqual(tokenNonce, nonce) else {
            throw refused("the ID token's nonce is not the sign-in's")
        }
        guard (1...255).contains(claims.sub.value.utf8.count) else { throw refused("the ID token has no usable sub") }
        let name = [claims.name, claims.preferredUsername].compactMap { $0 }.first { !$0.isEmpty }
        return Identity(issuer: configuration.issuer, subject: claims.sub.value, displayName: name ?? claims.sub.value)
    }
}

/// The claims of an ID token.
private struct IDTokenClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim
    var nbf: NotBeforeClaim?
    var nonce: String?
    var azp: String?
    var name: String?
    var preferredUsername: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nbf, nonce, azp, name
        case preferredUsername = "preferred_username"
    }

    /// The verifier checks the claims against its own clock and configuration.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
