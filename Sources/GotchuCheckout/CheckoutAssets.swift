/// The web checkout's style sheet, script and icon, served from this origin (`GET /p/assets/{name}`): the content
/// security policy allows no inline script or style and nothing from elsewhere. They are files of this module
/// (`Assets/`), compiled into the binary so an installed server needs no resource bundle.
package enum CheckoutAssets {
    /// The `Cache-Control` of every asset: kept an hour, since an asset changes only with the server's version.
    package static let cacheControl = "max-age=3600"

    /// An asset's media type and text.
    package struct Asset: Sendable {
        package var mediaType: String
        package var text: String
    }

    /// Every asset by its name under `/p/assets/`.
    package static let all: [String: Asset] = [
        "checkout.css": Asset(
            mediaType: "text/css; charset=utf-8",
            text: String(decoding: PackageResources.checkout_css, as: UTF8.self)
        ),
        "checkout.js": Asset(
            mediaType: "text/javascript; charset=utf-8",
            text: String(decoding: PackageResources.checkout_js, as: UTF8.self)
        ),
        "icon.svg": Asset(mediaType: "image/svg+xml", text: String(decoding: PackageResources.icon_svg, as: UTF8.self)),
    ]
}
