import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A minimal HTTP/1.1 client on a loopback TCP socket, enough to read an endless `text/event-stream` response
/// event by event (URLSession on Linux cannot stream a response body). Reads poll without blocking a thread.
final class HTTPTestConnection {
    /// A response's status line and headers (names in lower case).
    struct Head {
        var status: Int
        var headers: [String: String]
    }

    private var socketDescriptor: Int32
    private var unread: [UInt8] = []
    private var chunked = false
    private var contentLength: Int?
    private var decodedBody: [UInt8] = []
    private var bodyEnded = false
    private var closedByServer = false

    /// Connects to `127.0.0.1:port`.
    init(port: Int) throws {
        #if canImport(Glibc)
            socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            socketDescriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socketDescriptor >= 0 else { throw HTTPTestError("socket() failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                connect(socketDescriptor, address, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(socketDescriptor)
            throw HTTPTestError("connect to port \(port) failed: errno \(errno)")
        }
    }

    deinit { disconnect() }

    /// Closes the connection, as a browser tab that goes away.
    func disconnect() {
        guard socketDescriptor >= 0 else { return }
        close(socketDescriptor)
        socketDescriptor = -1
    }

    /// Sends a request without a body.
    func send(_ method: String, _ path: String, headers: [String: String] = [:]) throws {
        var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        var bytes = Array(request.utf8)
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { systemSend(socketDescriptor, $0.baseAddress, $0.count, 0) }
            guard sent > 0 else { throw HTTPTestError("send failed: errno \(errno)") }
            bytes.removeFirst(sent)
        }
    }

    /// Reads the response's status line and headers.
    func readHead(timeout: Duration = .seconds(60)) async throws -> Head {
        let deadline = ContinuousClock.now + timeout
        let separator = Array("\r\n\r\n".utf8)
        while unread.firstRange(of: separator) == nil {
            guard try await receive(until: deadline) else { throw HTTPTestError("connection closed before a head") }
        }
        let end = unread.firstRange(of: separator)!
        let text = String(decoding: unread[..<end.lowerBound], as: UTF8.self)
        unread.removeSubrange(..<end.upperBound)
        var lines = text.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw HTTPTestError("bad status line in \(text)")
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
        decode()
        return Head(status: status, headers: headers)
    }

    /// Reads the rest of a finite body.
    func readBody(timeout: Duration = .seconds(60)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while !bodyEnded {
            guard try await receive(until: deadline) else { break }
        }
        guard bodyEnded else { throw HTTPTestError("the body ended early") }
        return String(decoding: decodedBody, as: UTF8.self)
    }

    /// The next server-sent event block (the lines up to a blank line, comments included), or `nil` once the
    /// response has ended.
    func nextEvent(timeout: Duration = .seconds(60)) async throws -> [String]? {
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
    func nextData(timeout: Duration = .seconds(60)) async throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while let block = try await nextEvent(timeout: deadline - ContinuousClock.now) {
            let data = block.filter { $0.hasPrefix("data:") }.map { $0.dropFirst(5).drop { $0 == " " } }
            if !data.isEmpty { return data.joined(separator: "\n") }
        }
        return nil
    }

    /// Waits for bytes and adds them to the body; returns `false` when the server closed the connection.
    private func receive(until deadline: ContinuousClock.Instant) async throws -> Bool {
        guard !closedByServer else { return false }
        while true {
            var descriptor = pollfd(fd: socketDescriptor, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, 0) > 0 {
                var buffer = [UInt8](repeating: 0, count: 16 * 1024)
                let count = buffer.withUnsafeMutableBytes { recv(socketDescriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else {
                    closedByServer = true
                    if contentLength == nil && !chunked { bodyEnded = true }
                    return false
                }
                unread.append(contentsOf: buffer[..<count])
                decode()
                return true
            }
            guard ContinuousClock.now < deadline else { throw HTTPTestError("timed out waiting for the server") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Moves what has arrived of the body, de-chunked, into `decodedBody`. Does nothing before the head is read.
    private func decode() {
        if let length = contentLength {
            let take = min(length - decodedBody.count, unread.count)
            decodedBody.append(contentsOf: unread[..<take])
            unread.removeFirst(take)
            bodyEnded = decodedBody.count == length
            return
        }
        guard chunked else { return }
        let lineEnd = Array("\r\n".utf8)
        while !bodyEnded, let sizeEnd = unread.firstRange(of: lineEnd) {
            let sizeText = String(decoding: unread[..<sizeEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else { return }
            if size == 0 {
                bodyEnded = true
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

/// What went wrong talking to the test server.
struct HTTPTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
