import Foundation
public import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which webhook URLs the ledger may send to, so that a merchant cannot point the ledger's own network position at
/// what sits behind it (server-side request forgery).
///
/// A URL must be `https`, with a host name or a public address; `http` only for the hosts of the allow list. The
/// addresses a host resolves to must all be public: loopback, private (RFC 1918, unique local), link-local, cloud
/// metadata, unspecified, multicast, shared (CGNAT) and reserved addresses are refused, spelled as IPv4, IPv6 or
/// IPv4 inside IPv6 (mapped, compatible, NAT64, 6to4). The check runs when an endpoint is registered and again on
/// every delivery, on the very addresses connected to: a name that resolves to a refused address later is refused
/// then. Hosts on the allow list are exempt from the address check (a deployment's own receivers, or loopback in
/// tests).
public struct WebhookAddressPolicy: Sendable, Hashable {
    /// The longest URL accepted.
    public static let maximumURLLength = 2048

    /// Hosts (names or literal addresses, lowercase, IPv6 without brackets) that may use `http` and any address.
    public var allowedHosts: Set<String>

    /// A policy allowing `http` and any address for `allowedHosts` (names or literal addresses; IPv6 literals with or
    /// without brackets; compared without case).
    public init(allowedHosts: some Sequence<String> = []) {
        self.allowedHosts = Set(allowedHosts.map(Self.normalizedHost))
    }

    /// The server setting that fills the allow list, as refusals name it.
    public static let allowHostsSetting = "--webhook-allow-hosts"

    /// Whether `host` (as a URL spells it) is on the allow list.
    public func isAllowListed(_ host: String) -> Bool { allowedHosts.contains(Self.normalizedHost(host)) }

    /// The URL's parts a delivery needs, after the checks that need no network: `http(s)`, a host, no user
    /// information, no fragment, at most ``maximumURLLength`` bytes; `http` only for an allow-listed host; a literal
    /// address not refused.
    /// - Throws: ``WebhookURLError`` saying what is wrong.
    public func target(_ text: String) throws(WebhookURLError) -> WebhookTarget {
        guard !text.isEmpty else { throw WebhookURLError("url is required") }
        guard text.utf8.count <= Self.maximumURLLength else {
            throw WebhookURLError("url must be at most \(Self.maximumURLLength) bytes")
        }
        guard text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw WebhookURLError("url must be ASCII without spaces or control characters (percent-encode the rest)")
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw WebhookURLError("url is not a valid absolute URL")
        }
        guard scheme == "https" || scheme == "http" else { throw WebhookURLError("url must be an https URL") }
        guard let rawHost = Self.writtenHost(text), !rawHost.isEmpty else {
            throw WebhookURLError("url must name a host")
        }
        guard components.percentEncodedUser == nil, components.percentEncodedPassword == nil else {
            throw WebhookURLError("url must not hold a user name or password")
        }
        guard components.percentEncodedFragment == nil else { throw WebhookURLError("url must not hold a fragment") }
        let host = Self.normalizedHost(rawHost)
        guard !host.contains("%") else { throw WebhookURLError("url's host must not hold percent-escapes or zones") }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = components.port ?? defaultPort
        guard (1...65535).contains(port) else { throw WebhookURLError("url's port must be 1 to 65535") }
        let allowListed = allowedHosts.contains(host)
        guard scheme == "https" || allowListed else {
            throw WebhookURLError(
                "url must be https (http only for the hosts of the server's \(Self.allowHostsSetting))"
            )
        }
        let literal = IPAddressBytes(literal: host)
        if !allowListed, let literal, let reason = literal.refusal {
            throw WebhookURLError(
                "url's address \(host) is refused (\(reason)); a receiver of the ledger's own may be allowed with the "
                    + "server's \(Self.allowHostsSetting)"
            )
        }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        return WebhookTarget(
            isHTTPS: scheme == "https",
            host: host,
            port: port,
            hostHeader: port == defaultPort ? rawHost : "\(rawHost):\(port)",
            pathAndQuery: path,
            isLiteralAddress: literal != nil,
            isAllowListed: allowListed
        )
    }

    /// The first of `addresses` that a delivery to `target` must not connect to, with the reason; `nil` when all may
    /// be used (always for an allow-listed host).
    public func refusal(
        of addresses: [SocketAddress],
        for target: WebhookTarget
    ) -> (address: String, reason: String)? {
        guard !isAllowListed(target.host) else { return nil }
        for address in addresses {
            guard let bytes = IPAddressBytes(address) else {
                return (address.description, "not an internet address")
            }
            if let reason = bytes.refusal { return (bytes.description, reason) }
        }
        return nil
    }

    /// Whether `host` can be an entry of the allow list: a literal address (IPv6 with or without brackets) or a
    /// host name of letters, digits, dots, dashes and underscores.
    public static func isValidHost(_ host: String) -> Bool {
        let host = normalizedHost(host)
        guard !host.isEmpty, host.utf8.count <= 253 else { return false }
        if IPAddressBytes(literal: host) != nil { return true }
        return host.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }

    /// The host as compared with the allow list: lowercase, without the brackets of an IPv6 literal or a final dot.
    /// The host as `text` writes it: after `://` and any user information, before the port, path, query or
    /// fragment; an IPv6 literal with its brackets. Foundation's `URLComponents` turns an internationalised name's
    /// `xn--` form into percent-escaped Unicode, which is neither what is resolved nor what a certificate names.
    static func writtenHost(_ text: String) -> String? {
        guard let start = text.range(of: "://")?.upperBound else { return nil }
        let authority = text[start...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostAndPort = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority
        if hostAndPort.hasPrefix("[") {
            guard let close = hostAndPort.firstIndex(of: "]") else { return nil }
            return String(hostAndPort[...close])
        }
        return String(hostAndPort.prefix { $0 != ":" })
    }

    static func normalizedHost(_ host: String) -> String {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        while host.hasSuffix(".") { host.removeLast() }
        return host
    }
}

/// Why a webhook URL is refused: the message a client reads.
public struct WebhookURLError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong, naming the field (`url …`).
    public var description: String

    /// A refusal saying `description`.
    public init(_ description: String) { self.description = description }
}

/// Where a webhook URL points, as a delivery connects to it.
public struct WebhookTarget: Sendable, Hashable {
    /// `https` rather than `http`.
    public var isHTTPS: Bool
    /// The host, lowercase, an IPv6 literal without brackets: what is resolved, and the TLS server name.
    public var host: String
    /// The port.
    public var port: Int
    /// The `Host` header: the host as written, with the port unless it is the scheme's.
    public var hostHeader: String
    /// The path and query, percent-encoded as written; `/` when the URL has no path.
    public var pathAndQuery: String
    /// Whether the host is a literal address (then TLS verifies the certificate against that address, with no SNI).
    public var isLiteralAddress: Bool
    /// Whether the host is on the allow list.
    public var isAllowListed: Bool
}

/// An IPv4 or IPv6 address as bytes, for the address checks.
struct IPAddressBytes: Hashable, Sendable, CustomStringConvertible {
    /// 4 bytes for IPv4, 16 for IPv6.
    let bytes: [UInt8]

    init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// The address of a literal (`192.0.2.1`, `2001:db8::1`) in its standard spelling only; `nil` for a name.
    init?(literal text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            self.bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    /// The address of a socket address; `nil` for a Unix socket.
    init?(_ address: SocketAddress) {
        switch address {
        case .v4(let v4):
            var raw = v4.address.sin_addr
            self.bytes = withUnsafeBytes(of: &raw) { Array($0) }
        case .v6(let v6):
            var raw = v6.address.sin6_addr
            self.bytes = withUnsafeBytes(of: &raw) { Array($0) }
        case .unixDomainSocket:
            return nil
        }
    }

    var description: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let written = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) != nil
        }
        guard written else { return "?" }
        let end = text.firstIndex(of: 0) ?? text.count
        return String(decoding: text[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Why a delivery must not go to this address; `nil` for a public address.
    var refusal: String? {
        bytes.count == 4 ? Self.refusal(v4: bytes) : Self.refusal(v6: bytes)
    }

    /// Whether `bytes` start with the `bits` first bits of `prefix`.
    private static func matches(_ bytes: [UInt8], _ prefix: [UInt8], _ bits: Int) -> Bool {
        var remaining = bits
        for (index, byte) in prefix.enumerated() where remaining > 0 {
            let take = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if bytes[index] & mask != byte & mask { return false }
            remaining -= take
        }
        return true
    }

    private static func refusal(v4 bytes: [UInt8]) -> String? {
        let ranges: [([UInt8], Int, String)] = [
            ([169, 254, 169, 254], 32, "cloud metadata"),
            ([0, 0, 0, 0], 8, "unspecified"),
            ([127, 0, 0, 0], 8, "loopback"),
            ([10, 0, 0, 0], 8, "private"),
            ([172, 16, 0, 0], 12, "private"),
            ([192, 168, 0, 0], 16, "private"),
            ([100, 64, 0, 0], 10, "shared address space"),
            ([169, 254, 0, 0], 16, "link-local"),
            ([192, 0, 0, 0], 24, "reserved"),
            ([198, 18, 0, 0], 15, "reserved"),
            ([224, 0, 0, 0], 4, "multicast"),
            ([240, 0, 0, 0], 4, "reserved"),
        ]
        return ranges.first { matches(bytes, $0.0, $0.1) }?.2
    }

    private static func refusal(v6 bytes: [UInt8]) -> String? {
        let zero = [UInt8](repeating: 0, count: 16)
        if bytes == zero { return "unspecified" }
        if bytes == zero.dropLast() + [1] { return "loopback" }
        // IPv4 inside IPv6: judged as the IPv4 address it carries.
        let mapped = [UInt8](repeating: 0, count: 10) + [0xFF, 0xFF]
        if matches(bytes, mapped, 96) { return refusal(v4: Array(bytes[12...])).map { "IPv4-mapped, \($0)" } }
        if matches(bytes, zero, 96) { return "IPv4-compatible (deprecated)" }
        if matches(bytes, [0x00, 0x64, 0xFF, 0x9B], 96) {
            return refusal(v4: Array(bytes[12...])).map { "NAT64, \($0)" }
        }
        if matches(bytes, [0x20, 0x02], 16) { return refusal(v4: Array(bytes[2..<6])).map { "6to4, \($0)" } }
        let ranges: [([UInt8], Int, String)] = [
            ([0xFD, 0x00, 0x0E, 0xC2] + [UInt8](repeating: 0, count: 10) + [0x02, 0x54], 128, "cloud metadata"),
            ([0xFC], 7, "private"),
            ([0xFE, 0x80], 10, "link-local"),
            ([0xFE, 0xC0], 10, "site-local"),
            ([0xFF], 8, "multicast"),
            ([0x01, 0x00, 0, 0, 0, 0, 0, 0], 64, "reserved"),
            ([0x20, 0x01, 0x00, 0x00], 32, "Teredo tunnel"),
        ]
        return ranges.first { matches(bytes, $0.0, $0.1) }?.2
    }
}
