package import Foundation

/// A setting a program cannot run with, said for the operator: which file, variable or flag, and what is wrong, such
/// as `GOTCHU_KIOSK_ROTATE_EVERY: must be a whole number of seconds, 0 (never) or 5 to 3600, got "x"`.
package struct SettingsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The whole message.
    package var description: String

    /// Creates an error with its message.
    package init(_ description: String) {
        self.description = description
    }
}

/// What is wrong with one value, before it is known where it came from: "must be …, got …".
package struct SettingProblem: Error, Hashable, Sendable {
    /// The text after the setting's name.
    package var text: String

    /// Creates a problem with its text.
    package init(_ text: String) {
        self.text = text
    }
}

/// Where a setting's value came from: the layers, highest precedence first.
package enum SettingOrigin: Hashable, Sendable {
    /// The command line.
    case flags
    /// The environment.
    case environment
    /// A config file.
    case file(URL)
    /// The built-in value.
    case defaults

    /// The setting as the operator wrote it in this layer: `--session-lifetime`, `GOTCHU_KIOSK_SESSION_LIFETIME`,
    /// `session_lifetime in /etc/gotchu/kiosk.toml` or `the default session_lifetime`.
    package func name(of declaration: SettingDeclaration) -> String {
        switch self {
        case .flags: declaration.flag
        case .environment: declaration.environmentVariable
        case .file(let url): "\(declaration.key) in \(url.path)"
        case .defaults: "the default \(declaration.key)"
        }
    }

    /// The directory a relative path is taken from: a config file's own directory, else the working directory.
    package var baseDirectory: URL {
        if case .file(let file) = self { return file.deletingLastPathComponent() }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
    }
}
