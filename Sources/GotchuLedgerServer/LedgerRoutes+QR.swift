import GotchuAPI
import GotchuCore
import GotchuQR
import HTTPTypes
import Hummingbird
import NIOCore

extension LedgerRoutes {
    /// `GET /p/{eid}/qr.svg`: the QR code of the EID's web checkout, `PUBLIC_URL/p/EID`, as an SVG image.
    ///
    /// The address is made from the EID alone: the store is not asked, and every well-formed EID gets a code, so the
    /// answer says nothing of any session (not even whether one has that EID), to anyone, signed in or not, whatever
    /// `resolve` requires. It only costs the server an encoding, so it is counted per client address at resolve's
    /// rate, in a bucket of its own.
    var qrRoutes: [LedgerRoute] {
        [
            LedgerRoute(.get, "/p/{eid}/qr.svg", "checkoutQRCode") { request, context in
                guard let eid = EID(rawValue: try context.parameters.require("eid")) else {
                    throw Problem(.badRequest, detail: "eid must be 10 lowercase hex characters")
                }
                guard let publicURL else { throw Self.noPublicURL }
                try limiters.qrCodePerAddress?.take(clientAddress(request, context))
                return try Self.qrCodeResponse(publicURL.checkoutURL(for: eid))
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
