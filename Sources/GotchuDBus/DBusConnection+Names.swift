/// A change of a bus name's owner, from the bus's `NameOwnerChanged` signal.
public struct DBusNameOwnerChange: Hashable, Sendable {
    /// The name whose owner changed.
    public var name: String
    /// The previous owner's unique name, `nil` if there was none.
    public var oldOwner: String?
    /// The new owner's unique name, `nil` if the name is now unowned (the service exited).
    public var newOwner: String?
}

/// What to do when the requested name is already owned.
public struct DBusRequestNameOptions: OptionSet, Hashable, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Let a later requester with ``replaceExisting`` take the name over.
    public static let allowReplacement = DBusRequestNameOptions(rawValue: 1)
    /// Take the name from an owner that allowed replacement.
    public static let replaceExisting = DBusRequestNameOptions(rawValue: 2)
    /// Fail instead of queueing.
    public static let doNotQueue = DBusRequestNameOptions(rawValue: 4)
}

extension DBusConnection {
    /// Asks the bus for a well-known name; throws unless this connection becomes its primary owner.
    public func requestName(_ name: String, options: DBusRequestNameOptions = [.doNotQueue]) async throws {
        guard DBusNames.isValidBusName(name), !name.hasPrefix(":") else {
            throw DBusError(.invalidArgs, "invalid bus name \(name)")
        }
        let reply = try await callBus("RequestName", [.string(name), .uint32(options.rawValue)])
        // 1 = primary owner, 4 = already the owner.
        guard let code = reply.first.flatMap({ UInt32(dbusValue: $0) }), code == 1 || code == 4 else {
            throw DBusError(.accessDenied, "could not own \(name)")
        }
    }

    /// Gives a well-known name up.
    public func releaseName(_ name: String) async throws {
        guard DBusNames.isValidBusName(name) else { throw DBusError(.invalidArgs, "invalid bus name \(name)") }
        _ = try await callBus("ReleaseName", [.string(name)])
    }

    /// The unique name owning `name`, or `nil` when nobody owns it.
    public func nameOwner(of name: String) async throws -> String? {
        guard DBusNames.isValidBusName(name) else { throw DBusError(.invalidArgs, "invalid bus name \(name)") }
        do {
            let reply = try await callBus("GetNameOwner", [.string(name)])
            return reply.first.flatMap { String(dbusValue: $0) }
        } catch let error as DBusError where error.name == .nameHasNoOwner {
            return nil
        }
    }

    /// Owner changes of `name`, for reacting to a service restarting (for example bluetoothd).
    public func nameOwnerChanges(of name: String) async throws -> AsyncStream<DBusNameOwnerChange> {
        let signals = try await self.signals(
            matching: DBusMatchRule(
                sender: "org.freedesktop.DBus",
                interface: "org.freedesktop.DBus",
                member: "NameOwnerChanged",
                path: DBusObjectPath(rawValue: "/org/freedesktop/DBus")!,
                arg0: name
            )
        )
        let (stream, continuation) = AsyncStream.makeStream(
            of: DBusNameOwnerChange.self,
            bufferingPolicy: .bufferingNewest(64)
        )
        let task = Task {
            for await signal in signals {
                guard let name = signal.argument(0, as: String.self),
                    let old = signal.argument(1, as: String.self),
                    let new = signal.argument(2, as: String.self)
                else { continue }
                continuation.yield(
                    DBusNameOwnerChange(
                        name: name,
                        oldOwner: old.isEmpty ? nil : old,
                        newOwner: new.isEmpty ? nil : new
                    )
                )
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
