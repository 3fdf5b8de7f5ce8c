public import GotchuCore

/// The address of an EID's web checkout, `PUBLIC_URL/p/EID`: what a ledger with a public URL states as
/// `checkout_url` beside each EID it hands out, what its QR codes encode, and what a phone's camera opens.
public enum CheckoutURL {
    /// The most bytes a public URL may have (its trailing `/` included): with `p/` and an EID after it, a checkout
    /// URL fits a version 10 QR code at error correction level M (213 bytes).
    public static let maximumPublicURLLength = 200

    /// The most bytes a checkout URL has: a public URL of ``maximumPublicURLLength`` bytes, `p/` and an EID.
    public static var maximumLength: Int { maximumPublicURLLength + 2 + EID.length }

    /// `p/EID`: where an EID's checkout page lies under a public URL, which ends in `/`.
    public static func relativePath(of eid: EID) -> String { "p/" + eid.rawValue }

    /// `text` when it is a plausible checkout address of `eid`, `nil` otherwise: printable ASCII of at most
    /// ``maximumLength`` bytes, `https://` or `http://` (as a ledger writes them, in lower case), a host with no user
    /// name or password, no query or fragment, and a path that ends in `/p/EID` for this very EID.
    ///
    /// A client shows the address as a QR code to a person about to pay, so it takes nothing else: an address that
    /// named another EID (a ledger's mistake, or a response mixed up on the way) would send the payer to another
    /// session.
    public static func validated(_ text: String?, eid: EID) -> String? {
        guard let text, text.utf8.count <= maximumLength,
            text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }),
            !text.contains("?"), !text.contains("#"), !text.contains("\\")
        else { return nil }
        let rest: Substring
        if text.hasPrefix("https://") {
            rest = text.dropFirst("https://".count)
        } else if text.hasPrefix("http://") {
            rest = text.dropFirst("http://".count)
        } else {
            return nil
        }
        let authority = rest.prefix { $0 != "/" }
        guard !authority.isEmpty, !authority.contains("@"), !authority.hasPrefix(":"),
            rest.hasSuffix("/" + relativePath(of: eid))
        else { return nil }
        return text
    }
}
