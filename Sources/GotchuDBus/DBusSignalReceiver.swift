internal import CGotchuDBus
package import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A connection of its own to a bus that only receives signals, read straight from its socket: for a flood of
/// signals (BlueZ sends one per advertisement report) where libdbus's reading, validating and dispatching of each
/// message costs more than everything else done with it.
///
/// It connects to a Unix socket, authenticates as this process's user (`EXTERNAL`), says `Hello`, adds its match
/// rules, and from then on hands every signal that matches a rule to `handler` as a ``DBusMessageView`` of the bytes
/// as read, on its own thread. It sends nothing after that; closing it drops its matches with it. libdbus still
/// writes its few messages, so only the reading is its own, and every length on that path is checked.
///
/// Messages it reads are neither validated as libdbus would nor trusted: views check their bounds, and
/// ``DBusMessageView/message()`` hands anything kept to libdbus to validate.
package final class DBusSignalReceiver: Sendable {
    /// What the thread reports while setting up.
    private enum Setup {
        case waiting(CheckedContinuation<Void, any Error>?)
        case done
    }

    private let sockets: [DBusSocketAddress]
    private let rules: [DBusMatchRule]
    private let coalescing: Duration
    private let logger: Logger
    private let handler: @Sendable (DBusMessageView) -> Void
    private let drained: @Sendable () -> Void
    private let onEnd: @Sendable () -> Void
    private let wakeFD: Int32
    /// The socket while the thread reads it, -1 otherwise; only ``unreadByteCount`` looks at it from elsewhere.
    private let connectedSocket = Atomic<Int32>(-1)
    private let stopping = Atomic<Bool>(false)
    private let setup = Mutex(Setup.waiting(nil))

    /// How long connecting, authenticating and adding the matches may take.
    static let setupTimeout: Duration = .seconds(10)
    /// A message longer than this is skipped as it arrives, never held whole: no signal a receiver is for comes
    /// near it (libdbus would hold up to D-Bus's limit, 128 MiB).
    static let maximumMessage = 8 << 20
    /// What one read asks for: many signals per system call under a flood.
    static let readSize = 64 * 1024

    private init(
        sockets: [DBusSocketAddress],
        rules: [DBusMatchRule],
        coalescing: Duration,
        logger: Logger,
        handler: @escaping @Sendable (DBusMessageView) -> Void,
        drained: @escaping @Sendable () -> Void,
        onEnd: @escaping @Sendable () -> Void
    ) throws(DBusError) {
        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else { throw DBusError(.failed, "eventfd failed: errno \(errno)") }
        self.sockets = sockets
        self.rules = rules
        self.coalescing = coalescing
        self.logger = logger
        self.handler = handler
        self.drained = drained
        self.onEnd = onEnd
        self.wakeFD = fd
    }

    deinit {
        closeDescriptor(wakeFD)
    }

    /// Connects to the bus at `address` and adds `rules`; returns once the bus has answered every `AddMatch`.
    /// `handler` then runs on the receiver's thread for each matching signal, `drained` after each read's signals
    /// are handled (so work batched per signal can be passed on once per read), and `onEnd` once when the open
    /// connection ends: closed by ``close()``, by the bus, or by a stream that is not D-Bus. After a read that
    /// brought signals the receiver waits `coalescing` before reading again, so a flood arrives in batches.
    ///
    /// Throws ``DBusError/Name/notSupported`` when `address` names no Unix socket (the caller then reads through
    /// ``DBusConnection``), and the bus's own error when it refuses the connection or a rule.
    package static func open(
        address: String,
        rules: [DBusMatchRule],
        coalescing: Duration = .zero,
        logger: Logger,
        onEnd: @escaping @Sendable () -> Void = {},
        drained: @escaping @Sendable () -> Void = {},
        _ handler: @escaping @Sendable (DBusMessageView) -> Void
    ) async throws -> DBusSignalReceiver {
        let sockets = DBusSocketAddress.sockets(in: address)
        guard !sockets.isEmpty else {
            throw DBusError(.notSupported, "\(address) names no Unix socket to read signals from")
        }
        guard rules.allSatisfy(\.isValid) else { throw DBusError(.invalidArgs, "invalid match rule") }
        let receiver = try DBusSignalReceiver(
            sockets: sockets,
            rules: rules,
            coalescing: coalescing,
            logger: logger,
            handler: handler,
            drained: drained,
            onEnd: onEnd
        )
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            receiver.setup.withLock { $0 = .waiting(continuation) }
            // The thread holds the receiver until it ends.
            let status = startThread { receiver.run() }
            if status != 0 {
                receiver.finishSetup(DBusError(.failed, "could not start the signal thread: \(status)"))
            }
        }
        return receiver
    }

    /// Ends the connection; `onEnd` runs on the receiver's thread. Safe to call more than once.
    package func close() {
        stopping.store(true, ordering: .releasing)
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// How many bytes the bus has sent that wait unread on the socket (tests: what was sent is there to read).
    var unreadByteCount: Int { unreadBytes(on: connectedSocket.load(ordering: .acquiring)) }

    /// Ends the wait that follows a read before its `coalescing` has passed, as ``close()`` does but without closing
    /// (tests: a wait that lasts until the test has sent what it is to gather).
    func endCoalescingWait() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Resumes ``open(address:rules:coalescing:logger:onEnd:drained:_:)`` once: with `error`, or with success.
    /// Whether setup was still waiting.
    @discardableResult
    private func finishSetup(_ error: (any Error)?) -> Bool {
        let continuation: CheckedContinuation<Void, any Error>?? = setup.withLock { state in
            guard case .waiting(let continuation) = state else { return nil }
            state = .done
            return continuation
        }
        guard let continuation else { return false }
        if let error { continuation?.resume(throwing: error) } else { continuation?.resume() }
        return true
    }

    // MARK: The thread

    private func run() {
        let socket: Int32
        do {
            socket = try connectAndAuthenticate()
        } catch {
            finishSetup(error)
            return
        }
        connectedSocket.store(socket, ordering: .releasing)
        defer {
            connectedSocket.store(-1, ordering: .releasing)
            closeDescriptor(socket)
        }
        var reader = Reader(socket: socket, logger: logger)
        // Hello first, as every connection must; then the rules. Each answer is awaited below, among the signals.
        var awaiting: Set<UInt32> = []
        do {
            var serial: UInt32 = 0
            for message in [Self.busCall("Hello", [])]
                + rules.map({ Self.busCall("AddMatch", [.string($0.description)]) })
            {
                serial += 1
                try Self.send(message, serial: serial, on: socket)
                awaiting.insert(serial)
            }
        } catch {
            finishSetup(error)
            return
        }
        let deadline = ContinuousClock.now + Self.setupTimeout
        var ending: (any Error)?
        while !stopping.load(ordering: .acquiring) {
            let waitMilliseconds = awaiting.isEmpty ? -1 : DBusEventLoop.pollMilliseconds(max(.zero, deadline - .now))
            if !awaiting.isEmpty && waitMilliseconds == 0 {
                ending = DBusError(.noReply, "the bus did not answer Hello and AddMatch in \(Self.setupTimeout)")
                break
            }
            guard waitForInput(socket, milliseconds: waitMilliseconds) else { continue }
            var signals = 0
            do {
                try reader.readMessages { view in
                    switch view.type {
                    case .signal:
                        guard rules.contains(where: { $0.matches(view) }) else { return }
                        handler(view)
                        signals += 1
                    case .methodReturn, .error:
                        guard let serial = view.replySerial, awaiting.remove(serial) != nil else { return }
                        if view.type == .error {
                            throw (try? view.message().asError) ?? DBusError(.failed, view.errorName ?? "error")
                        }
                        if awaiting.isEmpty { finishSetup(nil) }
                    case .methodCall:
                        return  // Nothing is exported here; the bus only routes calls addressed to this name.
                    }
                }
            } catch {
                ending = error
                break
            }
            if signals > 0 {
                drained()
                if coalescing > .zero { waitForStop(milliseconds: DBusEventLoop.pollMilliseconds(coalescing)) }
            }
        }
        if !finishSetup(ending ?? DBusError(.disconnected, "closed before the bus answered")) {
            if let ending { logger.debug("signal connection ended", metadata: ["error": "\(ending)"]) }
            onEnd()
        }
    }

    /// Waits until the socket has input (or has closed) or the receiver is stopped; whether to read.
    private func waitForInput(_ socket: Int32, milliseconds: Int32) -> Bool {
        var fds = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
        ]
        guard poll(&fds, 2, milliseconds) > 0 else { return false }
        if fds[1].revents != 0 {
            var value: UInt64 = 0
            _ = read(wakeFD, &value, 8)
        }
        return fds[0].revents != 0
    }

    /// Sleeps for up to `milliseconds`, or until stopped.
    private func waitForStop(milliseconds: Int32) {
        var wake = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        _ = poll(&wake, 1, milliseconds)
    }

    // MARK: Connecting

    /// The first of the address's sockets that accepts a connection, authenticated; the socket, blocking.
    private func connectAndAuthenticate() throws(DBusError) -> Int32 {
        var failures: [String] = []
        var name = DBusError.Name.noServer
        for address in sockets {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw DBusError(.failed, "socket failed: errno \(errno)") }
            do {
                try Self.connect(fd, to: address)
                try Self.authenticate(fd)
                return fd
            } catch {
                closeDescriptor(fd)
                failures.append("\(address): \(error.message)")
                name = error.name
            }
        }
        throw DBusError(name, "could not connect to the bus: " + failures.joined(separator: "; "))
    }

    private static func connect(_ socket: Int32, to address: DBusSocketAddress) throws(DBusError) {
        var timeout = timeval(tv_sec: Int(setupTimeout.components.seconds), tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let name: [UInt8]
        switch address {
        case .path(let path): name = Array(path.utf8)
        case .abstract(let abstract): name = [0] + Array(abstract.utf8)  // A leading NUL names the abstract space.
        }
        let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path)
        guard name.count < capacity else { throw DBusError(.invalidArgs, "socket name too long") }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: name) }
        let length = socklen_t(MemoryLayout.offset(of: \sockaddr_un.sun_path)! + name.count + (name.first == 0 ? 0 : 1))
        let status = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connectSocket(socket, $0, length) }
        }
        guard status == 0 else { throw DBusError(.noServer, String(cString: strerror(errno))) }
    }

    /// SASL `EXTERNAL`: the bus knows the peer's user from the socket, the client names it (its uid in hex-encoded
    /// decimal), and `BEGIN` starts the message stream.
    private static func authenticate(_ socket: Int32) throws(DBusError) {
        let uid = String(getuid())
        let hex = uid.utf8.map { byte in String(byte, radix: 16) }.joined()
        try writeAll(Array("\0AUTH EXTERNAL \(hex)\r\n".utf8), to: socket)
        var line: [UInt8] = []
        while !line.ends(with: [13, 10]) {
            guard line.count < 512 else { throw DBusError(.accessDenied, "the bus's answer to AUTH is too long") }
            var byte: UInt8 = 0
            let count = read(socket, &byte, 1)
            guard count == 1 else { throw DBusError(.noServer, "the bus closed the connection during AUTH") }
            line.append(byte)
        }
        let answer = String(decoding: line.dropLast(2), as: UTF8.self)
        guard answer.hasPrefix("OK ") else {
            throw DBusError(
                .accessDenied,
                "the bus refused EXTERNAL authentication as uid \(uid): \(answer.debugDescription)"
            )
        }
        try writeAll(Array("BEGIN\r\n".utf8), to: socket)
    }

    private static func busCall(_ method: String, _ arguments: [DBusValue]) -> DBusMessage {
        DBusMessage(
            kind: .methodCall,
            destination: "org.freedesktop.DBus",
            path: DBusObjectPath(rawValue: "/org/freedesktop/DBus")!,
            interface: "org.freedesktop.DBus",
            member: method,
            body: arguments
        )
    }

    /// Writes `message` with `serial`, marshalled by libdbus.
    private static func send(_ message: DBusMessage, serial: UInt32, on socket: Int32) throws(DBusError) {
        let raw = try message.makeCMessage()
        defer { dbus_message_unref(raw) }
        dbus_message_set_serial(raw, serial)
        var data: UnsafeMutablePointer<CChar>? = nil
        var length: Int32 = 0
        guard dbus_message_marshal(raw, &data, &length) != 0, let data else {
            throw DBusError(.noMemory, "could not write a message")
        }
        defer { dbus_free(data) }
        try writeAll(Array(UnsafeRawBufferPointer(start: data, count: Int(length))), to: socket)
    }

    private static func writeAll(_ bytes: [UInt8], to socket: Int32) throws(DBusError) {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { sendBytes(socket, $0.baseAddress! + written, bytes.count - written) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw DBusError(.disconnected, "could not write to the bus: errno \(errno)") }
            written += count
        }
    }

    // MARK: Reading

    /// Reads the socket into one buffer and cuts it into messages, in place.
    private struct Reader: ~Copyable {
        let socket: Int32
        let logger: Logger
        private var buffer: UnsafeMutableRawBufferPointer
        /// The bytes read and not yet handled: `buffer[start..<end]`.
        private var start = 0
        private var end = 0
        /// Bytes still to drop of a message too long to keep.
        private var skipping = 0

        init(socket: Int32, logger: Logger) {
            self.socket = socket
            self.logger = logger
            buffer = .allocate(byteCount: 2 * DBusSignalReceiver.readSize, alignment: 8)
        }

        deinit { buffer.deallocate() }

        /// Reads what the socket has and calls `body` with each whole message in it. Throws when the connection
        /// ended or the stream is not D-Bus, and rethrows what `body` throws.
        mutating func readMessages(_ body: (DBusMessageView) throws -> Void) throws {
            if buffer.count - end < DBusSignalReceiver.readSize { compact() }
            let count = read(socket, buffer.baseAddress! + end, buffer.count - end)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { return }
            guard count > 0 else {
                throw DBusError(
                    .disconnected,
                    count == 0 ? "the bus closed the connection" : "read failed: errno \(errno)"
                )
            }
            end += count
            dropSkipped()
            while skipping == 0 {
                let available = UnsafeRawBufferPointer(rebasing: buffer[start..<end])
                switch DBusMessageView.frame(available) {
                case .incomplete:
                    return
                case .invalid(let reason):
                    throw DBusError(.failed, "the bus sent something that is not D-Bus: \(reason)")
                case .length(let length) where length > DBusSignalReceiver.maximumMessage:
                    logger.debug("skipped a message too long to hold", metadata: ["bytes": "\(length)"])
                    skipping = length
                    dropSkipped()
                case .length(let length):
                    guard length <= available.count else {
                        // The rest has not arrived; make room for it if the buffer cannot hold it.
                        if length > buffer.count - start { grow(to: length) }
                        return
                    }
                    if let view = DBusMessageView(wire: UnsafeRawBufferPointer(rebasing: available[..<length])) {
                        try body(view)
                    }
                    start += length
                }
            }
        }

        /// Drops what has arrived of the message being skipped.
        private mutating func dropSkipped() {
            let dropped = min(skipping, end - start)
            skipping -= dropped
            start += dropped
        }

        /// Moves the unhandled bytes to the front.
        private mutating func compact() {
            guard start > 0 else { return }
            if end > start { buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: end - start) }
            end -= start
            start = 0
        }

        private mutating func grow(to length: Int) {
            compact()
            let larger = UnsafeMutableRawBufferPointer.allocate(
                byteCount: length + DBusSignalReceiver.readSize,
                alignment: 8
            )
            larger.baseAddress!.copyMemory(from: buffer.baseAddress!, byteCount: end)
            buffer.deallocate()
            buffer = larger
        }
    }
}

/// How many bytes wait unread on the socket `fd`; 0 for a descriptor that is no open socket.
func unreadBytes(on fd: Int32) -> Int {
    guard fd >= 0 else { return 0 }
    var count: Int32 = 0
    return ioctl(fd, UInt(FIONREAD), &count) == 0 ? Int(count) : 0
}

/// `close`, under a name the receiver's own ``DBusSignalReceiver/close()`` does not shadow.
private func closeDescriptor(_ fd: Int32) { close(fd) }

/// `send` without `SIGPIPE`: a bus that hung up is an error to report, not a signal that ends the process.
private func sendBytes(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    send(fd, bytes, count, Int32(MSG_NOSIGNAL))
}

/// `connect`, likewise.
private func connectSocket(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && self[(count - suffix.count)...].elementsEqual(suffix)
    }
}
