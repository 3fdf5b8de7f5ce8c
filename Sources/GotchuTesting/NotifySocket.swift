import Foundation

#if canImport(Glibc)
    import Glibc
#endif

#if os(Linux)
    /// A datagram socket bound where systemd's would be, reading what the notifier sends.
    package final class NotifySocket: @unchecked Sendable {
        /// The value for `NOTIFY_SOCKET`.
        package let address: String
        private let descriptor: Int32
        private let directory: URL?

        /// Binds a socket file in a fresh temporary directory, or `@name` in the abstract namespace.
        package init(abstract: Bool = false) throws {
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            var pathBytes: [UInt8]
            if abstract {
                address = "@gotchu-test-\(UUID().uuidString)"
                directory = nil
                pathBytes = Array(address.utf8)
                pathBytes[0] = 0
            } else {
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "notify-\(UUID().uuidString)"
                )
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                self.directory = directory
                address = directory.appendingPathComponent("notify").path
                pathBytes = Array(address.utf8) + [0]
            }
            var socketAddress = sockaddr_un()
            socketAddress.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: pathBytes) }
            let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathBytes.count)
            let bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
            }
            guard bound == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        }

        deinit {
            close(descriptor)
            if let directory { try? FileManager.default.removeItem(at: directory) }
        }

        /// The next datagram, or `nil` after the timeout (which only bounds a hang; `.zero` looks once). Polls, so
        /// that no thread of the test's pool is blocked.
        package func receive(timeout: Duration = .seconds(60)) async -> String? {
            let deadline = ContinuousClock.now + timeout
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count >= 0 { return String(decoding: buffer[..<count], as: UTF8.self) }
                guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else {
                    return nil
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
    }
#endif
