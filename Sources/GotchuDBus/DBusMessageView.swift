internal import CGotchuDBus

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A received message read in place from its wire bytes: the header's fields are located once and compared without
/// copying, and the body is walked with ``DBusArgumentReader`` only as far as the consumer needs, so a high-rate
/// handler pays for what it reads and nothing else.
///
/// Every length and offset is checked against the message, so any bytes at all are safe to view; strings are not
/// validated (they are compared byte for byte and decoded with repair). ``message()`` converts through libdbus,
/// which validates the whole message.
///
/// Valid only during the handler call it is given to; ``message()`` converts it when a value must outlive it.
package struct DBusMessageView {
    /// The message types of the wire format.
    package enum MessageType: UInt8 {
        case methodCall = 1, methodReturn, error, signal
    }

    /// The whole message, header and body.
    let wire: UnsafeRawBufferPointer
    let bigEndian: Bool
    package let type: MessageType
    /// The body's bytes.
    let body: UnsafeRawBufferPointer
    /// The header's fields, in place; `nil` when the message has none.
    let pathBytes: DBusString?
    let interfaceBytes: DBusString?
    let memberBytes: DBusString?
    let errorNameBytes: DBusString?
    let senderBytes: DBusString?
    /// The body's signature, empty without one.
    let signature: UnsafeBufferPointer<UInt8>
    /// The serial of the call this message answers.
    package let replySerial: UInt32?

    /// The header's fixed part: byte order, type, flags, version, body length, serial, fields' length.
    static let fixedHeaderLength = 16
    /// The longest message D-Bus allows (2²⁷ bytes).
    package static let maximumLength = 1 << 27

    /// How long the message at the start of `bytes` is, once its fixed header has arrived.
    package enum Frame: Equatable {
        /// Fewer than 16 bytes: the length is not known yet.
        case incomplete
        /// The message is this long in all (it may not have arrived whole yet).
        case length(Int)
        /// Not a D-Bus message: the stream cannot be followed past it.
        case invalid(String)
    }

    /// The length of the message that starts `bytes`, from its fixed header alone.
    package static func frame(_ bytes: UnsafeRawBufferPointer) -> Frame {
        guard bytes.count >= fixedHeaderLength else { return .incomplete }
        let order = bytes[0]
        guard order == UInt8(ascii: "l") || order == UInt8(ascii: "B") else {
            return .invalid("byte order \(order) is neither l nor B")
        }
        guard bytes[3] == 1 else { return .invalid("protocol version \(bytes[3]), not 1") }
        let bigEndian = order == UInt8(ascii: "B")
        guard let bodyLength = DBusArgumentReader.readUInt32(bytes, at: 4, limit: bytes.count, bigEndian),
            let fieldsLength = DBusArgumentReader.readUInt32(bytes, at: 12, limit: bytes.count, bigEndian)
        else { return .incomplete }
        let length = DBusArgumentReader.align(fixedHeaderLength + Int(fieldsLength), 8) + Int(bodyLength)
        guard length <= maximumLength else { return .invalid("a message of \(length) bytes, over the limit") }
        return .length(length)
    }

    /// A view of the message `wire` holds exactly; `nil` when it is not a well-formed message of a known type (a
    /// length that does not fit, a header field of the wrong type, a required field missing).
    package init?(wire: UnsafeRawBufferPointer) {
        guard case .length(let length) = Self.frame(wire), length == wire.count,
            let type = MessageType(rawValue: wire[1])
        else { return nil }
        let bigEndian = wire[0] == UInt8(ascii: "B")
        guard let fieldsLength = DBusArgumentReader.readUInt32(wire, at: 12, limit: wire.count, bigEndian) else {
            return nil
        }
        let fieldsEnd = Self.fixedHeaderLength + Int(fieldsLength)
        var path: DBusString?
        var interface: DBusString?
        var member: DBusString?
        var errorName: DBusString?
        var sender: DBusString?
        var signature: DBusString?
        var replySerial: UInt32?
        // The fields are an a(yv) whose elements start at 16 (its length is at 12): each an 8-aligned structure of a
        // code byte and a variant. Walked directly, not through a reader: this runs for every message received.
        var offset = Self.fixedHeaderLength
        while offset < fieldsEnd {
            offset = DBusArgumentReader.align(offset, 8)
            guard offset < fieldsEnd,
                let types = DBusArgumentReader.textRange(
                    UInt8(ascii: "g"),
                    at: offset + 1,
                    in: wire,
                    limit: fieldsEnd,
                    bigEndian
                )
            else { return nil }
            let code = wire[offset]
            let valueStart = types.upperBound + 1
            // The fields read here are of one basic type each; a known field of another type makes the message invalid.
            let single = types.count == 1 ? wire[types.lowerBound] : 0
            switch code {
            case 1, 2, 3, 4, 7, 8:
                let expected = code == 1 ? UInt8(ascii: "o") : code == 8 ? UInt8(ascii: "g") : UInt8(ascii: "s")
                guard single == expected,
                    let text = DBusArgumentReader.textRange(
                        single,
                        at: valueStart,
                        in: wire,
                        limit: fieldsEnd,
                        bigEndian
                    )
                else { return nil }
                let value = DBusString(bytes: DBusArgumentReader.buffer(wire, text))
                switch code {
                case 1: path = value
                case 2: interface = value
                case 3: member = value
                case 4: errorName = value
                case 7: sender = value
                default: signature = value
                }
                offset = text.upperBound + 1
            case 5:
                let at = DBusArgumentReader.align(valueStart, 4)
                guard single == UInt8(ascii: "u"),
                    let serial = DBusArgumentReader.readUInt32(wire, at: at, limit: fieldsEnd, bigEndian)
                else { return nil }
                replySerial = serial
                offset = at + 4
            default:
                // Destination, Unix fds, and fields of later versions: stepped over.
                guard
                    let end = DBusArgumentReader.valueEnd(
                        DBusArgumentReader.buffer(wire, types),
                        0,
                        at: valueStart,
                        in: wire,
                        limit: fieldsEnd,
                        bigEndian,
                        depth: 1
                    ), end.typeIndex == types.count
                else { return nil }
                offset = end.offset
            }
        }
        switch type {
        case .methodCall: guard path != nil, member != nil else { return nil }
        case .methodReturn: guard replySerial != nil else { return nil }
        case .error: guard replySerial != nil, errorName != nil else { return nil }
        case .signal: guard path != nil, interface != nil, member != nil else { return nil }
        }
        let bodyStart = DBusArgumentReader.align(fieldsEnd, 8)
        guard signature != nil || bodyStart == wire.count else { return nil }
        self.wire = wire
        self.bigEndian = bigEndian
        self.type = type
        self.body = UnsafeRawBufferPointer(rebasing: wire[bodyStart...])
        self.pathBytes = path
        self.interfaceBytes = interface
        self.memberBytes = member
        self.errorNameBytes = errorName
        self.senderBytes = sender
        self.signature = signature?.bytes ?? UnsafeBufferPointer(start: nil, count: 0)
        self.replySerial = replySerial
    }

    /// Calls `body` with a view of a message libdbus holds, or returns `nil` if libdbus cannot write it out. libdbus
    /// lends no pointer to a message's bytes, so they are copied out once (`dbus_message_marshal`: one allocation
    /// and a copy of a few hundred bytes, far less than walking the body through libdbus's iterators) and freed
    /// when `body` returns.
    static func reading<Result>(_ raw: OpaquePointer, _ body: (DBusMessageView) -> Result) -> Result? {
        var data: UnsafeMutablePointer<CChar>? = nil
        var length: Int32 = 0
        guard dbus_message_marshal(raw, &data, &length) != 0, let data else { return nil }
        defer { dbus_free(data) }
        return DBusMessageView(wire: UnsafeRawBufferPointer(start: data, count: Int(length))).map(body)
    }

    /// Whether the message is a signal of `interface` and `member` (compared in place).
    package func isSignal(interface: StaticString, member: StaticString) -> Bool {
        type == .signal && memberBytes?.equals(member) == true && interfaceBytes?.equals(interface) == true
    }

    /// The object path (copied).
    package var path: DBusObjectPath? {
        pathBytes.flatMap { DBusObjectPath(rawValue: $0.string) }
    }

    /// Whether the object path lies strictly below `ancestor`, compared in place.
    package func pathIsStrictlyBelow(_ ancestor: DBusObjectPath) -> Bool {
        pathBytes?.isStrictlyBelow(ancestor) ?? false
    }

    /// The error's name, for an error reply (copied).
    package var errorName: String? { errorNameBytes?.string }

    /// Whether the body's signature starts with `prefix` (compared in place).
    package func signatureHasPrefix(_ prefix: StaticString) -> Bool {
        prefix.withUTF8Buffer { prefixBytes in signature.starts(with: prefixBytes) }
    }

    /// The body's signature text, such as `sa{sv}as` (copied; for diagnostics).
    package var signatureText: String {
        String(decoding: signature, as: UTF8.self)
    }

    /// The whole message in Swift form, read and validated by libdbus; an error when libdbus refuses it or its body
    /// does not fit the value model.
    package func message() throws(DBusError) -> DBusMessage {
        let raw = wire.withMemoryRebound(to: CChar.self) { chars in
            dbus_message_demarshal(chars.baseAddress, Int32(clamping: chars.count), nil)
        }
        guard let raw else { throw DBusError(.invalidArgs, "libdbus refused a received message as invalid") }
        defer { dbus_message_unref(raw) }
        return try DBusMessage(cMessage: raw)
    }

    /// A reader of the arguments, at the first one.
    package var arguments: DBusArgumentReader {
        DBusArgumentReader(body: body, bigEndian: bigEndian, signature: signature)
    }
}

extension DBusString {
    /// Whether this object path lies strictly below `ancestor`.
    func isStrictlyBelow(_ ancestor: DBusObjectPath) -> Bool {
        var prefix = ancestor.rawValue
        return prefix.withUTF8 { prefixBytes in
            if prefixBytes.count == 1 { return bytes.count > 1 }  // Everything but "/" lies below the root.
            guard bytes.count > prefixBytes.count + 1, bytes.starts(with: prefixBytes) else { return false }
            return bytes[prefixBytes.count] == UInt8(ascii: "/")
        }
    }
}

extension DBusMatchRule {
    /// ``matches(_:)`` on a message read in place, without converting it.
    func matches(_ view: DBusMessageView) -> Bool {
        guard view.type == .signal else { return false }
        if let sender, sender.hasPrefix(":") || sender == "org.freedesktop.DBus",
            view.senderBytes?.equals(sender) != true
        {
            return false
        }
        if let interface, view.interfaceBytes?.equals(interface) != true { return false }
        if let member, view.memberBytes?.equals(member) != true { return false }
        if let path, view.pathBytes?.equals(path.rawValue) != true { return false }
        if let pathNamespace {
            guard let messagePath = view.pathBytes,
                messagePath.equals(pathNamespace.rawValue) || messagePath.isStrictlyBelow(pathNamespace)
            else { return false }
        }
        if let arg0 {
            let arguments = view.arguments
            guard arguments.typeCode == UInt8(ascii: "s"), arguments.isString(arg0) else { return false }
        }
        return true
    }
}
