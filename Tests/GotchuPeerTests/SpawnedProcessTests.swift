import Foundation
import GotchuTesting
import Testing

@Suite("The tests' child processes", .timeLimit(.minutes(10)))
struct SpawnedProcessTests {
    @Test("A child holds only its standard streams, unblocked signals at their defaults, and its exit status is read")
    func cleanChild() throws {
        // The shell's own descriptors, then the mask and ignored set of a program it starts (a waiting shell blocks
        // signals of its own).
        let script = "ls /proc/$$/fd; grep -E '^Sig(Blk|Ign):' /proc/self/status; echo oops >&2; exit 3"
        let child = try SpawnedProcess(executable: "/bin/sh", arguments: ["-c", script], output: .pipe, error: .pipe)
        let output = String(decoding: child.output?.readToEnd() ?? Data(), as: UTF8.self)
        let errors = String(decoding: child.error?.readToEnd() ?? Data(), as: UTF8.self)
        #expect(child.waitUntilExit() == 3)
        let lines = output.split(separator: "\n")
        // The shell's descriptors: its three streams and none of this process's (sockets, pipes, databases).
        #expect(lines.filter { Int($0) != nil } == ["0", "1", "2"])
        // The standard signals (1–31); the C library keeps its own internal ones to itself.
        func signals(_ field: String) -> UInt64? {
            lines.first { $0.hasPrefix("\(field):") }.flatMap {
                UInt64($0.split(separator: "\t").last ?? "", radix: 16)
            }
            .map { $0 & 0x7fff_ffff }
        }
        #expect(signals("SigBlk") == 0)
        #expect(signals("SigIgn") == 0)
        #expect(errors == "oops\n")
    }

    @Test("A child's input is a pipe that ends when closed, and a signal that ends it is reported by number")
    func inputAndSignal() async throws {
        let cat = try SpawnedProcess(executable: "/bin/cat", arguments: [], input: .pipe, output: .pipe)
        try cat.input?.write(Data("hello".utf8))
        cat.input?.close()
        #expect(cat.output?.readToEnd() == Data("hello".utf8))
        #expect(try await cat.exit(timeout: .seconds(60)) == 0)

        let sleeper = try SpawnedProcess(executable: "/bin/sleep", arguments: ["600"])
        #expect(sleeper.isRunning)
        sleeper.signal(SIGTERM)
        #expect(try await sleeper.exit(timeout: .seconds(60)) == SIGTERM)
        #expect(!sleeper.isRunning)
    }

    @Test("Standard output and standard error sent to one file both land in it, in order")
    func sharedLog() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let log = directory.url.appendingPathComponent("log")
        let child = try SpawnedProcess(
            executable: "/bin/sh",
            arguments: ["-c", "echo one; echo two >&2; echo three"],
            output: .file(log),
            error: .file(log)
        )
        #expect(child.waitUntilExit() == 0)
        #expect(try String(contentsOf: log, encoding: .utf8) == "one\ntwo\nthree\n")
    }
}
