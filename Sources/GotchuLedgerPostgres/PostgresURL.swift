import Foundation
import NIOSSL
package import PostgresNIO

/// A `postgres://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]…]/DATABASE[?sslmode=MODE][&prepared_statements=on|off]
/// [&target_session_attrs=read-write]` connection URL.
///
/// Several hosts (libpq's multi-host form) name a primary and its standbys: the ledger writes to whichever of them is
/// the writable primary, and after a failover finds the new one by itself (see ``PostgresPrimary``). It needs the
/// primary, so `target_session_attrs` may only be `read-write` (the default here) or `primary`.
///
/// `sslmode` means what it means to libpq: `disable` (plain), `prefer` (the default: TLS when the server offers it),
/// `require` (TLS or nothing; neither checks the certificate, as in libpq) and `verify-full` (TLS with the
/// certificate checked against the system's trust roots and the host name). `prepared_statements=off` has the
/// database parse every statement on every run instead of once per connection, for a pooler that cannot keep
/// prepared statements (PgBouncer in transaction mode before 1.21, or without `max_prepared_statements`).
package struct PostgresURL: Sendable, Hashable {
    /// One host of the URL and its port.
    package struct Host: Sendable, Hashable, CustomStringConvertible {
        /// Host name or address (an IPv6 address without its brackets).
        package var name: String
        /// TCP port (5432 unless given).
        package var port: Int

        /// `name:port`, an IPv6 address in brackets.
        package var description: String { (name.contains(":") ? "[\(name)]" : name) + ":\(port)" }
    }

    /// The hosts, in the URL's order: the one to try first, then the others.
    package var hosts: [Host]
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

    /// The first host's name.
    package var host: String {
        get { hosts[0].name }
        set { hosts[0].name = newValue }
    }

    /// The first host's port.
    package var port: Int {
        get { hosts[0].port }
        set { hosts[0].port = newValue }
    }

    /// Whether `text` names a PostgreSQL database rather than a file.
    package static func isPostgresURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Parses `text`, taking the password from `environment["PGPASSWORD"]` when the URL has none.
    package init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let usage = "postgres://USER@HOST:PORT[,HOST:PORT…]/DATABASE"
        guard Self.isPostgresURL(text), let schemeEnd = text.range(of: "://") else {
            throw PostgresURLError("expected \(usage), got '\(text)'")
        }
        // libpq's multi-host form is not an RFC 3986 URL: the authority is split by hand, the rest (the path and
        // the query) read by URLComponents.
        let afterScheme = text[schemeEnd.upperBound...]
        let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" } ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else {
            throw PostgresURLError("the URL names no user: \(usage)")
        }
        let userInfo = authority[..<at]
        let (user, urlPassword): (Substring, Substring?) =
            if let colon = userInfo.firstIndex(of: ":") {
                (userInfo[..<colon], userInfo[userInfo.index(after: colon)...])
            } else {
                (userInfo, nil)
            }
        guard !user.isEmpty else { throw PostgresURLError("the URL names no user: \(usage)") }
        var hosts: [Host] = []
        for entry in authority[authority.index(after: at)...].split(separator: ",", omittingEmptySubsequences: false) {
            hosts.append(try Self.host(entry, usage: usage))
        }
        guard let components = URLComponents(string: "postgres://host" + afterScheme[authorityEnd...]) else {
            throw PostgresURLError("expected \(usage), got '\(text)'")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else {
            throw PostgresURLError("the URL names no database: \(usage)")
        }
        func query(_ name: String) -> String? { components.queryItems?.first(where: { $0.name == name })?.value }
        let sslMode = query("sslmode") ?? "prefer"
        guard ["disable", "prefer", "require", "verify-full"].contains(sslMode) else {
            throw PostgresURLError("sslmode must be disable, prefer, require or verify-full, got '\(sslMode)'")
        }
        let prepared = query("prepared_statements") ?? "on"
        guard ["on", "off"].contains(prepared) else {
            throw PostgresURLError("prepared_statements must be on or off, got '\(prepared)'")
        }
        let attributes = query("target_session_attrs") ?? "read-write"
        guard ["read-write", "primary"].contains(attributes) else {
            throw PostgresURLError(
                "target_session_attrs must be read-write (or primary): the ledger writes, so it needs the primary; "
                    + "got '\(attributes)'"
            )
        }
        self.hosts = hosts
        self.username = user.removingPercentEncoding ?? String(user)
        self.password = urlPassword.map { $0.removingPercentEncoding ?? String($0) } ?? environment["PGPASSWORD"]
        self.database = database.removingPercentEncoding ?? database
        self.sslMode = sslMode
        self.preparesStatements = prepared == "on"
    }

    /// One `HOST[:PORT]` of the authority: a name, an IPv4 address or a bracketed IPv6 address.
    private static func host(_ text: Substring, usage: String) throws -> Host {
        let name: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw PostgresURLError("an IPv6 host needs its closing ']': \(usage)")
            }
            name = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { throw PostgresURLError("expected :PORT after [\(name)]") }
                portText = rest.dropFirst()
            }
        } else if let colon = text.firstIndex(of: ":") {
            name = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else {
            name = text
        }
        guard !name.isEmpty, !name.contains(where: { $0.isWhitespace || "/?#@".contains($0) }) else {
            throw PostgresURLError("every host needs a name: \(usage)")
        }
        var port = 5432
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw PostgresURLError("a port must be 1 to 65535, got '\(portText)'")
            }
            port = number
        }
        return Host(name: String(name), port: port)
    }

    /// The same server and credentials with another database.
    package func with(database: String) -> PostgresURL {
        var copy = self
        copy.database = database
        return copy
    }

    /// The client configuration for this URL's first host.
    package var configuration: PostgresClient.Configuration { configuration(for: hosts[0]) }

    /// The client configuration for one of this URL's hosts.
    package func configuration(for host: Host) -> PostgresClient.Configuration {
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
            host: host.name,
            port: host.port,
            username: username,
            password: password,
            database: database,
            tls: tls
        )
    }

    /// The URL without its password, for logs.
    package var redacted: String {
        "postgres://\(username)@\(hosts.map(\.description).joined(separator: ","))/\(database)"
    }
}

/// A connection URL that cannot be used, with the reason.
package struct PostgresURLError: Error, CustomStringConvertible {
    /// What is wrong with the URL.
    package let description: String

    init(_ description: String) { self.description = description }
}
