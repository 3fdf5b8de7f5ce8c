package import Foundation

/// A program the tests start, read from and stop. Its standard output is read line by line; standard error is
/// collected whole. Its timeouts only bound a hang: they are far longer than anything should take on a busy machine.
package final class RunningCommand: @unchecked Sendable {
    // Unchecked: the mutable buffers are guarded by `lock`.
    private let process: SpawnedProcess
    private let lock = NSLock()
    private var outputLines: [String] = []
    private var partialLine = Data()
    private var errorData = Data()
    /// Pipes whose reader has not reached their end yet.
    private var openPipes = 2

    /// Starts `executable` with `arguments` and extra `environment` variables; `input`, if given, is its standard
    /// input (then closed), else it reads an empty one.
    package init(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String] = [:],
        input: Data? = nil
    ) throws {
        process = try SpawnedProcess(
            executable: executable.path,
            arguments: arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            input: input == nil ? .null : .pipe,
            output: .pipe,
            error: .pipe
        )
        if let end = process.input, let input {
            // Small inputs fit the pipe's buffer; closing the write end gives the program its end of file.
            try end.write(input)
            end.close()
        }
        // One reader thread per pipe, each to the pipe's end: after the exit, waiting for both ends is all it takes
        // to have every byte, with no handler still holding a chunk it has read but not yet stored.
        Self.read(process.output) { [weak self] data in
            self?.append(output: data)
        } atEnd: { [weak self] in
            self?.pipeEnded(flushingOutput: true)
        }
        Self.read(process.error) { [weak self] data in
            guard let self else { return }
            self.lock.withLock { self.errorData.append(data) }
        } atEnd: { [weak self] in
            self?.pipeEnded(flushingOutput: false)
        }
    }

    /// The process id.
    package var pid: Int32 { process.pid }

    /// Whether it is still running.
    package var isRunning: Bool { process.isRunning }

    /// Complete lines written to standard output so far.
    package var lines: [String] { lock.withLock { outputLines } }

    /// Everything written to standard error so far.
    package var standardError: String { lock.withLock { String(decoding: errorData, as: UTF8.self) } }

    /// Waits until a line of standard output satisfies `predicate`, for at most `timeout`.
    package func waitForLine(timeout: Duration = .seconds(60), where predicate: (String) -> Bool) async throws -> String
    {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = lines.first(where: predicate) { return line }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        await waitForPipes()
        if let line = lines.first(where: predicate) { return line }
        throw RunningCommandError("no matching line; stdout: \(lines.joined(separator: "\n")) stderr: \(standardError)")
    }

    /// Sends `signal` and waits for the exit, for at most `timeout`; returns the exit status (or signal number).
    @discardableResult
    package func stop(signal: Int32 = SIGTERM, timeout: Duration = .seconds(30)) async throws -> Int32 {
        process.signal(signal)
        return try await waitForExit(timeout: timeout)
    }

    /// Kills the process at once (SIGKILL) without waiting.
    package func stopNow() throws {
        process.signal(SIGKILL)
    }

    /// Waits for the process to exit on its own, and for what it wrote to be read; returns its exit status.
    package func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        let status: Int32
        do {
            status = try await process.exit(timeout: timeout)
        } catch {
            process.signal(SIGTERM)
            throw RunningCommandError("did not exit within \(timeout)")
        }
        await waitForPipes()
        return status
    }

    /// Waits until both readers reached their pipe's end. A process the command started and left running may hold
    /// a pipe open; the wait gives up after a while then, with what was read so far.
    private func waitForPipes() async {
        let deadline = ContinuousClock.now + .seconds(30)
        while lock.withLock({ openPipes > 0 }) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    private func pipeEnded(flushingOutput: Bool) {
        lock.withLock {
            if flushingOutput && !partialLine.isEmpty {
                outputLines.append(String(decoding: partialLine, as: UTF8.self))
                partialLine = Data()
            }
            openPipes -= 1
        }
    }

    /// Reads `end` on a thread of its own until its end, handing each chunk to `chunk`.
    private static func read(
        _ end: PipeEnd?,
        chunk: @escaping @Sendable (Data) -> Void,
        atEnd: @escaping @Sendable () -> Void
    ) {
        guard let end else { return atEnd() }
        Thread.detachNewThread {
            while true {
                let data = end.read()
                if data.isEmpty { break }
                chunk(data)
            }
            atEnd()
        }
    }

    private func append(output data: Data) {
        lock.withLock {
            partialLine.append(data)
            while let newline = partialLine.firstIndex(of: UInt8(ascii: "\n")) {
                outputLines.append(String(decoding: partialLine[partialLine.startIndex..<newline], as: UTF8.self))
                partialLine.removeSubrange(partialLine.startIndex...newline)
            }
        }
    }
}

/// A test helper's failure, with what it saw.
package struct RunningCommandError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Locates the products of this package's build.
package enum BuiltProducts {
    /// The `gotchu` executable beside the test bundle.
    package static var gotchu: URL {
        get throws { try executable("gotchu") }
    }

    /// The kiosk-only `gotchu-kiosk` executable beside the test bundle.
    package static var gotchuKiosk: URL {
        get throws { try executable("gotchu-kiosk") }
    }

    /// The executable product `name`, built beside the test bundle.
    package static func executable(_ name: String) throws -> URL {
        var directory = Bundle.main.bundleURL
        for _ in 0..<3 {
            let candidate = directory.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue
            {
                return candidate
            }
            directory = directory.deletingLastPathComponent()
        }
        throw RunningCommandError(
            "the \(name) executable was not built next to the tests (\(Bundle.main.bundleURL.path))"
        )
    }
}

/// A fresh temporary directory, deleted by `remove()`.
package struct TemporaryDirectory: Sendable {
    /// Its location.
    package let url: URL

    /// Creates a fresh directory under the system's temporary directory.
    package init(prefix: String = "gotchu") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Deletes the directory and everything in it.
    package func remove() { try? FileManager.default.removeItem(at: url) }
}
