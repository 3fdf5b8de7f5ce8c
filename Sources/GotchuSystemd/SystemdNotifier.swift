import Foundation
package import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Tells systemd how the service is doing, as `sd_notify(3)` does, without libsystemd: one datagram per message to
/// the AF_UNIX socket named by `NOTIFY_SOCKET`.
///
/// Without `NOTIFY_SOCKET` (not started by systemd, or not `Type=notify`) every call does nothing. A socket that is
/// gone or refuses the message is logged and otherwise ignored: telling systemd is never worth failing the service.
package struct SystemdNotifier: Sendable {
    /// The socket's address as `NOTIFY_SOCKET` gives it: a path, or `@name` in the abstract namespace.
    package let socket: String?
    /// How often systemd expects `WATCHDOG=1` at the latest (`WATCHDOG_USEC`); `nil` when the watchdog is off, is
    /// meant for another process (`WATCHDOG_PID`), or there is no socket to send to.
    package let watchdogInterval: Duration?
    private let logger: Logger

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from `environment`.
    ///
    /// - Parameters:
    ///   - environment: The process environment.
    ///   - processID: This process's id, compared with `WATCHDOG_PID`.
    ///   - logger: Where failures to notify are logged.
    package init(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        processID: Int32 = ProcessInfo.processInfo.processIdentifier,
        logger: Logger = Logger(label: "gotchu.systemd")
    ) {
        self.logger = logger
        let socket = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        self.socket = socket
        self.watchdogInterval = socket == nil ? nil : Self.watchdogInterval(environment, processID: processID)
    }

    /// Whether there is a socket to notify.
    package var isEnabled: Bool { socket != nil }

    /// `READY=1`: start-up is finished; systemd starts the units ordered after this one. `status` goes with it.
    package func ready(status: String? = nil) {
        send(["READY=1"] + (status.map { ["STATUS=\(Self.oneLine($0))"] } ?? []))
    }

    /// `STATUS=…`: one line for `systemctl status`.
    package func status(_ text: String) {
        send(["STATUS=\(Self.oneLine(text))"])
    }

    /// `STOPPING=1`: shutdown has begun.
    package func stopping(status: String? = nil) {
        send(["STOPPING=1"] + (status.map { ["STATUS=\(Self.oneLine($0))"] } ?? []))
    }

    /// `WATCHDOG=1`: the service is alive; systemd restarts it when these stop for longer than ``watchdogInterval``.
    package func watchdog() {
        send(["WATCHDOG=1"])
    }

    /// Sends `assignments` (`KEY=value`, one per line) in one datagram; logs and returns `false` when that fails.
    @discardableResult
    package func send(_ assignments: [String]) -> Bool {
        guard let socket else { return true }
        do {
            try Self.sendDatagram(assignments.joined(separator: "\n"), to: socket)
            return true
        } catch {
            logger.warning(
                "cannot notify systemd",
                metadata: [
                    "socket": "\(socket)", "message": "\(assignments.joined(separator: " "))", "error": "\(error)",
                ]
            )
            return false
        }
    }

    private static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }

    private static func watchdogInterval(_ environment: [String: String], processID: Int32) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0,
            microseconds <= UInt64(Int64.max)
        else { return nil }
        // As sd_watchdog_enabled(3): a WATCHDOG_PID that is not ours means the watchdog is another process's.
        if let pid = environment["WATCHDOG_PID"] {
            guard let owner = Int32(pid), owner == processID else { return nil }
        }
        return .microseconds(Int64(microseconds))
    }

    /// Why a message did not reach systemd.
    struct SendError: Error, CustomStringConvertible {
        var description: String
    }

    /// A fresh socket per message, as sd_notify does, so nothing is kept open and a restarted systemd is found.
    private static func sendDatagram(_ message: String, to socketAddress: String) throws {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketAddress.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        if pathBytes.first == UInt8(ascii: "@") {
            // The abstract namespace: a leading NUL, and the name is not NUL-terminated.
            pathBytes[0] = 0
            guard pathBytes.count <= capacity else { throw SendError(description: "socket name too long") }
        } else {
            guard pathBytes.first == UInt8(ascii: "/") else {
                throw SendError(description: "unsupported NOTIFY_SOCKET \(socketAddress)")
            }
            guard pathBytes.count < capacity, !pathBytes.contains(0) else {
                throw SendError(description: "socket path too long")
            }
            pathBytes.append(0)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathBytes.count)

        #if canImport(Glibc)
            let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let descriptor = Darwin.socket(AF_UNIX, SOCK_DGRAM, 0)
        #endif
        guard descriptor >= 0 else { throw SendError(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }

        #if canImport(Glibc)
            // A datagram socket whose peer is gone must not raise SIGPIPE.
            let flags = Int32(MSG_NOSIGNAL)
        #else
            let flags: Int32 = 0
        #endif
        let bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bytes.withUnsafeBytes { body in
                    sendto(descriptor, body.baseAddress, body.count, flags, socketAddress, length)
                }
            }
        }
        guard sent == bytes.count else {
            throw SendError(description: "sendto: \(sent < 0 ? String(cString: strerror(errno)) : "short write")")
        }
    }
}
