extension DBusConnection {
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let introspectableInterface = "org.freedesktop.DBus.Introspectable"
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    static let peerInterface = "org.freedesktop.DBus.Peer"

    /// Exports `object` at `path` until ``unexport(_:)``. Prefer ``withExportedObject(_:at:_:)``.
    public func export(_ object: DBusObject, at path: DBusObjectPath) throws {
        guard raw != nil else { throw DBusError(.disconnected, "connection closed") }
        guard objects[path] == nil else { throw DBusError(.failed, "an object is already exported at \(path)") }
        for interface in object.interfaces {
            guard DBusNames.isValidInterface(interface.name),
                interface.methods.allSatisfy({ DBusNames.isValidMember($0.name) }),
                interface.properties.allSatisfy({ DBusNames.isValidMember($0.name) })
            else { throw DBusError(.invalidArgs, "invalid names in interface \(interface.name)") }
            for property in interface.properties { try property.value.validate() }
        }
        objects[path] = ExportedObject(object: object, token: makeToken())
        let added = DBusValue.dictionary(
            DBusDictionary(
                keyType: .string,
                valueType: [String: DBusVariant].dbusType,
                entries: object.interfaces.map {
                    .init(
                        key: .string($0.name),
                        value: ExportedObject(object: object, token: 0).properties(of: $0).dbusValue
                    )
                }
            )
        )
        for managerPath in managers(above: path) {
            try? emitSignal(
                path: managerPath,
                interface: Self.objectManagerInterface,
                member: "InterfacesAdded",
                [.objectPath(path), added]
            )
        }
    }

    /// Stops exporting the object at `path`; later calls to it get `UnknownObject`.
    public func unexport(_ path: DBusObjectPath) {
        guard let removed = objects.removeValue(forKey: path) else { return }
        for managerPath in managers(above: path) {
            try? emitSignal(
                path: managerPath,
                interface: Self.objectManagerInterface,
                member: "InterfacesRemoved",
                [.objectPath(path), .strings(removed.object.interfaces.map(\.name))]
            )
        }
    }

    /// Exports `object` at `path` while `body` runs, and unexports it however `body` ends, cancellation included.
    public func withExportedObject<Result: Sendable>(
        _ object: DBusObject,
        at path: DBusObjectPath,
        _ body: () async throws -> Result
    ) async throws -> Result {
        try export(object, at: path)
        do {
            let result = try await body()
            unexport(path)
            return result
        } catch {
            unexport(path)
            throw error
        }
    }

    /// The paths currently exported.
    public var exportedPaths: [DBusObjectPath] { objects.keys.sorted() }

    /// Updates a property of an exported object and emits `PropertiesChanged`.
    public func setProperty(
        _ name: String,
        of interface: String,
        at path: DBusObjectPath,
        to value: DBusValue
    ) throws {
        try storeProperty(name, of: interface, at: path, value: value, checkWritable: false)
    }

    /// The current value of a property of an exported object.
    public func property(_ name: String, of interface: String, at path: DBusObjectPath) -> DBusValue? {
        objects[path]?.interface(named: interface)?.properties.first { $0.name == name }?.value
    }

    private func storeProperty(
        _ name: String,
        of interfaceName: String,
        at path: DBusObjectPath,
        value: DBusValue,
        checkWritable: Bool
    ) throws(DBusError) {
        guard var exported = objects[path] else { throw DBusError(.unknownObject, "no object at \(path)") }
        guard let interfaceIndex = exported.object.interfaces.firstIndex(where: { $0.name == interfaceName }) else {
            throw DBusError(.unknownInterface, "no interface \(interfaceName) at \(path)")
        }
        guard
            let propertyIndex = exported.object.interfaces[interfaceIndex].properties.firstIndex(where: {
                $0.name == name
            })
        else { throw DBusError(.unknownProperty, "no property \(name) in \(interfaceName)") }
        let property = exported.object.interfaces[interfaceIndex].properties[propertyIndex]
        if checkWritable, property.access != .readWrite {
            throw DBusError(.propertyReadOnly, "\(name) is read-only")
        }
        guard value.type == property.type else {
            throw DBusError(.invalidArgs, "\(name) has type \(property.type), not \(value.type)")
        }
        try value.validate()
        exported.object.interfaces[interfaceIndex].properties[propertyIndex].value = value
        objects[path] = exported
        let changed = [name: DBusVariant(value)]
        do {
            try emitSignal(
                path: path,
                interface: Self.propertiesInterface,
                member: "PropertiesChanged",
                [.string(interfaceName), changed.dbusValue, DBusValue.strings([])]
            )
        } catch {
            throw error as? DBusError ?? DBusError(.failed, "\(error)")
        }
    }

    private func managers(above path: DBusObjectPath) -> [DBusObjectPath] {
        objects.filter { $0.value.object.isObjectManager && $0.key != path && path.isDescendant(of: $0.key) }.map(\.key)
    }

    // MARK: Incoming calls

    /// Answers a method call addressed to this connection. Returns `false` to let libdbus answer (`Peer`).
    func handleMethodCall(_ message: DBusMessage) -> Bool {
        guard let path = message.path, let member = message.member else { return false }
        if message.interface == Self.peerInterface { return false }
        guard let exported = objects[path] else {
            if member == "Introspect", message.interface == nil || message.interface == Self.introspectableInterface {
                reply(to: message, [.string(introspectionXML(for: path, object: nil))])
            } else {
                replyError(to: message, DBusError(.unknownObject, "no object at \(path)"))
            }
            return true
        }
        switch (message.interface, member) {
        case (Self.propertiesInterface, "Get"):
            guard message.signature.rawValue == "ss", let interfaceName = message.argument(0, as: String.self),
                let name = message.argument(1, as: String.self)
            else { return replyError(to: message, DBusError(.invalidArgs, "Get takes (ss)")) }
            guard let interface = exported.interface(named: interfaceName) else {
                return replyError(to: message, DBusError(.unknownInterface, "no interface \(interfaceName)"))
            }
            guard let property = interface.properties.first(where: { $0.name == name }) else {
                return replyError(to: message, DBusError(.unknownProperty, "no property \(name)"))
            }
            reply(to: message, [.variant(DBusVariant(property.value))])
        case (Self.propertiesInterface, "GetAll"):
            guard message.signature.rawValue == "s", let interfaceName = message.argument(0, as: String.self) else {
                return replyError(to: message, DBusError(.invalidArgs, "GetAll takes (s)"))
            }
            guard let interface = exported.interface(named: interfaceName) else {
                return replyError(to: message, DBusError(.unknownInterface, "no interface \(interfaceName)"))
            }
            reply(to: message, [exported.properties(of: interface).dbusValue])
        case (Self.propertiesInterface, "Set"):
            guard message.signature.rawValue == "ssv", let interfaceName = message.argument(0, as: String.self),
                let name = message.argument(1, as: String.self), let variant = message.argument(2, as: DBusVariant.self)
            else { return replyError(to: message, DBusError(.invalidArgs, "Set takes (ssv)")) }
            do {
                try storeProperty(name, of: interfaceName, at: path, value: variant.value, checkWritable: true)
                reply(to: message, [])
            } catch {
                replyError(to: message, error)
            }
        case (Self.introspectableInterface, "Introspect"):
            reply(to: message, [.string(introspectionXML(for: path, object: exported.object))])
        case (Self.objectManagerInterface, "GetManagedObjects") where exported.object.isObjectManager:
            let managed = objects.filter { $0.key != path && $0.key.isDescendant(of: path) }
            let value = DBusDictionary(
                keyType: .objectPath,
                valueType: [String: [String: DBusVariant]].dbusType,
                entries: managed.sorted { $0.key < $1.key }.map {
                    .init(key: .objectPath($0.key), value: $0.value.allProperties.dbusValue)
                }
            )
            reply(to: message, [.dictionary(value)])
        default:
            let candidates = exported.object.interfaces.filter {
                message.interface == nil || $0.name == message.interface
            }
            guard let method = candidates.lazy.compactMap({ $0.methods.first { $0.name == member } }).first else {
                let interfaceText = message.interface ?? "(any)"
                return replyError(
                    to: message,
                    DBusError(
                        .unknownMethod,
                        "no method \(member) with signature \(message.signature) in \(interfaceText) at \(path)"
                    )
                )
            }
            guard message.signature == method.inputs else {
                return replyError(
                    to: message,
                    DBusError(.invalidArgs, "\(member) takes (\(method.inputs)), not (\(message.signature))")
                )
            }
            let handler = method.handler
            Task {
                do {
                    let result = try await handler(message)
                    self.reply(to: message, result)
                } catch let error as DBusError {
                    self.replyError(to: message, error)
                } catch {
                    self.replyError(to: message, DBusError(.failed, "\(error)"))
                }
            }
        }
        return true
    }

    func reply(to call: DBusMessage, _ arguments: [DBusValue]) {
        guard !call.noReplyExpected else { return }
        let message = DBusMessage(
            kind: .methodReturn,
            destination: call.sender,
            replySerial: call.serial,
            body: arguments
        )
        do {
            try send(message)
        } catch {
            replyError(to: call, error as? DBusError ?? DBusError(.failed, "\(error)"))
        }
    }

    @discardableResult
    func replyError(to call: DBusMessage, _ error: DBusError) -> Bool {
        guard !call.noReplyExpected else { return true }
        replyError(toSerial: call.serial, sender: call.sender, error)
        return true
    }

    // MARK: Introspection

    private func introspectionXML(for path: DBusObjectPath, object: DBusObject?) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        if let object {
            var interfaces = object.interfaces
            interfaces.append(
                DBusInterface(
                    Self.introspectableInterface,
                    methods: [DBusMethod("Introspect", outputs: [.string]) { _ in [] }]
                )
            )
            interfaces.append(
                DBusInterface(
                    Self.propertiesInterface,
                    methods: [
                        DBusMethod("Get", inputs: [.string, .string], outputs: [.variant]) { _ in [] },
                        DBusMethod("GetAll", inputs: [.string], outputs: [[String: DBusVariant].dbusType]) { _ in [] },
                        DBusMethod("Set", inputs: [.string, .string, .variant]) { _ in [] },
                    ],
                    signals: [
                        DBusSignalDescription(
                            "PropertiesChanged",
                            arguments: [.string, [String: DBusVariant].dbusType, .array(.string)]
                        )
                    ]
                )
            )
            if object.isObjectManager {
                interfaces.append(
                    DBusInterface(
                        Self.objectManagerInterface,
                        methods: [
                            DBusMethod(
                                "GetManagedObjects",
                                outputs: [[DBusObjectPath: [String: [String: DBusVariant]]].dbusType]
                            ) { _ in [] }
                        ]
                    )
                )
            }
            for interface in interfaces {
                xml += "  <interface name=\"\(interface.name)\">\n"
                for method in interface.methods {
                    xml += "    <method name=\"\(method.name)\">\n"
                    for type in method.inputs.types { xml += "      <arg type=\"\(type)\" direction=\"in\"/>\n" }
                    for type in method.outputs.types { xml += "      <arg type=\"\(type)\" direction=\"out\"/>\n" }
                    xml += "    </method>\n"
                }
                for signal in interface.signals {
                    xml += "    <signal name=\"\(signal.name)\">\n"
                    for type in signal.arguments.types { xml += "      <arg type=\"\(type)\"/>\n" }
                    xml += "    </signal>\n"
                }
                for property in interface.properties {
                    let access = property.access == .read ? "read" : "readwrite"
                    xml += "    <property name=\"\(property.name)\" type=\"\(property.type)\" access=\"\(access)\"/>\n"
                }
                xml += "  </interface>\n"
            }
        }
        // Children: the next path element of every exported object below `path`.
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        let children = Set(
            objects.keys.compactMap { child -> String? in
                guard child.rawValue.hasPrefix(prefix), child != path else { return nil }
                return child.rawValue.dropFirst(prefix.count).split(separator: "/").first.map(String.init)
            }
        )
        for child in children.sorted() { xml += "  <node name=\"\(child)\"/>\n" }
        xml += "</node>\n"
        return xml
    }
}
