import Foundation
import GotchuTesting
import Logging
import Synchronization
import Testing

@testable import GotchuDBus

@Suite("Signal receiver: a socket of its own, read without libdbus", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct SignalReceiverTests {
    static let bus = PrivateBus.Shared()
    static let logger = Logger(label: "gotchu.test.receiver")

    /// What a receiver's callbacks saw, in order.
    final class Seen: Sendable {
        enum Event: Equatable { case tick(String, Int16?), drained, ended }
        private let events = Mutex<[Event]>([])
        func append(_ event: Event) { events.withLock { $0.append(event) } }
        var all: [Event] { events.withLock { $0 } }
        var ticks: [Event] { all.filter { if case .tick = $0 { true } else { false } } }
    }

    static func open(
        _ address: String,
        _ rules: [DBusMatchRule],
        coalescing: Duration = .zero,
        _ seen: Seen
    ) async throws -> DBusSignalReceiver {
        try await DBusSignalReceiver.open(
            address: address,
            rules: rules,
            coalescing: coalescing,
            logger: logger,
            onEnd: { seen.append(.ended) },
            drained: { seen.append(.drained) },
            { view in
                var arguments = view.arguments
                let first = arguments.string ?? "?"
                arguments.next()
                seen.append(.tick("\(view.path?.rawValue ?? "?") \(first)", arguments.int16))
            }
        )
    }

    /// A receiver of the `Tick` signals `server` sends (the suite's bus is shared by tests that run at once).
    static func openForTicks(
        from server: DBusConnection,
        on bus: PrivateBus,
        coalescing: Duration = .zero,
        _ seen: Seen
    ) async throws -> DBusSignalReceiver {
        let rule = DBusMatchRule(sender: await server.uniqueName, interface: "io.gotchu.Test.Signals", member: "Tick")
        return try await open(bus.address, [rule], coalescing: coalescing, seen)
    }

    static func tick(_ connection: DBusConnection, _ path: String, _ arguments: [DBusValue]) async throws {
        try await connection.emitSignal(
            path: DBusObjectPath(rawValue: path)!,
            interface: "io.gotchu.Test.Signals",
            member: "Tick",
            arguments
        )
    }

    @Test("signals that match a rule arrive in order, read from the receiver's own socket; drained ends each read")
    func rules() async throws {
        let bus = try await Self.bus.get()
        try await DBusConnection.withConnection(to: .address(bus.address)) { server in
            let seen = Seen()
            let receiver = try await Self.open(
                bus.address,
                [
                    DBusMatchRule(
                        sender: await server.uniqueName,
                        interface: "io.gotchu.Test.Signals",
                        member: "Tick",
                        pathNamespace: DBusObjectPath(rawValue: "/io/gotchu")!,
                        arg0: "mine"
                    ),
                    DBusMatchRule(
                        sender: await server.uniqueName,
                        interface: "io.gotchu.Test.Signals",
                        member: "Tick",
                        path: DBusObjectPath(rawValue: "/x")!
                    ),
                ],
                seen
            )
            defer { receiver.close() }
            // None of these matches a rule.
            try await Self.tick(server, "/elsewhere", [.string("mine"), .int16(1)])
            try await Self.tick(server, "/io/gotchu/a", [.string("yours"), .int16(2)])
            try await Self.tick(server, "/io/gotchuX", [.string("mine"), .int16(3)])
            try await Self.tick(server, "/x/y", [.string("any"), .int16(4)])
            // These do, one by each rule.
            try await Self.tick(server, "/io/gotchu/a/b", [.string("mine"), .int16(5)])
            try await Self.tick(server, "/x", [.string("any"), .string("six")])
            #expect(try await eventually { seen.ticks.count >= 2 })
            #expect(seen.ticks == [.tick("/io/gotchu/a/b mine", 5), .tick("/x any", nil)])
            #expect(try await eventually { seen.all.last == .drained })
        }
    }

    @Test("coalescing gathers what arrives during the wait into one read")
    func coalescing() async throws {
        let bus = try await Self.bus.get()
        try await DBusConnection.withConnection(to: .address(bus.address)) { server in
            let seen = Seen()
            let size = Atomic<Int>(0)
            let rule = DBusMatchRule(
                sender: await server.uniqueName,
                interface: "io.gotchu.Test.Signals",
                member: "Tick"
            )
            // A wait far longer than the test: it ends when the test ends it, once what it is to gather is there to
            // read, however slowly a busy machine sends it.
            let receiver = try await DBusSignalReceiver.open(
                address: bus.address,
                rules: [rule],
                coalescing: .seconds(3600),
                logger: Self.logger,
                drained: { seen.append(.drained) },
                { view in
                    size.store(view.wire.count, ordering: .relaxed)
                    seen.append(.tick("", view.arguments.int16))
                }
            )
            defer { receiver.close() }
            // Every tick is as long as the next: the same header, and a body of one INT16.
            try await Self.tick(server, "/a", [.int16(1)])
            #expect(try await eventually { seen.all.last == .drained })
            // The receiver now waits before it reads again: these arrive meanwhile, and each alone would have made
            // a read of its own.
            for value: Int16 in 2...4 { try await Self.tick(server, "/a", [.int16(value)]) }
            let three = 3 * size.load(ordering: .relaxed)
            #expect(try await eventually { receiver.unreadByteCount >= three })
            receiver.endCoalescingWait()
            #expect(try await eventually { seen.ticks.count == 4 && seen.all.last == .drained })
            #expect(seen.all == [.tick("", 1), .drained, .tick("", 2), .tick("", 3), .tick("", 4), .drained])
        }
    }

    @Test("a message too long to hold is skipped as it arrives; the ones after it are read")
    func tooLong() async throws {
        let bus = try await Self.bus.get()
        try await DBusConnection.withConnection(to: .address(bus.address)) { server in
            let seen = Seen()
            let receiver = try await Self.openForTicks(from: server, on: bus, seen)
            defer { receiver.close() }
            let huge = [UInt8](repeating: 0x61, count: DBusSignalReceiver.maximumMessage + 1)
            try await Self.tick(server, "/big", [.string("big"), .bytes(huge)])
            try await Self.tick(server, "/small", [.string("small"), .int16(7)])
            #expect(try await eventually(timeout: .seconds(20)) { !seen.ticks.isEmpty })
            #expect(seen.ticks == [.tick("/small small", 7)])
        }
    }

    @Test("close() ends the receiver and onEnd runs once; so does the bus going away")
    func ending() async throws {
        let shared = try await Self.bus.get()
        let seen = Seen()
        let receiver = try await Self.open(shared.address, [DBusMatchRule(member: "NeverSent")], seen)
        receiver.close()
        receiver.close()
        #expect(try await eventually { seen.all == [.ended] })

        try await PrivateBus.with { bus in
            let seen = Seen()
            let receiver = try await Self.open(bus.address, [DBusMatchRule(member: "NeverSent")], seen)
            bus.stop()
            #expect(try await eventually { seen.all == [.ended] })
            receiver.close()
        }
    }

    @Test("addresses: Unix paths and abstract names, escapes decoded, other transports left out")
    func addresses() async throws {
        #expect(
            DBusSocketAddress.sockets(in: "unix:path=/run/dbus/system%20bus,guid=0123;tcp:host=x,port=1")
                == [.path("/run/dbus/system bus")]
        )
        #expect(
            DBusSocketAddress.sockets(in: "tcp:host=x,port=1;unix:abstract=/tmp/dbus-AbC;unix:path=/b")
                == [.abstract("/tmp/dbus-AbC"), .path("/b")]
        )
        #expect(DBusSocketAddress.sockets(in: "unix:tmpdir=/tmp").isEmpty)
        #expect(DBusSocketAddress.sockets(in: "unix:path=/bad%zz").isEmpty)
        #expect(DBusSocketAddress.sockets(in: "unix:path=/cut%4").isEmpty)
        #expect(DBusSocketAddress.sockets(in: "").isEmpty)
        do {
            _ = try await DBusSignalReceiver.open(address: "tcp:host=127.0.0.1,port=1", rules: [], logger: Self.logger)
            {
                _ in
            }
            Issue.record("opened a receiver on a TCP address")
        } catch let error as DBusError {
            #expect(error.name == .notSupported)
        }
    }

    @Test("a peer that is no bus: refused authentication, bytes that are not D-Bus, a hang-up, no socket at all")
    func hostilePeers() async throws {
        func attempt(_ answer: @escaping @Sendable (Int32) -> Void) async throws -> DBusError {
            let peer = try FakePeer(answer)
            defer { peer.stop() }
            do {
                let receiver = try await DBusSignalReceiver.open(
                    address: "unix:path=\(peer.path)",
                    rules: [DBusMatchRule(member: "Tick")],
                    logger: Self.logger
                ) { _ in }
                receiver.close()
                throw TestingError("a receiver opened on a peer that is no bus")
            } catch let error as DBusError {
                return error
            }
        }
        let rejected = try await attempt { fd in
            _ = FakePeer.readLine(fd)
            FakePeer.send(fd, "REJECTED EXTERNAL\r\n")
        }
        #expect(rejected.name == .accessDenied && rejected.message.contains("REJECTED"), "\(rejected)")
        let garbage = try await attempt { fd in
            _ = FakePeer.readLine(fd)
            FakePeer.send(fd, "OK 0123456789abcdef0123456789abcdef\r\n")
            _ = FakePeer.readLine(fd)  // BEGIN
            FakePeer.send(fd, String(repeating: "not a D-Bus message ", count: 10))
            FakePeer.drain(fd)  // Takes Hello and AddMatch until the receiver hangs up.
        }
        #expect(garbage.message.contains("not D-Bus"), "\(garbage)")
        let hangUp = try await attempt { fd in
            _ = FakePeer.readLine(fd)
            FakePeer.send(fd, "OK 0123456789abcdef0123456789abcdef\r\n")
        }
        #expect(hangUp.name == .disconnected || hangUp.message.contains("closed"), "\(hangUp)")
        do {
            _ = try await DBusSignalReceiver.open(
                address: "unix:path=/nonexistent/gotchu-bus",
                rules: [],
                logger: Self.logger
            ) { _ in }
            Issue.record("opened a receiver on a missing socket")
        } catch let error as DBusError {
            #expect(error.name == .noServer)
        }
    }
}

/// A Unix socket that answers one connection with `answer`, then hangs up.
private final class FakePeer: Sendable {
    let path: String
    private let listener: Int32

    init(_ answer: @escaping @Sendable (Int32) -> Void) throws {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-peer-\(UUID().uuidString.prefix(8))")
            .path
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(listener, 1) == 0 else { throw TestingError("could not listen on \(path)") }
        Thread.detachNewThread {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            answer(fd)
            close(fd)
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlink(path)
    }

    /// Reads up to and including the next CR LF (the NUL a client sends first counts as part of its line).
    static func readLine(_ fd: Int32) -> String {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            line.append(byte)
            if line.suffix(2) == [13, 10] { break }
        }
        return String(decoding: line, as: UTF8.self)
    }

    /// Reads until the other side closes.
    static func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while read(fd, &buffer, buffer.count) > 0 {}
    }

    static func send(_ fd: Int32, _ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { sendWithoutSignal(fd, $0.baseAddress!, $0.count) }
    }
}

/// `send` without `SIGPIPE`, under a name ``FakePeer/send(_:_:)`` does not shadow.
private func sendWithoutSignal(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    send(fd, bytes, count, Int32(MSG_NOSIGNAL))
}
