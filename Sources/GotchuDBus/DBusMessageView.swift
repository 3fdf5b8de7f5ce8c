internal import CGotchuDBus

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A received signal read in place: headers are compared in libdbus's buffer without copying, and the body is walked
/// with ``DBusArgumentReader`` straight from its wire format, only as far as the consumer needs, so a high-rate
/// handler pays for what it reads and nothing else. libdbus has already validated the whole message (types, UTF-8,
/// paths) when it arrives.
///
/// Valid only during the handler call it is given to; ``message()`` converts it when a value must outlive it.
package struct DBusMessageView {
    let raw: OpaquePointer
    /// The body's bytes and their byte order; empty when the message has no body.
    let body: UnsafeRawBufferPointer
    let bigEndian: Bool
    /// The body's signature, in libdbus's header.
    let signature: UnsafeBufferPointer<UInt8>

    /// A view of `raw` whose body is `body`; without one, the arguments read as none.
    private init(_ raw: OpaquePointer, body: (bytes: UnsafeRawBufferPointer, bigEndian: Bool)?) {
        self.raw = raw
        self.body = body?.bytes ?? UnsafeRawBufferPointer(start: nil, count: 0)
        self.bigEndian = body?.bigEndian ?? false
        let signature = body == nil ? nil : dbus_message_get_signature(raw)
        self.signature = UnsafeBufferPointer(
            start: signature.map { UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self) },
            count: signature.map { strlen($0) } ?? 0
        )
    }

    /// Calls `body` with a view of `raw`. libdbus lends no pointer to a message's body, so its wire bytes are copied
    /// out once (`dbus_message_marshal`: one allocation and a copy of a few hundred bytes, far less than walking the
    /// body through libdbus's iterators) and freed when `body` returns.
    static func reading<Result>(_ raw: OpaquePointer, _ body: (DBusMessageView) -> Result) -> Result {
        var data: UnsafeMutablePointer<CChar>? = nil
        var length: Int32 = 0
        guard dbus_message_marshal(raw, &data, &length) != 0, let data else {
            return body(DBusMessageView(raw, body: nil))
        }
        defer { dbus_free(data) }
        let wire = UnsafeRawBufferPointer(start: data, count: Int(length))
        let located = bodyRange(wire).map { (UnsafeRawBufferPointer(rebasing: wire[$0.0]), $0.bigEndian) }
        return body(DBusMessageView(raw, body: located))
    }

    /// Where the body lies in a marshalled message, and whether it is big-endian: after the fixed 16 bytes of
    /// header and the header fields, padded to 8.
    static func bodyRange(_ wire: UnsafeRawBufferPointer) -> (Range<Int>, bigEndian: Bool)? {
        guard wire.count >= 16 else { return nil }
        let bigEndian = wire[0] == UInt8(ascii: "B")
        guard let bodyLength = DBusArgumentReader.readUInt32(wire, at: 4, limit: wire.count, bigEndian),
            let fieldsLength = DBusArgumentReader.readUInt32(wire, at: 12, limit: wire.count, bigEndian)
        else { return nil }
        let start = DBusArgumentReader.align(16 + Int(fieldsLength), 8)
        guard start <= wire.count, Int(bodyLength) <= wire.count - start else { return nil }
        return (start..<(start + Int(bodyLength)), bigEndian)
    }

    /// Whether the message is a signal of `interface` and `member` (compared in place).
    package func isSignal(interface: StaticString, member: StaticString) -> Bool {
        Self.equal(dbus_message_get_member(raw), member) && Self.equal(dbus_message_get_interface(raw), interface)
    }

    /// The object path (copied).
    package var path: DBusObjectPath? {
        dbus_message_get_path(raw).flatMap { DBusObjectPath(rawValue: String(cString: $0)) }
    }

    /// Whether the object path lies strictly below `ancestor`, compared in place.
    package func pathIsStrictlyBelow(_ ancestor: DBusObjectPath) -> Bool {
        guard let path = dbus_message_get_path(raw) else { return false }
        return Self.isStrictlyBelow(path, ancestor)
    }

    /// Whether the body's signature starts with `prefix` (compared in place).
    package func signatureHasPrefix(_ prefix: StaticString) -> Bool {
        prefix.withUTF8Buffer { prefixBytes in signature.starts(with: prefixBytes) }
    }

    /// The body's signature text, such as `sa{sv}as` (copied; for diagnostics).
    package var signatureText: String {
        String(decoding: signature, as: UTF8.self)
    }

    /// The whole message in Swift form, or an error when its body does not fit the value model.
    package func message() throws(DBusError) -> DBusMessage {
        try DBusMessage(cMessage: raw)
    }

    /// A reader of the arguments, at the first one.
    package var arguments: DBusArgumentReader {
        DBusArgumentReader(body: body, bigEndian: bigEndian, signature: signature)
    }

    static func equal(_ text: UnsafePointer<CChar>?, _ expected: StaticString) -> Bool {
        guard let text else { return false }
        return expected.withUTF8Buffer { expectedBytes in
            let length = strlen(text)
            guard length == expectedBytes.count else { return false }
            return length == 0 || memcmp(text, expectedBytes.baseAddress!, length) == 0
        }
    }

    static func equal(_ text: UnsafePointer<CChar>?, _ expected: String) -> Bool {
        guard let text else { return false }
        var expected = expected
        return expected.withUTF8 { expectedBytes in
            let length = strlen(text)
            guard length == expectedBytes.count else { return false }
            return length == 0 || memcmp(text, expectedBytes.baseAddress!, length) == 0
        }
    }

    static func isStrictlyBelow(_ path: UnsafePointer<CChar>, _ ancestor: DBusObjectPath) -> Bool {
        var prefix = ancestor.rawValue
        return prefix.withUTF8 { prefixBytes in
            let length = strlen(path)
            if prefixBytes.count == 1 { return length > 1 }  // Everything but "/" lies below the root.
            guard length > prefixBytes.count + 1, memcmp(path, prefixBytes.baseAddress!, prefixBytes.count) == 0
            else { return false }
            return path[prefixBytes.count] == CChar(UInt8(ascii: "/"))
        }
    }
}

extension DBusMatchRule {
    /// ``matches(_:)`` on a message still in libdbus's buffer, without converting it.
    func matches(_ view: DBusMessageView) -> Bool {
        let raw = view.raw
        guard dbus_message_get_type(raw) == DBUS_MESSAGE_TYPE_SIGNAL else { return false }
        if let sender, sender.hasPrefix(":") || sender == "org.freedesktop.DBus",
            !DBusMessageView.equal(dbus_message_get_sender(raw), sender)
        {
            return false
        }
        if let interface, !DBusMessageView.equal(dbus_message_get_interface(raw), interface) { return false }
        if let member, !DBusMessageView.equal(dbus_message_get_member(raw), member) { return false }
        if let path, !DBusMessageView.equal(dbus_message_get_path(raw), path.rawValue) { return false }
        if let pathNamespace {
            guard let messagePath = dbus_message_get_path(raw),
                DBusMessageView.equal(messagePath, pathNamespace.rawValue)
                    || DBusMessageView.isStrictlyBelow(messagePath, pathNamespace)
            else { return false }
        }
        if let arg0 {
            let arguments = view.arguments
            guard arguments.typeCode == UInt8(ascii: "s"), arguments.isString(arg0) else { return false }
        }
        return true
    }
}
