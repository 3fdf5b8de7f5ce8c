package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP connection to a loopback port for tests of HTTP servers: it sends exactly the bytes it is given (requests
/// no HTTP client would send: HTTP/0.9, broken heads, bodies that stop half-way), holds connections open, and reads
/// answers with a `Content-Length` or chunked body, including an endless `text/event-stream` event by event
/// (URLSession on Linux cannot stream a response body). Reads poll without blocking a thread; every wait is bounded
/// by a timeout that only guards against a hang.
package final class LoopbackConnection {
    /// A response's status line and headers (names in lower case).
    package struct Head: Sendable {
        package var status: Int
        package var headers: [String: String]
    }

    /// A whole response.
    package struct Response: Sendable {
        package var status: Int
        package var headers: [String: String]
        package var body: Data
    }

    private var descriptor: Int32
    private var unread: [UInt8] = []
    private var chunked = false
    private var contentLength: Int?
    private var decodedBody: [UInt8] = []
    private var bodyEnded = false
    /// Whether the server has closed the connection (end of stream or reset).
    package private(set) var closedByServer = false

    /// Connects to `127.0.0.1:port`.
    package init(port: Int) throws {
        #if canImport(Glibc)
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw LoopbackConnectionError("socket() failed: errno \(errno)") }
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
            throw LoopbackConnectionError("connect to port \(port) failed: errno \(error)")
        }
    }

    deinit { disconnect() }

    /// Closes the connection from this side, as a client (or a browser tab) that goes away.
    package func disconnect() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    /// Shuts down the sending side only: the server sees the request end, and can still answer.
    package func finishSending() {
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Sends `text` as it is.
    package func send(_ text: String) throws {
        var bytes = Array(text.utf8)
        while !bytes.isEmpty {
            // MSG_NOSIGNAL: a server that closed must fail the send, not kill the test process with SIGPIPE.
            let sent = bytes.withUnsafeBytes { systemSend(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw LoopbackConnectionError("send failed: errno \(errno)") }
            bytes.removeFirst(sent)
        }
    }

    /// Sends an HTTP/1.1 request without a body.
    package func send(_ method: String, _ path: String, headers: [String: String] = [:]) throws {
        var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        try send(request + "\r\n")
    }

    /// Reads the next response's status line and headers.
    package func readHead(timeout: Duration = .seconds(60)) async throws -> Head {
        let deadline = ContinuousClock.now + timeout
        let separator = Array("\r\n\r\n".utf8)
        while unread.firstRange(of: separator) == nil {
            guard try await receive(until: deadline) else {
                throw LoopbackConnectionError(
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
            throw LoopbackConnectionError("bad status line in \(text)")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces
            )
        }
        chunked = headers["transfer-encoding"]?.lowercased() == "chunked"
        contentLength = headers["content-length"].flatMap { Int($0) }
        decodedBody = []
        bodyEnded = false
        decode()
        return Head(status: status, headers: headers)
    }

    /// Reads the rest of a finite body as text.
    package func readBody(timeout: Duration = .seconds(60)) async throws -> String {
        String(decoding: try await readBodyBytes(timeout: timeout), as: UTF8.self)
    }

    private func readBodyBytes(timeout: Duration) async throws -> Data {
        let deadline = ContinuousClock.now + timeout
        while !bodyEnded {
            guard try await receive(until: deadline) else { break }
        }
        guard bodyEnded else { throw LoopbackConnectionError("the body ended early") }
        defer { decodedBody = [] }
        return Data(decodedBody)
    }

    /// Reads one whole response. A HEAD response has no body to read: pass `head: true`.
    package func readResponse(head isHead: Bool = false, timeout: Duration = .seconds(10)) async throws -> Response {
        let deadline = ContinuousClock.now + timeout
        if isHead {
            // The head's Content-Length tells the size of the GET's body, which is not sent.
            let head = try await readHead(timeout: timeout)
            unread.insert(contentsOf: decodedBody, at: 0)
            decodedBody = []
            contentLength = nil
            chunked = false
            bodyEnded = true
            return Response(status: head.status, headers: head.headers, body: Data())
        }
        let head = try await readHead(timeout: timeout)
        if head.headers["content-length"] == nil && !chunked { bodyEnded = true }
        let body = try await readBodyBytes(timeout: deadline - ContinuousClock.now)
        return Response(status: head.status, headers: head.headers, body: body)
    }

    /// The next server-sent event block (the lines up to a blank line, comments included), or `nil` once the
    /// response has ended.
    package func nextEvent(timeout: Duration = .seconds(60)) async throws -> [String]? {
        let deadline = ContinuousClock.now + timeout
        let separator = Array("\n\n".utf8)
        while true {
            if let end = decodedBody.firstRange(of: separator) {
                let block = String(decoding: decodedBody[..<end.lowerBound], as: UTF8.self)
                decodedBody.removeSubrange(..<end.upperBound)
                return block.components(separatedBy: "\n")
            }
            if bodyEnded { return nil }
            guard try await receive(until: deadline) else { return nil }
        }
    }

    /// The `data:` of the next event that has one, skipping comments and fields such as `retry:`.
    package func nextData(timeout: Duration = .seconds(60)) async throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while let block = try await nextEvent(timeout: deadline - ContinuousClock.now) {
            let data = block.filter { $0.hasPrefix("data:") }.map { $0.dropFirst(5).drop { $0 == " " } }
            if !data.isEmpty { return data.joined(separator: "\n") }
        }
        return nil
    }

    /// Waits until the server closes the connection, keeping what arrives; returns the bytes not yet read as a
    /// response. Throws if it stays open past `timeout`.
    @discardableResult
    package func waitForClose(timeout: Duration = .seconds(10)) async throws -> Data {
        let deadline = ContinuousClock.now + timeout
        while try await receive(until: deadline) {}
        return Data(unread)
    }

    /// Waits until the raw bytes not yet read hold `text` `occurrences` times (a streamed body has no end to wait
    /// for). For connections whose head is not read with ``readHead(timeout:)``.
    package func waitFor(_ text: String, occurrences: Int = 1, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        let needle = Array(text.utf8)
        while unread.ranges(of: needle).count < occurrences {
            guard try await receive(until: deadline) else {
                throw LoopbackConnectionError(
                    "closed before \(occurrences) × \(text); got \(String(decoding: unread, as: UTF8.self))"
                )
            }
        }
    }

    /// Waits for bytes and decodes what it can of a body; returns `false` once the server has closed the connection.
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
                    if contentLength == nil && !chunked { bodyEnded = true }
                    return false
                }
                unread.append(contentsOf: buffer[..<count])
                decode()
                return true
            }
            guard ContinuousClock.now < deadline else {
                throw LoopbackConnectionError("timed out waiting for the server")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Moves what has arrived of the current body, de-chunked, into `decodedBody`; does nothing between responses.
    private func decode() {
        if let length = contentLength {
            let take = min(length - decodedBody.count, unread.count)
            decodedBody.append(contentsOf: unread[..<take])
            unread.removeFirst(take)
            if decodedBody.count == length {
                bodyEnded = true
                contentLength = nil
            }
            return
        }
        guard chunked else { return }
        let lineEnd = Array("\r\n".utf8)
        while !bodyEnded, let sizeEnd = unread.firstRange(of: lineEnd) {
            let sizeText = String(decoding: unread[..<sizeEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else { return }
            if size == 0 {
                // The last chunk, then the (empty) trailer's CRLF.
                guard unread.count >= sizeEnd.upperBound + 2 else { return }
                unread.removeSubrange(..<(sizeEnd.upperBound + 2))
                bodyEnded = true
                chunked = false
                return
            }
            let start = sizeEnd.upperBound
            guard unread.count >= start + size + 2 else { return }
            decodedBody.append(contentsOf: unread[start..<start + size])
            unread.removeSubrange(..<(start + size + 2))
        }
    }
}

#if canImport(Glibc)
    private let systemSend = Glibc.send
#else
    private let systemSend = Darwin.send
#endif

/// What went wrong on a loopback connection.
package struct LoopbackConnectionError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
