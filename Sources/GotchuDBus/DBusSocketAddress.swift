/// A Unix socket a D-Bus address names, for the connections this package opens itself (``DBusSignalReceiver``).
package enum DBusSocketAddress: Hashable, Sendable {
    /// A socket file, from `unix:path=…`.
    case path(String)
    /// A socket in Linux's abstract namespace, from `unix:abstract=…`.
    case abstract(String)

    /// The Unix sockets `address` names, in its order: a D-Bus address is a `;`-separated list of
    /// `transport:key=value,…` entries whose values escape bytes as `%XX`. Entries of other transports (`tcp:`,
    /// `unixexec:`…) and malformed ones are left out.
    package static func sockets(in address: String) -> [DBusSocketAddress] {
        address.split(separator: ";").compactMap { entry in
            guard let colon = entry.firstIndex(of: ":"), entry[..<colon] == "unix" else { return nil }
            var keys: [Substring: String] = [:]
            for pair in entry[entry.index(after: colon)...].split(separator: ",") {
                guard let equals = pair.firstIndex(of: "="), let value = unescape(pair[pair.index(after: equals)...])
                else { return nil }
                keys[pair[..<equals]] = value
            }
            if let path = keys["path"], !path.isEmpty { return .path(path) }
            if let name = keys["abstract"], !name.isEmpty { return .abstract(name) }
            return nil
        }
    }

    /// `value` with its `%XX` escapes decoded; `nil` for a broken escape or bytes that are not UTF-8.
    static func unescape(_ value: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = value.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
