package import Foundation
import Synchronization

/// A private `dbus-daemon` for tests: its own socket in a temporary directory, a permissive system-like policy (plus
/// optional `<include>`d files), stopped and cleaned up by ``stop()``.
package final class PrivateBus: Sendable {
    /// The bus address, `unix:path=…`.
    package let address: String
    /// The temporary directory holding the socket, the config and logs of processes started with ``launch(_:_:)``.
    package let directory: URL
    private let daemon: ChildProcess

    /// Whether `dbus-daemon` can be found on `PATH`.
    package static var isAvailable: Bool { ChildProcess.which("dbus-daemon") != nil }

    /// Starts a bus. Throws if `dbus-daemon` is missing or refuses the config (for example an invalid include).
    package static func start(includes: [URL] = []) async throws -> PrivateBus {
        guard let executable = ChildProcess.which("dbus-daemon") else { throw TestingError("dbus-daemon not found") }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("gotchu-bus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socket = directory.appendingPathComponent("bus").path
        let includeLines = includes.map { "  <include>\($0.path)</include>" }.joined(separator: "\n")
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
              </policy>
            \(includeLines)
            </busconfig>
            """
        let configURL = directory.appendingPathComponent("bus.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)
        let daemon = try ChildProcess.launch(
            executable: executable,
            arguments: ["--config-file=\(configURL.path)", "--nofork", "--nopidfile"],
            environment: [:],
            log: directory.appendingPathComponent("dbus-daemon.log")
        )
        let bus = PrivateBus(address: "unix:path=\(socket)", directory: directory, daemon: daemon)
        // The daemon is ready once its socket accepts connections; a daemon that exits early refused the config.
        // The deadline only bounds a hang: a busy machine may take seconds to start it.
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            // Checked once more past the deadline: a test process that was starved through it finds the bus up.
            let late = ContinuousClock.now >= deadline
            if Self.accepts(socket) {
                BusRegistry.add(bus)
                return bus
            }
            if late { break }
            if !daemon.isRunning {
                let log =
                    (try? String(contentsOf: directory.appendingPathComponent("dbus-daemon.log"), encoding: .utf8))
                bus.stop()
                throw TestingError("dbus-daemon exited: \(log ?? "")")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        bus.stop()
        throw TestingError("dbus-daemon did not create its socket")
    }

    /// Starts a bus, runs `body`, and stops the bus however `body` ends.
    package static func with<Result>(
        includes: [URL] = [],
        _ body: (PrivateBus) async throws -> Result
    ) async throws -> Result {
        let bus = try await start(includes: includes)
        do {
            let result = try await body(bus)
            bus.stop()
            return result
        } catch {
            bus.stop()
            throw error
        }
    }

    private init(address: String, directory: URL, daemon: ChildProcess) {
        self.address = address
        self.directory = directory
        self.daemon = daemon
    }

    /// Environment for a child that should see this bus as both its system and session bus.
    package var environment: [String: String] {
        ["DBUS_SYSTEM_BUS_ADDRESS": address, "DBUS_SESSION_BUS_ADDRESS": address]
    }

    /// Starts a program connected to this bus; its output goes to `<directory>/<name>.log`.
    package func launch(_ executable: String, _ arguments: [String], name: String) throws -> ChildProcess {
        try ChildProcess.launch(
            executable: executable,
            arguments: arguments,
            environment: environment,
            log: directory.appendingPathComponent("\(name).log")
        )
    }

    /// The log of a program started with ``launch(_:_:name:)``.
    package func log(of name: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent("\(name).log"), encoding: .utf8)) ?? ""
    }

    /// Kills the daemon and removes the directory.
    package func stop() {
        BusRegistry.remove(self)
        daemon.terminate()
        try? FileManager.default.removeItem(at: directory)
    }

    var pid: Int32 { daemon.pid }

    private static func accepts(_ socketPath: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(socketPath.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    /// One bus shared by the tests of a suite: started on first use, stopped when the test process exits.
    package actor Shared {
        private var bus: PrivateBus?

        package init() {}

        /// The bus, started if needed.
        package func get() async throws -> PrivateBus {
            if let bus { return bus }
            let started = try await PrivateBus.start()
            bus = started
            return started
        }
    }
}

/// Buses still running, so that an exiting test process leaves no daemon behind.
private enum BusRegistry {
    private static let buses = Mutex<[ObjectIdentifier: (pid: Int32, directory: String)]>([:])
    private static let installHandler: Void = {
        atexit {
            let remaining = BusRegistry.buses.withLock { $0 }
            for (_, bus) in remaining {
                kill(bus.pid, SIGKILL)
                try? FileManager.default.removeItem(atPath: bus.directory)
            }
        }
    }()

    static func add(_ bus: PrivateBus) {
        _ = installHandler
        buses.withLock { $0[ObjectIdentifier(bus)] = (bus.pid, bus.directory.path) }
    }

    static func remove(_ bus: PrivateBus) {
        _ = buses.withLock { $0.removeValue(forKey: ObjectIdentifier(bus)) }
    }
}

/// An error from a test helper.
package struct TestingError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
