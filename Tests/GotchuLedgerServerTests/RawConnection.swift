import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP connection to a loopback port that sends exactly the bytes it is given: for requests no HTTP client would
/// send (HTTP/0.9, broken heads, bodies that stop half-way) and for holding connections open. Reads poll without
/// blocking a thread; every wait is bounded by a timeout that only guards against a hang.
final class RawConnection {
    /// A response: status, headers (names in lower case) and a `Content-Length` body.
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: Data
    }

    private var descriptor: Int32
    private var unread: [UInt8] = []
    private(set) var closedByServer = false

    /// Connects to `127.0.0.1:port`.
    init(port: Int) throws {
        #if canImport(Glibc)
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw RawConnectionError("socket() failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                connect(descriptor, address, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            close(descriptor)
            throw RawConnectionError("connect to port \(port) failed: errno \(error)")
        }
    }

    deinit { disconnect() }

    /// Closes the connection from this side.
    func disconnect() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    /// Shuts down the sending side only: the server sees the request end, and can still answer.
    func finishSending() {
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Sends `text` as it is.
    func send(_ text: String) throws {
        var bytes = Array(text.utf8)
        while !bytes.isEmpty {
            // MSG_NOSIGNAL: a server that closed must fail the send, not kill the test process with SIGPIPE.
            let sent = bytes.withUnsafeBytes { systemSend(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw RawConnectionError("send failed: errno \(errno)") }
            bytes.removeFirst(sent)
        }
    }

    /// Reads one response whose body has a `Content-Length` (every answer of the ledger has one). A HEAD response
    /// has none to read: pass `head: true`.
    func readResponse(head: Bool = false, timeout: Duration = .seconds(10)) async throws -> Response {
        let deadline = ContinuousClock.now + timeout
        let separator = Array("\r\n\r\n".utf8)
        while unread.firstRange(of: separator) == nil {
            guard try await receive(until: deadline) else {
                throw RawConnectionError(
                    "closed before a response head; got \(String(decoding: unread, as: UTF8.self))"
                )
            }
        }
        let end = unread.firstRange(of: separator)!
        let text = String(decoding: unread[..<end.lowerBound], as: UTF8.self)
        unread.removeSubrange(..<end.upperBound)
        var lines = text.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, statusLine[0] == "HTTP/1.1", let status = Int(statusLine[1]) else {
            throw RawConnectionError("bad status line in \(text)")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces
            )
        }
        let length = head ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        while unread.count < length {
            guard try await receive(until: deadline) else { throw RawConnectionError("the body ended early") }
        }
        let body = Data(unread[..<length])
        unread.removeFirst(length)
        return Response(status: status, headers: headers, body: body)
    }

    /// Waits until the server closes the connection (end of stream or reset), keeping what arrives; returns the
    /// bytes not yet read as a response. Throws if it stays open past `timeout`.
    @discardableResult
    func waitForClose(timeout: Duration = .seconds(10)) async throws -> Data {
        let deadline = ContinuousClock.now + timeout
        while try await receive(until: deadline) {}
        return Data(unread)
    }

    /// Waits until what arrived holds `text` `occurrences` times (a streamed body has no end to wait for).
    func waitFor(_ text: String, occurrences: Int = 1, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        let needle = Array(text.utf8)
        while unread.ranges(of: needle).count < occurrences {
            guard try await receive(until: deadline) else {
                throw RawConnectionError(
                    "closed before \(occurrences) × \(text); got \(String(decoding: unread, as: UTF8.self))"
                )
            }
        }
    }

    /// Waits for bytes; returns `false` once the server has closed the connection.
    private func receive(until deadline: ContinuousClock.Instant) async throws -> Bool {
        guard !closedByServer else { return false }
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 0) > 0 {
                var buffer = [UInt8](repeating: 0, count: 16 * 1024)
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else {
                    // 0 is the end of the stream; an error (a reset) is a close as well.
                    closedByServer = true
                    return false
                }
                unread.append(contentsOf: buffer[..<count])
                return true
            }
            guard ContinuousClock.now < deadline else {
                throw RawConnectionError("timed out waiting for the server")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

#if canImport(Glibc)
    private let systemSend = Glibc.send
#else
    private let systemSend = Darwin.send
#endif

/// What went wrong on a raw connection.
struct RawConnectionError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
