import GotchuAPI
import GotchuCheckout
import GotchuCore
import GotchuQR
import HTTPTypes
import Hummingbird
import NIOCore

extension LedgerRoutes {
    /// `GET /p/{code}/qr.svg`: the QR code of a web checkout, `PUBLIC_URL/p/LINK` (a session's checkout link) or
    /// `PUBLIC_URL/p/EID`, as an SVG image.
    ///
    /// The address is made from the path alone: the store is not asked, and every well-formed link or EID gets a
    /// code, so the answer says nothing of any session (not even whether one exists), to anyone, signed in or not,
    /// whatever `resolve` requires. It only costs the server an encoding, so it is counted per client address at
    /// resolve's rate, in a bucket of its own.
    var qrRoutes: [LedgerRoute] {
        [
            LedgerRoute(.get, "/p/{eid}/qr.svg", "checkoutQRCode") { request, context in
                let code = try context.parameters.require("eid")
                let path: String
                if let link = CheckoutLink(rawValue: code) {
                    path = CheckoutURL.relativePath(of: link)
                } else if let eid = EID(rawValue: code) {
                    path = CheckoutURL.relativePath(of: eid)
                } else {
                    throw Problem(
                        .badRequest,
                        detail: "the path must name a checkout link (22 base64url characters) or an EID (10 lowercase "
                            + "hex characters)"
                    )
                }
                guard let publicURL else { throw Self.noPublicURL }
                try limiters.qrCodePerAddress?.take(clientAddress(request, context))
                return try Self.qrCodeResponse(publicURL.description + path)
            }
        ]
    }

    /// The answer of a server with no public URL: the QR codes and the web checkout have no address to give.
    static var noPublicURL: Problem {
        Problem(
            .notFound,
            detail: "this server has no public URL, so no web checkout or QR codes: its operator sets one with "
                + "--public-url (public_url in the config file, GOTCHU_SERVER_PUBLIC_URL)"
        )
    }

    /// `url` as a QR code (byte mode, level M) in an SVG image: no style, script or link, so its policy allows
    /// nothing; kept by no cache, since the address holds an EID.
    static func qrCodeResponse(_ url: String) throws -> Response {
        let code: QRCode
        do {
            code = try QRCode(encoding: url, correction: .medium)
        } catch {
            // A public URL is short enough for version 10 (CheckoutURL.maximumPublicURLLength): never reached.
            throw Problem(.internalError, detail: "the checkout address does not fit a QR code: \(error)")
        }
        var headers = HTTPFields()
        headers[.contentType] = "image/svg+xml"
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] = "default-src 'none'; frame-ancestors 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(string: code.svg(title: "Pay at " + url)))
        )
    }
}
