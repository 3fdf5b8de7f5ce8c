package import Foundation

/// A child process started for a test, stopped by ``terminate()``.
package final class ChildProcess: Sendable {
    private let process: SpawnedProcess

    /// The process id.
    package var pid: Int32 { process.pid }
    /// Whether it is still running.
    package var isRunning: Bool { process.isRunning }

    private init(process: SpawnedProcess) { self.process = process }

    /// Starts `executable` with `arguments`, adding `environment` to this process's environment.
    package static func launch(
        executable: String,
        arguments: [String],
        environment: [String: String],
        log: URL
    ) throws -> ChildProcess {
        let process = try SpawnedProcess(
            executable: executable,
            arguments: arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
            output: .file(log),
            error: .file(log)
        )
        return ChildProcess(process: process)
    }

    /// Stops the process at once (SIGKILL: nothing a test's daemon leaves behind matters) and waits for it.
    package func terminate() {
        guard process.isRunning else { return }
        process.signal(SIGKILL)
        process.waitUntilExit()
    }

    /// Sends a signal (for example SIGKILL to simulate a crash).
    package func signal(_ number: Int32) { process.signal(number) }

    /// The full path of `name` found on `PATH`, or `nil`.
    package static func which(_ name: String) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

/// The Python used for fakes: `GOTCHU_PYTHON` if set, else `python3` on `PATH`.
package enum TestPython {
    /// The interpreter's path, or `nil` if none is found.
    package static var executable: String? {
        if let configured = ProcessInfo.processInfo.environment["GOTCHU_PYTHON"], !configured.isEmpty {
            return ChildProcess.which(configured)
        }
        // scripts/install-dependencies makes this virtual environment at the package's root.
        let venv = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".venv/bin/python").path
        if FileManager.default.isExecutableFile(atPath: venv) { return venv }
        return ChildProcess.which("python3")
    }

    /// Whether the interpreter can import every module in `modules`.
    package static func canImport(_ modules: [String]) -> Bool {
        succeeds(modules.map { "import \($0)" }.joined(separator: "; "))
    }

    /// Whether python-dbusmock is at least `major.minor` (0.38 brought the LE advertising API to bluez5).
    package static func hasDBusMock(atLeast major: Int, _ minor: Int) -> Bool {
        succeeds(
            "import sys, dbusmock; v = tuple(int(p) for p in dbusmock.__version__.split('.')[:2]); "
                + "sys.exit(0 if v >= (\(major), \(minor)) else 1)"
        )
    }

    /// Whether `code` runs and exits with status 0.
    package static func succeeds(_ code: String) -> Bool {
        guard let executable else { return false }
        guard let process = try? SpawnedProcess(executable: executable, arguments: ["-c", code]) else { return false }
        return process.waitUntilExit() == 0
    }

    /// What to install when a fake's modules are missing.
    package static let installHint =
        "install the Python fakes with scripts/install-dependencies (a .venv at the package root), "
        + "or point GOTCHU_PYTHON at a Python with python-dbusmock>=0.38, bluezoo and dbus-python"
}
