package import GotchuDBus

/// The argument list that starts python-dbusmock's bluez5 template on the system bus.
package let dbusmockArguments = ["-m", "dbusmock", "--system", "--template", "bluez5"]
/// The mock's root object, where its `org.bluez.Mock` control methods (`AddAdapter`, `RemoveAdapter`) live.
package let mockRoot = DBusObjectPath(rawValue: "/")!
/// The adapter `AddAdapter("hci0", …)` creates.
package let mockAdapter = DBusObjectPath(rawValue: "/org/bluez/hci0")!

extension DBusConnection {
    /// Calls a method of the mock's control interface.
    package func mock(
        _ method: String,
        at path: DBusObjectPath,
        interface: String = "org.bluez.Mock",
        _ arguments: [DBusValue]
    )
        async throws -> [DBusValue]
    {
        try await call(destination: "org.bluez", path: path, interface: interface, method: method, arguments)
    }

    /// The arguments of every logged call of `method` on the mock object at `path`.
    package func mockCalls(_ method: String, at path: DBusObjectPath) async throws -> [[DBusValue]] {
        let reply = try await mock(
            "GetMethodCalls",
            at: path,
            interface: "org.freedesktop.DBus.Mock",
            [.string(method)]
        )
        guard case .array(let calls) = reply.first else { return [] }
        return calls.elements.compactMap { call -> [DBusValue]? in
            guard case .structure(let fields) = call, fields.count == 2, case .array(let arguments) = fields[1] else {
                return nil
            }
            return arguments.elements.compactMap { argument in
                guard case .variant(let variant) = argument else { return nil }
                return variant.value
            }
        }
    }
}

/// The currently running fake process; replacing it stops the previous one first.
package actor FakeSlot {
    private var process: ChildProcess?

    /// An empty slot.
    package init() {}

    /// Stops the current process, if any, and keeps `next`.
    package func replace(with next: ChildProcess?) {
        process?.terminate()
        process = next
    }
}
