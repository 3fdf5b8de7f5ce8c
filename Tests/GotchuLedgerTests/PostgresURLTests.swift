import GotchuLedger
import GotchuLedgerPostgres
import Testing

@Suite("postgres:// URLs", .timeLimit(.minutes(10)))
struct PostgresURLTests {
    @Test("User, password, host, port, database and sslmode are read; the password may come from PGPASSWORD")
    func parses() throws {
        let full = try PostgresURL("postgres://ledger:p%40ss@db.example:6543/gotchu?sslmode=require", environment: [:])
        #expect(full.username == "ledger" && full.password == "p@ss")
        #expect(full.host == "db.example" && full.port == 6543 && full.database == "gotchu")
        #expect(full.sslMode == "require")
        #expect(full.redacted == "postgres://ledger@db.example:6543/gotchu")

        let short = try PostgresURL("postgresql://ledger@127.0.0.1/gotchu", environment: ["PGPASSWORD": "secret"])
        #expect(short.port == 5432 && short.password == "secret" && short.sslMode == "prefer")
        #expect(try PostgresURL("postgres://a:inline@h/d", environment: ["PGPASSWORD": "env"]).password == "inline")
        #expect(short.with(database: "other").database == "other")
        #expect(try PostgresURL("postgres://a@h/d?sslmode=verify-full", environment: [:]).sslMode == "verify-full")
        #expect(full.preparesStatements && short.preparesStatements)
        let unprepared = try PostgresURL("postgres://a@h/d?sslmode=disable&prepared_statements=off", environment: [:])
        #expect(!unprepared.preparesStatements && unprepared.sslMode == "disable")
    }

    @Test(
        "Missing parts, unknown sslmodes and prepared_statements values are refused with a message",
        arguments: [
            ("http://user@host/db", "expected postgres://"),
            ("postgres://host/db", "names no user"),
            ("postgres://user@host", "names no database"),
            ("postgres://user@host/", "names no database"),
            ("postgres://user@host/db?sslmode=verify-ca", "sslmode must be"),
            ("postgres://user@host/db?prepared_statements=false", "prepared_statements must be on or off"),
        ]
    )
    func refuses(text: String, message: String) {
        let error = #expect(throws: PostgresURLError.self) { try PostgresURL(text, environment: [:]) }
        #expect(error?.description.contains(message) == true, "\(text): \(String(describing: error))")
    }
}
