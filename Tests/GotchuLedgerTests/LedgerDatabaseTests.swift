import Foundation
import GotchuLedger
import GotchuLedgerStores
import GotchuLedgerTesting
import GotchuTesting
import Logging
import Testing

@Suite("Opening a ledger by name: an SQLite path or a postgres:// URL", .timeLimit(.minutes(10)))
struct LedgerDatabaseTests {
    @Test("A URL names PostgreSQL (checked, logged without its password), anything else a file")
    func names() throws {
        #expect(try LedgerDatabase("/var/lib/gotchu/ledger.sqlite") == .sqlite(path: "/var/lib/gotchu/ledger.sqlite"))
        let postgres = try LedgerDatabase("postgres://gotchu:secret@db.internal:6543/ledger")
        #expect(postgres.description == "postgres://gotchu@db.internal:6543/ledger")
        #expect(postgres.logMetadata["postgres"]?.description == "postgres://gotchu@db.internal:6543/ledger")
        #expect(throws: LedgerDatabaseError.self) { try LedgerDatabase("postgres://db.internal/ledger") }

        let data = URL(fileURLWithPath: "/data")
        #expect(
            postgres.companionFile(pathExtension: "jwt-secret", directory: data).path
                == "/data/postgres-db.internal-6543-ledger.jwt-secret"
        )
        #expect(
            try LedgerDatabase("/srv/ledger.sqlite").companionFile(pathExtension: "jwt-secret", directory: data).path
                == "/srv/ledger.sqlite.jwt-secret"
        )
    }

    @Test("A missing SQLite file is created with its directory, or refused when it may not be")
    func missingFile() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-ledger-database")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("new/ledger.sqlite").path
        #expect {
            _ = try LedgerDatabase.open(path, LedgerDatabase.Options(createsFile: false))
        } throws: { error in
            (error as? LedgerDatabaseError)?.missingFile == path
        }
        let opened = try LedgerDatabase.open(path)
        #expect(opened.services.isEmpty)
        let users = try await opened.withServices { store in
            try await store.migrate()
            return try await store.users().count
        }
        #expect(users == 0)
        #expect(FileManager.default.fileExists(atPath: path))
        _ = try LedgerDatabase.open(path, LedgerDatabase.Options(createsFile: false))
    }
}
