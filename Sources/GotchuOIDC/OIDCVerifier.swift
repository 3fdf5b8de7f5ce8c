import AsyncHTTPClient
public import Foundation
import GotchuAPI
import GotchuCore
import GotchuReceipts
import JWTKit
import NIOCore
import NIOHTTP1

/// Verifies the access tokens of one OpenID Connect issuer against its published keys (JWKS).
///
/// Only `RS256` and `ES256` are accepted, and only with a key of the matching type published under the token's
/// `kid`: a token naming `none`, an HMAC algorithm (a forger's way to use a public key as a shared secret) or any
/// other algorithm is refused before a key is looked at, as is one with `crit` extensions. The token must name the
/// issuer as `iss`, the audience among its `aud`, a non-empty `sub`, and be within its `exp` and `nbf` (with
/// ``leewaySeconds`` of skew).
///
/// The keys are fetched on first use and kept; an unknown `kid` (the issuer rotated its keys) or keys older than
/// the cache lifetime fetch them again, at most once per minimum interval however many tokens ask, so a flood of
/// made-up `kid`s cannot turn into a flood of requests to the issuer. A failed fetch keeps the keys already known.
public actor OIDCVerifier {
    /// What the verifier trusts.
    public struct Configuration: Sendable, Hashable {
        /// The issuer, exactly as its tokens' `iss` claim names it, such as `https://id.example.com/realms/shop`.
        public var issuer: String
        /// The audience the tokens must be for (their `aud`).
        public var audience: String
        /// Where the keys are published; `nil` reads `jwks_uri` from the issuer's discovery document
        /// (`ISSUER/.well-known/openid-configuration`).
        public var jwksURL: URL?
        /// The least time between two fetches of the keys.
        public var minimumRefetchInterval: Duration = .seconds(60)
        /// How long fetched keys and the discovery document are used before they are fetched again.
        public var cacheLifetime: Duration = .seconds(3600)
        /// The client id of browser sign-in at the issuer (the authorization code flow); `nil` is the audience.
        public var clientID: String?
        /// The client secret of a confidential client, sent to the issuer's token endpoint; `nil` for a public
        /// client, which proves itself with PKCE alone.
        public var clientSecret: String?

        /// The client id browser sign-in uses: ``clientID``, else the audience.
        public var signInClientID: String { clientID ?? audience }

        /// Trusts `issuer`'s tokens for `audience`.
        public init(issuer: String, audience: String, jwksURL: URL? = nil) {
            self.issuer = issuer
            self.audience = audience
            self.jwksURL = jwksURL
        }
    }

    /// Who a verified token names.
    public struct Identity: Sendable, Hashable {
        /// The issuer.
        public var issuer: String
        /// The user's id at the issuer (`sub`).
        public var subject: String
        /// A name for the user: `name`, else `preferred_username`, else `sub`.
        public var displayName: String
    }

    /// The clock skew tolerated, in seconds.
    public static let leewaySeconds: Double = 60
    /// The algorithms accepted, and the key type each needs.
    static let algorithms: [String: JWK.KeyType] = ["RS256": .rsa, "ES256": .ecdsa]
    /// The largest key set or discovery document read.
    static let maximumDocumentSize = 1 << 20

    /// The configuration.
    public nonisolated let configuration: Configuration
    private let fetch: @Sendable (URL) async throws -> Data
    /// The clock expiry and the caches are judged by.
    let clock: @Sendable () -> Date
    private var keys: [String: (algorithm: String, collection: JWTKeyCollection)] = [:]
    private var fetchedAt: Date?
    private var lastAttempt: Date?
    private var refreshing: Task<Void, Never>?
    private var discovered: (document: DiscoveryDocument, at: Date)?
    private var discoveryFailure: (error: OIDCError, at: Date)?
    private var discovering: Task<DiscoveryDocument, any Error>?

    /// A verifier for `configuration`.
    /// - Parameters:
    ///   - clock: the clock expiry and the key cache are judged by.
    ///   - fetch: reads a document over HTTP (the default uses AsyncHTTPClient, 10 s timeout, 1 MiB at most).
    public init(
        _ configuration: Configuration,
        clock: @escaping @Sendable () -> Date = Date.init,
        fetch: (@Sendable (URL) async throws -> Data)? = nil
    ) {
        self.configuration = configuration
        self.clock = clock
        self.fetch = fetch ?? Self.httpFetch
    }

    /// How many times the keys were fetched (successfully or not), for tests and logs.
    package private(set) var fetchCount = 0

    /// The identity in `token`, or `nil` when it is not a valid access token of the issuer for the audience.
    public func identity(from token: String) async -> Identity? {
        guard let claims = await verifiedPayload(token, as: OIDCClaims.self) else { return nil }
        let now = clock()
        let leeway = Self.leewaySeconds
        guard claims.iss.value == configuration.issuer,
            claims.aud.value.contains(configuration.audience),
            now < claims.exp.value.addingTimeInterval(leeway),
            claims.nbf.map({ $0.value <= now.addingTimeInterval(leeway) }) ?? true,
            claims.iat.map({ $0.value <= now.addingTimeInterval(leeway) }) ?? true,
            (1...255).contains(claims.sub.value.utf8.count)
        else { return nil }
        let name = [claims.name, claims.preferredUsername].compactMap { $0 }.first { !$0.isEmpty }
        return Identity(issuer: configuration.issuer, subject: claims.sub.value, displayName: name ?? claims.sub.value)
    }

    /// The payload of `token` when one of the issuer's keys signed it under the algorithm its header names (one of
    /// ``algorithms``, pinned to the key's type), `nil` otherwise; its claims are the caller's to check.
    func verifiedPayload<Payload: JWTPayload>(_ token: String, as payload: Payload.Type) async -> Payload? {
        // One spelling per token: jwt-kit would take a reworded signature (``CompactJWS/isCanonical(_:)``).
        guard CompactJWS.isCanonical(token), let header = TokenHeader(token), header.crit == nil,
            let algorithm = header.alg,
            Self.algorithms[algorithm] != nil, let kid = header.kid
        else { return nil }
        let now = clock()
        let stale = fetchedAt.map { now.timeIntervalSince($0) >= configuration.cacheLifetime.seconds } ?? true
        if keys[kid] == nil || stale { await refresh() }
        guard let key = keys[kid], key.algorithm == algorithm else { return nil }
        return try? await key.collection.verify(token, as: Payload.self)
    }

    /// Fetches the keys again unless that was tried within the minimum interval; callers during a fetch wait for it.
    private func refresh() async {
        if let refreshing {
            await refreshing.value
            return
        }
        let now = clock()
        if let lastAttempt, now.timeIntervalSince(lastAttempt) < configuration.minimumRefetchInterval.seconds {
            return
        }
        lastAttempt = now
        fetchCount += 1
        let task = Task { await self.load() }
        refreshing = task
        await task.value
        refreshing = nil
    }

    private func load() async {
        do {
            let url = try await jwksURL()
            keys = try await Self.keys(from: try await fetch(url))
            fetchedAt = clock()
        } catch {
            // The keys already known stay in use; the next attempt waits out the interval.
        }
    }

    private func jwksURL() async throws -> URL {
        if let url = configuration.jwksURL { return url }
        guard let url = URL(string: try await discovery().jwksURI), Self.isTrustworthy(url) else {
            throw OIDCError("the discovery document names no https jwks_uri")
        }
        return url
    }

    /// The issuer's discovery document (`ISSUER/.well-known/openid-configuration`), which must name the issuer.
    ///
    /// Fetched on first use and kept for the cache lifetime; callers during a fetch wait for it. A failed fetch is
    /// not tried again within the minimum interval, however many ask (its error is thrown again), and a document
    /// already known stays in use while a fresh one cannot be had.
    func discovery() async throws(OIDCError) -> DiscoveryDocument {
        let now = clock()
        if let discovered, now.timeIntervalSince(discovered.at) < configuration.cacheLifetime.seconds {
            return discovered.document
        }
        if let discoveryFailure,
            now.timeIntervalSince(discoveryFailure.at) < configuration.minimumRefetchInterval.seconds
        {
            if let discovered { return discovered.document }
            throw discoveryFailure.error
        }
        let task: Task<DiscoveryDocument, any Error>
        if let discovering {
            task = discovering
        } else {
            let configuration = configuration
            let fetch = fetch
            task = Task { try await Self.fetchDiscovery(configuration, fetch: fetch) }
            discovering = task
        }
        do {
            let document = try await task.value
            if discovering == task {
                discovered = (document, clock())
                discoveryFailure = nil
                discovering = nil
            }
            return document
        } catch {
            let failure = error as? OIDCError ?? OIDCError("the discovery document could not be read: \(error)")
            if discovering == task {
                discoveryFailure = (failure, clock())
                discovering = nil
            }
            if let discovered { return discovered.document }
            throw failure
        }
    }

    private static func fetchDiscovery(
        _ configuration: Configuration,
        fetch: @Sendable (URL) async throws -> Data
    ) async throws -> DiscoveryDocument {
        var issuer = configuration.issuer
        while issuer.hasSuffix("/") { issuer.removeLast() }
        guard let url = URL(string: issuer + "/.well-known/openid-configuration") else {
            throw OIDCError("the issuer is not a URL")
        }
        let data: Data
        do {
            data = try await fetch(url)
        } catch let error as OIDCError {
            throw error
        } catch {
            throw OIDCError("\(url.absoluteString) could not be fetched: \(error)")
        }
        guard let document = try? JSONDecoder().decode(DiscoveryDocument.self, from: data) else {
            throw OIDCError("\(url.absoluteString) is not a discovery document with issuer and jwks_uri")
        }
        guard document.issuer == configuration.issuer else {
            throw OIDCError("the discovery document names another issuer, \(document.issuer)")
        }
        return document
    }

    /// Whether keys may be fetched from `url`: https, or http to this machine only.
    public static func isTrustworthy(_ url: URL) -> Bool {
        guard let host = url.host?.lowercased(), !host.isEmpty else { return false }
        switch url.scheme?.lowercased() {
        case "https": return true
        case "http": return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
        default: return false
        }
    }

    /// One collection per usable key: RSA keys for RS256 and P-256 keys for ES256, each pinned to its algorithm.
    /// Keys of other types or algorithms, and keys without a `kid`, are skipped.
    static func keys(from data: Data) async throws -> [String: (algorithm: String, collection: JWTKeyCollection)] {
        let set = try JSONDecoder().decode(LenientKeySet.self, from: data)
        var keys: [String: (algorithm: String, collection: JWTKeyCollection)] = [:]
        for case var jwk? in set.keys {
            guard let kid = jwk.keyIdentifier?.string else { continue }
            let algorithm: String
            switch jwk.keyType {
            case .rsa where jwk.algorithm == nil || jwk.algorithm == .rs256:
                algorithm = "RS256"
                jwk.algorithm = .rs256
            case .ecdsa where (jwk.algorithm == nil || jwk.algorithm == .es256) && jwk.curve == .ecdsa(.p256):
                algorithm = "ES256"
                jwk.algorithm = .es256
            default:
                continue
            }
            let collection = JWTKeyCollection()
            guard (try? await collection.add(jwk: jwk)) != nil else { continue }
            keys[kid] = (algorithm, collection)
        }
        return keys
    }

    /// GET `url` with AsyncHTTPClient: 200 and at most ``maximumDocumentSize`` bytes, within 10 seconds.
    @Sendable static func httpFetch(_ url: URL) async throws -> Data {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "Accept", value: "application/json")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        guard response.status == .ok else { throw OIDCError("\(url.absoluteString) answered \(response.status.code)") }
        let body = try await response.body.collect(upTo: maximumDocumentSize)
        return Data(body.readableBytesView)
    }
}

/// Why the issuer's keys or discovery document could not be fetched.
struct OIDCError: Error, CustomStringConvertible, Sendable {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The fields of a JOSE header the verifier looks at before it picks a key.
struct TokenHeader: Decodable {
    var alg: String?
    var kid: String?
    var crit: [String]?

    init?(_ token: String) {
        guard let part = token.split(separator: ".", omittingEmptySubsequences: false).first,
            let data = Base64URL.decode(String(part)),
            let header = try? JSONDecoder().decode(TokenHeader.self, from: data)
        else { return nil }
        self = header
    }
}

/// The claims of an access token.
private struct OIDCClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim?
    var nbf: NotBeforeClaim?
    var name: String?
    var preferredUsername: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nbf, name
        case preferredUsername = "preferred_username"
    }

    /// The verifier checks the claims against its own clock and configuration.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// What the server reads of a discovery document: the issuer, its keys, and the endpoints of browser sign-in.
struct DiscoveryDocument: Decodable, Sendable {
    var issuer: String
    var jwksURI: String
    var authorizationEndpoint: String?
    var tokenEndpoint: String?
    var codeChallengeMethodsSupported: [String]?
    var tokenEndpointAuthMethodsSupported: [String]?

    enum CodingKeys: String, CodingKey {
        case issuer
        case jwksURI = "jwks_uri"
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case codeChallengeMethodsSupported = "code_challenge_methods_supported"
        case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
    }
}

/// A JWKS whose keys this version cannot read (another `kty`, say) are skipped instead of failing the whole set.
private struct LenientKeySet: Decodable {
    var keys: [JWK?]

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        var list = try container.nestedUnkeyedContainer(forKey: .keys)
        var keys: [JWK?] = []
        while !list.isAtEnd {
            keys.append((try? list.decode(LenientKey.self))?.key)
        }
        self.keys = keys
    }

    enum CodingKeys: String, CodingKey { case keys }

    private struct LenientKey: Decodable {
        var key: JWK?
        init(from decoder: any Decoder) throws { key = try? JWK(from: decoder) }
    }
}
