import ArgumentParser
import Foundation
import GotchuCore
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import Logging
import PostgresNIO

/// `gotchu admin key …`: API keys for unattended terminals, made, listed and revoked on the server machine against
/// the database itself.
struct AdminKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Create, list and revoke API keys (least-privilege credentials for a terminal).",
        discussion: """
            A key acts for one payee and can only do what its scopes say: \
            \(APIKeyScope.allCases.map(\.rawValue).joined(separator: ", ")). It can never send money, fund, \
            read the wallet or act for another payee. The key is printed once, when it is created; the \
            ledger keeps only its hash.

            Examples:
              gotchu admin key create --database ledger.sqlite --user shop@example.com \\
                --scope sessions:create --scope sessions:read --scope sessions:cancel --name till-1
              gotchu admin key list --database ledger.sqlite
              gotchu admin key revoke --database ledger.sqlite 5f0c…
            """,
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a key for a payee and print it (once)."
        )

        @OptionGroup var database: AdminDatabaseOptions

        @Option(help: ArgumentHelp("The payee's e-mail address.", valueName: "email"))
        var user: String

        @Option(
            name: .customLong("scope"),
            help: ArgumentHelp(
                "What the key may do (repeat, or separate with commas): \(APIKeyScope.allCases.map(\.rawValue).joined(separator: ", ")).",
                valueName: "scope"
            )
        )
        var scopes: [String] = []

        @Option(help: ArgumentHelp("A name for the key, such as the terminal it goes on.", valueName: "name"))
        var name = "terminal"

        func validate() throws { _ = try parsedScopes }

        var parsedScopes: Set<APIKeyScope> {
            get throws {
                let names = scopes.flatMap { $0.split(separator: ",") }.map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                guard !names.isEmpty else { throw ValidationError("give the key at least one --scope") }
                return Set(
                    try names.map { name in
                        guard let scope = APIKeyScope(rawValue: name) else {
                            throw ValidationError(
                                "unknown scope \(DisplayText.quoted(name)); the scopes are "
                                    + APIKeyScope.allCases.map(\.rawValue).joined(separator: ", ")
                            )
                        }
                        return scope
                    }
                )
            }
        }

        func run() async throws {
            let scopes = try parsedScopes
            let (key, secret) = try await database.withStore { store in
                try await store.createAPIKey(email: user, name: name, scopes: scopes)
            }
            FileHandle.standardError.write(
                Data(
                    Console.safe(
                        "created key \(key.id) for \(key.userEmail) (\(key.storedScopes)); it is shown only now:\n"
                    ).utf8
                )
            )
            // The key alone on standard output, so `> key-file` captures exactly it.
            print(secret)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys: id, hint, payee, scopes, use.")

        @OptionGroup var database: AdminDatabaseOptions

        @Option(help: ArgumentHelp("Only this payee's keys.", valueName: "email"))
        var user: String?

        func run() async throws {
            let keys = try await database.withStore { store in try await store.apiKeys(email: user) }
            let console = Console()
            // Columns are separated by two spaces; a name is quoted, so its own spaces stay inside the quotes.
            console.line(
                ["ID", "HINT", "USER", "NAME", "SCOPES", "CREATED", "LAST USED", "REVOKED"].joined(separator: "  ")
            )
            for key in keys {
                console.line(
                    [
                        key.id, key.hint + "…", key.userEmail, DisplayText.quoted(key.name), key.storedScopes,
                        Self.time(key.createdAt), key.lastUsedAt.map(Self.time) ?? "never",
                        key.revokedAt.map(Self.time) ?? "-",
                    ].joined(separator: "  ")
                )
            }
        }

        static func time(_ milliseconds: Int64) -> String {
            Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key: it stops working at once.")

        @OptionGroup var database: AdminDatabaseOptions

        @Argument(help: ArgumentHelp("The key's id, as `key list` shows it.", valueName: "id"))
        var id: String

        func run() async throws {
            let key = try await database.withStore { store in try await store.revokeAPIKey(id: id) }
            Console().line("revoked key \(key.id) (\(key.hint)…) of \(key.userEmail)")
        }
    }
}

/// `--database` of the admin commands: the ledger's SQLite file or PostgreSQL URL, opened directly (no server).
struct AdminDatabaseOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "SQLite database file (default: $XDG_DATA_HOME/gotchu/ledger.sqlite) or postgres://USER@HOST:PORT/DB URL.",
            valueName: "path-or-url"
        )
    )
    var database: String?

    /// Runs `body` with the store, its schema brought up to date, and stops what it needs afterwards. Refusals come back as a
    /// ``CLIError`` with the ledger's reason.
    func withStore<T: Sendable>(_ body: @Sendable (any LedgerStore) async throws -> T) async throws -> T {
        do {
            if let database, PostgresURL.isPostgresURL(database) {
                let logger = Logger(label: "gotchu.admin") { _ in SwiftLogNoOpLogHandler() }
                let store = PostgresLedgerStore(url: try PostgresURL(database), maximumConnections: 2, logger: logger)
                return try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask { await store.client.run() }
                    defer { tasks.cancelAll() }
                    try await store.backend.migrate()
                    return try await body(store)
                }
            }
            let path = database ?? Paths.dataHome.appendingPathComponent("ledger.sqlite").path
            guard FileManager.default.fileExists(atPath: path) else {
                throw CLIError("no ledger database at \(path); pass --database")
            }
            let store = try SQLiteLedgerStore(path: path)
            // The schema only: the store's own start-up work (releasing the payments a crash left in flight) belongs
            // to the server, which may be running beside this command.
            try await store.backend.migrate()
            return try await body(store)
        } catch let refusal as LedgerError {
            throw CLIError(refusal.detail)
        }
    }
}

/// `gotchu admin`: operator commands run on the server machine against the database.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Operator commands, run on the server machine against --database (no HTTP).",
        subcommands: [AdminKeyCommand.self]
    )
}
