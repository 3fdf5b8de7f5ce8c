import Foundation
package import GotchuAPI
import GotchuCore
package import GotchuLedger
import HTTPTypes
package import Hummingbird
package import NIOCore
import ServiceLifecycle

/// `GET /p/{eid}/events`: what a payer's checkout page may learn of the session its EID named, as server-sent
/// events: each state the session moves to, named as the API's stream names them (``SessionEventKind``: `paid` when
/// someone else paid it, `share-paid`, `cancelled`, `expired`, and `eid-rotated` once the terminal advertises a new
/// EID), with `{"status", "shares", "shares_paid"}` as data and nothing more: no amounts paid, no receipts, no payers.
///
/// It follows the session, not the EID: a rotation (however long ago) does not end it. Like the payee's stream it
/// watches the session's change notices before its first read, reads it again on each notice, when it expires, and
/// on a slow safety poll, sends a comment every heartbeat, ends after a final state, and ends at graceful shutdown.
package struct CheckoutEventStream<Store: LedgerStore>: Sendable {
    /// Reads the session as the page follows it (by its EID, or by its checkout link).
    package let status: @Sendable () async throws -> CheckoutStatus
    package let heartbeat: Duration
    package let safetyPoll: Duration

    package init(
        status: @escaping @Sendable () async throws -> CheckoutStatus,
        heartbeat: Duration,
        safetyPoll: Duration
    ) {
        self.status = status
        self.heartbeat = heartbeat
        self.safetyPoll = safetyPoll
    }

    /// Writes the stream until the session ends, the watcher is closed, or a write fails (the client went away).
    package func run(watcher: SessionWatcher, first: CheckoutStatus, writer: inout any ResponseBodyWriter) async throws
    {
        let clock = ContinuousClock()
        // What the page was told: the status (with the shares paid) and whether the EID was rotated away.
        var told: (status: SessionStatus, sharesPaid: Int)?
        var toldRotation = false
        var view = first
        var readAt = clock.now
        var wroteAt = clock.now
        try await writer.write(ByteBuffer(string: "retry: \(SessionEventKind.retryMilliseconds)\n\n"))
        while true {
            if told.map({ $0.status != view.status || $0.sharesPaid != view.sharesPaid }) ?? true {
                try await writer.write(Self.event(SessionEventKind.reporting(view.status, after: told?.status), view))
                told = (view.status, view.sharesPaid)
                wroteAt = clock.now
            }
            if view.eidRetired, !toldRotation, view.status.isLive {
                try await writer.write(Self.event(.eidRotated, view))
                toldRotation = true
                wroteAt = clock.now
            }
            guard view.status.isLive else { return }
            let lapseAt = view.nextLapse.map { lapse in
                readAt + .milliseconds(Int64((lapse.timeIntervalSince(view.now) * 1000).rounded(.up)) + 20)
            }
            let readDue = min(readAt + safetyPoll, lapseAt ?? readAt + safetyPoll)
            let heartbeatDue = wroteAt + heartbeat
            switch await watcher.wait(for: max(.zero, min(readDue, heartbeatDue) - clock.now)) {
            case .closed:
                return
            case .notified:
                break
            case .timedOut:
                if clock.now < readDue {
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                    wroteAt = clock.now
                    continue
                }
            }
            readAt = clock.now
            view = try await status()
        }
    }

    /// One event: `event:`, one `data:` line of JSON, a blank line. No `id:`: a page that reconnects is sent the
    /// current state, which is what it shows anyway.
    package static func event(_ kind: SessionEventKind, _ status: CheckoutStatus) -> ByteBuffer {
        let data =
            "{\"status\":\"\(status.status.rawValue)\",\"shares\":\(status.shares),\"shares_paid\":\(status.sharesPaid)}"
        return ByteBuffer(string: "event: \(kind.rawValue)\ndata: \(data)\n\n")
    }
}
