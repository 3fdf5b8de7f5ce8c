package import Foundation
import Synchronization

/// A child process the tests start with `posix_spawn`.
///
/// Foundation's `Process.run()` on Linux reads past the end of `readdir`'s buffer while it looks for the highest
/// open descriptor, and crashes the test process now and then (fixed in later Foundation releases); and
/// `FileHandle.availableData` traps on `EINTR`. So the tests start and read their children here instead: the child
/// gets default signal handling and an empty signal mask (the test runner's threads block some signals, which a
/// child would otherwise inherit), only the descriptors named here (every other one is closed), and its pipes are
/// read with plain `read(2)`.
package final class SpawnedProcess: Sendable {
    /// Where one of the child's standard streams goes.
    package enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// A pipe whose other end this process holds (``input``, ``output``, ``error``).
        case pipe
        /// A file, created or truncated; standard output and standard error may name the same one.
        case file(URL)
    }

    /// The process id.
    package let pid: pid_t
    /// The write end of the child's standard input, when it is `.pipe`.
    package let input: PipeEnd?
    /// The read end of the child's standard output, when it is `.pipe`.
    package let output: PipeEnd?
    /// The read end of the child's standard error, when it is `.pipe`.
    package let error: PipeEnd?
    /// The raw wait status, once the child has been reaped.
    private let waitStatus = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments`, the environment `environment` (this process's when `nil`), in
    /// `directory` (this process's when `nil`).
    package init(
        executable: String,
        arguments: [String],
        environment: [String: String]? = nil,
        directory: URL? = nil,
        input: Stream = .null,
        output: Stream = .null,
        error: Stream = .null
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        var ours: [Int32] = []  // this process's ends, kept
        var theirs: [Int32] = []  // the child's ends, closed here once it has started
        var failed = true
        defer {
            for descriptor in theirs { close(descriptor) }
            if failed { for descriptor in ours { close(descriptor) } }
        }
        var ends: [PipeEnd?] = []
        var files: [String: Int32] = [:]
        for (target, stream) in [(Int32(0), input), (1, output), (2, error)] {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
                ends.append(nil)
            case .file(let url):
                // One open file description for both streams when they name one file, so they share its offset.
                let descriptor: Int32
                if let opened = files[url.path] {
                    descriptor = opened
                } else {
                    descriptor = open(url.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                    guard descriptor >= 0 else { throw SpawnError("cannot open \(url.path): \(Self.errnoText())") }
                    theirs.append(descriptor)
                    files[url.path] = descriptor
                }
                posix_spawn_file_actions_adddup2(&actions, descriptor, target)
                ends.append(nil)
            case .pipe:
                var pair: [Int32] = [-1, -1]
                // Close-on-exec (glibc's pipe2 is not declared to Swift): a child started meanwhile by another thread
                // closes them anyway (every child here closes all but its standard streams).
                guard pipe(&pair) == 0 else { throw SpawnError("pipe: \(Self.errnoText())") }
                for descriptor in pair { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
                let (child, parent) = target == 0 ? (pair[0], pair[1]) : (pair[1], pair[0])
                theirs.append(child)
                ours.append(parent)
                posix_spawn_file_actions_adddup2(&actions, child, target)
                ends.append(PipeEnd(descriptor: parent))
            }
        }
        if let directory { try Self.addChdir(&actions, directory.path) }
        try Self.addCloseFrom(&actions, 3)

        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let variables = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        var child: pid_t = 0
        let result = Self.withCStrings([executable] + arguments) { argv in
            Self.withCStrings(variables) { envp in posix_spawn(&child, executable, &actions, &attributes, argv, envp) }
        }
        guard result == 0 else { throw SpawnError("cannot start \(executable): \(String(cString: strerror(result)))") }
        failed = false
        pid = child
        self.input = ends[0]
        self.output = ends[1]
        self.error = ends[2]
    }

    deinit {
        guard waitStatus.withLock({ $0 == nil }) else { return }
        kill(pid, SIGKILL)
        // Reaped on a thread of its own: a killed process still finishing a write to disk may take a while to go,
        // and the last reference may be dropped on one of the few threads every test's tasks run on.
        let pid = self.pid
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        }
    }

    /// Whether the child is still running (reaping it if it has exited).
    package var isRunning: Bool { reap(blocking: false) == nil }

    /// The exit status, or the number of the signal that ended it; `nil` while it runs.
    package var terminationStatus: Int32? { reap(blocking: false).map(Self.decode) }

    /// Sends `signal` to the child, unless it has been reaped (its pid may then be another process's).
    package func signal(_ number: Int32) {
        waitStatus.withLock { status in if status == nil { _ = kill(pid, number) } }
    }

    /// Blocks until the child exits; returns its exit status or the number of the signal that ended it.
    @discardableResult
    package func waitUntilExit() -> Int32 { Self.decode(reap(blocking: true) ?? 0) }

    /// Waits for the exit, for at most `timeout` (which only bounds a hang); returns as ``waitUntilExit()``.
    package func exit(timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = terminationStatus { return status }
            guard ContinuousClock.now < deadline else { throw SpawnError("pid \(pid) did not exit within \(timeout)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The raw wait status if the child has exited, reaping it once. The wait itself holds no lock, so a blocking
    /// wait never holds up ``signal(_:)`` from another thread.
    private func reap(blocking: Bool) -> Int32? {
        if let known = waitStatus.withLock({ $0 }) { return known }
        var status: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(pid, &status, blocking ? 0 : WNOHANG) } while result == -1 && errno == EINTR
        return waitStatus.withLock { known in
            if result == pid { known = status }
            // -1 (ECHILD): another wait reaped it, and stored what it learnt; 0: still running.
            return known
        }
    }

    /// An exit code, or a signal number, from a raw wait status.
    private static func decode(_ status: Int32) -> Int32 {
        status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }

    private static func withCStrings<T>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> T) -> T {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        return body(pointers)
    }

    // glibc has these since 2.29 and 2.34, but does not declare them to Swift (they are GNU extensions).
    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>)
        -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    private static func addChdir(_ actions: inout posix_spawn_file_actions_t, _ path: String) throws {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else {
            throw SpawnError("this C library cannot start a child in another directory")
        }
        _ = unsafeBitCast(symbol, to: AddChdir.self)(&actions, path)
    }

    private static func addCloseFrom(_ actions: inout posix_spawn_file_actions_t, _ lowest: Int32) throws {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else {
            throw SpawnError("this C library cannot close a child's inherited descriptors (glibc 2.34 or later can)")
        }
        _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, lowest)
    }
}

/// This process's end of a pipe to a child, closed when released.
package final class PipeEnd: Sendable {
    private let state: Mutex<Int32>

    init(descriptor: Int32) { state = Mutex(descriptor) }

    deinit { state.withLock { if $0 >= 0 { Glibc.close($0) } } }

    /// Writes all of `data` (blocking while the pipe is full).
    package func write(_ data: Data) throws {
        try state.withLock { descriptor in
            var rest = data[...]
            while !rest.isEmpty {
                let written = rest.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw SpawnError("write to a child: \(String(cString: strerror(errno)))")
                }
                rest = rest.dropFirst(written)
            }
        }
    }

    /// The next bytes, blocking until some arrive; empty at the end of the stream.
    package func read() -> Data {
        let descriptor = state.withLock { $0 }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count >= 0 { return Data(buffer[..<count]) }
            if errno != EINTR { return Data() }
        }
    }

    /// Everything up to the end of the stream.
    package func readToEnd() -> Data {
        var all = Data()
        while true {
            let chunk = read()
            if chunk.isEmpty { return all }
            all.append(chunk)
        }
    }

    /// Closes this end now (a child reading it then sees the end of its input).
    package func close() {
        state.withLock { descriptor in
            if descriptor >= 0 { Glibc.close(descriptor) }
            descriptor = -1
        }
    }
}

/// A child process could not be started or spoken to.
package struct SpawnError: Error, CustomStringConvertible {
    /// What failed.
    package let description: String
    init(_ description: String) { self.description = description }
}
