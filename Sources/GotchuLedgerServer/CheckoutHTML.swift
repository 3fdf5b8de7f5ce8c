import Foundation
import GotchuAPI
import GotchuCore
import HTTPTypes
import Hummingbird
import NIOCore

/// HTML for the web checkout: escaping, the one page layout every answer under `/p/` shares, and the headers every
/// such answer carries.
///
/// Text from elsewhere (a payee's name, a message quoted from the ledger) enters a page only through ``text(_:)`` or
/// ``attribute(_:)``, after ``GotchuCore/DisplayText`` made it safe for a person to read: markup in a name shows as
/// the characters it is made of, and a bidi override or an invisible character shows as an escape. Pages hold no
/// inline script or style (the content security policy forbids both), and every link, form and asset is written
/// relative to the page, so a ledger served under a path prefix (`https://example.com/pay/p/…`) works unchanged.
enum CheckoutHTML {
    /// The content security policy of every answer under `/p/`: only this origin's scripts, styles, images and event
    /// streams; no inline script or style; not framed; forms post only here.
    static let contentSecurityPolicy =
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    /// The headers every answer under `/p/` carries: the content security policy, no framing (also for browsers
    /// that know `X-Frame-Options` but not `frame-ancestors`), no referrer (the address holds an EID), no caching, no
    /// content sniffing.
    static let securityHeaders: [(HTTPField.Name, String)] = [
        (HTTPField.Name("Content-Security-Policy")!, contentSecurityPolicy),
        (HTTPField.Name("X-Frame-Options")!, "DENY"),
        (HTTPField.Name("Referrer-Policy")!, "no-referrer"),
        (.cacheControl, "no-store"),
        (HTTPField.Name("X-Content-Type-Options")!, "nosniff"),
    ]

    /// Strict transport security for a checkout whose public address is `https`: a year, so a phone that once
    /// opened it never again follows an `http` link to it in the clear.
    static let strictTransportSecurity = (HTTPField.Name("Strict-Transport-Security")!, "max-age=31536000")

    /// The media type of the pages.
    static let mediaType = "text/html; charset=utf-8"

    /// `text` escaped for an element's content.
    static func text(_ text: String) -> String { DisplayText.html(text) }

    /// `text` escaped for a double-quoted attribute value.
    static func attribute(_ text: String) -> String { DisplayText.html(text) }

    /// One page: the layout (a header with the brand and, when signed in, who and a sign-out button; the page's
    /// `main`; a footer), its title, and its script when it has one.
    struct Page {
        /// The `<title>` and, unless the content has its own, the `h1`.
        var title: String
        /// The HTML inside `<main>`, escaped already.
        var main: String
        /// What leads from the page's address to `/p/`: empty for `/p/{eid}`, `../` for `/p/{eid}/…`.
        var root: String
        /// The header's sign-out form, escaped already; empty when nobody is signed in.
        var account: String = ""
        /// Whether the page loads the checkout's script (live status and the countdown).
        var script: Bool = false

        /// The whole document.
        var html: String {
            """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(CheckoutHTML.text(title)) · Gotchu</title>
            <link rel="icon" href="\(root)assets/icon.svg" type="image/svg+xml">
            <link rel="stylesheet" href="\(root)assets/checkout.css">
            \(script ? "<script src=\"\(root)assets/checkout.js\" defer></script>\n" : "")</head>
            <body>
            <header><p class="brand">Gotchu</p>\(account)</header>
            <main id="main">
            \(main)
            </main>
            <footer><p>Payments are recorded by this ledger and each one is signed: \
            <a href="\(root)../.well-known/gotchu-receipt-keys">its receipt keys</a>.</p></footer>
            </body>
            </html>

            """
        }
    }

    /// An HTML answer with `status`, the page's media type and every security header, plus `headers`.
    static func response(_ page: Page, status: HTTPResponse.Status, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = mediaType
        for (name, value) in securityHeaders { fields[name] = value }
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: page.html)))
    }

    /// A `303 See Other` to `location` (relative to the request's address), with every security header and
    /// `headers` (a `Set-Cookie`).
    static func redirect(to location: String, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.location] = location
        for (name, value) in securityHeaders { fields[name] = value }
        return Response(status: .seeOther, headers: fields)
    }
}
