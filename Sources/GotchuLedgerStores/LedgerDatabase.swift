public import Foundation
public import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerSQLite
public import Logging
public import ServiceLifecycle

/// Where a ledger lives, as `--database` names it: one SQLite file, or a PostgreSQL database.
///
/// Every program that opens a ledger by name (the server, the operator's commands, the auditor) goes through
/// ``open(_:)``, so they agree on what a name means and on how each store is set up.
public enum LedgerDatabase: Sendable, Hashable, CustomStringConvertible {
    /// An SQLite file in WAL mode.
    case sqlite(path: String)
    /// A PostgreSQL database, given as `postgres://USER@HOST:PORT/DB` (or `postgresql://`), the password in the URL
    /// or `$PGPASSWORD`.
    case postgres(url: String)

    /// The database `location` names: a `postgres://` or `postgresql://` URL, else a file path.
    /// - Throws: ``LedgerDatabaseError`` when the URL cannot be used (no user, no database, a bad option).
    public init(_ location: String) throws(LedgerDatabaseError) {
        guard PostgresURL.isPostgresURL(location) else {
            self = .sqlite(path: location)
            return
        }
        do {
            _ = try PostgresURL(location)
        } catch {
            throw LedgerDatabaseError("\(error)")
        }
        self = .postgres(url: location)
    }

    /// The file path, or the URL without its password: what may be written to a log.
    public var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let url): (try? PostgresURL(url))?.redacted ?? "postgres://"
        }
    }

    /// How a log names this database: `path` (made absolute) for a file, `postgres` (without the password) for a URL.
    public var logMetadata: Logger.Metadata {
        switch self {
        case .sqlite(let path): ["path": "\(URL(fileURLWithPath: path).path)"]
        case .postgres: ["postgres": "\(description)"]
        }
    }

    /// A file that belongs with this database, such as a generated secret that every process using it shares: beside
    /// an SQLite file (its name with `pathExtension` appended), or for PostgreSQL in `directory`, named after the
    /// server and database (`postgres-HOST-PORT-DB.EXTENSION`).
    public func companionFile(pathExtension: String, directory: URL) -> URL {
        switch self {
        case .sqlite(let path):
            return URL(fileURLWithPath: path).appendingPathExtension(pathExtension)
        case .postgres(let text):
            guard let url = try? PostgresURL(text) else { return directory.appendingPathComponent("postgres") }
            return directory.appendingPathComponent("postgres-\(url.host)-\(url.port)-\(url.database)")
                .appendingPathExtension(pathExtension)
        }
    }

    /// How to open a store.
    public struct Options: Sendable {
        /// The rules the store enforces.
        public var policy: LedgerPolicy
        /// Replaces the store's clock (tests); `nil` is the wall clock for SQLite and the database's clock
        /// (`clock_timestamp()`) for PostgreSQL.
        package var clock: (@Sendable () -> Date)?
        /// PostgreSQL only: the connection pool's size.
        public var maximumConnections: Int
        /// PostgreSQL only: how long a request waits for a connection before it is refused as unavailable; `nil` is
        /// the store's default.
        public var connectionWait: Duration?
        /// Whether a missing SQLite file is created (with its directory, owner-only); when `false`, ``open(_:)``
        /// throws ``LedgerDatabaseError`` for a file that does not exist, so a mistyped path creates no ledger.
        public var createsFile: Bool
        /// Logs the PostgreSQL connection pool's events.
        public var logger: Logger

        /// Options with the defaults of a server.
        public init(
            policy: LedgerPolicy = LedgerPolicy(),
            clock: (@Sendable () -> Date)? = nil,
            maximumConnections: Int = 20,
            connectionWait: Duration? = nil,
            createsFile: Bool = true,
            logger: Logger = Logger(label: "gotchu.ledger") { _ in SwiftLogNoOpLogHandler() }
        ) {
            self.policy = policy
            self.clock = clock
            self.maximumConnections = maximumConnections
            self.connectionWait = connectionWait
            self.createsFile = createsFile
            self.logger = logger
        }
    }

    /// Opens the store on this database; nothing is read or migrated yet, and a PostgreSQL pool connects only once
    /// its service runs (see ``OpenedStore/withServices(_:)``).
    /// - Throws: ``LedgerDatabaseError`` for a missing SQLite file that may not be created or a URL that cannot be
    ///   used; the database's own error for an SQLite file that cannot be opened.
    public func open(_ options: Options = Options()) throws -> OpenedStore {
        switch self {
        case .sqlite(let path):
            let file = URL(fileURLWithPath: path)
            if options.createsFile {
                do {
                    try FileManager.default.createDirectory(
                        at: file.deletingLastPathComponent(),
                        withIntermediateDirectories: true,
                        attributes: [.posixPermissions: 0o700]
                    )
                } catch {
                    throw LedgerDatabaseError("cannot create the directory of \(path): \(error.localizedDescription)")
                }
            } else if !FileManager.default.fileExists(atPath: path) {
                throw LedgerDatabaseError(missingFile: path)
            }
            let store: SQLiteLedgerStore
            if let clock = options.clock {
                store = try SQLiteLedgerStore(path: path, policy: options.policy, clock: clock)
            } else {
                store = try SQLiteLedgerStore(path: path, policy: options.policy)
            }
            return OpenedStore(database: self, store: store, services: [])
        case .postgres(let text):
            let url: PostgresURL
            do {
                url = try PostgresURL(text)
            } catch {
                throw LedgerDatabaseError("\(error)")
            }
            let store = PostgresLedgerStore(
                url: url,
                policy: options.policy,
                clock: options.clock,
                maximumConnections: options.maximumConnections,
                connectionWait: options.connectionWait ?? PostgresLedgerBackend.defaultConnectionWait,
                logger: options.logger
            )
            return OpenedStore(database: self, store: store, services: [store.primary])
        }
    }

    /// Opens the store on the database `location` names; see ``init(_:)`` and ``open(_:)``.
    public static func open(_ location: String, _ options: Options = Options()) throws -> OpenedStore {
        try LedgerDatabase(location).open(options)
    }
}

/// A store opened by ``LedgerDatabase/open(_:)``, with what must run while it is used.
public struct OpenedStore: Sendable {
    /// The database it is on.
    public let database: LedgerDatabase
    /// The store.
    public let store: any LedgerStore
    /// What must run while the store is used (PostgreSQL's connection pool); none for SQLite. A server runs them
    /// beside itself; ``withServices(_:)`` runs them around one piece of work.
    public let services: [any Service]

    /// Runs the ``services`` while `body` works on the store, then stops them.
    public func withServices<Result: Sendable>(
        _ body: @Sendable (any LedgerStore) async throws -> Result
    ) async throws -> Result {
        guard !services.isEmpty else { return try await body(store) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            for service in services { group.addTask { try await service.run() } }
            defer { group.cancelAll() }
            return try await body(store)
        }
    }
}

/// Why a ledger database cannot be opened.
public struct LedgerDatabaseError: Error, CustomStringConvertible, Sendable {
    /// What is wrong, naming the file or URL.
    public let description: String
    /// The SQLite file that does not exist and was not to be created, if that is the reason.
    public let missingFile: String?

    init(_ description: String) {
        self.description = description
        self.missingFile = nil
    }

    init(missingFile path: String) {
        self.description = "no ledger database at \(path)"
        self.missingFile = path
    }
}
