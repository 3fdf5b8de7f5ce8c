import Foundation
import HTTPTypes
package import Hummingbird

/// The cookie that carries a browser session's secret (``GotchuLedger/BrowserSessions``) on the web checkout.
///
/// `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends it along), `Path=/`, and over HTTPS
/// `Secure` with the `__Host-` prefix, which makes browsers refuse it unless it is `Secure`, set by this host alone and
/// for the whole site, so no subdomain and no plain-HTTP page can plant or shadow it. Browsers refuse `Secure` cookies
/// from plain HTTP, so a server without TLS (a development server on loopback) names it without the prefix.
///
/// It is read only by the checkout's pages and never as a bearer token, and the API's `Authorization` header is
/// never read by those pages: the two credentials do not stand in for each other.
package struct BrowserSessionCookie: Sendable {
    /// Whether the cookie is `Secure` and `__Host-` prefixed.
    package var secure: Bool

    /// The cookie, `secure` when the checkout is served over HTTPS.
    package init(secure: Bool) { self.secure = secure }

    /// The cookie's name: `__Host-gotchu-session` when secure, else `gotchu-session`.
    package var name: String { secure ? "__Host-gotchu-session" : "gotchu-session" }

    /// The attributes after the value.
    private var attributes: String { "; Path=/; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "") }

    /// The `Set-Cookie` value that gives the browser `token` for `lifetime`.
    package func setting(_ token: String, lifetime: Duration) -> String {
        "\(name)=\(token)\(attributes); Max-Age=\(max(0, lifetime.components.seconds))"
    }

    /// The `Set-Cookie` value that makes the browser forget the cookie.
    package var clearing: String { "\(name)=\(attributes); Max-Age=0" }

    /// The secret the request's cookie carries, if it sends this cookie: the first of that name (a browser sends the
    /// most specific first). Only its shape is checked here; the store says whether it signs anyone in.
    package func token(in request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let trimmed = pair.drop { $0 == " " }
                guard let equals = trimmed.firstIndex(of: "="), trimmed[..<equals] == name else { continue }
                return String(trimmed[trimmed.index(after: equals)...])
            }
        }
        return nil
    }
}
