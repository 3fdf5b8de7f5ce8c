import Foundation
import GotchuLedgerPostgres
import GotchuLedgerServer
import Logging
import PostgresNIO
import ServiceLifecycle
import Testing

/// The PostgreSQL server the tests use, named by `GOTCHU_TEST_POSTGRES_URL` (a role that may create databases).
/// Each test gets its own database, so tests stay independent and may run in parallel.
enum TestPostgres {
    static let variable = "GOTCHU_TEST_POSTGRES_URL"

    /// Whether the variable is set; when it is, the PostgreSQL tests run (and fail if it is not a usable URL).
    static let isConfigured = ProcessInfo.processInfo.environment[variable] != nil

    /// The server, or `nil` when the variable is unset or not a URL.
    static let server: PostgresURL? = ProcessInfo.processInfo.environment[variable].flatMap { try? PostgresURL($0) }

    /// Why PostgreSQL tests are skipped, for `.enabled(if:)`.
    static let skipReason: Comment =
        "\(variable) is unset: PostgreSQL tests skipped (run them under scripts/with-postgres)"

    /// Creates a fresh database, runs `body` with its URL, and drops the database afterwards.
    static func withDatabase<T: Sendable>(_ body: @Sendable (PostgresURL) async throws -> T) async throws -> T {
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
    static func withClient<T: Sendable>(
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
struct TestPostgresError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `services` while `body` runs, then cancels them.
func withServices<T: Sendable>(
    _ services: [any Service],
    _ body: @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        for service in services { tasks.addTask { try await service.run() } }
        defer { tasks.cancelAll() }
        return try await body()
    }
}

@Suite("PostgreSQL test server")
struct TestPostgresTests {
    @Test("PostgreSQL is configured", .enabled(if: TestPostgres.isConfigured, TestPostgres.skipReason))
    func configured() async throws {
        let text = ProcessInfo.processInfo.environment[TestPostgres.variable] ?? ""
        let server = try #require(TestPostgres.server, "\(TestPostgres.variable)='\(text)' is not a postgres:// URL")
        let version = try await TestPostgres.withClient(server) { client in
            var version = ""
            for try await text in try await client.query("SHOW server_version_num").decode(String.self) {
                version = text
            }
            return version
        }
        #expect((Int(version) ?? 0) >= 130_000, "DROP DATABASE … WITH (FORCE) needs PostgreSQL 13 or later")
    }
}
