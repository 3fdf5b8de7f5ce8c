package import Foundation

/// The `gotchu` executable run as the tests' users would: a development ledger server and CLI commands, each with
/// its own XDG directories under one temporary directory.
package struct GotchuProcesses: Sendable {
    /// The temporary directory holding every file of these processes.
    package let directory: TemporaryDirectory

    /// Creates a fresh set of directories.
    package init() throws {
        directory = try TemporaryDirectory(prefix: "gotchu-processes")
    }

    /// The environment of a user named `user`: its own config and state homes (tokens, journal).
    package func environment(user: String, extra: [String: String] = [:]) -> [String: String] {
        let home = directory.url.appendingPathComponent(user)
        return [
            "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
            "XDG_STATE_HOME": home.appendingPathComponent("state").path,
            "XDG_DATA_HOME": home.appendingPathComponent("data").path,
            "XDG_RUNTIME_DIR": directory.url.appendingPathComponent("runtime").path,
            // A server on PostgreSQL waits up to a minute for a connection, not the few seconds it would in
            // production: on a machine whose cores are busy a small pool may take that long, and a test that means
            // to see an outage says so itself.
            "GOTCHU_SERVER_DB_CONNECTION_WAIT": "60",
        ].merging(extra) { $1 }
    }

    /// Starts `gotchu server --dev` on a free loopback port, with `options` such as `--session-lifetime 2`, and
    /// returns it with its base URL.
    package func startServer(_ options: [String] = []) async throws -> (RunningCommand, String) {
        let database = directory.url.appendingPathComponent("ledger.sqlite").path
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--dev", "--port", "0", "--database", database] + options,
            environment: environment(user: "server")
        )
        let line = try await server.waitForLine { $0.hasPrefix("listening on ") }
        return (server, String(line.dropFirst("listening on ".count)))
    }

    /// Starts `gotchu ARGUMENTS` (or another of the package's executables) as `user`.
    package func start(
        _ arguments: [String],
        user: String,
        extra: [String: String] = [:],
        executable: URL? = nil
    ) throws -> RunningCommand {
        try RunningCommand(
            try executable ?? BuiltProducts.gotchu,
            arguments,
            environment: environment(user: user, extra: extra)
        )
    }

    /// Runs `gotchu ARGUMENTS` as `user` to its end; throws unless it exits 0.
    @discardableResult
    package func run(_ arguments: [String], user: String, timeout: Duration = .seconds(60)) async throws -> [String] {
        let command = try start(arguments, user: user)
        let status = try await command.waitForExit(timeout: timeout)
        guard status == 0 else {
            throw RunningCommandError(
                "gotchu \(arguments.joined(separator: " ")) exited \(status): \(command.standardError)"
                    + " (output: \(command.lines.joined(separator: " / ")))"
            )
        }
        return command.lines
    }

    /// Deletes the directories.
    package func remove() { directory.remove() }
}
