import Foundation
import GotchuAPI
import GotchuCheckout
import GotchuCore
import GotchuLedgerAPI
import GotchuOIDC
import HTTPTypes
import Hummingbird
import Logging

extension LedgerRoutes {
    /// Browser sign-in on the web checkout through the configured OpenID Connect issuer (``OIDCSignIn``), when one
    /// is set: `GET /p/{eid}/sign-in/oidc` sends the browser to the issuer, `GET /p/oidc/callback` is where the
    /// issuer sends it back (`PUBLIC_URL/p/oidc/callback`, the redirect URI to register at the issuer). The issuer's
    /// user is the one its access tokens name, provisioned on first use; signing in starts a browser session, as the
    /// password form does.
    var oidcSignInRoutes: [LedgerRoute] {
        guard let identities else { return [] }
        let signIn = OIDCSignIn(verifier: identities, key: tokens.derivedKey(for: OIDCSignIn.keyPurpose))
        return [
            LedgerRoute(.get, "/p/{eid}/sign-in/oidc", "checkoutOIDCSignIn") { request, context in
                await oidcStart(signIn, request, context)
            },
            LedgerRoute(.get, OIDCSignIn.callbackPath, "checkoutOIDCCallback") { request, context in
                await oidcCallback(signIn, request, context)
            },
        ]
    }

    /// The issuer's name as the sign-in link shows it (its host), when `request`'s browser can sign in through it:
    /// an issuer is trusted, and the issuer can send the browser back (``oidcRedirectURI(_:)``).
    func oidcSignInName(for request: Request) -> String? {
        guard let identities, let host = URL(string: identities.configuration.issuer)?.host, !host.isEmpty,
            oidcRedirectURI(request) != nil
        else { return nil }
        return host
    }

    /// `GET /p/{eid}/sign-in/oidc`: a `303` to the issuer's authorization endpoint, with the pending sign-in's
    /// cookie.
    private func oidcStart(
        _ signIn: OIDCSignIn,
        _ request: Request,
        _ context: LedgerRequestContext
    ) async -> Response {
        let text = context.parameters.get("eid") ?? ""
        // The path's own text, a checkout link or an EID, is where the browser comes back to.
        let code = CheckoutCode.names(text) ? text : nil
        do {
            try checkout.pagesPerAddress?.take(clientAddress(request, context))
        } catch {
            return problemPage(error, eid: code, root: "../../", logger: context.logger)
        }
        guard let eid = code else {
            return problemPage(CheckoutRefusal.notAnEID, eid: nil, root: "../../", logger: context.logger)
        }
        guard let redirectURI = oidcRedirectURI(request) else {
            context.logger.warning(
                "browser sign-in through the OpenID Connect issuer needs the server's public URL (--public-url)"
            )
            return oidcFailure(
                OIDCSignInError(
                    .notFound,
                    "Signing in through another service is not set up on this ledger (it needs its public address, "
                        + "--public-url). Sign in with your e-mail address and password instead.",
                    reason: "no public URL"
                ),
                eid: eid,
                root: "../../",
                context: context
            )
        }
        do {
            let start = try await signIn.start(returnPath: "/p/" + eid, redirectURI: redirectURI)
            return CheckoutHTML.redirect(to: start.location, headers: [.setCookie: start.cookie])
        } catch {
            return oidcFailure(error, eid: eid, root: "../../", context: context)
        }
    }

    /// `GET /p/oidc/callback?code=…&state=…`: the issuer's answer. Checked against the pending sign-in's cookie,
    /// the code exchanged and its ID token verified, the user is looked up (provisioned on first use) and a browser
    /// session started; the page then sends the browser on to the checkout page the sign-in began at.
    ///
    /// That last step is a page, not a redirect: the browser session's cookie is `SameSite=Strict`, and browsers do
    /// not send it on a redirect that continues the issuer's cross-site navigation, so the checkout page would not
    /// see the session. The page's `Refresh` is a navigation of this site's own, which does send it; the page's link
    /// does the same without it.
    private func oidcCallback(
        _ signIn: OIDCSignIn,
        _ request: Request,
        _ context: LedgerRequestContext
    ) async -> Response {
        do {
            try checkout.pagesPerAddress?.take(clientAddress(request, context))
        } catch {
            return problemPage(error, eid: nil, root: "../", logger: context.logger)
        }
        let secure = oidcRedirectURI(request)?.lowercased().hasPrefix("https:") ?? checkout.cookie.secure
        // The pending sign-in is used once, whatever comes of it.
        let clearing = HTTPField(name: .setCookie, value: OIDCSignIn.clearingCookie(secure: secure))
        func fail(_ error: OIDCSignInError) -> Response {
            var response = oidcFailure(error, eid: nil, root: "../", context: context)
            response.headers.append(clearing)
            return response
        }
        let query = request.uri.queryParameters
        for name in ["code", "state", "error"] where query.getAll(name).count > 1 {
            return fail(
                OIDCSignInError(.badRequest, "The sign-in service's answer is malformed.", reason: "\(name) twice")
            )
        }
        if let error = query.get("error") {
            let description = query.get("error_description").map { ": " + String($0.prefix(200)) } ?? ""
            return fail(
                OIDCSignInError(
                    error == "access_denied" ? .forbidden : .badRequest,
                    "The sign-in service did not sign you in (\(DisplayText.escaped(error, maximumLength: 64))). "
                        + "Go back to the payment and try again.",
                    reason: "the issuer answered error=\(error.prefix(64))\(description)"
                )
            )
        }
        guard let code = query.get("code"), let state = query.get("state"), (1...2048).contains(code.utf8.count),
            (1...512).contains(state.utf8.count)
        else {
            return fail(
                OIDCSignInError(.badRequest, "The sign-in service's answer is malformed.", reason: "no code or state")
            )
        }
        let cookie = request.cookies[OIDCSignIn.cookieName(secure: secure)]?.value
        let finished: OIDCSignIn.Finish
        do {
            finished = try await signIn.finish(code: code, state: state, cookie: cookie)
        } catch {
            return fail(error)
        }
        let returnTo = "../" + finished.returnPath.dropFirst("/p/".count)
        do {
            let identity = finished.identity
            let user = try await store.user(
                issuer: identity.issuer,
                subject: identity.subject,
                displayName: String(identity.displayName.prefix(EmailAddress.maximumNameLength))
            )
            guard !user.disabled else {
                return fail(
                    OIDCSignInError(
                        .forbidden,
                        "This account is disabled; ask the ledger's operator.",
                        reason: "the account of \(identity.subject) is disabled"
                    )
                )
            }
            // Renewed at sign-in: whatever session the browser held (and sent, which a cross-site arrival does
            // not) ends.
            if let old = checkout.cookie.token(in: request) { try await store.endBrowserSession(token: old) }
            let started = try await startBrowserSession(userID: user.id, location: returnTo)
            context.logger.info("signed in through the OpenID Connect issuer", metadata: ["user": "\(user.id)"])
            var headers = HTTPFields()
            headers.append(clearing)
            for field in started.headers where field.name == .setCookie { headers.append(field) }
            headers[HTTPField.Name("Refresh")!] = "0; url=" + returnTo
            let page = CheckoutPages.outcome(
                "Signed in",
                "You are signed in as \(DisplayText.escaped(user.displayName)). Taking you back to the payment…",
                root: "../",
                eid: String(finished.returnPath.dropFirst("/p/".count)),
                link: "Continue to the payment"
            )
            return CheckoutHTML.response(page, status: .ok, headers: headers)
        } catch {
            let outage = (error as? LedgerError).map(StoreOutage.isOutage) ?? false
            if outage, let refusal = error as? LedgerError {
                self.outage.failed(refusal, logger: context.logger)
            } else {
                context.logger.error("browser sign-in failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            var headers = HTTPFields()
            headers.append(clearing)
            let page = CheckoutPages.outcome(
                "Something went wrong",
                "The ledger failed to sign you in. Try again in a moment.",
                root: "../",
                eid: String(finished.returnPath.dropFirst("/p/".count)),
                link: "Back to the payment"
            )
            return CheckoutHTML.response(
                page,
                status: outage ? .serviceUnavailable : .internalServerError,
                headers: headers
            )
        }
    }

    /// `PUBLIC_URL/p/oidc/callback`; without a public URL, the request's own host, only when that is this machine
    /// (or on a development server), since anyone may send any `Host`; `nil` otherwise.
    func oidcRedirectURI(_ request: Request) -> String? {
        if let publicURL { return publicURL.description + OIDCSignIn.callbackPath.dropFirst() }
        guard let authority = request.head.authority, Self.isAuthority(authority),
            developmentMode || Self.isLoopback(authority: authority)
        else { return nil }
        return (checkout.cookie.secure ? "https://" : "http://") + authority + OIDCSignIn.callbackPath
    }

    /// Whether `authority` is a host (a name, an IPv4 address or a bracketed IPv6 address) with an optional port,
    /// and nothing else.
    static func isAuthority(_ authority: String) -> Bool {
        guard (1...255).contains(authority.utf8.count) else { return false }
        return authority.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"),
                UInt8(ascii: "["), UInt8(ascii: "]"):
                return true
            default:
                return false
            }
        }
    }

    /// Whether the host of `authority` is this machine: `localhost`, `127.x.x.x` or `[::1]`.
    static func isLoopback(authority: String) -> Bool {
        let host: Substring
        if authority.hasPrefix("[") {
            host = authority.prefix { $0 != "]" }.dropFirst()
            return host == "::1"
        }
        host = authority.prefix { $0 != ":" }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return host.lowercased() == "localhost"
            || (octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil })
    }

    /// The page of a failed sign-in, its reason logged.
    private func oidcFailure(
        _ error: OIDCSignInError,
        eid: String?,
        root: String,
        context: LedgerRequestContext
    ) -> Response {
        let level: Logger.Level = error.status.code >= 500 ? .error : .warning
        context.logger.log(
            level: level,
            "browser sign-in through the OpenID Connect issuer failed",
            metadata: ["reason": "\(error.reason)", "status": "\(error.status.code)"]
        )
        return problemPage(error, eid: eid, root: root, logger: context.logger)
    }
}
