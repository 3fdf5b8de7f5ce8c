import Foundation
package import GotchuLedgerPostgres
package import PostgresNIO
package import ServiceLifecycle
package import Testing

/// The PostgreSQL server the tests use, named by `GOTCHU_TEST_POSTGRES_URL` (a role that may create databases).
/// Each test gets its own database, so tests stay independent and may run in parallel.
package enum TestPostgres {
    package static let variable = "GOTCHU_TEST_POSTGRES_URL"

    /// How long a test's store waits for a database connection before refusing a request as unavailable: far longer
    /// than the server's few seconds, since a test that means to see an outage sets its own, and a pool of a few
    /// connections on a machine whose cores are busy may take seconds to hand one over.
    package static let connectionWait: Duration = .seconds(120)

    /// Whether the variable is set; when it is, the PostgreSQL tests run (and fail if it is not a usable URL).
    package static let isConfigured = ProcessInfo.processInfo.environment[variable] != nil

    /// The server, or `nil` when the variable is unset or not a URL.
    package static let server: PostgresURL? = ProcessInfo.processInfo.environment[variable].flatMap {
        try? PostgresURL($0)
    }

    /// Why PostgreSQL tests are skipped, for `.enabled(if:)`.
    package static let skipReason: Comment =
        "\(variable) is unset: PostgreSQL tests skipped (run them under scripts/with-postgres)"

    /// Creates a fresh database, runs `body` with its URL, and drops the database afterwards.
    package static func withDatabase<T: Sendable>(
        _ body: @Sendable (PostgresURL) async throws -> T
    ) async throws -> T {
        guard let server else { throw TestPostgresError(skipReason.rawValue) }
        let name = "gotchu_test_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
        try await withClient(server) { client in _ = try await client.query("CREATE DATABASE \(unescaped: name)") }
        do {
            let result = try await body(server.with(database: name))
            try await drop(name, server)
            return result
        } catch {
            try? await drop(name, server)
            throw error
        }
    }

    /// Runs `body` with a running client for `url`.
    package static func withClient<T: Sendable>(
        _ url: PostgresURL,
        _ body: @Sendable (PostgresClient) async throws -> T
    ) async throws -> T {
        var configuration = url.configuration
        configuration.options.maximumConnections = 4
        let client = PostgresClient(configuration: configuration)
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await client.run() }
            defer { tasks.cancelAll() }
            return try await body(client)
        }
    }

    private static func drop(_ name: String, _ server: PostgresURL) async throws {
        try await withClient(server) { client in
            _ = try await client.query("DROP DATABASE IF EXISTS \(unescaped: name) WITH (FORCE)")
        }
    }
}

/// A failure in the PostgreSQL test helpers.
package struct TestPostgresError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Runs `services` while `body` runs, then cancels them.
package func withServices<T: Sendable>(
    _ services: [any Service],
    _ body: @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        for service in services { tasks.addTask { try await service.run() } }
        defer { tasks.cancelAll() }
        return try await body()
    }
}
