import GRDB
import Synchronization

/// The writer connection of a ``SQLiteLedgerBackend``, with group commit.
///
/// A write request takes the connection through a gate (one at a time, in arrival order), opens the shared
/// `IMMEDIATE` transaction if none is open, and runs inside a savepoint of its own: released if it succeeds, rolled
/// back to if it throws, so one request's refusal never undoes another's writes. Then, if more requests are waiting
/// or on their way and the batch is not full, it hands the connection to the next one and waits; the last of the
/// batch commits for all. Every request, refused ones too (their refusal may rest on a batch-mate's write), is
/// answered only after the commit returned, which with `synchronous=FULL` means the batch is on disk; if the commit
/// fails, every member gets its error. Under load one fsync is shared by the whole batch; alone, a request commits at
/// once.
///
/// A request's turn at the connection runs on the writer's own thread (``SQLiteWriterExecutor``), and its statements
/// through GRDB's synchronous access (``sync(_:)``): no thread hop per statement or per hand-over, and no task's
/// cancellation can interrupt a statement of a transaction others share. The begin and the commit block that thread,
/// not one of the concurrency pool, while they wait out another writer's lock or the fsync.
final class SQLiteWriter: Sendable {
    let database: DatabasePool
    private let maximumBatch: Int
    private let executor = SQLiteWriterExecutor()
    private let state = Mutex(State())

    private struct State: ~Copyable {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
        /// Requests that asked for the connection and are still on their way to the writer's thread: each will take the
        /// gate in turn, so a holder that sees one may leave the commit to it.
        var arriving = 0
        /// Members of the open transaction that finished their savepoint and wait for its commit.
        var pending: [CheckedContinuation<Void, any Error>] = []
        /// Transactions run and commits made, since the store opened.
        var transactions = 0
        var commits = 0
    }

    init(database: DatabasePool, maximumBatch: Int = 256) {
        self.database = database
        self.maximumBatch = maximumBatch
    }

    /// Runs `body` on the writer connection on the calling thread. Only for the holder of the gate (inside
    /// ``transaction(_:)`` or ``exclusively(_:)``).
    func sync<T>(_ body: (Database) throws -> T) throws -> T {
        try database.writeWithoutTransaction(body)
    }

    /// Runs `body` in a savepoint of the current batch and returns its result once the batch is committed.
    func transaction<T>(_ body: () async throws -> T) async throws -> T {
        announce()
        return try await withTaskExecutorPreference(executor) { try await turn(body) }
    }

    /// A request's turn at the connection, on the writer's thread.
    private func turn<T>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        var result: Result<T, any Error>
        do {
            if try !sync({ db in db.isInsideTransaction }) { try begin() }
            // Prepared once per connection: parsing them was a visible share of a payment's time.
            try sync { db in try db.cachedStatement(sql: SQLiteLedgerStatements.savepoint).execute() }
            do {
                result = .success(try await body())
                try sync { db in try db.cachedStatement(sql: SQLiteLedgerStatements.releaseSavepoint).execute() }
            } catch {
                result = .failure(error)
                do {
                    try sync { db in
                        try db.execute(sql: "ROLLBACK TO request")
                        try db.execute(sql: SQLiteLedgerStatements.releaseSavepoint)
                    }
                } catch {
                    // The savepoint cannot be undone, so neither can the batch be trusted: drop it whole.
                    try? sync { db in if db.isInsideTransaction { try db.rollback() } }
                }
            }
        } catch {
            // The transaction or the savepoint could not be opened: nothing of this request ran.
            result = .failure(error)
        }
        if !((try? sync { db in db.isInsideTransaction }) ?? false) {
            // No transaction is open: it never began, or it was dropped (here above, or by SQLite itself on an I/O
            // error or a full disk) and with it every member's writes.
            let error: any Error
            switch result {
            case .failure(let failure): error = failure
            case .success: error = DatabaseError(resultCode: .SQLITE_ABORT, message: "the transaction was rolled back")
            }
            settle(error: error)
            release()
            throw error
        }
        let handOver = state.withLock { state in
            state.transactions += 1
            return (!state.waiting.isEmpty || state.arriving > 0) && state.pending.count + 1 < maximumBatch
        }
        if handOver {
            // Refused requests wait too: a refusal may rest on a batch-mate's write, which must be durable first.
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    state.pending.append(continuation)
                    if state.waiting.isEmpty {
                        // One is on its way (while the gate is held, an arrival can only join `waiting`): it takes the
                        // free gate, and the batch with it.
                        state.busy = false
                        return nil
                    }
                    return state.waiting.removeFirst()
                }
                next?.resume()
            }
        } else {
            defer { release() }
            try commit()
        }
        return try result.get()
    }

    /// Write transactions run and commits made since the store opened.
    var statistics: (transactions: Int, commits: Int) { state.withLock { ($0.transactions, $0.commits) } }

    /// Whether no request holds the connection.
    var isIdle: Bool { state.withLock { !$0.busy } }

    /// Requests waiting for the connection.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Requests that asked for the connection and have not reached the writer's thread yet.
    var arrivingCount: Int { state.withLock { $0.arriving } }

    /// Whether the connection is in use (a request holds it, or a batch is open), and how many requests wait for it:
    /// at the gate or on their way to the writer's thread.
    var usage: (inUse: Bool, waiting: Int) {
        state.withLock { ($0.busy || !$0.pending.isEmpty, $0.waiting.count + $0.arriving) }
    }

    /// Runs `body` with the connection to itself: the batch in progress, if any, is committed first.
    func exclusively<T>(_ body: () async throws -> T) async throws -> T {
        announce()
        return try await withTaskExecutorPreference(executor) {
            await acquire()
            defer { release() }
            if try sync({ db in db.isInsideTransaction }) { try commit() }
            return try await body()
        }
    }

    /// Opens the shared transaction. `BEGIN IMMEDIATE` waits (up to the busy timeout) while another connection to the
    /// file writes, another process's or another store's in this one.
    private func begin() throws {
        try sync { db in try db.beginTransaction(.immediate) }
    }

    /// Commits the open transaction and answers its waiting members; on failure they all get the error.
    private func commit() throws {
        do {
            try sync { db in
                do {
                    try db.commit()
                } catch {
                    if db.isInsideTransaction { try? db.rollback() }
                    throw error
                }
            }
        } catch {
            settle(error: error)
            throw error
        }
        state.withLock { $0.commits += 1 }
        settle(error: nil)
    }

    /// Answers the batch's waiting members, with `error` if it did not commit.
    private func settle(error: (any Error)?) {
        let pending = state.withLock { state in
            let pending = state.pending
            state.pending = []
            return pending
        }
        for member in pending {
            if let error { member.resume(throwing: error) } else { member.resume() }
        }
    }

    /// Lets the next request in.
    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.busy = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }

    /// Counts a request on its way to the writer's thread; its ``acquire()`` there uncounts it.
    private func announce() {
        state.withLock { $0.arriving += 1 }
    }

    private func acquire() async {
        let entered = state.withLock { state in
            if state.busy { return false }
            state.busy = true
            state.arriving -= 1
            return true
        }
        if entered { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let entered = state.withLock { state in
                state.arriving -= 1
                if state.busy {
                    state.waiting.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if entered { continuation.resume() }
        }
    }
}
