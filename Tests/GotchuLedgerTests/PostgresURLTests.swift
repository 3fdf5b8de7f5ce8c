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

    @Test("Several hosts, libpq's way: each with its port, IPv6 in brackets, the first one first")
    func parsesSeveralHosts() throws {
        let url = try PostgresURL(
            "postgres://ledger:pw@db1.internal:5433,[::1],10.0.0.2:6000/gotchu?target_session_attrs=read-write",
            environment: [:]
        )
        #expect(url.hosts.map(\.description) == ["db1.internal:5433", "[::1]:5432", "10.0.0.2:6000"])
        #expect(url.host == "db1.internal" && url.port == 5433)
        #expect(url.username == "ledger" && url.password == "pw" && url.database == "gotchu")
        #expect(url.redacted == "postgres://ledger@db1.internal:5433,[::1]:5432,10.0.0.2:6000/gotchu")
        #expect(try PostgresURL("postgres://a@h1,h2/d?target_session_attrs=primary", environment: [:]).hosts.count == 2)
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
            ("postgres://user@a,,b/db", "every host needs a name"),
            ("postgres://user@a:0/db", "a port must be 1 to 65535"),
            ("postgres://user@a:5432,b:x/db", "a port must be 1 to 65535"),
            ("postgres://user@[::1/db", "closing ']'"),
            ("postgres://user@a,b/db?target_session_attrs=any", "target_session_attrs must be read-write"),
            ("postgres://user@a/db?target_session_attrs=standby", "target_session_attrs must be read-write"),
        ]
    )
    func refuses(text: String, message: String) {
        let error = #expect(throws: PostgresURLError.self) { try PostgresURL(text, environment: [:]) }
        #expect(error?.description.contains(message) == true, "\(text): \(String(describing: error))")
    }
}
