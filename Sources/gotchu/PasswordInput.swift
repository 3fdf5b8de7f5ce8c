import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reading a password: from standard input (for scripts), or typed at the terminal with echo off.
enum PasswordInput {
    /// The first line of standard input, without its line ending; at most 4 KiB are read.
    static func fromStandardInput() throws -> String {
        var bytes: [UInt8] = []
        while bytes.count <= 4096 {
            var byte: UInt8 = 0
            let count = read(STDIN_FILENO, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1, byte != UInt8(ascii: "\n") else { break }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard bytes.count <= 4096 else { throw CLIError("the password on standard input is too long") }
        guard !bytes.isEmpty else { throw CLIError("no password on standard input") }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CLIError("the password on standard input is not UTF-8")
        }
        return text
    }

    /// Asks for a password on the controlling terminal without echoing it.
    static func ask(_ prompt: String) throws -> String {
        let tty = open("/dev/tty", O_RDWR)
        guard tty >= 0 else {
            throw CLIError(
                "no terminal to ask for the password on; pass --password-stdin and give it on standard input"
            )
        }
        defer { close(tty) }
        var original = termios()
        guard tcgetattr(tty, &original) == 0 else { throw CLIError("cannot read the terminal's settings") }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ECHONL)
        _ = prompt.withCString { write(tty, $0, strlen($0)) }
        guard tcsetattr(tty, TCSAFLUSH, &silent) == 0 else { throw CLIError("cannot turn the terminal's echo off") }
        defer { _ = tcsetattr(tty, TCSAFLUSH, &original) }
        var bytes: [UInt8] = []
        while bytes.count <= 4096 {
            var byte: UInt8 = 0
            let count = read(tty, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1, byte != UInt8(ascii: "\n") else { break }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard let text = String(validating: bytes, as: UTF8.self), !text.isEmpty else {
            throw CLIError("no password given")
        }
        return text
    }
}
