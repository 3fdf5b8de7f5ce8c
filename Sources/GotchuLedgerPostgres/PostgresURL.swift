import Foundation
import NIOSSL
package import PostgresNIO

/// A `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE][&prepared_statements=on|off]` connection URL.
///
/// `sslmode` means what it means to libpq: `disable` (plain), `prefer` (the default: TLS when the server offers it),
/// `require` (TLS or nothing; neither checks the certificate, as in libpq) and `verify-full` (TLS with the
/// certificate checked against the system's trust roots and the host name). `prepared_statements=off` has the
/// database parse every statement on every run instead of once per connection, for a pooler that cannot keep
/// prepared statements (PgBouncer in transaction mode before 1.21, or without `max_prepared_statements`).
package struct PostgresURL: Sendable, Hashable {
    /// Host name or address.
    package var host: String
    /// TCP port (5432 unless given).
    package var port: Int
    /// Role to connect as.
    package var username: String
    /// Password from the URL, else `PGPASSWORD`, else none (trust or peer authentication).
    package var password: String?
    /// Database name.
    package var database: String
    /// `disable`, `prefer` (the default), `require` or `verify-full`.
    package var sslMode: String
    /// Whether the ledger prepares each statement once per connection (`prepared_statements`, on by default).
    package var preparesStatements: Bool

    /// Whether `text` names a PostgreSQL database rather than a file.
    package static func isPostgresURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Parses `text`, taking the password from `environment["PGPASSWORD"]` when the URL has none.
    package init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard Self.isPostgresURL(text), let components = URLComponents(string: text), let host = components.host,
            !host.isEmpty
        else {
            throw PostgresURLError("expected postgres://USER@HOST:PORT/DATABASE, got '\(text)'")
        }
        guard let user = components.user, !user.isEmpty else {
            throw PostgresURLError("the URL names no user: postgres://USER@HOST:PORT/DATABASE")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else {
            throw PostgresURLError("the URL names no database: postgres://USER@HOST:PORT/DATABASE")
        }
        let sslMode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer"
        guard ["disable", "prefer", "require", "verify-full"].contains(sslMode) else {
            throw PostgresURLError("sslmode must be disable, prefer, require or verify-full, got '\(sslMode)'")
        }
        let prepared = components.queryItems?.first(where: { $0.name == "prepared_statements" })?.value ?? "on"
        guard ["on", "off"].contains(prepared) else {
            throw PostgresURLError("prepared_statements must be on or off, got '\(prepared)'")
        }
        self.host = host
        self.port = components.port ?? 5432
        self.username = user.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 } ?? environment["PGPASSWORD"]
        self.database = database.removingPercentEncoding ?? database
        self.sslMode = sslMode
        self.preparesStatements = prepared == "on"
    }

    /// The same server and credentials with another database.
    package func with(database: String) -> PostgresURL {
        var copy = self
        copy.database = database
        return copy
    }

    /// The client configuration for this URL.
    package var configuration: PostgresClient.Configuration {
        var unverified = TLSConfiguration.makeClientConfiguration()
        unverified.certificateVerification = .none
        let tls: PostgresClient.Configuration.TLS =
            switch sslMode {
            case "disable": .disable
            case "require": .require(unverified)
            case "verify-full": .require(.makeClientConfiguration())
            default: .prefer(unverified)
            }
        return PostgresClient.Configuration(
            host: host,
            port: port,
            username: username,
            password: password,
            database: database,
            tls: tls
        )
    }

    /// The URL without its password, for logs.
    package var redacted: String { "postgres://\(username)@\(host):\(port)/\(database)" }
}

/// A connection URL that cannot be used, with the reason.
package struct PostgresURLError: Error, CustomStringConvertible {
    /// What is wrong with the URL.
    package let description: String

    init(_ description: String) { self.description = description }
}
