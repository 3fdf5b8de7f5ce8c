import Foundation
import GotchuLedgerTesting
import PostgresNIO
import Testing

@Suite("PostgreSQL test server", .timeLimit(.minutes(10)))
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
