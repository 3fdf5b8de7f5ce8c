import AsyncHTTPClient
import Foundation
public import GotchuAPI
public import GotchuCore
import GotchuReceipts
import NIOCore
import NIOHTTP1
import Synchronization

extension LedgerClient {
    /// `GET /sessions/{sid}/events`: the session's changes as they happen, for its payee. The first event is the
    /// current state (unless `lastEventID` names it); the stream finishes after a final state (paid, expired,
    /// cancelled), and throws a ``LedgerClientError`` when it cannot be opened or breaks: a ``Problem`` (404
    /// `not-found` or 405 `method-not-allowed` from a server that predates the route), or a transport failure,
    /// including a stream that stays silent longer than `quietLimit` (the server sends a comment line every 15 s by
    /// default). Requests go through AsyncHTTPClient, which reads a response as it arrives.
    public func sessionEvents(
        sid: String,
        lastEventID: String? = nil,
        quietLimit: Duration = .seconds(45)
    ) -> AsyncThrowingStream<SessionEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: SessionEvent.self)
        let client = self
        let task = Task {
            do {
                try await client.readEvents(sid: sid, lastEventID: lastEventID, quietLimit: quietLimit) { event in
                    continuation.yield(event)
                }
                continuation.finish()
            } catch let error as LedgerClientError {
                continuation.finish(throwing: error)
            } catch is CancellationError {
                continuation.finish(throwing: CancellationError())
            } catch {
                let description =
                    await LedgerTransport.describe(error, url: baseURL, trust: trust)
                continuation.finish(throwing: LedgerClientError.transport(description))
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// The session's next status that differs from `after` (any status when `after` is `nil`), or, when
    /// `sharesPaid` is given, whose count of shares paid differs from it (a split session stays partially paid while
    /// its shares are paid one by one), read from its event stream, which is opened for the call and closed when it
    /// returns: the first event is the current state, so a change made before the call is seen at once. Throws when
    /// the stream cannot be opened or breaks before such a status (see
    /// ``sessionEvents(sid:lastEventID:quietLimit:)``); a stream that ends without one is reported as a transport
    /// failure.
    public func nextSessionStatus(
        sid: String,
        after: SessionStatus?,
        sharesPaid: Int? = nil,
        quietLimit: Duration = .seconds(45)
    ) async throws(LedgerClientError) -> SessionStatusResponse {
        do {
            for try await event in sessionEvents(sid: sid, quietLimit: quietLimit) {
                if event.session.status != after { return event.session }
                if let sharesPaid, event.session.sharesPaid != sharesPaid { return event.session }
            }
        } catch let error as LedgerClientError {
            throw error
        } catch {
            throw .transport("\(error)")
        }
        throw .transport("the event stream ended without news of the session")
    }

    /// Whether `error` says the server has no event streams (it predates them), so a caller should poll instead.
    public static func eventStreamsUnsupported(_ error: LedgerClientError) -> Bool {
        switch error {
        case .problem(let problem): return problem.kind == .notFound || problem.kind == .methodNotAllowed
        case .unexpectedResponse(let status, _): return status == 404 || status == 405
        default: return false
        }
    }

    private func readEvents(
        sid: String,
        lastEventID: String?,
        quietLimit: Duration,
        _ yield: @escaping @Sendable (SessionEvent) -> Void
    ) async throws {
        guard let token else { throw LedgerClientError.notLoggedIn }
        let escaped = sid.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? sid
        let path = "/sessions/\(escaped)/events"
        guard let url = URL(string: path, relativeTo: baseURL) else {
            throw LedgerClientError.invalidURL(baseURL.absoluteString + path)
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "Accept", value: EventStreamMedia.type)
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        if let lastEventID { request.headers.add(name: "Last-Event-ID", value: lastEventID) }
        let client = LedgerTransport.client(trust, silence: nil, connections: maximumConnections)
        let activity = LastActivity()
        let outgoing = request
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // The stream has no end in time; silence is what the watchdog below judges.
                let response = try await client.execute(outgoing, deadline: .now() + .hours(24 * 365))
                activity.touch()
                guard response.status == .ok else {
                    let body = try await response.body.collect(upTo: 64 * 1024)
                    let data = Data(body.readableBytesView)
                    if let problem = try? APIJSON.decoder().decode(Problem.self, from: data) {
                        throw LedgerClientError.problem(problem)
                    }
                    throw LedgerClientError.unexpectedResponse(
                        status: Int(response.status.code),
                        body: String(decoding: data.prefix(512), as: UTF8.self)
                    )
                }
                let contentType = response.headers.first(name: "Content-Type") ?? ""
                guard contentType.lowercased().hasPrefix(EventStreamMedia.type) else {
                    throw LedgerClientError.unexpectedResponse(
                        status: Int(response.status.code),
                        body: "Content-Type \(contentType), not \(EventStreamMedia.type)"
                    )
                }
                var parser = ServerSentEventParser()
                for try await chunk in response.body {
                    activity.touch()
                    let raws: [ServerSentEventParser.RawEvent]
                    do {
                        raws = try parser.feed(chunk.readableBytesView)
                    } catch {
                        throw LedgerClientError.unexpectedResponse(status: 200, body: "\(error)")
                    }
                    for raw in raws {
                        // Kinds this client does not know are skipped: a newer server may send more.
                        guard let kind = SessionEventKind(rawValue: raw.type) else { continue }
                        guard (try? Receipt.checkAnswer(raw.data.utf8)) != nil,
                            let status = try? APIJSON.decoder().decode(
                                SessionStatusResponse.self,
                                from: Data(raw.data.utf8)
                            )
                        else {
                            throw LedgerClientError.unexpectedResponse(
                                status: 200,
                                body: "an unreadable \(kind.rawValue) event: \(raw.data.prefix(200))"
                            )
                        }
                        yield(SessionEvent(id: raw.lastEventID ?? "", kind: kind, session: status))
                    }
                }
            }
            group.addTask {
                while true {
                    let quietFor = ContinuousClock.now - activity.instant
                    if quietFor >= quietLimit {
                        throw LedgerClientError.transport(
                            "the event stream stayed silent for \(quietLimit); the connection is taken as lost"
                        )
                    }
                    try await Task.sleep(for: quietLimit - quietFor)
                }
            }
            // The first to end decides: the reader (the stream ended, or failed), or the watchdog.
            defer { group.cancelAll() }
            try await group.next()
        }
    }
}

/// When a stream last showed signs of life.
private final class LastActivity: Sendable {
    private let last = Mutex(ContinuousClock.now)
    var instant: ContinuousClock.Instant { last.withLock { $0 } }
    func touch() { last.withLock { $0 = .now } }
}
