import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerPostgres
import GotchuLedgerServer
import GotchuLedgerStores
import GotchuReceipts
import Logging
import PostgresNIO

struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Audit a ledger database, rotate its receipt signing key, check its replication.",
        subcommands: [LedgerVerifyCommand.self, LedgerRotateKeyCommand.self, LedgerCheckReplicationCommand.self]
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

struct LedgerCheckReplicationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-replication",
        abstract: "Report which PostgreSQL host is the primary, its standbys, and whether commits wait for one.",
        discussion: """
            Asks every host of --database (postgres://USER@HOST1:PORT,HOST2:PORT/DB) what it is: the primary \
            (it takes writes), or a standby and whether its WAL receiver streams; the primary's standbys \
            with their state, sync_state and replay lag; and synchronous_standby_names and \
            synchronous_commit. It writes nothing.

            It exits 1 when no host or more than one takes writes, or when the primary names synchronous \
            standbys but none streams (then every commit waits until one is back). A primary that \
            acknowledges commits without a synchronous standby is \
            reported as a warning: losing its machine loses what the standbys had not received.

            Examples:
              gotchu ledger check-replication --database postgres://gotchu@db1:5432,db2:5432/gotchu
            """
    )

    @OptionGroup var options: LedgerDatabaseOptions

    func run() async throws {
        guard case .postgres(let text) = try LedgerDatabase.option(options.database) else {
            throw CLIError(
                "check-replication is for a PostgreSQL ledger (--database postgres://…): an SQLite ledger is one file"
            )
        }
        let url: PostgresURL
        do {
            url = try PostgresURL(text)
        } catch {
            throw CLIError("--database: \(error)")
        }
        let logger = Logger(label: "gotchu.replication") { _ in SwiftLogNoOpLogHandler() }
        let primary = PostgresPrimary(url: url, logger: logger) { configuration in
            configuration.options.maximumConnections = 1
            configuration.options.minimumConnections = 0
        }
        let statuses = await withTaskGroup(of: [PostgresPrimary.HostStatus]?.self) { group in
            group.addTask {
                try? await primary.run()
                return nil
            }
            group.addTask { await primary.status() }
            var result: [PostgresPrimary.HostStatus] = []
            while let next = await group.next() {
                if let next {
                    result = next
                    group.cancelAll()
                }
            }
            return result
        }
        var failed = false
        for status in statuses {
            let host = Console.safe(status.host.description)
            if let reason = status.unreachable {
                print("\(host)  unreachable: \(Console.safe(reason))")
                continue
            }
            guard status.isPrimary else {
                print("\(host)  standby  receiver \(Console.safe(status.receiver ?? "unknown"))")
                continue
            }
            print(
                "\(host)  primary  synchronous_standby_names=\(DisplayText.quoted(status.synchronousStandbyNames)) "
                    + "synchronous_commit=\(Console.safe(status.synchronousCommit))"
            )
            for standby in status.standbys {
                print(
                    "  standby \(DisplayText.quoted(standby.name))  \(Console.safe(standby.state))  "
                        + "\(Console.safe(standby.syncState))  "
                        + String(format: "replay lag %.2f s", standby.replayLag)
                )
            }
        }
        let primaries = statuses.filter { $0.unreachable == nil && $0.isPrimary }
        switch primaries.count {
        case 0:
            print("FAIL  no host takes writes: the ledger refuses every payment until a standby is promoted")
            failed = true
        case 1:
            let primary = primaries[0]
            let synchronous = primary.standbys.filter {
                $0.state == "streaming" && ($0.syncState == "sync" || $0.syncState == "quorum")
            }
            if primary.synchronousStandbyNames.isEmpty || ["off", "local"].contains(primary.synchronousCommit) {
                print(
                    "WARN  commits are acknowledged once the primary alone holds them: losing its machine loses "
                        + "what the standbys had not received (set synchronous_standby_names and synchronous_commit = on)"
                )
            } else if synchronous.isEmpty {
                print(
                    "FAIL  the primary waits for a synchronous standby and none streams: every commit waits until "
                        + "one is back"
                )
                failed = true
            } else {
                let names = synchronous.map { DisplayText.quoted($0.name) }.joined(separator: ", ")
                print(
                    "ok    one primary; each commit is acknowledged once a synchronous standby holds it too (\(names))"
                )
            }
        default:
            print("FAIL  \(primaries.count) hosts take writes: stop all but one before any server writes to them")
            failed = true
        }
        if failed { throw ExitCode.failure }
    }
}
