internal import CGotchuDBus
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The thread that owns one libdbus connection: it polls the connection's watches and an eventfd, fires its
/// timeouts, dispatches incoming messages, and runs the jobs of the ``DBusConnection`` actor, whose executor it is.
///
/// Every libdbus call for the connection happens on this thread, so libdbus's own locking is never contended and
/// a pending method call never stops incoming calls from being served.
final class DBusEventLoop: SerialExecutor, @unchecked Sendable {
    private enum Job {
        case executor(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    private struct Timeout {
        let timeout: OpaquePointer
        var deadline: ContinuousClock.Instant
    }

    private struct State {
        var jobs: [Job] = []
        var stopping = false
    }

    private let state = Mutex(State())
    private let wakeFD: Int32
    /// The loop thread's id, published by the thread itself so checks never race with `pthread_create`.
    private let loopThread = Atomic<UInt>(0)
    // The fields below are touched only on the loop thread.
    private var watches: [OpaquePointer] = []
    private var timeouts: [Timeout] = []
    /// The connection to dispatch; set and cleared on the loop thread.
    var connection: OpaquePointer?
    /// Runs after every round of dispatch while a connection is attached.
    private var afterDispatch: (() -> Void)?
    /// The watch the last poll found readable, read again while a round's reads keep completing messages.
    private var readableWatch: OpaquePointer?
    /// libdbus reads at most 2 KiB of a socket per call, a handful of signals. Under a flood a round reads up to
    /// this many times while each read completes a message, so the loop polls, and consumers flush and wake, once
    /// per burst of up to 64 KiB instead of once per handful.
    private static let readsPerRound = 32
    /// After a round that read messages, how long the loop lets more arrive before it reads again, so that a flood
    /// is read, dispatched and passed on in bursts. Jobs submitted meanwhile still run at once. Zero reads as soon
    /// as data is there; the connection sets zero while a call awaits its reply. Set on the loop thread.
    var readCoalescing: Duration = .zero

    init() throws(DBusError) {
        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else { throw DBusError(.failed, "eventfd failed: errno \(errno)") }
        wakeFD = fd
        // The thread holds the loop until it ends.
        let status = startThread { [self] in run() }
        guard status == 0 else {
            close(fd)
            throw DBusError(.failed, "could not start the D-Bus thread: \(status)")
        }
    }

    // MARK: Executor

    func enqueue(_ job: consuming ExecutorJob) {
        submit(.executor(UnownedJob(job)))
    }

    func checkIsolated() {
        precondition(isOnLoopThread, "expected to run on the D-Bus connection's thread")
    }

    func isIsolatingCurrentContext() -> Bool? { isOnLoopThread }

    var isOnLoopThread: Bool { loopThread.load(ordering: .acquiring) == UInt(pthread_self()) }

    /// Runs `body` on the loop thread.
    func execute(_ body: @escaping @Sendable () -> Void) {
        submit(.closure(body))
    }

    /// Stops the thread after the jobs already queued.
    func stop() {
        state.withLock { $0.stopping = true }
        wake()
    }

    private func submit(_ job: Job) {
        state.withLock { $0.jobs.append(job) }
        wake()
    }

    /// Wakes the loop from another thread. On its own thread there is nothing to wake: the loop looks for jobs and
    /// dispatchable messages before every poll.
    func wake() {
        if isOnLoopThread { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: Loop

    private func run() {
        loopThread.store(UInt(pthread_self()), ordering: .releasing)
        while true {
            let (jobs, stopping) = state.withLock { state in
                let jobs = state.jobs
                state.jobs.removeAll(keepingCapacity: true)
                return (jobs, state.stopping)
            }
            for job in jobs {
                switch job {
                case .executor(let job): job.runSynchronously(on: asUnownedSerialExecutor())
                case .closure(let body): body()
                }
            }
            if stopping && jobs.isEmpty { break }
            if let connection {
                // Every message already read is dispatched before the next poll, then consumers flush once.
                let socketWasRead = readableWatch != nil
                var reads = 0
                repeat {
                    while CGotchuDBus_dispatchDataRemains(connection) != 0 {}
                    reads += 1
                } while reads < Self.readsPerRound && readAgain(connection)
                readableWatch = nil
                afterDispatch?()
                if socketWasRead && readCoalescing > .zero { waitForJobs(upTo: readCoalescing) }
            }
            pollOnce()
        }
        close(wakeFD)
    }

    /// Sleeps until `interval` passed or a job is submitted, whichever comes first.
    private func waitForJobs(upTo interval: Duration) {
        if state.withLock({ !$0.jobs.isEmpty || $0.stopping }) { return }
        var wakeup = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        if poll(&wakeup, 1, Self.pollMilliseconds(interval)) > 0 {
            var value: UInt64 = 0
            _ = read(wakeFD, &value, 8)
        }
    }

    /// Reads the socket the last poll found readable once more; whether that completed a message to dispatch. A
    /// socket with nothing left answers the read at once.
    private func readAgain(_ connection: OpaquePointer) -> Bool {
        guard let watch = readableWatch, watches.contains(watch), dbus_watch_get_enabled(watch) != 0 else {
            return false
        }
        dbus_watch_handle(watch, DBUS_WATCH_READABLE.rawValue)
        return dbus_connection_get_dispatch_status(connection) == DBUS_DISPATCH_DATA_REMAINS
    }

    /// `duration` as poll's timeout, in whole milliseconds rounded up: a poll never returns before it has passed.
    static func pollMilliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    private func pollOnce() {
        let now = ContinuousClock.now
        var timeoutMilliseconds: Int32 = -1
        for entry in timeouts where dbus_timeout_get_enabled(entry.timeout) != 0 {
            let remaining = max(Duration.zero, entry.deadline - now)
            let milliseconds = Self.pollMilliseconds(remaining)
            timeoutMilliseconds = timeoutMilliseconds < 0 ? milliseconds : min(timeoutMilliseconds, milliseconds)
        }
        // An already-queued job or buffered message must not wait for the poll.
        if state.withLock({ !$0.jobs.isEmpty || $0.stopping }) { timeoutMilliseconds = 0 }
        if let connection, dbus_connection_get_dispatch_status(connection) == DBUS_DISPATCH_DATA_REMAINS {
            timeoutMilliseconds = 0
        }

        let activeWatches = watches.filter { dbus_watch_get_enabled($0) != 0 }
        var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        for watch in activeWatches {
            let flags = dbus_watch_get_flags(watch)
            var events: Int16 = 0
            if flags & DBUS_WATCH_READABLE.rawValue != 0 { events |= Int16(POLLIN) }
            if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { events |= Int16(POLLOUT) }
            fds.append(pollfd(fd: dbus_watch_get_unix_fd(watch), events: events, revents: 0))
        }
        let count = poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
        if count > 0 {
            if fds[0].revents != 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
            for (index, watch) in activeWatches.enumerated() {
                let revents = fds[index + 1].revents
                guard revents != 0, watches.contains(watch) else { continue }
                var flags: UInt32 = 0
                if revents & Int16(POLLIN) != 0 { flags |= DBUS_WATCH_READABLE.rawValue }
                if revents & Int16(POLLOUT) != 0 { flags |= DBUS_WATCH_WRITABLE.rawValue }
                if revents & Int16(POLLERR) != 0 { flags |= DBUS_WATCH_ERROR.rawValue }
                if revents & Int16(POLLHUP) != 0 { flags |= DBUS_WATCH_HANGUP.rawValue }
                if flags == DBUS_WATCH_READABLE.rawValue { readableWatch = watch }
                dbus_watch_handle(watch, flags)
            }
        }
        fireTimeouts()
    }

    private func fireTimeouts() {
        let now = ContinuousClock.now
        let due = timeouts.filter { dbus_timeout_get_enabled($0.timeout) != 0 && $0.deadline <= now }
        for entry in due {
            // Re-arm first: libdbus timeouts repeat until removed or disabled.
            if let index = timeouts.firstIndex(where: { $0.timeout == entry.timeout }) {
                timeouts[index].deadline = now + .milliseconds(dbus_timeout_get_interval(entry.timeout))
                dbus_timeout_handle(entry.timeout)
            }
        }
    }

    // MARK: libdbus callbacks (called on the loop thread from inside libdbus)

    func addWatch(_ watch: OpaquePointer) { watches.append(watch) }
    func removeWatch(_ watch: OpaquePointer) { watches.removeAll { $0 == watch } }

    func addTimeout(_ timeout: OpaquePointer) {
        timeouts.append(
            Timeout(timeout: timeout, deadline: .now + .milliseconds(dbus_timeout_get_interval(timeout)))
        )
    }

    func removeTimeout(_ timeout: OpaquePointer) { timeouts.removeAll { $0.timeout == timeout } }

    func toggleTimeout(_ timeout: OpaquePointer) {
        if let index = timeouts.firstIndex(where: { $0.timeout == timeout }) {
            timeouts[index].deadline = .now + .milliseconds(dbus_timeout_get_interval(timeout))
        }
    }

    /// Installs watch, timeout and wake-up functions on `connection` and starts dispatching it; `afterDispatch`
    /// runs on this thread after each round of dispatch until ``detach()``.
    func attach(_ connection: OpaquePointer, afterDispatch: @escaping () -> Void) -> Bool {
        self.connection = connection
        self.afterDispatch = afterDispatch
        let me = Unmanaged.passUnretained(self).toOpaque()
        let watchesOK = dbus_connection_set_watch_functions(
            connection,
            { watch, data in
                guard let watch, let data else { return 0 }
                Unmanaged<DBusEventLoop>.fromOpaque(data).takeUnretainedValue().addWatch(watch)
                return 1
            },
            { watch, data in
                guard let watch, let data else { return }
                Unmanaged<DBusEventLoop>.fromOpaque(data).takeUnretainedValue().removeWatch(watch)
            },
            { _, _ in },
            me,
            nil
        )
        let timeoutsOK = dbus_connection_set_timeout_functions(
            connection,
            { timeout, data in
                guard let timeout, let data else { return 0 }
                Unmanaged<DBusEventLoop>.fromOpaque(data).takeUnretainedValue().addTimeout(timeout)
                return 1
            },
            { timeout, data in
                guard let timeout, let data else { return }
                Unmanaged<DBusEventLoop>.fromOpaque(data).takeUnretainedValue().removeTimeout(timeout)
            },
            { timeout, data in
                guard let timeout, let data else { return }
                Unmanaged<DBusEventLoop>.fromOpaque(data).takeUnretainedValue().toggleTimeout(timeout)
            },
            me,
            nil
        )
        dbus_connection_set_wakeup_main_function(
            connection,
            { data in
                guard let data else { return }
                Unmanaged<DBusEventLoop>.fromOpaque(data).takeUnretainedValue().wake()
            },
            me,
            nil
        )
        return watchesOK != 0 && timeoutsOK != 0
    }

    /// Removes the callbacks installed by ``attach(_:)``; the caller then closes and releases the connection.
    func detach() {
        guard let connection else { return }
        _ = dbus_connection_set_watch_functions(connection, nil, nil, nil, nil, nil)
        _ = dbus_connection_set_timeout_functions(connection, nil, nil, nil, nil, nil)
        dbus_connection_set_wakeup_main_function(connection, nil, nil, nil)
        watches.removeAll()
        timeouts.removeAll()
        afterDispatch = nil
        self.connection = nil
    }
}
