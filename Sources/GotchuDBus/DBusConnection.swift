internal import CGotchuDBus
public import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A private connection to a D-Bus bus.
///
/// The actor's executor is the connection's own event-loop thread, so every isolated method runs where libdbus
/// expects it and nothing blocks Swift's cooperative pool. Method calls are asynchronous: while one is pending the
/// loop keeps serving incoming calls (BlueZ calls back into an advertiser before it answers `RegisterAdvertisement`).
///
/// Close it with ``close()`` or use ``withConnection(to:logger:_:)``: an open connection stays alive, with its thread,
/// until it is closed.
public actor DBusConnection {
    /// Which bus to connect to.
    public enum Bus: Hashable, Sendable, CustomStringConvertible {
        /// The system bus; `DBUS_SYSTEM_BUS_ADDRESS` overrides the standard socket.
        case system
        /// The session bus from `DBUS_SESSION_BUS_ADDRESS`.
        case session
        /// A bus at an explicit address such as `unix:path=/tmp/bus`.
        case address(String)

        /// The bus a person names: `system`, `session`, or a D-Bus address such as `unix:path=/tmp/bus`; `nil` for
        /// anything else.
        public init?(named name: String) {
            switch name {
            case "system": self = .system
            case "session": self = .session
            default:
                // A D-Bus address is transport:key=value[,…], such as unix:path=/run/dbus/system_bus_socket.
                guard let colon = name.firstIndex(of: ":"), colon != name.startIndex, name[colon...].contains("=")
                else { return nil }
                self = .address(name)
            }
        }

        /// What ``init(named:)`` accepts, for error messages.
        public static let namingHint = "\"system\", \"session\" or a D-Bus address such as unix:path=/tmp/bus"

        /// The address libdbus is given.
        public var address: String? {
            switch self {
            case .system:
                return environment("DBUS_SYSTEM_BUS_ADDRESS") ?? "unix:path=/var/run/dbus/system_bus_socket"
            case .session:
                return environment("DBUS_SESSION_BUS_ADDRESS")
            case .address(let address):
                return address
            }
        }

        public var description: String {
            switch self {
            case .system: "system bus"
            case .session: "session bus"
            case .address(let address): address
            }
        }

        private func environment(_ name: String) -> String? {
            guard let value = getenv(name) else { return nil }
            let text = String(cString: value)
            return text.isEmpty ? nil : text
        }
    }

    struct PendingCall {
        let call: OpaquePointer
        let continuation: CheckedContinuation<DBusMessage, any Error>
    }

    struct Subscription {
        enum Sink {
            case stream(AsyncStream<DBusMessage>.Continuation)
            case handler(@Sendable (DBusMessage) -> Void, onEnd: @Sendable () -> Void)
            /// Reads signals in place; `drained` runs once the signals that had arrived are all dispatched.
            case view(
                @Sendable (DBusMessageView) -> Void,
                drained: @Sendable () -> Void,
                onEnd: @Sendable () -> Void
            )
        }

        let rule: DBusMatchRule
        let sink: Sink
        /// How long reads may wait after a round for this subscriber's sake (see ``DBusEventLoop/readCoalescing``).
        var coalescing: Duration = .zero

        func deliver(_ message: DBusMessage) {
            switch sink {
            case .stream(let continuation): continuation.yield(message)
            case .handler(let handler, _): handler(message)
            case .view: break
            }
        }

        func end() {
            switch sink {
            case .stream(let continuation): continuation.finish()
            case .handler(_, let onEnd): onEnd()
            case .view(_, _, let onEnd): onEnd()
            }
        }
    }

    /// The default time to wait for a method reply (libdbus uses the same).
    public static let defaultTimeout: Duration = .seconds(25)

    nonisolated let loop: DBusEventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    let logger: Logger
    var raw: OpaquePointer?
    var pendingCalls: [UInt64: PendingCall] = [:] {
        didSet { updateReadCoalescing() }
    }
    var subscriptions: [UInt64: Subscription] = [:] {
        didSet { updateReadCoalescing() }
    }
    var objects: [DBusObjectPath: ExportedObject] = [:]
    /// Whether a view handler received signals since the last ``dispatchRoundEnded()``.
    private var viewHandlersUndrained = false
    private var nextToken: UInt64 = 0
    /// The unique name the bus gave this connection, such as `:1.42`.
    public private(set) var uniqueName = ""
    /// Whether the connection is open.
    public var isConnected: Bool { raw.map { dbus_connection_get_is_connected($0) != 0 } ?? false }
    /// The connection's socket, `nil` when closed (tests: ``unreadBytes(on:)`` shows what the bus has sent that
    /// the loop has not read yet).
    var socketDescriptor: Int32? {
        var fd: Int32 = -1
        guard let raw, dbus_connection_get_unix_fd(raw, &fd) != 0 else { return nil }
        return fd
    }

    /// The address the connection was opened at, such as `unix:path=/run/dbus/system_bus_socket`.
    package nonisolated let address: String

    private init(loop: DBusEventLoop, address: String, logger: Logger) {
        self.loop = loop
        self.address = address
        self.logger = logger
    }

    /// Reads gather for the subscribers that ask for it (``Subscription/coalescing``), but never while a call awaits
    /// its reply: the reply is read as soon as it arrives, however much else the bus sends meanwhile.
    private func updateReadCoalescing() {
        loop.readCoalescing = pendingCalls.isEmpty ? subscriptions.values.map(\.coalescing).max() ?? .zero : .zero
    }

    /// Opens a private connection to `bus` and registers with it.
    public static func connect(
        to bus: Bus,
        logger: Logger = Logger(label: "gotchu.dbus")
    ) async throws -> DBusConnection {
        guard let address = bus.address else {
            throw DBusError(.fileNotFound, "no address for the \(bus) (DBUS_SESSION_BUS_ADDRESS is unset)")
        }
        let loop = try DBusEventLoop()
        let connection = DBusConnection(loop: loop, address: address, logger: logger)
        do {
            try await connection.open(address)
        } catch {
            await connection.close()
            throw error
        }
        return connection
    }

    /// Connects, runs `body`, and closes the connection however `body` ends.
    public static func withConnection<Result: Sendable>(
        to bus: Bus,
        logger: Logger = Logger(label: "gotchu.dbus"),
        _ body: (DBusConnection) async throws -> Result
    ) async throws -> Result {
        let connection = try await connect(to: bus, logger: logger)
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }

    private func open(_ address: String) async throws {
        dbus_threads_init_default()
        let connection = try withDBusError { dbus_connection_open_private(address, $0) }
        guard let connection else { throw DBusError(.failed, "could not connect to \(address)") }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        raw = connection
        // Runs on the loop thread after each round of dispatch, only while attached: close() detaches first.
        let attached = loop.attach(connection) { [unowned self] in
            self.assumeIsolated { $0.dispatchRoundEnded() }
        }
        guard attached else { throw DBusError(.noMemory, "could not watch the connection") }
        // The filter keeps the actor alive until close() removes it (and libdbus calls the release function).
        let filterAdded = dbus_connection_add_filter(
            connection,
            dbusMessageFilter,
            Unmanaged.passRetained(self).toOpaque(),
            { data in
                guard let data else { return }
                Unmanaged<DBusConnection>.fromOpaque(data).release()
            }
        )
        guard filterAdded != 0 else { throw DBusError(.noMemory, "could not add a message filter") }
        let reply = try await call(
            destination: "org.freedesktop.DBus",
            path: DBusObjectPath(rawValue: "/org/freedesktop/DBus")!,
            interface: "org.freedesktop.DBus",
            method: "Hello"
        )
        guard let name = reply.first.flatMap({ String(dbusValue: $0) }) else {
            throw DBusError(.failed, "the bus did not answer Hello with a name")
        }
        uniqueName = name
        _ = dbus_bus_set_unique_name(connection, name)
        logger.debug("connected", metadata: ["address": "\(address)", "name": "\(name)"])
    }

    /// Closes the connection: pending calls fail with ``DBusError/Name/disconnected``, signal streams finish, and
    /// exported objects are dropped. Safe to call more than once. The loop thread ends when the actor is released.
    public func close() {
        failEverything(DBusError(.disconnected, "connection closed"))
        guard let connection = raw else { return }
        raw = nil
        Self.release(connection, loop: loop, filterData: Unmanaged.passUnretained(self).toOpaque())
    }

    private static func release(_ connection: OpaquePointer, loop: DBusEventLoop, filterData: UnsafeMutableRawPointer) {
        dbus_connection_remove_filter(connection, dbusMessageFilter, filterData)
        dbus_connection_close(connection)
        loop.detach()
        dbus_connection_unref(connection)
    }

    deinit {
        // The message filter holds a reference until close(), so reaching here means the connection is closed.
        loop.stop()
    }

    private func failEverything(_ error: DBusError) {
        let calls = pendingCalls
        pendingCalls.removeAll()
        for (_, pending) in calls {
            dbus_pending_call_cancel(pending.call)
            dbus_pending_call_unref(pending.call)
            pending.continuation.resume(throwing: error)
        }
        let streams = subscriptions
        subscriptions.removeAll()
        for (_, subscription) in streams { subscription.end() }
        objects.removeAll()
    }

    func makeToken() -> UInt64 {
        nextToken += 1
        return nextToken
    }

    // MARK: Sending

    /// Sends a message that expects no reply (a signal, or a call marked no-reply).
    public func send(_ message: DBusMessage) throws {
        guard let connection = raw else { throw DBusError(.disconnected, "connection closed") }
        let cMessage = try message.makeCMessage()
        defer { dbus_message_unref(cMessage) }
        guard dbus_connection_send(connection, cMessage, nil) != 0 else {
            throw DBusError(.noMemory, "could not queue a message")
        }
    }

    /// Emits a signal from `path`.
    public func emitSignal(
        path: DBusObjectPath,
        interface: String,
        member: String,
        _ arguments: [DBusValue] = [],
        destination: String? = nil
    ) throws {
        try send(
            DBusMessage(
                kind: .signal,
                destination: destination,
                path: path,
                interface: interface,
                member: member,
                body: arguments
            )
        )
    }

    /// Calls a method and returns the reply's arguments. A D-Bus error reply is thrown as ``DBusError``; no reply
    /// within `timeout` throws ``DBusError/Name/noReply``; cancelling the task throws `CancellationError`.
    public func call(
        destination: String?,
        path: DBusObjectPath,
        interface: String?,
        method: String,
        _ arguments: [DBusValue] = [],
        timeout: Duration = DBusConnection.defaultTimeout
    ) async throws -> [DBusValue] {
        let message = DBusMessage(
            kind: .methodCall,
            destination: destination,
            path: path,
            interface: interface,
            member: method,
            body: arguments
        )
        return try await call(message, timeout: timeout).body
    }

    /// Sends a method call and returns the whole reply message.
    public func call(
        _ message: DBusMessage,
        timeout: Duration = DBusConnection.defaultTimeout
    ) async throws
        -> DBusMessage
    {
        let token = makeToken()
        let loop = self.loop
        let reply = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<DBusMessage, any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                do {
                    try startCall(message, timeout: timeout, token: token, continuation: continuation)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            loop.execute { [self] in
                self.assumeIsolated { $0.cancelCall(token) }
            }
        }
        if reply.kind == .error { throw reply.asError }
        return reply
    }

    private func startCall(
        _ message: DBusMessage,
        timeout: Duration,
        token: UInt64,
        continuation: CheckedContinuation<DBusMessage, any Error>
    ) throws {
        guard let connection = raw else { throw DBusError(.disconnected, "connection closed") }
        let cMessage = try message.makeCMessage()
        defer { dbus_message_unref(cMessage) }
        var pending: OpaquePointer?
        let (seconds, attoseconds) = timeout.components
        let milliseconds = Int32(clamping: max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
        guard dbus_connection_send_with_reply(connection, cMessage, &pending, milliseconds) != 0 else {
            throw DBusError(.noMemory, "could not send a method call")
        }
        guard let pending else { throw DBusError(.disconnected, "connection closed") }
        pendingCalls[token] = PendingCall(call: pending, continuation: continuation)
        let context = PendingCallContext(connection: self, token: token)
        let notifySet = dbus_pending_call_set_notify(
            pending,
            { _, data in
                guard let data else { return }
                let context = Unmanaged<PendingCallContext>.fromOpaque(data).takeUnretainedValue()
                let token = context.token
                context.connection.assumeIsolated { $0.completeCall(token) }
            },
            Unmanaged.passRetained(context).toOpaque(),
            { data in
                guard let data else { return }
                Unmanaged<PendingCallContext>.fromOpaque(data).release()
            }
        )
        if notifySet == 0 {
            pendingCalls[token] = nil
            dbus_pending_call_cancel(pending)
            dbus_pending_call_unref(pending)
            throw DBusError(.noMemory, "could not watch a pending call")
        }
    }

    private func completeCall(_ token: UInt64) {
        guard let pending = pendingCalls.removeValue(forKey: token) else { return }
        defer { dbus_pending_call_unref(pending.call) }
        guard let reply = dbus_pending_call_steal_reply(pending.call) else {
            pending.continuation.resume(throwing: DBusError(.noReply, "no reply"))
            return
        }
        defer { dbus_message_unref(reply) }
        do {
            pending.continuation.resume(returning: try DBusMessage(cMessage: reply))
        } catch {
            pending.continuation.resume(throwing: error)
        }
    }

    private func cancelCall(_ token: UInt64) {
        guard let pending = pendingCalls.removeValue(forKey: token) else { return }
        dbus_pending_call_cancel(pending.call)
        dbus_pending_call_unref(pending.call)
        pending.continuation.resume(throwing: CancellationError())
    }

    // MARK: Receiving

    /// Called by the message filter during dispatch, on the loop thread.
    func handleIncoming(_ cMessage: OpaquePointer) -> Bool {
        let type = dbus_message_get_type(cMessage)
        if type == DBUS_MESSAGE_TYPE_SIGNAL {
            // libdbus makes this one up itself; it is looked at before anything is read from the message.
            if dbus_message_is_signal(cMessage, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
                logger.debug("disconnected from the bus")
                failEverything(DBusError(.disconnected, "the bus closed the connection"))
                return true
            }
            return DBusMessageView.reading(cMessage) { handleSignal($0) } ?? false
        }
        guard type == DBUS_MESSAGE_TYPE_METHOD_CALL else { return false }
        let message: DBusMessage
        do {
            message = try DBusMessage(cMessage: cMessage)
        } catch {
            logger.debug("dropped an undecodable message", metadata: ["error": "\(error)"])
            if dbus_message_get_no_reply(cMessage) == 0 {
                replyError(toSerial: dbus_message_get_serial(cMessage), sender: dbusSender(cMessage), error)
                return true
            }
            return false
        }
        return handleMethodCall(message)
    }

    /// Matches a signal in place; it is converted to a ``DBusMessage`` only for subscribers that take one, once.
    private func handleSignal(_ view: DBusMessageView) -> Bool {
        var converted: Result<DBusMessage, DBusError>?
        for (_, subscription) in subscriptions where subscription.rule.matches(view) {
            if case .view(let handler, _, _) = subscription.sink {
                handler(view)
                viewHandlersUndrained = true
                continue
            }
            if converted == nil {
                converted = Result { () throws(DBusError) in try view.message() }
                if case .failure(let error) = converted {
                    logger.debug("dropped an undecodable signal", metadata: ["error": "\(error)"])
                }
            }
            if case .success(let message) = converted { subscription.deliver(message) }
        }
        return false
    }

    /// Tells view handlers that every signal that had arrived is dispatched, so they can pass on what they batched.
    private func dispatchRoundEnded() {
        guard viewHandlersUndrained else { return }
        viewHandlersUndrained = false
        for (_, subscription) in subscriptions {
            if case .view(_, let drained, _) = subscription.sink { drained() }
        }
    }

    private func dbusSender(_ cMessage: OpaquePointer) -> String? {
        dbus_message_get_sender(cMessage).flatMap { String(validatingCString: $0) }
    }

    func replyError(toSerial serial: UInt32, sender: String?, _ error: DBusError) {
        let reply = DBusMessage(
            kind: .error,
            destination: sender,
            errorName: DBusNames.isValidErrorName(error.name.rawValue)
                ? error.name.rawValue : DBusError.Name.failed.rawValue,
            replySerial: serial,
            body: [.string(error.message)]
        )
        do { try send(reply) } catch { logger.debug("could not send an error reply", metadata: ["error": "\(error)"]) }
    }

    // MARK: Signals

    /// Subscribes to signals matching `rule`. The match is on the bus before this returns, and is removed when the
    /// stream is dropped or its consumer cancelled. Only the newest `limit` signals are kept when the consumer lags.
    public func signals(
        matching rule: DBusMatchRule,
        bufferingNewest limit: Int = 256
    ) async throws -> AsyncStream<DBusMessage> {
        guard rule.isValid else { throw DBusError(.invalidArgs, "invalid match rule") }
        let token = makeToken()
        let (stream, continuation) = AsyncStream.makeStream(
            of: DBusMessage.self,
            bufferingPolicy: .bufferingNewest(max(1, limit))
        )
        subscriptions[token] = Subscription(rule: rule, sink: .stream(continuation))
        let loop = self.loop
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            loop.execute {
                self.assumeIsolated { $0.removeSubscription(token) }
            }
        }
        do {
            _ = try await callBus("AddMatch", [.string(rule.description)])
        } catch {
            subscriptions[token] = nil
            continuation.finish()
            throw error
        }
        return stream
    }

    /// Calls `handler` on the connection's own thread for every signal matching `rule`, with no hop to another
    /// thread: for high-rate consumers whose work per signal is short and never blocks. `onEnd` runs when the
    /// connection closes. Returns a token for ``removeSignalHandler(_:)``.
    package func addSignalHandler(
        matching rule: DBusMatchRule,
        onEnd: @escaping @Sendable () -> Void = {},
        _ handler: @escaping @Sendable (DBusMessage) -> Void
    ) async throws -> UInt64 {
        guard rule.isValid else { throw DBusError(.invalidArgs, "invalid match rule") }
        let token = makeToken()
        subscriptions[token] = Subscription(rule: rule, sink: .handler(handler, onEnd: onEnd))
        do {
            _ = try await callBus("AddMatch", [.string(rule.description)])
        } catch {
            subscriptions[token] = nil
            throw error
        }
        return token
    }

    /// Calls `handler` on the connection's own thread with every signal matching `rule` as it lies in libdbus's
    /// buffer, read in place and valid only during the call; `drained` runs after each round of dispatch in which
    /// the handler was called, so work batched per signal can be passed on once per round. For the highest rates:
    /// nothing is converted that the handler does not read. While the handler is added, a round that read messages
    /// is followed by a wait of up to `coalescing` before the connection reads again, so a flood arrives in bursts
    /// of many signals per round (and per `drained`) rather than a few; method calls made meanwhile still go out at
    /// once, but their replies may wait that long. Returns a token for ``removeSignalHandler(_:)``.
    package func addSignalViewHandler(
        matching rule: DBusMatchRule,
        coalescing: Duration = .zero,
        onEnd: @escaping @Sendable () -> Void = {},
        drained: @escaping @Sendable () -> Void = {},
        _ handler: @escaping @Sendable (DBusMessageView) -> Void
    ) async throws -> UInt64 {
        guard rule.isValid else { throw DBusError(.invalidArgs, "invalid match rule") }
        let token = makeToken()
        subscriptions[token] = Subscription(
            rule: rule,
            sink: .view(handler, drained: drained, onEnd: onEnd),
            coalescing: coalescing
        )
        do {
            _ = try await callBus("AddMatch", [.string(rule.description)])
        } catch {
            subscriptions[token] = nil
            throw error
        }
        return token
    }

    /// Removes a handler added with ``addSignalHandler(matching:onEnd:_:)`` or
    /// ``addSignalViewHandler(matching:coalescing:onEnd:drained:_:)``, and its match.
    package func removeSignalHandler(_ token: UInt64) {
        removeSubscription(token)
    }

    private func removeSubscription(_ token: UInt64) {
        guard let subscription = subscriptions.removeValue(forKey: token), raw != nil else { return }
        // Fire and forget: nobody waits for RemoveMatch, and the stream has already ended.
        let message = DBusMessage(
            kind: .methodCall,
            destination: "org.freedesktop.DBus",
            path: DBusObjectPath(rawValue: "/org/freedesktop/DBus")!,
            interface: "org.freedesktop.DBus",
            member: "RemoveMatch",
            noReplyExpected: true,
            body: [.string(subscription.rule.description)]
        )
        try? send(message)
    }

    /// The number of live signal subscriptions (for tests and diagnostics).
    package var subscriptionCount: Int { subscriptions.count }

    func callBus(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await call(
            destination: "org.freedesktop.DBus",
            path: DBusObjectPath(rawValue: "/org/freedesktop/DBus")!,
            interface: "org.freedesktop.DBus",
            method: method,
            arguments
        )
    }
}

/// The filter every incoming message passes through, during dispatch on the loop thread.
private let dbusMessageFilter: DBusHandleMessageFunction = { _, message, data in
    guard let message, let data else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
    let connection = Unmanaged<DBusConnection>.fromOpaque(data).takeUnretainedValue()
    // A pointer is not Sendable; its address is, and the closure runs synchronously on this same thread.
    let address = UInt(bitPattern: message)
    let handled = connection.assumeIsolated { connection in
        OpaquePointer(bitPattern: address).map { connection.handleIncoming($0) } ?? false
    }
    return handled ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
}

/// What a pending call's notify callback needs; retained by libdbus until the call is freed.
private final class PendingCallContext: Sendable {
    let connection: DBusConnection
    let token: UInt64

    init(connection: DBusConnection, token: UInt64) {
        self.connection = connection
        self.token = token
    }
}
