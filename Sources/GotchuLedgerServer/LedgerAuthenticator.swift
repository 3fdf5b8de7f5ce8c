import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerAPI
import GotchuOIDC
import HTTPTypes
import Hummingbird
import HummingbirdAuth

/// Puts the request's `Authorization: Bearer …` credentials on the context as its identity: an API key (`gk_…`),
/// one of this server's tokens, or with an external issuer configured one of its access tokens. No credentials, no
/// identity; invalid ones are refused with 401 by the handler that asks (``LedgerRequestContext/principal()``).
///
/// Lazy: `handle` resolves nothing, it gives the context what resolves the credentials the first time a handler asks,
/// once per request. The routes decide when that is, so the ledger's order of answers holds whatever the
/// credentials: a route that is public ignores them (a login with a stale token, `/healthz`, an unknown path's
/// 404), resolve checks its body's shape first (a malformed request says what is wrong with it, logged in or not),
/// lock takes the per-address limit first (a flood is refused before the store is read to authenticate it). An eager
/// authenticator in front of every route would read the store for requests that never need it and answer 401 where
/// those answer 400, 404 or 429.
struct LedgerAuthenticator<Store: LedgerStore>: AuthenticatorMiddleware {
    typealias Context = LedgerRequestContext

    let store: Store
    let tokens: TokenAuthority
    /// Verifies the access tokens of an external issuer, when one is trusted.
    let identities: OIDCVerifier?

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        let authenticating = context
        context.credentials = .init { try await authenticate(request: request, context: authenticating) }
        return try await next(request, context)
    }

    /// Who the request's bearer credentials act as, `nil` without an `Authorization` header.
    /// - Throws: 401 for credentials that are not a bearer token, or are unknown, expired, revoked or of a disabled
    ///   account.
    func authenticate(request: Request, context: Context) async throws -> LedgerPrincipal? {
        guard let header = request.headers[.authorization] else { return nil }
        guard header.count > 7, header.prefix(7).lowercased() == "bearer " else {
            throw Problem(.unauthorized, detail: "the Authorization header must be a Bearer token")
        }
        let token = String(header.dropFirst(7))
        if APIKeySecret.isAPIKey(token) {
            guard let principal = try await store.principal(apiKey: token) else {
                throw Problem(.unauthorized, detail: "the API key is unknown or revoked")
            }
            return principal
        }
        if let bearer = await tokens.bearer(of: token) {
            let user = try await enabledUser(bearer.userID)
            // Revoked by a logout (or a reused refresh token) after it was issued.
            if let notBefore = user.tokensNotBefore, LedgerTime.milliseconds(bearer.issuedAt) < notBefore {
                throw Problem(.unauthorized, detail: "the token was revoked; log in again")
            }
            return .user(user.id)
        }
        if let identities, let identity = await identities.identity(from: token) {
            let user = try await store.user(
                issuer: identity.issuer,
                subject: identity.subject,
                displayName: String(identity.displayName.prefix(EmailAddress.maximumNameLength))
            )
            guard !user.disabled else { throw Problem(.unauthorized, detail: "this account is disabled") }
            return .user(user.id)
        }
        throw Problem(.unauthorized, detail: "the token is invalid or expired; log in again")
    }

    /// The user with this id, which must exist and not be disabled. The user is read on every request, not cached:
    /// an operator disabling an account (from another process, for every replica) must stop its tokens at their
    /// next request.
    private func enabledUser(_ userID: String) async throws -> LedgerUser {
        guard let user = try await store.user(id: userID) else {
            throw Problem(.unauthorized, detail: "the token's user does not exist; log in again")
        }
        guard !user.disabled else { throw Problem(.unauthorized, detail: "this account is disabled") }
        return user
    }
}
