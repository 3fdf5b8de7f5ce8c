public import GotchuCore
import GotchuReceipts

/// A session's own checkout link: 22 base64url characters (128 bits) that name the session for the whole of its life,
/// whatever EIDs it advertises meanwhile, and that nobody without the ledger's secret can tie to those EIDs or to
/// another session's link. A QR code of it lasts the charge, while the EIDs on the air keep rotating.
public struct CheckoutLink: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The 22 characters.
    public let rawValue: String

    /// How many characters a link has.
    public static let length = 22

    /// `rawValue` when it is 128 bits in canonical base64url: 22 characters, the last one's unused bits zero.
    public init?(rawValue: String) {
        guard rawValue.utf8.count == Self.length, Base64URL.isCanonical(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    public var description: String { rawValue }
}

/// The address of a session's web checkout, `PUBLIC_URL/p/LINK` (``CheckoutLink``), or of one EID's,
/// `PUBLIC_URL/p/EID`: what a ledger with a public URL states as `checkout_url` beside each EID it hands out, what its
/// QR codes encode, and what a phone's camera opens.
public enum CheckoutURL {
    /// The most bytes a public URL may have (its trailing `/` included): with `p/` and a link after it, a checkout
    /// URL fits a version 10 QR code at error correction level M (213 bytes).
    public static let maximumPublicURLLength = 189

    /// The most bytes a checkout URL has: a public URL of ``maximumPublicURLLength`` bytes, `p/` and a link.
    public static var maximumLength: Int { maximumPublicURLLength + 2 + CheckoutLink.length }

    /// `p/EID`: where an EID's checkout page lies under a public URL, which ends in `/`.
    public static func relativePath(of eid: EID) -> String { "p/" + eid.rawValue }

    /// `p/LINK`: where a session's checkout page lies under a public URL, which ends in `/`.
    public static func relativePath(of link: CheckoutLink) -> String { "p/" + link.rawValue }

    /// `text` when it is a plausible checkout address of the session advertising `eid`, `nil` otherwise: printable
    /// ASCII of at most ``maximumLength`` bytes, `https://` or `http://` (as a ledger writes them, in lower case), a
    /// host with no user name or password, no query or fragment, and a path that ends in `/p/` and a
    /// ``CheckoutLink``, or `/p/EID` for this very EID.
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
        let last = rest.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
        guard !authority.isEmpty, !authority.contains("@"), !authority.hasPrefix(":"),
            rest.hasSuffix("/" + relativePath(of: eid))
                || (rest.hasSuffix("/p/" + last) && CheckoutLink(rawValue: last) != nil)
        else { return nil }
        return text
    }
}
