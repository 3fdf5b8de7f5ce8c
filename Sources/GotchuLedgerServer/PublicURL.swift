import Foundation
public import GotchuAPI
import GotchuCheckout
public import GotchuCore

/// The address at which payers' phones reach this ledger (`public_url`): the base of every absolute link it hands
/// out, the web checkout of each EID (`PUBLIC_URL/p/EID`) first of all, which its QR codes encode.
///
/// It is what a phone opens, not where the server listens: behind a TLS proxy it is the proxy's `https` address, and
/// it may carry a path the proxy serves the ledger under (`https://example.com/pay/`). It is held normalised: the
/// scheme and host in lower case, and one `/` at the end.
public struct PublicURL: Sendable, Hashable, CustomStringConvertible {
    /// The normalised address, ending in `/`: `https://pay.example.com/`.
    public let description: String
    /// Whether it is `https`.
    public let isHTTPS: Bool
    /// Whether its host is this machine (`localhost`, `127.x.x.x`, `[::1]`): good for tests, useless to a phone.
    public let isLoopback: Bool

    /// Why a text is not a usable public URL.
    public struct Invalid: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong, for the operator.
        public var description: String
    }

    /// Checks and normalises `text`: an absolute `http` or `https` URL of printable ASCII, at most
    /// ``GotchuAPI/CheckoutURL/maximumPublicURLLength`` bytes with its final `/`, whose host is a DNS name, an IPv4
    /// address or a bracketed IPv6 address, with an optional port and path (no `.` or `..` segments, no empty ones)
    /// and no user name, password, query or fragment.
    /// - Throws: ``Invalid`` saying what is wrong.
    public init(_ text: String) throws(Invalid) {
        func invalid(_ reason: String) -> Invalid {
            Invalid(description: "must be an absolute http(s) URL such as https://pay.example.com/, \(reason)")
        }
        guard text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw invalid("of printable ASCII with no spaces (write an international domain name as xn--…)")
        }
        guard !text.contains("?"), !text.contains("#") else {
            throw invalid("with no query (?) or fragment (#): the server appends its own paths to it")
        }
        let scheme: String
        let rest: Substring
        if let separator = text.range(of: "://") {
            scheme = text[..<separator.lowerBound].lowercased()
            rest = text[separator.upperBound...]
        } else {
            scheme = ""
            rest = ""
        }
        guard scheme == "https" || scheme == "http" else { throw invalid("starting https:// (or http://)") }
        let authority = rest.prefix { $0 != "/" }
        var path = String(rest.dropFirst(authority.count))
        guard !authority.contains("@") else { throw invalid("with no user name or password") }
        let host: Substring
        let port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw invalid("with a closing ] after an IPv6 host")
            }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else { throw invalid("with a port after ]:") }
            port = after.isEmpty ? nil : after.dropFirst()
            guard host.count > 2, host.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." })
            else { throw invalid("with an IPv6 host of hex digits, : and .") }
        } else {
            let parts = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = parts.first ?? ""
            port = parts.count == 2 ? parts[1] : nil
            let labels = host.split(separator: ".", omittingEmptySubsequences: false)
            guard !host.isEmpty,
                labels.allSatisfy({ label in
                    (1...63).contains(label.count) && !label.hasPrefix("-") && !label.hasSuffix("-")
                        && label.allSatisfy { ($0.isASCII && $0.isLetter) || $0.isNumber || $0 == "-" }
                })
            else { throw invalid("with a host name of letters, digits, - and . (got \"\(host)\")") }
        }
        if let port {
            guard (1...5).contains(port.count), port.allSatisfy(\.isNumber), let number = Int(port),
                (1...65535).contains(number)
            else { throw invalid("with a port from 1 to 65535") }
        }
        if !path.hasSuffix("/") { path += "/" }
        let segments = path.dropFirst().dropLast().split(separator: "/", omittingEmptySubsequences: false)
        if path != "/" {
            guard segments.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
                throw invalid("with a path that has no empty, . or .. segments")
            }
            guard segments.allSatisfy({ $0.allSatisfy(Self.isPathCharacter) }) else {
                throw invalid("with a path of letters, digits and -._~!$&'()*+,;=:@% only")
            }
        }
        let normalised = scheme + "://" + host.lowercased() + (port.map { ":" + $0 } ?? "") + path
        guard normalised.utf8.count <= CheckoutURL.maximumPublicURLLength else {
            throw invalid(
                "of at most \(CheckoutURL.maximumPublicURLLength) characters, so that its QR codes stay small"
            )
        }
        description = normalised
        isHTTPS = scheme == "https"
        let lowerHost = host.lowercased()
        isLoopback =
            lowerHost == "localhost" || lowerHost == "[::1]"
            || (lowerHost.hasPrefix("127.") && lowerHost.split(separator: ".").count == 4
                && lowerHost.allSatisfy { $0.isNumber || $0 == "." })
    }

    /// `PUBLIC_URL/p/EID`: the web checkout of `eid`, what its QR code encodes.
    public func checkoutURL(for eid: EID) -> String { description + CheckoutURL.relativePath(of: eid) }

    /// The web checkout of the session `link` names, for its whole life: `PUBLIC_URL/p/LINK`.
    public func checkoutURL(for link: CheckoutLink) -> String { description + CheckoutURL.relativePath(of: link) }

    /// The characters of a path segment (RFC 3986 `pchar`, a `%` for percent-encoding included).
    private static func isPathCharacter(_ character: Character) -> Bool {
        guard character.isASCII else { return false }
        return character.isLetter || character.isNumber || "-._~!$&'()*+,;=:@%".contains(character)
    }
}
