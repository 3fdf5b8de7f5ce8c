/// A match rule for signals, as `AddMatch` takes it; also applied locally, since one connection may hold several
/// rules and the bus delivers the union.
public struct DBusMatchRule: Hashable, Sendable, CustomStringConvertible {
    /// Sender: a unique name, or a well-known name (checked by the bus only, since it maps to a unique name).
    public var sender: String?
    /// The signal's interface, such as `org.freedesktop.DBus.Properties`; `nil` matches any.
    public var interface: String?
    /// The signal's name, such as `PropertiesChanged`; `nil` matches any.
    public var member: String?
    /// The exact object path the signal comes from; `nil` matches any (see ``pathNamespace`` for a subtree).
    public var path: DBusObjectPath?
    /// Matches `path` and every object below it.
    public var pathNamespace: DBusObjectPath?
    /// The first argument, when it is a string.
    public var arg0: String?

    /// Creates a rule for signals; unset fields match anything.
    public init(
        sender: String? = nil,
        interface: String? = nil,
        member: String? = nil,
        path: DBusObjectPath? = nil,
        pathNamespace: DBusObjectPath? = nil,
        arg0: String? = nil
    ) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.arg0 = arg0
    }

    /// The rule in the bus's text syntax.
    public var description: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            parts.append("\(key)='\(value.replacingQuote())'")
        }
        add("sender", sender)
        add("interface", interface)
        add("member", member)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("arg0", arg0)
        return parts.joined(separator: ",")
    }

    /// Whether `message` satisfies the rule.
    public func matches(_ message: DBusMessage) -> Bool {
        guard message.kind == .signal else { return false }
        if let sender, sender.hasPrefix(":") || sender == "org.freedesktop.DBus", message.sender != sender {
            return false
        }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let path, message.path != path { return false }
        if let pathNamespace {
            guard let messagePath = message.path, messagePath.isDescendant(of: pathNamespace) else { return false }
        }
        if let arg0, message.argument(0, as: String.self) != arg0 { return false }
        return true
    }

    var isValid: Bool {
        [sender, interface, member, arg0].allSatisfy { value in
            value.map { !$0.utf8.contains(0) } ?? true
        }
    }
}

extension String {
    /// Match rule values are single-quoted; a quote inside is written as `'\''`.
    fileprivate func replacingQuote() -> String {
        var result = ""
        for character in self {
            if character == "'" { result += "'\\''" } else { result.append(character) }
        }
        return result
    }
}
