import GRDB
import Synchronization

/// Read-only connections for lookups: the row or few rows of a key, read in one statement on the calling thread.
///
/// GRDB's pool runs every read in a transaction of its own (`BEGIN`, `COMMIT`) and hands out its readers through a
/// barrier queue, a semaphore, a dispatch group and a lock. For a statement of microseconds that cost more than the
/// statement itself: about 4 % of the server's CPU with 32 payers, in a `perf` profile. One statement reads one
/// snapshot by itself, in SQLite's autocommit mode, so a lookup needs no transaction: it takes an idle connection from
/// a list under a mutex, runs, and puts it back. In WAL mode a reader never waits for the writer.
final class SQLiteLookupReaders: Sendable {
    private let path: String
    private let configuration: Configuration
    /// The most connections opened; lookups beyond them go to the pool.
    let limit: Int
    private let state = Mutex<(idle: [DatabaseQueue], opened: Int, busy: Int)>(([], 0, 0))

    /// Lookups on the database at `path`, through at most `limit` connections made with `configuration` (read-only).
    init(path: String, configuration: Configuration, limit: Int) {
        var configuration = configuration
        configuration.readonly = true
        configuration.label = (configuration.label ?? "gotchu-ledger") + ".lookup"
        self.path = path
        self.configuration = configuration
        self.limit = limit
    }

    /// Runs `body`, which must read with one statement, on an idle connection; `nil` when all `limit` are busy.
    func read<T>(_ body: (Database) throws -> T) throws -> T? {
        guard let connection = try take() else { return nil }
        defer { state.withLock { $0.idle.append(connection) } }
        return try connection.inDatabase(body)
    }

    /// How many connections are open (tests).
    var openedCount: Int { state.withLock { $0.opened } }

    /// How many lookups found all `limit` connections busy, and so went to the pool (tests).
    var busyCount: Int { state.withLock { $0.busy } }

    /// An idle connection, a new one while fewer than `limit` are open, or `nil`.
    private func take() throws -> DatabaseQueue? {
        enum Taken {
            case idle(DatabaseQueue)
            case open
            case none
        }
        let taken = state.withLock { state -> Taken in
            if let idle = state.idle.popLast() { return .idle(idle) }
            guard state.opened < limit else {
                state.busy += 1
                return .none
            }
            state.opened += 1
            return .open
        }
        switch taken {
        case .idle(let connection): return connection
        case .none: return nil
        case .open:
            do {
                return try DatabaseQueue(path: path, configuration: configuration)
            } catch {
                state.withLock { $0.opened -= 1 }
                throw error
            }
        }
    }
}
