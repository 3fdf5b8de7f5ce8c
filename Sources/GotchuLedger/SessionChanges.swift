public import Foundation
public import GotchuCore
import Synchronization

/// What a change notice says beyond "this session changed": watchers re-read the session either way.
public enum SessionNotice: String, Sendable, Hashable, CaseIterable {
    /// Its state may have changed (locked, unlocked, paid, cancelled).
    case changed
    /// It advertises a new EID. Reported as an `eid-rotated` event even though the status is unchanged.
    case eidRotated = "eid-rotated"

    /// The payload of a database notification: `<sid>` or `<sid> <notice>`.
    public static func payload(sid: String, _ notice: SessionNotice) -> String {
        notice == .changed ? sid : "\(sid) \(notice.rawValue)"
    }

    /// Reads a notification payload; `nil` for one that is not ours (the channel is the database's to share).
    public static func parse(payload: String) -> (sid: String, notice: SessionNotice)? {
        let parts = payload.split(separator: " ", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts[0].utf8.count == 36,
            parts[0].utf8.allSatisfy({
                $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66)
            })
        else { return nil }
        guard parts.count == 2 else { return (String(parts[0]), .changed) }
        guard let notice = SessionNotice(rawValue: String(parts[1])) else { return nil }
        return (String(parts[0]), notice)
    }
}

/// The in-process fan-out of session changes to the watchers of each session (the event streams of this server).
///
/// The engine publishes here after each transaction that may have changed a session has committed, so a watcher
/// never reads a state older than the notice. A database shared by several servers also relays the changes other
/// servers committed (``LedgerStore/relayChanges()``). A notice only wakes watchers, who then read the session:
/// notices carry no state, so a late, doubled or coalesced notice costs one read and nothing else, and a lost one is
/// made up by the watchers' slow safety poll.
public final class SessionChanges: Sendable {
    /// Held weakly: a watcher its stream dropped unregisters itself (its `deinit`), however the stream ended.
    private struct Entry: @unchecked Sendable {
        weak var watcher: SessionWatcher?
    }

    private struct State {
        var watchers: [String: [UInt64: Entry]] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A broadcaster with no watchers.
    public init() {}

    /// Starts watching `sid`: notices published from now on wake the watcher. Watch before the first read, so no
    /// change falls between the read and the watch.
    public func watch(sid: String) -> SessionWatcher {
        state.withLock { state in
            state.nextID += 1
            let watcher = SessionWatcher(sid: sid, id: state.nextID) { [weak self] sid, id in
                self?.remove(sid: sid, id: id)
            }
            state.watchers[sid, default: [:]][watcher.id] = Entry(watcher: watcher)
            return watcher
        }
    }

    /// Wakes the watchers of `sid`.
    public func publish(sid: String, _ notice: SessionNotice = .changed) {
        let watchers = state.withLock { state in state.watchers[sid].map { $0.values.compactMap(\.watcher) } ?? [] }
        for watcher in watchers { watcher.wake(notice) }
    }

    /// Wakes every watcher: changes may have been missed (the relay from the database was down), so all re-read.
    public func publishAll() {
        let watchers = state.withLock { state in state.watchers.values.flatMap { $0.values.compactMap(\.watcher) } }
        for watcher in watchers { watcher.wake(.changed) }
    }

    /// How many watchers are registered.
    public var watcherCount: Int {
        state.withLock { state in state.watchers.values.reduce(0) { $0 + $1.values.count { $0.watcher != nil } } }
    }

    private func remove(sid: String, id: UInt64) {
        state.withLock { state in
            state.watchers[sid]?[id] = nil
            if state.watchers[sid]?.isEmpty == true { state.watchers[sid] = nil }
        }
    }
}

/// One watcher of one session: remembers the notices since it last looked, and lets one task wait for the next.
public final class SessionWatcher: Sendable {
    /// Why ``wait(for:)`` returned.
    public enum Wake: Sendable, Hashable {
        /// Notices arrived; `eidRotated` if one of them said so.
        case notified(eidRotated: Bool)
        /// The wait ran out.
        case timedOut
        /// The watcher was closed.
        case closed
    }

    private struct State {
        var changed = false
        var eidRotated = false
        var closed = false
        var waiter: CheckedContinuation<Void, Never>?

        /// Whether a wait would return now.
        var isDue: Bool { closed || changed }
    }

    /// The session watched.
    public let sid: String
    let id: UInt64
    private let state = Mutex(State())
    private let onClose: @Sendable (String, UInt64) -> Void

    init(sid: String, id: UInt64, onClose: @escaping @Sendable (String, UInt64) -> Void) {
        self.sid = sid
        self.id = id
        self.onClose = onClose
    }

    deinit { onClose(sid, id) }

    func wake(_ notice: SessionNotice) {
        state.withLock { state in
            state.changed = true
            if notice == .eidRotated { state.eidRotated = true }
        }
        resumeIfDue()
    }

    /// Stops the watcher: a wait under way and every later one return ``Wake/closed``.
    public func close() {
        state.withLock { $0.closed = true }
        resumeIfDue()
        onClose(sid, id)
    }

    /// Waits for a notice (returning at once if one came since the last wait), the watcher's closing, or `timeout`.
    ///
    /// The notices are consumed only here, after the wait, never by whoever wakes the waiter: a notice that lands
    /// just as the timeout wins is still returned, by this wait or the next, never lost between the two.
    public func wait(for timeout: Duration) async -> Wake {
        if let wake = state.withLock({ state in Self.consume(&state) }) { return wake }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let ready = self.state.withLock { state -> Bool in
                            if state.isDue || Task.isCancelled { return true }
                            state.waiter = continuation
                            return false
                        }
                        if ready { continuation.resume() }
                    }
                } onCancel: {
                    self.takeWaiter(ifDue: false)?.resume()
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
        return state.withLock { state in Self.consume(&state) } ?? .timedOut
    }

    /// Resumes the waiter if something is pending for it.
    private func resumeIfDue() {
        takeWaiter(ifDue: true)?.resume()
    }

    /// The waiter, removed, if there is one (and, with `ifDue`, if a wait would return now).
    private func takeWaiter(ifDue: Bool) -> CheckedContinuation<Void, Never>? {
        state.withLock { state in
            guard !ifDue || state.isDue else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
    }

    /// What a wait returns now, consuming the notices; `nil` if it must wait.
    private static func consume(_ state: inout State) -> Wake? {
        if state.closed { return .closed }
        guard state.changed else { return nil }
        defer {
            state.changed = false
            state.eidRotated = false
        }
        return .notified(eidRotated: state.eidRotated)
    }
}

/// A session as its event stream reads it: the session, when it will change by itself, and the id of its state.
public struct WatchedSession: Sendable, Hashable {
    /// The session, as its payee sees it (``LedgerStore/session(sid:viewerID:)``).
    public var session: SessionView
    /// The store's time of the read.
    public var now: Date
    /// When the status changes without anything written (the lock lapses, the session expires); `nil` once final.
    public var nextLapse: Date?
    /// Names this state: equal ids, equal states. Used as the event id, so a client resuming with it is sent
    /// nothing until the state moves on.
    public var stateID: String

    /// Creates a view.
    public init(session: SessionView, now: Date, nextLapse: Date?, stateID: String) {
        self.session = session
        self.now = now
        self.nextLapse = nextLapse
        self.stateID = stateID
    }

    /// The status named by a state id this store made, if `id` is one.
    public static func status(ofStateID id: String) -> SessionStatus? {
        let parts = id.split(separator: ".")
        guard parts.count == 3, parts[0] == "s1" else { return nil }
        return SessionStatus(rawValue: String(parts[1]))
    }

    /// The state id of `status` with a lock held until `lockUntil` (milliseconds), if locked, with `sharesPaid`
    /// shares paid of a split partly paid, or with `refundedCents` refunded: each share paid and each refund is a
    /// new state.
    static func stateID(
        _ status: SessionStatus,
        lockUntil: Int64?,
        refundedCents: Int64 = 0,
        sharesPaid: Int = 0
    )
        -> String
    {
        if refundedCents > 0 { return "s1.\(status.rawValue).r\(refundedCents)" }
        if status == .partiallyPaid { return "s1.\(status.rawValue).p\(sharesPaid)" }
        return "s1.\(status.rawValue).\(lockUntil ?? 0)"
    }
}
