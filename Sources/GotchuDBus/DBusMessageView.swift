internal import CGotchuDBus

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A received signal read in place from libdbus's buffer: headers are compared without copying and the body is
/// walked with ``DBusArgumentReader`` only as far as the consumer needs, so a high-rate handler pays for what it
/// reads and nothing else. libdbus has already validated the whole message (types, UTF-8, paths) when it arrives.
///
/// Valid only during the handler call it is given to; ``message()`` converts it when a value must outlive it.
package struct DBusMessageView {
    let raw: OpaquePointer

    init(_ raw: OpaquePointer) { self.raw = raw }

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
        guard let signature = dbus_message_get_signature(raw) else { return false }
        return prefix.withUTF8Buffer { prefixBytes in
            strlen(signature) >= prefixBytes.count
                && (prefixBytes.isEmpty || memcmp(signature, prefixBytes.baseAddress!, prefixBytes.count) == 0)
        }
    }

    /// The body's signature text, such as `sa{sv}as` (copied; for diagnostics).
    package var signatureText: String {
        dbus_message_get_signature(raw).map { String(cString: $0) } ?? ""
    }

    /// The whole message in Swift form, or an error when its body does not fit the value model.
    package func message() throws(DBusError) -> DBusMessage {
        try DBusMessage(cMessage: raw)
    }

    /// Reads the arguments from the first one on.
    package func withArguments<Result>(_ body: (inout DBusArgumentReader) -> Result) -> Result {
        withUnsafeTemporaryAllocation(of: DBusMessageIter.self, capacity: 1) { buffer in
            let iter = buffer.baseAddress!
            iter.initialize(to: DBusMessageIter())
            if dbus_message_iter_init(raw, iter) == 0 {
                // No arguments: an iterator that reports the end at once.
                var reader = DBusArgumentReader(iter: nil)
                return body(&reader)
            }
            var reader = DBusArgumentReader(iter: UnsafeMutableRawPointer(iter))
            return body(&reader)
        }
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

/// Walks a message body in place, one value at a time. Values are read only when asked for and only as the type
/// they are: a reader never converts, so a wrong type on the wire shows as a type code the caller did not expect.
package struct DBusArgumentReader {
    /// A `DBusMessageIter`, kept untyped so the C type stays private to this module. `nil` for an empty body.
    private let iter: UnsafeMutableRawPointer?

    fileprivate init(iter: UnsafeMutableRawPointer?) { self.iter = iter }

    private var cIter: UnsafeMutablePointer<DBusMessageIter>? { iter?.assumingMemoryBound(to: DBusMessageIter.self) }

    /// The type code of the current value (`s`, `n`, `a`, `v`, `e`…), or 0 at the end.
    package var typeCode: UInt8 {
        guard let cIter else { return 0 }
        let code = dbus_message_iter_get_arg_type(cIter)
        return code > 0 && code < 128 ? UInt8(code) : 0
    }

    /// For an array: the type code of its elements (`e` for a dictionary's entries).
    package var elementTypeCode: UInt8 {
        guard let cIter, typeCode == UInt8(ascii: "a") else { return 0 }
        let code = dbus_message_iter_get_element_type(cIter)
        return code > 0 && code < 128 ? UInt8(code) : 0
    }

    /// The complete signature of the current value, such as `a{sv}` (copied; for diagnostics and rare checks).
    package var signatureText: String {
        guard let cIter, let text = dbus_message_iter_get_signature(cIter) else { return "" }
        defer { dbus_free(text) }
        return String(cString: text)
    }

    /// Moves to the next value; `false` at the end.
    @discardableResult
    package mutating func next() -> Bool {
        guard let cIter else { return false }
        return dbus_message_iter_next(cIter) != 0
    }

    /// Whether the current value is a string (or object path) equal to `expected`, compared in place.
    package func isString(_ expected: StaticString) -> Bool {
        guard let text = stringPointer else { return false }
        return DBusMessageView.equal(text, expected)
    }

    /// Whether the current value is a string (or object path) equal to `expected`, compared in place.
    package func isString(_ expected: String) -> Bool {
        guard let text = stringPointer else { return false }
        return DBusMessageView.equal(text, expected)
    }

    /// The current string, object path or signature (copied), or `nil` for another type.
    package var string: String? {
        stringPointer.map { String(cString: $0) }
    }

    private var stringPointer: UnsafePointer<CChar>? {
        guard let cIter else { return nil }
        switch typeCode {
        case UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"):
            var pointer: UnsafePointer<CChar>? = nil
            dbus_message_iter_get_basic(cIter, &pointer)
            return pointer
        default:
            return nil
        }
    }

    /// The current value if it is an `n`.
    package var int16: Int16? {
        guard let cIter, typeCode == UInt8(ascii: "n") else { return nil }
        var value: Int16 = 0
        dbus_message_iter_get_basic(cIter, &value)
        return value
    }

    /// For an `ay`: its bytes, in place, for the duration of `body`; `nil` for another type.
    package func withBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result? {
        guard let cIter, typeCode == UInt8(ascii: "a"), elementTypeCode == UInt8(ascii: "y") else { return nil }
        return withUnsafeTemporaryAllocation(of: DBusMessageIter.self, capacity: 1) { buffer in
            let sub = buffer.baseAddress!
            sub.initialize(to: DBusMessageIter())
            dbus_message_iter_recurse(cIter, sub)
            var base: UnsafePointer<UInt8>? = nil
            var count: Int32 = 0
            dbus_message_iter_get_fixed_array(sub, &base, &count)
            return body(UnsafeBufferPointer(start: count > 0 ? base : nil, count: count > 0 ? Int(count) : 0))
        }
    }

    /// Reads inside the current container (array, dictionary entry, variant or structure); `nil` when the
    /// current value is not a container.
    package func withContents<Result>(_ body: (inout DBusArgumentReader) -> Result) -> Result? {
        guard let cIter else { return nil }
        switch typeCode {
        case UInt8(ascii: "a"), UInt8(ascii: "v"), UInt8(ascii: "e"), UInt8(ascii: "r"):
            break
        default:
            return nil
        }
        return withUnsafeTemporaryAllocation(of: DBusMessageIter.self, capacity: 1) { buffer in
            let sub = buffer.baseAddress!
            sub.initialize(to: DBusMessageIter())
            dbus_message_iter_recurse(cIter, sub)
            var reader = DBusArgumentReader(iter: UnsafeMutableRawPointer(sub))
            return body(&reader)
        }
    }

    /// For a dictionary whose keys are strings (`a{s…}`): calls `body` with each key, in place, and a reader on
    /// its value, in wire order, until `body` returns `false`. `false` when the current value is no such dictionary
    /// (an empty one is not looked into: check ``signatureText`` when that matters).
    @discardableResult
    package func forEachStringKeyedEntry(_ body: (DBusString, inout DBusArgumentReader) -> Bool) -> Bool {
        guard elementTypeCode == UInt8(ascii: "e") else { return false }
        return withContents { entries in
            while entries.typeCode == UInt8(ascii: "e") {
                let keepGoing =
                    entries.withContents { entry -> Bool? in
                        guard let key = entry.stringPointer, entry.typeCode == UInt8(ascii: "s") else { return nil }
                        entry.next()
                        return body(DBusString(pointer: key), &entry)
                    } ?? nil
                guard let keepGoing else { return false }
                if !keepGoing { return true }
                entries.next()
            }
            return true
        } ?? false
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
            guard view.withArguments({ $0.typeCode == UInt8(ascii: "s") && $0.isString(arg0) }) else { return false }
        }
        return true
    }
}

/// A string inside a received message, compared in place and copied only on demand.
package struct DBusString {
    let pointer: UnsafePointer<CChar>

    /// Whether it equals `expected`.
    package func equals(_ expected: StaticString) -> Bool { DBusMessageView.equal(pointer, expected) }

    /// Whether it equals `expected`.
    package func equals(_ expected: String) -> Bool { DBusMessageView.equal(pointer, expected) }

    /// The text (copied; libdbus has validated it as UTF-8).
    package var string: String { String(cString: pointer) }
}
