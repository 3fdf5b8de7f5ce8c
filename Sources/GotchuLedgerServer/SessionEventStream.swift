import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerAPI
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization

/// `GET /sessions/{sid}/events`: one session's changes, as server-sent events, to its payee.
///
/// The stream watches the session in the store's ``SessionChanges`` before its first read, so no change falls
/// between the two, then sends the current state (unless it is the one named by `Last-Event-ID`) and each state the
/// session moves to, each as one event named by ``SessionEventKind`` with the session's status as its data and an id
/// naming the state. Notices only wake it: it reads the session again on each, on a slow safety poll (a notice may be
/// lost: the relay from the database was down) and when a lock lapses or the session expires by itself, so it
/// converges whatever it missed. It ends after a final state (paid, expired, cancelled), or, of a split cancelled or
/// expired with shares paid, once the ledger has returned every payment (each return an event of that state with
/// the new `refunded_cents`), so its payee hears the returns without asking; a comment line every
/// heartbeat keeps proxies from closing it and lets a write find a client that went away. Graceful shutdown ends it.
struct SessionEventStream<Store: LedgerStore>: Sendable {
    let store: Store
    let sid: String
    let payeeID: String
    let heartbeat: Duration
    let safetyPoll: Duration

    /// Writes the stream until the session ends, the watcher is closed, or a write fails (the client went away).
    func run(
        watcher: SessionWatcher,
        first: WatchedSession,
        lastEventID: String?,
        writer: inout any ResponseBodyWriter
    ) async throws {
        let clock = ContinuousClock()
        var sent = lastEventID
        var previous = lastEventID.flatMap(WatchedSession.status(ofStateID:))
        var view = first
        var readAt = clock.now
        var wroteAt = clock.now
        var rotated = false
        try await writer.write(ByteBuffer(string: "retry: \(SessionEventKind.retryMilliseconds)\n\n"))
        while true {
            if view.stateID != sent {
                let kind = SessionEventKind.reporting(view.session.status, after: previous)
                try await writer.write(try Self.event(kind, id: view.stateID, view.session))
                sent = view.stateID
                wroteAt = clock.now
            }
            previous = view.session.status
            guard view.session.status.isLive || view.session.awaitsReturns else { return }
            if rotated {
                try await writer.write(try Self.event(.eidRotated, id: view.stateID, view.session))
                wroteAt = clock.now
                rotated = false
            }
            // The next lapse is judged on the store's clock; a margin so the read lands past it.
            let lapseAt = view.nextLapse.map { lapse in
                readAt + .milliseconds(Int64((lapse.timeIntervalSince(view.now) * 1000).rounded(.up)) + 20)
            }
            let readDue = min(readAt + safetyPoll, lapseAt ?? readAt + safetyPoll)
            let heartbeatDue = wroteAt + heartbeat
            let wait = max(.zero, min(readDue, heartbeatDue) - clock.now)
            switch await watcher.wait(for: wait) {
            case .closed:
                return
            case .notified(let eidRotated):
                rotated = eidRotated
            case .timedOut:
                if clock.now < readDue {
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                    wroteAt = clock.now
                    continue
                }
            }
            readAt = clock.now
            view = try await store.watchedSession(sid: sid, payeeID: payeeID)
        }
    }

    /// One event in the wire format: `event:`, `id:`, one `data:` line of JSON, a blank line.
    static func event(_ kind: SessionEventKind, id: String, _ session: SessionView) throws -> ByteBuffer {
        let data = String(decoding: try APIJSON.encoder().encode(SessionStatusResponse(session)), as: UTF8.self)
        return ByteBuffer(string: "event: \(kind.rawValue)\nid: \(id)\ndata: \(data)\n\n")
    }

    /// The `Last-Event-ID` header if it is one of ours; anything else is ignored (the client is sent the current
    /// state), never echoed.
    static func lastEventID(_ request: Request) -> String? {
        guard let value = request.headers[HTTPField.Name("Last-Event-ID")!],
            value.utf8.count <= 64, WatchedSession.status(ofStateID: value) != nil
        else { return nil }
        return value
    }
}

/// The event streams each user holds open on this server, bounded per user: each holds a connection and a watcher.
final class EventStreamSlots: Sendable {
    /// One open stream's place; released when the stream lets go of it, however the stream ended.
    final class Slot: Sendable {
        private let release: @Sendable () -> Void
        init(release: @escaping @Sendable () -> Void) { self.release = release }
        deinit { release() }
    }

    let maximumPerUser: Int
    private let open = Mutex<[String: Int]>([:])

    init(maximumPerUser: Int) { self.maximumPerUser = maximumPerUser }

    /// A slot for one more of `user`'s streams, or `nil` if the user holds the maximum already.
    func take(for user: String) -> Slot? {
        let taken = open.withLock { open -> Bool in
            guard open[user, default: 0] < maximumPerUser else { return false }
            open[user, default: 0] += 1
            return true
        }
        guard taken else { return nil }
        return Slot { [weak self] in self?.release(user) }
    }

    /// How many streams `user` holds open.
    func count(for user: String) -> Int { open.withLock { $0[user, default: 0] } }

    private func release(_ user: String) {
        open.withLock { open in
            let left = open[user, default: 1] - 1
            open[user] = left > 0 ? left : nil
        }
    }
}

extension LedgerRoutes {
    /// `GET /sessions/{sid}/events` for the authenticated `user`.
    func sessionEvents(user: String, _ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let sid = try SessionID.validate(try context.parameters.require("sid"))
        guard let slot = eventStreams.take(for: user) else {
            let limit = eventStreams.maximumPerUser
            var response = Problem(
                .rateLimited,
                detail: "at most \(limit) event streams per user may be open at once on this server; close one "
                    + "(or wait for one to end) and retry"
            ).httpResponse
            response.headers[.retryAfter] = "\(max(1, Int(limits.eventHeartbeat.components.seconds)))"
            return response
        }
        // Watching before the first read: a change committed between the two still wakes the stream.
        let watcher = store.changes.watch(sid: sid)
        // The client gone, the stream ends now and its slot is free, not at the next heartbeat's failed write.
        context.connectionClosed.whenComplete { _ in watcher.close() }
        let first = try await store.watchedSession(sid: sid, payeeID: user)
        let stream = SessionEventStream(
            store: store,
            sid: sid,
            payeeID: user,
            heartbeat: limits.eventHeartbeat,
            safetyPoll: limits.eventSafetyPoll
        )
        let lastEventID = SessionEventStream<Store>.lastEventID(request)
        var headers = HTTPFields()
        headers[.contentType] = EventStreamMedia.type
        headers[.cacheControl] = "no-store"
        // Proxies that buffer (nginx) would hold events back.
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody { writer in
                // The slot is held until the stream ends, and released then whether it ended well or not.
                defer { withExtendedLifetime(slot) {} }
                defer { watcher.close() }
                try await withGracefulShutdownHandler {
                    try await stream.run(watcher: watcher, first: first, lastEventID: lastEventID, writer: &writer)
                } onGracefulShutdown: {
                    watcher.close()
                }
                try await writer.finish(nil)
            }
        )
    }
}
