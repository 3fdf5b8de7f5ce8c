import Foundation

/// Standard output as the commands write it: with `write(2)`, so that a reader that goes away (`gotchu … | head`)
/// ends the command quietly with status 0, instead of `SIGPIPE` (status 141) or Foundation's trap on `EPIPE`.
enum StandardOutput {
    /// Makes a write to a pipe whose reader has gone fail with `EPIPE` instead of killing the process; called once,
    /// before any command runs.
    static func ignoreBrokenPipes() { signal(SIGPIPE, SIG_IGN) }

    /// Writes `text` whole; exits with status 0 once nobody reads standard output any more.
    static func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written >= 0 {
                bytes = bytes.dropFirst(written)
            } else if errno == EPIPE {
                exit(0)
            } else if errno != EINTR {
                return
            }
        }
    }
}
