import Foundation
import GotchuLedgerClient

/// Where the CLI keeps its files, after the XDG base directory specification.
enum Paths {
    /// `$XDG_DATA_HOME/gotchu` (default `~/.local/share/gotchu`): the ledger database.
    static var dataHome: URL { base("XDG_DATA_HOME", ".local/share") }
    /// `$XDG_CONFIG_HOME/gotchu` (default `~/.config/gotchu`): the cached token.
    static var configHome: URL { base("XDG_CONFIG_HOME", ".config") }
    /// `$XDG_STATE_HOME/gotchu` (default `~/.local/state/gotchu`): the payer's journal.
    static var stateHome: URL { base("XDG_STATE_HOME", ".local/state") }

    private static func base(_ variable: String, _ fallback: String) -> URL {
        let environment = ProcessInfo.processInfo.environment
        let root: URL
        if let value = environment[variable], value.hasPrefix("/") {
            root = URL(fileURLWithPath: value)
        } else {
            root = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(fallback)
        }
        return root.appendingPathComponent("gotchu")
    }

    /// Creates `directory` (owner-only) if needed.
    static func ensure(_ directory: URL) throws {
        try FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
    }

    /// Writes `contents` to `file` readable by its owner only (0600), replacing it atomically.
    static func writePrivate(_ contents: Data, to file: URL) throws {
        do {
            try PrivateFile.write(contents, to: file)
        } catch {
            throw CLIError(error.description)
        }
    }
}

/// A failure the CLI reports as one clear sentence and exit status 1.
///
/// Its text often quotes a server (a problem's detail), so it is escaped through ``DisplayText`` like every line.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = Console.safe(description) }
}
