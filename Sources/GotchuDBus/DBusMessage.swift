internal import CGotchuDBus

/// A D-Bus message in Swift form: headers plus a typed body. Incoming messages are converted on arrival, so no C
/// pointer ever leaves the connection's loop thread.
public struct DBusMessage: Hashable, Sendable {
    /// The four message kinds.
    public enum Kind: Hashable, Sendable {
        /// A call, its successful reply, its error reply, or a broadcast signal.
        case methodCall, methodReturn, error, signal
    }

    /// Which of the four kinds this message is.
    public var kind: Kind
    /// The sender's unique name (set by the bus on incoming messages).
    public var sender: String?
    /// The bus name it is addressed to; `nil` for a signal broadcast to every matching rule.
    public var destination: String?
    /// The object called, or the object a signal comes from; `nil` on replies.
    public var path: DBusObjectPath?
    /// The interface of the method or signal; `nil` on replies (and optional on calls).
    public var interface: String?
    /// The method or signal name; `nil` on replies.
    public var member: String?
    /// For errors: the error name.
    public var errorName: String?
    /// The sender's number for this message, which a reply names as its ``replySerial``; 0 until sent.
    public var serial: UInt32
    /// For replies and errors: the ``serial`` of the call answered; 0 otherwise.
    public var replySerial: UInt32
    /// Whether the sender expects no reply.
    public var noReplyExpected: Bool
    /// The arguments.
    public var body: [DBusValue]

    /// Creates a message; normally built by the connection.
    public init(
        kind: Kind,
        sender: String? = nil,
        destination: String? = nil,
        path: DBusObjectPath? = nil,
        interface: String? = nil,
        member: String? = nil,
        errorName: String? = nil,
        serial: UInt32 = 0,
        replySerial: UInt32 = 0,
        noReplyExpected: Bool = false,
        body: [DBusValue] = []
    ) {
        self.kind = kind
        self.sender = sender
        self.destination = destination
        self.path = path
        self.interface = interface
        self.member = member
        self.errorName = errorName
        self.serial = serial
        self.replySerial = replySerial
        self.noReplyExpected = noReplyExpected
        self.body = body
    }

    /// The body's signature.
    public var signature: DBusSignature { DBusSignature(body.map(\.type)) }

    /// The argument at `index` converted to `T`, or `nil` when missing or of another type.
    public func argument<T: DBusRepresentable>(_ index: Int, as type: T.Type = T.self) -> T? {
        guard body.indices.contains(index) else { return nil }
        return T(dbusValue: body[index])
    }

    /// For an error message: the error it carries.
    var asError: DBusError {
        DBusError(DBusError.Name(rawValue: errorName ?? DBusError.Name.failed.rawValue), argument(0) ?? "")
    }
}

/// Validation of the names D-Bus puts in headers. libdbus aborts on invalid names, so they are checked first.
enum DBusNames {
    static func isValidInterface(_ name: String) -> Bool {
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        guard name.utf8.count <= 255, elements.count >= 2 else { return false }
        return elements.allSatisfy { isValidElement($0, allowHyphen: false, allowLeadingDigit: false) }
    }

    static func isValidMember(_ name: String) -> Bool {
        name.utf8.count <= 255 && isValidElement(Substring(name), allowHyphen: false, allowLeadingDigit: false)
    }

    static func isValidErrorName(_ name: String) -> Bool { isValidInterface(name) }

    static func isValidBusName(_ name: String) -> Bool {
        guard name.utf8.count <= 255 else { return false }
        if name.hasPrefix(":") {
            let elements = name.dropFirst().split(separator: ".", omittingEmptySubsequences: false)
            return elements.count >= 2
                && elements.allSatisfy { isValidElement($0, allowHyphen: true, allowLeadingDigit: true) }
        }
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        return elements.count >= 2
            && elements.allSatisfy { isValidElement($0, allowHyphen: true, allowLeadingDigit: false) }
    }

    private static func isValidElement(_ element: Substring, allowHyphen: Bool, allowLeadingDigit: Bool) -> Bool {
        guard let first = element.utf8.first else { return false }
        if !allowLeadingDigit, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) { return false }
        return element.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                || (allowHyphen && byte == UInt8(ascii: "-"))
        }
    }
}

extension DBusMessage {
    /// Builds the libdbus message; the caller owns the returned reference.
    func makeCMessage() throws(DBusError) -> OpaquePointer {
        if let destination, !DBusNames.isValidBusName(destination) {
            throw DBusError(.invalidArgs, "invalid bus name \(destination)")
        }
        if let interface, !DBusNames.isValidInterface(interface) {
            throw DBusError(.invalidArgs, "invalid interface name \(interface)")
        }
        if let member, !DBusNames.isValidMember(member) {
            throw DBusError(.invalidArgs, "invalid member name \(member)")
        }
        if let errorName, !DBusNames.isValidErrorName(errorName) {
            throw DBusError(.invalidArgs, "invalid error name \(errorName)")
        }
        let type: Int32
        switch kind {
        case .methodCall:
            guard path != nil, member != nil else { throw DBusError(.invalidArgs, "a call needs a path and a member") }
            type = DBUS_MESSAGE_TYPE_METHOD_CALL
        case .methodReturn:
            type = DBUS_MESSAGE_TYPE_METHOD_RETURN
        case .error:
            guard errorName != nil else { throw DBusError(.invalidArgs, "an error needs a name") }
            type = DBUS_MESSAGE_TYPE_ERROR
        case .signal:
            guard path != nil, interface != nil, member != nil else {
                throw DBusError(.invalidArgs, "a signal needs a path, an interface and a member")
            }
            type = DBUS_MESSAGE_TYPE_SIGNAL
        }
        guard let message = dbus_message_new(type) else { throw DBusError(.noMemory, "could not allocate a message") }
        var ok = true
        if let destination { ok = ok && dbus_message_set_destination(message, destination) != 0 }
        if let path { ok = ok && dbus_message_set_path(message, path.rawValue) != 0 }
        if let interface { ok = ok && dbus_message_set_interface(message, interface) != 0 }
        if let member { ok = ok && dbus_message_set_member(message, member) != 0 }
        if let errorName { ok = ok && dbus_message_set_error_name(message, errorName) != 0 }
        if replySerial != 0 { ok = ok && dbus_message_set_reply_serial(message, replySerial) != 0 }
        dbus_message_set_no_reply(message, noReplyExpected ? 1 : 0)
        guard ok else {
            dbus_message_unref(message)
            throw DBusError(.noMemory, "could not set message headers")
        }
        do {
            try DBusMarshalling.append(body, to: message)
        } catch {
            dbus_message_unref(message)
            throw error
        }
        return message
    }

    /// Converts a libdbus message. The body is read defensively; headers were validated by libdbus.
    init(cMessage message: OpaquePointer) throws(DBusError) {
        func string(_ pointer: UnsafePointer<CChar>?) -> String? {
            pointer.flatMap { String(validatingCString: $0) }
        }
        let kind: Kind
        switch dbus_message_get_type(message) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: kind = .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: kind = .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: kind = .error
        case DBUS_MESSAGE_TYPE_SIGNAL: kind = .signal
        default: throw DBusError(.invalidArgs, "unknown message type")
        }
        self.init(
            kind: kind,
            sender: string(dbus_message_get_sender(message)),
            destination: string(dbus_message_get_destination(message)),
            path: string(dbus_message_get_path(message)).flatMap(DBusObjectPath.init(rawValue:)),
            interface: string(dbus_message_get_interface(message)),
            member: string(dbus_message_get_member(message)),
            errorName: string(dbus_message_get_error_name(message)),
            serial: dbus_message_get_serial(message),
            replySerial: dbus_message_get_reply_serial(message),
            noReplyExpected: dbus_message_get_no_reply(message) != 0,
            body: try DBusMarshalling.read(from: message)
        )
    }
}
