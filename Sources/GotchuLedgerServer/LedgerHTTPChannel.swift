import Foundation
import GotchuAPI
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import Synchronization

/// The ledger's HTTP/1.1 connections: Hummingbird's, behind a guard that keeps what a connection may hold bounded.
///
/// - At most ``LedgerLimits/maximumOpenConnections`` are served at once. The next ones are accepted and answered
///   503 `unavailable` with `Retry-After: 1` and `Connection: close` at once, without reading their request, then
///   closed: a client learns that the server is busy instead of waiting unanswered in the kernel's listen backlog, and
///   can tell "busy" from "down". Up to ``ConnectionSlots/maximumRefusing`` such answers
///   are in progress at once (each holds a descriptor until its client has read it, at most the read timeout); past
///   that a connection is closed without an answer, so a flood costs a bounded number of descriptors.
/// - A request's head and body must arrive within ``LedgerLimits/readTimeout`` of its first byte, or the connection
///   is closed; a connection waiting for its next request is closed after ``LedgerLimits/idleTimeout`` (Hummingbird's
///   idle timeout, which also ends a connection whose request stops arriving for that long).
/// - A request line without an HTTP version (HTTP/0.9), which the parser would wait on forever, and any request the
///   parser rejects are answered 400 `bad-request` as `application/problem+json` and the connection is closed.
///
/// Under HTTPS (HummingbirdTLS's `TLSChannel` wrapping this one) the TLS handler is first in the pipeline and these
/// handlers go right behind it, so they see the decrypted bytes; a refused connection gets its 503 after the
/// handshake. A client that never completes the handshake sends no request bytes and is closed by the idle timeout.
struct LedgerHTTPChannel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
        /// The HTTP parts of a served connection; `nil` for one refused at the cap.
        let http: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>?
    }

    let http1: HTTP1Channel
    let slots: ConnectionSlots
    let readTimeout: TimeAmount

    init(responder: @escaping HTTPChannelHandler.Responder, limits: LedgerLimits, metrics: LedgerMetrics? = nil) {
        self.http1 = HTTP1Channel(
            responder: responder,
            configuration: .init(idleTimeout: TimeAmount(limits.idleTimeout))
        )
        self.slots = ConnectionSlots(maximum: limits.maximumOpenConnections, metrics: metrics)
        self.readTimeout = TimeAmount(limits.readTimeout)
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let admission = slots.admit(logger: logger)
        let slots = self.slots
        channel.closeFuture.whenComplete { _ in slots.release(admission, logger: logger) }
        switch admission {
        case .drop:
            channel.close(promise: nil)
            return channel.eventLoop.makeSucceededFuture(Value(channel: channel, http: nil))
        case .refuse:
            let answer = EdgeResponse.bytes(
                Problem(.unavailable, detail: "the server is at its connection limit; retry in a second"),
                headers: [("Retry-After", "1")],
                allocator: channel.allocator
            )
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(ConnectionRefusal(answer: answer, linger: readTimeout))
                return Value(channel: channel, http: nil)
            }
        case .serve:
            let connection = ConnectionGuard(readTimeout: readTimeout, logger: logger)
            do {
                let operations = channel.pipeline.syncOperations
                // In front of the HTTP codec, behind TLS when there is TLS.
                let position: ChannelPipeline.SynchronousOperations.Position =
                    if let tls = try? operations.handler(type: NIOSSLServerHandler.self) { .after(tls) } else { .first }
                try operations.addHandler(RequestBytesHandler(connection), position: position)
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
            return http1.setup(channel: channel, logger: logger).assumeIsolated().flatMapThrowing { http in
                // Between the HTTP codec and Hummingbird's connection state: it sees parsed parts and parser errors.
                let operations = channel.pipeline.syncOperations
                let state = try operations.handler(type: HTTPConnectionStateHandler.self)
                try operations.addHandler(RequestPartsHandler(connection), position: .before(state))
                return Value(channel: channel, http: http)
            }.nonisolated()
        }
    }

    func handle(value: Value, logger: Logger) async {
        // A refused connection answers and closes on its own.
        guard let http = value.http else { return }
        await http1.handle(value: http, logger: logger)
    }
}

/// The count of connections served and refused; shared by all of a server's connections.
final class ConnectionSlots: Sendable {
    enum Admission: Sendable {
        case serve
        case refuse
        case drop
    }

    /// Refusals answered at once, at most.
    static let maximumRefusing = 64

    let maximum: Int
    let metrics: LedgerMetrics?
    private let state = Mutex((served: 0, refusing: 0, full: false))

    init(maximum: Int, metrics: LedgerMetrics? = nil) {
        precondition(LedgerLimits.allowedOpenConnections.contains(maximum), "maximumOpenConnections out of range")
        self.maximum = maximum
        self.metrics = metrics
    }

    /// Takes a slot for a new connection, or says how to turn it away. Logs when the server becomes full, not per
    /// connection: a flood must not become a flood of log lines.
    func admit(logger: Logger) -> Admission {
        let (admission, becameFull) = state.withLock { state -> (Admission, Bool) in
            if state.served < maximum {
                state.served += 1
                // Under the lock, so the gauge's last value is the count's.
                metrics?.connections(open: state.served)
                return (.serve, false)
            }
            let becameFull = !state.full
            state.full = true
            guard state.refusing < Self.maximumRefusing else { return (.drop, becameFull) }
            state.refusing += 1
            return (.refuse, becameFull)
        }
        if admission != .serve { metrics?.connectionRefused() }
        if becameFull {
            logger.warning(
                "connection limit reached; new connections are answered 503 until some close",
                metadata: ["max_open_connections": "\(maximum)"]
            )
        }
        return admission
    }

    func release(_ admission: Admission, logger: Logger) {
        let recovered = state.withLock { state -> Bool in
            switch admission {
            case .serve:
                state.served -= 1
                metrics?.connections(open: state.served)
            case .refuse: state.refusing -= 1
            case .drop: break
            }
            guard state.full, state.served < maximum else { return false }
            state.full = false
            return true
        }
        if recovered { logger.info("below the connection limit again; accepting connections") }
    }

    /// Connections being served now.
    var served: Int { state.withLock { $0.served } }
}

/// A request whose head and body did not arrive within the read timeout.
struct RequestReadTimeout: Error, CustomStringConvertible {
    var description: String { "the request did not arrive within the read timeout" }
}

/// What one served connection is doing, for its read timeout and its answers to requests the parser cannot take.
/// Confined to the connection's event loop; its two handlers sit at either end of the HTTP codec.
final class ConnectionGuard {
    let readTimeout: TimeAmount
    let logger: Logger
    /// The context of the handler in front of the codec, which writes raw answers and closes.
    var bytesContext: ChannelHandlerContext?
    /// The context of the handler behind the codec, which passes a timeout to the request's body.
    var partsContext: ChannelHandlerContext?

    /// The first request line, until it is known to carry an HTTP version; `nil` after.
    private var firstLine: [UInt8]? = []
    /// Whether part of a request has arrived but not all of it (the read timer runs).
    private var receiving = false
    /// Whether the last request's head arrived and its end has not.
    private var bodyPending = false
    private var headsRead = 0
    private var responsesEnded = 0
    /// When the request being received runs out of time; `nil` when none is.
    private var deadline: NIODeadline?
    /// Fires at or before ``deadline``. Left to fire when a request ends early, and moved on when it finds a later
    /// deadline: a request costs reading the clock, not scheduling and cancelling a task of the event loop.
    private var timer: Scheduled<Void>?
    /// Set once the connection is being answered and closed here: nothing more is read.
    private(set) var closing = false
    /// Whether an event stream is being sent: a client closing its side then has gone away (an event stream's
    /// client has nothing left to send), and the connection is closed at once rather than at the next heartbeat's
    /// failed write, which frees the stream's per-user slot.
    private(set) var streaming = false

    init(readTimeout: TimeAmount, logger: Logger) {
        self.readTimeout = readTimeout
        self.logger = logger
    }

    /// Bytes from the client; returns whether to pass them to the parser.
    func bytesArrived(_ buffer: ByteBuffer) -> Bool {
        guard !closing else { return false }
        if firstLine != nil, !checkFirstLine(buffer) {
            logger.debug("request line without an HTTP version; answered 400 and closed")
            answerAndClose(
                Problem(.badRequest, detail: "the request line must end with the HTTP version, such as HTTP/1.1")
            )
            return false
        }
        startReceiving()
        return true
    }

    func partRead(_ part: HTTPRequestPart) {
        switch part {
        case .head:
            headsRead += 1
            bodyPending = true
            startReceiving()
        case .body:
            break
        case .end:
            bodyPending = false
            receiving = false
            deadline = nil
        }
    }

    func partWritten(_ part: HTTPResponsePart) {
        switch part {
        case .head(let head):
            streaming = head.headerFields[.contentType] == EventStreamMedia.type
        case .end:
            responsesEnded += 1
            streaming = false
        case .body:
            break
        }
    }

    /// A parser error: answered here when no request is with the responder (it is in the head of a new one);
    /// otherwise passed on, and the body of the request being answered fails with it. Returns whether it was handled.
    func parserFailed(_ error: any Error) -> Bool {
        if closing { return true }
        guard let parserError = error as? HTTPParserError, headsRead == responsesEnded else { return false }
        logger.debug("malformed request; answered 400 and closed", metadata: ["error": "\(parserError)"])
        answerAndClose(Problem(.badRequest, detail: "the request is not valid HTTP/1.1 (\(parserError))"))
        return true
    }

    func cancelTimer() {
        timer?.cancel()
        timer = nil
    }

    /// Sends `problem` with `Connection: close`, then closes: output first, and the rest once the client has
    /// closed its side or the read timeout has passed, so the answer is not lost to a reset for unread input.
    func answerAndClose(_ problem: Problem) {
        guard !closing, let context = bytesContext else { return }
        closing = true
        cancelTimer()
        EdgeResponse.send(
            EdgeResponse.bytes(problem, headers: [], allocator: context.channel.allocator),
            on: context,
            linger: readTimeout
        )
    }

    private func startReceiving() {
        guard !receiving else { return }
        receiving = true
        arm()
    }

    private func arm() {
        let due = NIODeadline.now() + readTimeout
        deadline = due
        if timer == nil { schedule(at: due) }
    }

    private func schedule(at due: NIODeadline) {
        guard let context = bytesContext else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            timer = nil
            guard receiving, let deadline else { return }
            if deadline > .now() {
                schedule(at: deadline)
            } else {
                expire()
            }
        }
    }

    private func expire() {
        guard receiving, !closing, let context = bytesContext else { return }
        // An earlier request still being answered (pipelining): its handler's time is not this request's to lose.
        if headsRead - responsesEnded - (bodyPending ? 1 : 0) > 0 {
            arm()
            return
        }
        closing = true
        logger.debug("request not received within the read timeout; closing", metadata: ["body": "\(bodyPending)"])
        // A handler waiting for the body gets the reason; then the connection goes.
        if bodyPending { partsContext?.fireErrorCaught(RequestReadTimeout()) }
        context.close(promise: nil)
    }

    /// Looks at the first request line as it arrives; returns `false` if it lacks an HTTP version. Bytes are
    /// checked before the parser sees them, so a version-less request never reaches the router.
    private func checkFirstLine(_ buffer: ByteBuffer) -> Bool {
        guard var line = firstLine else { return true }
        let bytes = buffer.readableBytesView
        var newline: Int?
        for (offset, byte) in bytes.enumerated() {
            // Empty lines before a request line are allowed (RFC 9112, 2.2).
            if line.isEmpty, byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") { continue }
            if byte == UInt8(ascii: "\n") {
                newline = offset
                break
            }
            line.append(byte)
            // A line this long is the parser's to refuse; stop copying it.
            if line.count > 8 * 1024 {
                firstLine = nil
                return true
            }
        }
        guard newline != nil else {
            firstLine = line
            return true
        }
        firstLine = nil
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        let words = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard words.count == 3, let version = words.last else { return false }
        return version.starts(with: Array("HTTP/".utf8))
    }
}

/// In front of the HTTP codec: sees the connection's bytes as they arrive.
final class RequestBytesHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let connection: ConnectionGuard

    init(_ connection: ConnectionGuard) { self.connection = connection }

    func handlerAdded(context: ChannelHandlerContext) { connection.bytesContext = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        connection.cancelTimer()
        connection.bytesContext = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard connection.bytesArrived(unwrapInboundIn(data)) else { return }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Once answering here, or sending an event stream, the client closing its side ends the connection; the
        // parser has nothing to say.
        if connection.closing || connection.streaming, case ChannelEvent.inputClosed = event {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.cancelTimer()
        context.fireChannelInactive()
    }
}

/// Behind the HTTP codec: sees request parts, response parts and parser errors.
final class RequestPartsHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let connection: ConnectionGuard

    init(_ connection: ConnectionGuard) { self.connection = connection }

    func handlerAdded(context: ChannelHandlerContext) { connection.partsContext = context }

    func handlerRemoved(context: ChannelHandlerContext) { connection.partsContext = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.partRead(unwrapInboundIn(data))
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        connection.partWritten(unwrapOutboundIn(data))
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !connection.parserFailed(error) else { return }
        context.fireErrorCaught(error)
    }
}

/// The whole pipeline of a connection refused at the cap: answers, reads nothing, closes.
final class ConnectionRefusal: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    let answer: ByteBuffer
    let linger: TimeAmount
    private var answered = false

    init(answer: ByteBuffer, linger: TimeAmount) {
        self.answer = answer
        self.linger = linger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        refuse(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case ChannelEvent.inputClosed, is ChannelShouldQuiesceEvent: context.close(promise: nil)
        default: context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func refuse(_ context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        EdgeResponse.send(answer, on: context, linger: linger)
    }
}

/// Answers written below the HTTP codec, as bytes: for connections the router never sees.
enum EdgeResponse {
    /// A complete HTTP/1.1 response carrying `problem`, with `Connection: close`.
    static func bytes(_ problem: Problem, headers: [(String, String)], allocator: ByteBufferAllocator) -> ByteBuffer {
        let body = (try? APIJSON.encoder().encode(problem)) ?? Data()
        let status = HTTPResponseStatus(statusCode: problem.status)
        var head = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n"
        head += "Date: \(httpDate(Date()))\r\n"
        head += "Server: gotchu-ledger\r\n"
        head += "Content-Type: \(Problem.mediaType)\r\n"
        head += "Content-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Connection: close\r\n\r\n"
        var buffer = allocator.buffer(capacity: head.utf8.count + body.count)
        buffer.writeString(head)
        buffer.writeBytes(body)
        return buffer
    }

    /// Writes `answer` from `context` (which must be in front of any HTTP codec), closes the output, and closes the
    /// connection once the client closes its side, or after `linger`.
    static func send(_ answer: ByteBuffer, on context: ChannelHandlerContext, linger: TimeAmount) {
        let loop = context.eventLoop.assumeIsolated()
        let lingering = loop.scheduleTask(in: linger) { context.close(promise: nil) }
        context.channel.closeFuture.assumeIsolated().whenComplete { _ in lingering.cancel() }
        context.writeAndFlush(NIOAny(answer)).assumeIsolated().whenComplete { result in
            switch result {
            case .success:
                context.close(mode: .output).assumeIsolated().whenFailure { _ in context.close(promise: nil) }
            case .failure: context.close(promise: nil)
            }
        }
    }

    /// An IMF-fixdate (RFC 9110, 5.6.7), without a formatter: this runs for every refused connection of a flood.
    static func httpDate(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let weekday = days[Int(parts.tm_wday)]
        let month = months[Int(parts.tm_mon)]
        return "\(weekday), \(two(parts.tm_mday)) \(month) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
