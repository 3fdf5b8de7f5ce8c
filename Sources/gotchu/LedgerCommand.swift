import ArgumentParser
import Foundation
import GotchuAPI
import GotchuLedgerServer
import GotchuLedgerStores
import GotchuReceipts

struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Audit a ledger database, and rotate its receipt signing key.",
        subcommands: [LedgerVerifyCommand.self, LedgerRotateKeyCommand.self]
    )
}

/// `--database` of the commands that open a ledger's database directly.
struct LedgerDatabaseOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The ledger's SQLite database file, or its postgres://USER@HOST:PORT/DB URL.",
            valueName: "path-or-url"
        )
    )
    var database: String

    func validate() throws { _ = try LedgerDatabase.option(database) }

    /// Runs `body` over the store on that database (a PostgreSQL pool runs meanwhile). An SQLite file must exist:
    /// these commands never create a ledger.
    func withStore<T: Sendable>(_ body: @Sendable (any LedgerStore) async throws -> T) async throws -> T {
        let opened: OpenedStore
        do {
            opened = try LedgerDatabase.option(database).open(
                LedgerDatabase.Options(maximumConnections: 2, createsFile: false)
            )
        } catch let error as LedgerDatabaseError {
            throw CLIError(error.description)
        }
        return try await opened.withServices(body)
    }
}

extension LedgerDatabase {
    /// The database a `--database` option names.
    /// - Throws: `ValidationError` naming the option when the URL cannot be used.
    static func option(_ text: String) throws -> LedgerDatabase {
        do {
            return try LedgerDatabase(text)
        } catch {
            throw ValidationError("--database: \(error)")
        }
    }

    /// The server's database without `--database`: `$XDG_DATA_HOME/gotchu/ledger.sqlite`.
    static var defaultPath: String { Paths.dataHome.appendingPathComponent("ledger.sqlite").path }
}

struct LedgerVerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a whole ledger from its rows; stop at the first broken one.",
        discussion: """
            Reads the database in one snapshot (it writes nothing) and checks, in this order: the hash \
            chain over every entry, each transfer's debit against its credit, every balance recomputed \
            from its entries, the sum over all accounts (zero), each session against its entries (a PAID \
            session has exactly one payment, from its payer to its payee, of its amount; no other session \
            has one), and every receipt against its payment and the published keys. Prints each check that \
            passed; at the first failure prints the row that broke it and exits 1.

            The database must be at the current schema: start the server on it once after an upgrade.

            Examples:
              gotchu ledger verify --database /var/lib/gotchu/ledger.sqlite
              gotchu ledger verify --database postgres://gotchu@db.internal:5432/gotchu
            """
    )

    @OptionGroup var options: LedgerDatabaseOptions

    func run() async throws {
        let start = ContinuousClock.now
        let verification = try await options.withStore { store in
            do {
                return try await store.verify()
            } catch {
                throw CLIError(
                    "cannot read the ledger (\(error)); if it predates receipts and the hash chain, start the server "
                        + "on it once to upgrade it"
                )
            }
        }
        for line in verification.passed { print("ok    \(line)") }
        if let failure = verification.failure {
            print("FAIL  \(Console.safe(failure))")
            throw ExitCode.failure
        }
        let elapsed = ContinuousClock.now - start
        print(String(format: "ledger verified in %.2f s", elapsed / .seconds(1)))
    }
}

struct LedgerRotateKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-receipt-key",
        abstract: "Make a new receipt signing key current; the old ones stay published, their private halves erased.",
        discussion: """
            Servers on the database pick the new key up within a minute; until then they sign with the \
            previous key, which stays published, so every receipt keeps verifying. Prints the new key id.
            """
    )

    @OptionGroup var options: LedgerDatabaseOptions

    func run() async throws {
        let key = try await options.withStore { store in try await store.rotateReceiptKey() }
        print("new receipt key \(key.keyID)")
    }
}
