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
            ledger keeps only its hash. Creating and revoking keys is recorded in the audit log.

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

        @OptionGroup var admin: AdminOptions

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
            let (key, secret) = try await admin.withKeyStore { store in
                try await store.createAPIKey(email: user, name: name, scopes: scopes, actor: AdminOptions.actor)
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

        @OptionGroup var admin: AdminOptions

        @Option(help: ArgumentHelp("Only this payee's keys.", valueName: "email"))
        var user: String?

        func run() async throws {
            let keys = try await admin.withKeyStore { store in try await store.apiKeys(email: user) }
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

        @OptionGroup var admin: AdminOptions

        @Argument(help: ArgumentHelp("The key's id, as `key list` shows it.", valueName: "id"))
        var id: String

        func run() async throws {
            let key = try await admin.withKeyStore { store in
                try await store.revokeAPIKey(id: id, actor: AdminOptions.actor)
            }
            Console().line("revoked key \(key.id) (\(key.hint)…) of \(key.userEmail)")
        }
    }
}

extension AdminOptions {
    /// ``withStore(policy:_:)``, with the ledger's refusals (an unknown user or key, a bad name) said plainly.
    func withKeyStore<T: Sendable>(_ body: @Sendable (any LedgerStore) async throws -> T) async throws -> T {
        do {
            return try await withStore(body)
        } catch let refusal as LedgerError {
            throw CLIError(refusal.detail)
        }
    }
}
