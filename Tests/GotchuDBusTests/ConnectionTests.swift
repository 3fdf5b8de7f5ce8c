import GotchuTesting
import Synchronization
import Testing

@testable import GotchuDBus

@Suite("Connection: calls, signals, exported objects", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct ConnectionTests {
    static let bus = PrivateBus.Shared()

    @Test("Properties Get, GetAll, Set and PropertiesChanged")
    func properties() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            try await server.export(echoObject(), at: echoPath)
            let serverName = await server.uniqueName
            let changes = try await client.signals(
                matching: DBusMatchRule(
                    interface: "org.freedesktop.DBus.Properties",
                    member: "PropertiesChanged",
                    path: echoPath
                )
            )
            let all = try await client.call(
                destination: serverName,
                path: echoPath,
                interface: "org.freedesktop.DBus.Properties",
                method: "GetAll",
                [.string(echoInterface)]
            )
            let properties = try #require(all.first.flatMap { [String: DBusVariant](dbusValue: $0) })
            #expect(properties["Name", as: String.self] == "echo")
            #expect(properties["Volume", as: UInt16.self] == 3)

            _ = try await client.call(
                destination: serverName,
                path: echoPath,
                interface: "org.freedesktop.DBus.Properties",
                method: "Set",
                [.string(echoInterface), .string("Volume"), .variant(DBusVariant(UInt16(9)))]
            )
            let got = try await client.call(
                destination: serverName,
                path: echoPath,
                interface: "org.freedesktop.DBus.Properties",
                method: "Get",
                [.string(echoInterface), .string("Volume")]
            )
            #expect(got == [.variant(DBusVariant(UInt16(9)))])

            var iterator = changes.makeAsyncIterator()
            let signal = try #require(await iterator.next())
            #expect(signal.argument(0, as: String.self) == echoInterface)
            #expect(signal.argument(1, as: [String: DBusVariant].self)?["Volume", as: UInt16.self] == 9)
            #expect(signal.argument(2, as: [String].self) == [])

            await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: serverName,
                    path: echoPath,
                    interface: "org.freedesktop.DBus.Properties",
                    method: "Set",
                    [.string(echoInterface), .string("Name"), .variant(DBusVariant("other"))]
                )
            }
            do {
                _ = try await client.call(
                    destination: serverName,
                    path: echoPath,
                    interface: "org.freedesktop.DBus.Properties",
                    method: "Set",
                    [.string(echoInterface), .string("Volume"), .variant(DBusVariant("wrong type"))]
                )
                Issue.record("a wrongly typed Set succeeded")
            } catch let error as DBusError {
                #expect(error.name == .invalidArgs)
            }
        }
    }

    @Test("unknown methods and objects get D-Bus errors, not silence")
    func unknownMethod() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            try await server.export(echoObject(), at: echoPath)
            let serverName = await server.uniqueName
            do {
                _ = try await client.call(
                    destination: serverName,
                    path: echoPath,
                    interface: echoInterface,
                    method: "Nope"
                )
                Issue.record("call succeeded")
            } catch let error as DBusError {
                #expect(error.name == .unknownMethod)
            }
            do {
                _ = try await client.call(
                    destination: serverName,
                    path: echoPath,
                    interface: "org.freedesktop.DBus.ObjectManager",
                    method: "GetManagedObjects"
                )
                Issue.record("call succeeded")
            } catch let error as DBusError {
                #expect(error.name == .unknownMethod)
            }
            do {
                _ = try await client.call(
                    destination: serverName,
                    path: DBusObjectPath(rawValue: "/nothing")!,
                    interface: echoInterface,
                    method: "Echo"
                )
                Issue.record("call succeeded")
            } catch let error as DBusError {
                #expect(error.name == .unknownObject)
            }
            let xml = try await client.call(
                destination: serverName,
                path: echoPath,
                interface: "org.freedesktop.DBus.Introspectable",
                method: "Introspect"
            )
            let text = try #require(xml.first.flatMap { String(dbusValue: $0) })
            #expect(text.contains("<interface name=\"\(echoInterface)\">"))
            #expect(text.contains("<property name=\"Volume\" type=\"q\" access=\"readwrite\"/>"))
        }
    }

    @Test("a pending call does not stop incoming calls (the RegisterAdvertisement call-back pattern)")
    func reentrantCallBack() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            // The client exports an object; the server's method calls back into the client before replying.
            try await client.export(echoObject(), at: echoPath)
            let clientName = await client.uniqueName
            let registerPath = DBusObjectPath(rawValue: "/manager")!
            try await server.export(
                DBusObject(interfaces: [
                    DBusInterface(
                        "io.gotchu.Test.Manager",
                        methods: [
                            DBusMethod("Register", inputs: [.objectPath], outputs: [.string]) { [server] call in
                                let all = try await server.call(
                                    destination: clientName,
                                    path: echoPath,
                                    interface: "org.freedesktop.DBus.Properties",
                                    method: "GetAll",
                                    [.string(echoInterface)],
                                    timeout: .seconds(30)
                                )
                                let name = all.first.flatMap { [String: DBusVariant](dbusValue: $0) }?[
                                    "Name",
                                    as: String.self
                                ]
                                return [.string(name ?? "none")]
                            }
                        ]
                    )
                ]),
                at: registerPath
            )
            let reply = try await client.call(
                destination: await server.uniqueName,
                path: registerPath,
                interface: "io.gotchu.Test.Manager",
                method: "Register",
                [.objectPath(echoPath)],
                timeout: .seconds(60)
            )
            #expect(reply == [.string("echo")])
        }
    }

    @Test("a call without a reply times out with NoReply, and cancellation ends a call")
    func timeoutAndCancellation() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            let hangs = CallCount()
            try await server.export(
                DBusObject(interfaces: [
                    DBusInterface(
                        echoInterface,
                        methods: [
                            DBusMethod("Hang") { _ in
                                hangs.count.add(1, ordering: .sequentiallyConsistent)
                                try await Task.sleep(for: .seconds(30))
                                return []
                            }
                        ]
                    )
                ]),
                at: echoPath
            )
            let serverName = await server.uniqueName
            let clock = ContinuousClock()
            let start = clock.now
            do {
                _ = try await client.call(
                    destination: serverName,
                    path: echoPath,
                    interface: echoInterface,
                    method: "Hang",
                    timeout: .milliseconds(200)
                )
                Issue.record("call succeeded")
            } catch let error as DBusError {
                #expect(error.name == .noReply)
            }
            #expect(clock.now - start < .seconds(20))

            let task = Task {
                try await client.call(destination: serverName, path: echoPath, interface: echoInterface, method: "Hang")
            }
            // Cancelled once the call is under way: the server is handling it (the first call was the first Hang).
            #expect(try await eventually { hangs.count.load(ordering: .sequentiallyConsistent) >= 2 })
            task.cancel()
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
        }
    }

    @Test("signal streams are bounded and remove their match when dropped")
    func signalLifetime() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            let rule = DBusMatchRule(interface: "io.gotchu.Test.Signals", member: "Tick")
            do {
                let stream = try await client.signals(matching: rule, bufferingNewest: 4)
                #expect(await client.subscriptionCount == 1)
                for index in 0..<20 {
                    try await server.emitSignal(
                        path: echoPath,
                        interface: "io.gotchu.Test.Signals",
                        member: "Tick",
                        [.int32(Int32(index))]
                    )
                }
                // A round trip to the server orders the signals before its reply on the client's socket.
                _ = try await client.call(
                    destination: "org.freedesktop.DBus",
                    path: DBusObjectPath(rawValue: "/org/freedesktop/DBus")!,
                    interface: "org.freedesktop.DBus",
                    method: "GetId"
                )
                try await server.emitSignal(
                    path: echoPath,
                    interface: "io.gotchu.Test.Signals",
                    member: "Tick",
                    [.int32(99)]
                )
                var received: [Int32] = []
                for await signal in stream {
                    received.append(signal.argument(0, as: Int32.self) ?? -1)
                    if received.last == 99 { break }
                }
                #expect(received.count <= 5)
                #expect(received.last == 99)
            }
            // The stream is gone; its subscription follows once the loop has run the termination handler.
            #expect(try await eventually { await client.subscriptionCount == 0 })
        }
    }

    @Test("view handlers read signals in place; path_namespace and arg0 are applied; drained ends each round")
    func signalViews() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            let events = ViewEvents()
            let rule = DBusMatchRule(
                interface: "io.gotchu.Test.Signals",
                member: "Tick",
                pathNamespace: DBusObjectPath(rawValue: "/io/gotchu")!,
                arg0: "mine"
            )
            let token = try await client.addSignalViewHandler(
                matching: rule,
                drained: { events.append(.drained) },
                { view in
                    // Read in place: the path, the first argument compared, the second read only if it is an `n`.
                    var arguments = view.arguments
                    let mine = arguments.isString("mine")
                    arguments.next()
                    let event = ViewEvent.tick(mine ? view.path?.rawValue ?? "?" : "not mine", arguments.int16)
                    events.append(event)
                }
            )
            func tick(_ path: String, _ arguments: [DBusValue]) async throws {
                try await server.emitSignal(
                    path: DBusObjectPath(rawValue: path)!,
                    interface: "io.gotchu.Test.Signals",
                    member: "Tick",
                    arguments
                )
            }
            // Outside the namespace, another arg0, arg0 of another type, a namespace that only shares a prefix:
            // none of these may reach the handler, whatever the bus delivers.
            try await tick("/elsewhere", [.string("mine"), .int16(1)])
            try await tick("/io/gotchu/a", [.string("yours"), .int16(2)])
            try await tick("/io/gotchu/a", [.objectPath(DBusObjectPath(rawValue: "/mine")!), .int16(3)])
            try await tick("/io/gotchuX", [.string("mine"), .int16(4)])
            // Then three that match, the last with a second argument of another type.
            try await tick("/io/gotchu", [.string("mine"), .int16(5)])
            try await tick("/io/gotchu/a/b", [.string("mine"), .int16(6)])
            try await tick("/io/gotchu/c", [.string("mine"), .string("seven")])
            #expect(try await eventually { events.ticks.count >= 3 })
            // Signals from one sender arrive in order: had any of the first four been let through, it came first.
            #expect(events.ticks == [.tick("/io/gotchu", 5), .tick("/io/gotchu/a/b", 6), .tick("/io/gotchu/c", nil)])
            // Every round of dispatch that called the handler ends with `drained`.
            #expect(try await eventually { events.all.last == .drained })
            await client.removeSignalHandler(token)
            #expect(await client.subscriptionCount == 0)
        }
    }

    @Test(
        "a view handler's coalescing gathers signals into one round, and does not hold back a call's reply",
        .timeLimit(.minutes(5))
    )
    func coalescedReads() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            let events = ViewEvents()
            let size = Atomic<Int>(0)
            // A wait far longer than the test: only what the connection does ends it, never the clock, however
            // slowly a busy machine sends. Had a call's reply to wait it out, the call would outlast the time limit.
            let token = try await client.addSignalViewHandler(
                matching: DBusMatchRule(
                    sender: await server.uniqueName,
                    interface: "io.gotchu.Test.Signals",
                    member: "Gathered"
                ),
                coalescing: .seconds(3600),
                drained: { events.append(.drained) },
                { view in
                    size.store(view.wire.count, ordering: .relaxed)
                    events.append(.tick("", view.arguments.int16))
                }
            )
            let socket = try #require(await client.socketDescriptor)
            // Every tick is as long as the next: the same header, and a body of one INT16.
            func tick(_ value: Int16) async throws {
                try await server.emitSignal(
                    path: DBusObjectPath(rawValue: "/io/gotchu")!,
                    interface: "io.gotchu.Test.Signals",
                    member: "Gathered",
                    [.int16(value)]
                )
            }
            try await tick(1)
            #expect(try await eventually { events.all.last == .drained })
            #expect(events.all == [.tick("", 1), .drained])
            // The connection now waits before it reads again, so these arrive meanwhile, though each alone would
            // have made its own round. Once they are all there to read, a job for the connection ends the wait.
            for value: Int16 in 2...4 { try await tick(value) }
            let three = 3 * size.load(ordering: .relaxed)
            #expect(try await eventually { unreadBytes(on: socket) >= three })
            #expect(await client.isConnected)
            #expect(try await eventually { events.ticks.count == 4 && events.all.last == .drained })
            #expect(events.all == [.tick("", 1), .drained, .tick("", 2), .tick("", 3), .tick("", 4), .drained])
            // During the next wait a call goes out and its reply is read at once, not after the wait, even when
            // another signal waits to be read beside it (its round would otherwise start a wait of its own).
            try await tick(5)
            #expect(try await eventually { unreadBytes(on: socket) >= size.load(ordering: .relaxed) })
            #expect(try await client.nameOwner(of: "org.freedesktop.DBus") == "org.freedesktop.DBus")
            #expect(try await eventually { events.ticks.count == 5 })
            #expect(events.ticks.last == .tick("", 5))
            await client.removeSignalHandler(token)
        }
    }

    @Test("scoped exports disappear when the scope ends, also on cancellation")
    func scopedExport() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            let serverName = await server.uniqueName
            try await server.withExportedObject(echoObject(), at: echoPath) {
                #expect(await server.exportedPaths == [echoPath])
            }
            #expect(await server.exportedPaths.isEmpty)
            let task = Task {
                try await server.withExportedObject(echoObject(), at: echoPath) {
                    try await Task.sleep(for: .seconds(30))
                }
            }
            #expect(try await eventually { await server.exportedPaths == [echoPath] })
            task.cancel()
            _ = await task.result
            #expect(await server.exportedPaths.isEmpty)
            do {
                _ = try await client.call(
                    destination: serverName,
                    path: echoPath,
                    interface: "org.freedesktop.DBus.Properties",
                    method: "GetAll",
                    [.string(echoInterface)]
                )
                Issue.record("call succeeded")
            } catch let error as DBusError {
                #expect(error.name == .unknownObject)
            }
        }
    }

    @Test("ObjectManager lists children and announces them")
    func objectManager() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            let root = DBusObjectPath(rawValue: "/app")!
            try await server.export(DBusObject(interfaces: [], isObjectManager: true), at: root)
            let added = try await client.signals(
                matching: DBusMatchRule(interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded")
            )
            let child = root.appending("child")
            try await server.export(echoObject(), at: child)
            var iterator = added.makeAsyncIterator()
            let signal = try #require(await iterator.next())
            #expect(signal.argument(0, as: DBusObjectPath.self) == child)
            let managed = try await client.call(
                destination: await server.uniqueName,
                path: root,
                interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects"
            )
            let objects = try #require(
                managed.first.flatMap { [DBusObjectPath: [String: [String: DBusVariant]]](dbusValue: $0) }
            )
            #expect(objects[child]?[echoInterface]?["Name", as: String.self] == "echo")
        }
    }

    @Test("name ownership and owner changes")
    func nameOwners() async throws {
        try await withTwoConnections(on: Self.bus) { bus, server, client in
            let changes = try await client.nameOwnerChanges(of: "io.gotchu.Test")
            #expect(try await client.nameOwner(of: "io.gotchu.Test") == nil)
            try await server.requestName("io.gotchu.Test")
            let owner = await server.uniqueName
            #expect(try await client.nameOwner(of: "io.gotchu.Test") == owner)
            var iterator = changes.makeAsyncIterator()
            let first = try #require(await iterator.next())
            #expect(first.newOwner == owner)
            await server.close()
            let second = try #require(await iterator.next())
            #expect(second.oldOwner == owner)
            #expect(second.newOwner == nil)
        }
    }

    @Test("connecting to a missing bus fails with the D-Bus error")
    func missingBus() async throws {
        do {
            _ = try await DBusConnection.connect(to: .address("unix:path=/nonexistent/gotchu-bus"))
            Issue.record("connected")
        } catch let error as DBusError {
            #expect(
                error.name == .fileNotFound || error.name == .noServer
                    || error.name.rawValue.hasPrefix("org.freedesktop.DBus.Error")
            )
        }
    }
}

/// How often a method was called.
final class CallCount: Sendable {
    let count = Atomic<Int>(0)
}

private enum ViewEvent: Equatable, Sendable {
    case tick(String, Int16?)
    case drained
}

private final class ViewEvents: Sendable {
    private let events = Mutex<[ViewEvent]>([])

    func append(_ event: ViewEvent) { events.withLock { $0.append(event) } }
    var all: [ViewEvent] { events.withLock { $0 } }
    var ticks: [ViewEvent] { all.filter { $0 != .drained } }
}
