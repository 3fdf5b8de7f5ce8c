import Foundation
import GotchuAPI
import GotchuCore
package import HTTPTypes
package import Hummingbird
import NIOCore

/// HTML for the web checkout: escaping, the one page layout every answer under `/p/` shares, and the headers every
/// such answer carries.
///
/// Text from elsewhere (a payee's name, a message quoted from the ledger) enters a page only as a template's value,
/// which the template escapes, after ``GotchuCore/DisplayText`` made it safe for a person to read: markup in a name
/// shows as the characters it is made of, and a bidi override or an invisible character shows as an escape. Pages hold no
/// inline script or style (the content security policy forbids both), and every link, form and asset is written
/// relative to the page, so a ledger served under a path prefix (`https://example.com/pay/p/…`) works unchanged.
package enum CheckoutHTML {
    /// The content security policy of every answer under `/p/`: only this origin's scripts, styles, images and event
    /// streams; no inline script or style; not framed; forms post only here.
    package static let contentSecurityPolicy =
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    /// The headers every answer under `/p/` carries: the content security policy, no framing (also for browsers
    /// that know `X-Frame-Options` but not `frame-ancestors`), no referrer (the address holds an EID), no caching, no
    /// content sniffing.
    package static let securityHeaders: [(HTTPField.Name, String)] = [
        (HTTPField.Name("Content-Security-Policy")!, contentSecurityPolicy),
        (HTTPField.Name("X-Frame-Options")!, "DENY"),
        (HTTPField.Name("Referrer-Policy")!, "no-referrer"),
        (.cacheControl, "no-store"),
        (HTTPField.Name("X-Content-Type-Options")!, "nosniff"),
    ]

    /// Strict transport security for a checkout whose public address is `https`: a year, so a phone that once
    /// opened it never again follows an `http` link to it in the clear.
    package static let strictTransportSecurity = (HTTPField.Name("Strict-Transport-Security")!, "max-age=31536000")

    /// The media type of the pages.
    package static let mediaType = "text/html; charset=utf-8"

    /// One page: the layout (a header with the brand and, when signed in, who and a sign-out button; the page's
    /// `main`; a footer) around one of the templates, with what that template shows.
    package struct Page {
        /// The template of the page's `main` (`Templates/NAME.mustache`).
        var template: String
        /// The `<title>`.
        var title: String
        /// What leads from the page's address to `/p/`: empty for `/p/{eid}`, `../` for `/p/{eid}/…`.
        var root: String
        /// Who is signed in, for the header's sign-out form; `nil` when nobody is.
        var account: CheckoutPages.Account?
        /// Whether the page loads the checkout's script (live status and the countdown).
        var script: Bool
        /// What the template shows: a value whose stored properties it reads by name.
        var content: Any

        init(
            template: String,
            title: String,
            root: String,
            account: CheckoutPages.Account? = nil,
            script: Bool = false,
            content: Any
        ) {
            self.template = template
            self.title = title
            self.root = root
            self.account = account
            self.script = script
            self.content = content
        }

        /// The whole document.
        package var html: String {
            // The layout's values first, then the page's own: a template reads either by name.
            struct Layout {
                let title: String
                let root: String
                let account: CheckoutPages.Account?
                let script: Bool
            }
            return CheckoutTemplates.render(
                template,
                [Layout(title: title, root: root, account: account, script: script), content]
            )
        }
    }

    /// An HTML answer with `status`, the page's media type and every security header, plus `headers`.
    package static func response(_ page: Page, status: HTTPResponse.Status, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = mediaType
        for (name, value) in securityHeaders { fields[name] = value }
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: page.html)))
    }

    /// A `303 See Other` to `location` (relative to the request's address), with every security header and
    /// `headers` (a `Set-Cookie`).
    package static func redirect(to location: String, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.location] = location
        for (name, value) in securityHeaders { fields[name] = value }
        return Response(status: .seeOther, headers: fields)
    }
}
