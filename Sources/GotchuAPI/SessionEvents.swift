public import GotchuCore

/// What happened to a session, as `GET /sessions/{sid}/events` names it in each event's `event:` field.
///
/// The stream carries states, not a log: each event's data is the session's status after the change, and a change
/// the stream could not deliver (the client was away, a notification was lost) arrives as the state it led to. So a
/// session locked and unlocked while nobody listened shows nothing new, and a client that reconnects is sent the
/// current state unless it is the one named by its `Last-Event-ID`.
public enum SessionEventKind: String, Codable, Hashable, Sendable, CaseIterable {
    /// The reconnection delay both event streams (the payee's and the checkout page's) suggest to clients in their
    /// `retry:` line, in milliseconds.
    public static let retryMilliseconds = 2000

    /// Waiting for a payer: the first event of a stream opened on a session nobody holds.
    case advertising
    /// A payer holds the lock.
    case locked
    /// The lock was released or lapsed without payment; the session waits for a payer again.
    case unlocked
    /// A share of a split session was paid, not the last one: the status says how many are (`shares_paid`).
    case sharePaid = "share-paid"
    /// Paid (of a split: the last share); the last event of the stream.
    case paid
    /// Expired unpaid; the last event of the stream. Of a split with shares paid, sent again as the ledger returns
    /// each payment (`refunded_cents` grows), the last once all are returned.
    case expired
    /// Cancelled; the last event of the stream. Of a split with shares paid, sent again as the ledger returns each
    /// payment, like ``expired``.
    case cancelled
    /// The session advertises a new EID; the status is unchanged.
    case eidRotated = "eid-rotated"

    /// The kind of an event that reports `status`, coming after a state of status `previous` (`nil` when the client
    /// saw none).
    public static func reporting(_ status: SessionStatus, after previous: SessionStatus?) -> SessionEventKind {
        switch status {
        case .paid: return .paid
        case .expired: return .expired
        case .cancelled: return .cancelled
        case .locked: return .locked
        case .partiallyPaid: return .sharePaid
        case .created, .advertising: return previous == .locked ? .unlocked : .advertising
        }
    }
}

/// One event of `GET /sessions/{sid}/events`.
public struct SessionEvent: Hashable, Sendable {
    /// The event's id: send it back as `Last-Event-ID` when reconnecting, to be sent only what changed since.
    public var id: String
    /// What happened.
    public var kind: SessionEventKind
    /// The session's status after it.
    public var session: SessionStatusResponse

    /// An event `id` (the stream's `Last-Event-ID` to resume after it) of `kind`, carrying the session's status
    /// at that moment.
    public init(id: String, kind: SessionEventKind, session: SessionStatusResponse) {
        self.id = id
        self.kind = kind
        self.session = session
    }
}

/// The media type of an event stream.
public enum EventStreamMedia {
    /// `text/event-stream`.
    public static let type = "text/event-stream"
}

/// Reads a `text/event-stream` body (the WHATWG HTML "server-sent events" format) as it arrives, without I/O: feed it
/// bytes, take the events it completes. Comments (heartbeats) and `retry:` fields count as activity only. Lines and
/// events are bounded, so a hostile server cannot make it hold unbounded memory.
public struct ServerSentEventParser: Sendable {
    /// A dispatched event, before any meaning is given to it.
    public struct RawEvent: Hashable, Sendable {
        /// The `event:` field; `message` when absent.
        public var type: String
        /// The `data:` lines, joined by newlines.
        public var data: String
        /// The last `id:` seen so far in the stream.
        public var lastEventID: String?

        /// A raw event as read from the stream: its `event:` type, its `data:` text and the
        /// last `id:` seen so far in the stream.
        public init(type: String, data: String, lastEventID: String?) {
            self.type = type
            self.data = data
            self.lastEventID = lastEventID
        }
    }

    /// Why a stream cannot be read.
    public struct Malformed: Error, Hashable, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// The longest line accepted, in bytes.
    public static let maximumLineLength = 64 * 1024

    private var line: [UInt8] = []
    private var skipLineFeed = false
    private var type = ""
    private var data: [String] = []
    private var dataLength = 0
    private var lastEventID: String?
    /// The reconnection delay the server asked for with `retry:`, in milliseconds.
    public private(set) var retryMilliseconds: Int?

    /// A parser at the start of a stream.
    public init() {}

    /// Reads `bytes` and returns the events they complete, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(Malformed) -> [RawEvent] {
        var events: [RawEvent] = []
        for byte in bytes {
            if skipLineFeed {
                skipLineFeed = false
                if byte == 0x0A { continue }
            }
            switch byte {
            case 0x0D, 0x0A:
                skipLineFeed = byte == 0x0D
                if let event = try endLine() { events.append(event) }
            default:
                guard line.count < Self.maximumLineLength else {
                    throw Malformed(description: "an event stream line is longer than \(Self.maximumLineLength) bytes")
                }
                line.append(byte)
            }
        }
        return events
    }

    private mutating func endLine() throws(Malformed) -> RawEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer {
                type = ""
                data = []
                dataLength = 0
            }
            guard !data.isEmpty else { return nil }
            return RawEvent(
                type: type.isEmpty ? "message" : type,
                data: data.joined(separator: "\n"),
                lastEventID: lastEventID
            )
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        let name: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            name = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            name = text[...]
            value = ""
        }
        switch name {
        case "event": type = String(value)
        case "data":
            dataLength += value.utf8.count
            guard dataLength <= Self.maximumLineLength else {
                throw Malformed(description: "an event's data is longer than \(Self.maximumLineLength) bytes")
            }
            data.append(String(value))
        case "id" where !value.contains("\0"): lastEventID = String(value)
        case "retry": if let milliseconds = Int(value), milliseconds >= 0 { retryMilliseconds = milliseconds }
        default: break
        }
        return nil
    }
}
