import PostgresNIO
import Synchronization

/// A ledger statement run as a named prepared statement, so PostgreSQL parses and plans it once per connection
/// instead of on every execution (a payment runs 27 statements; parsing each every time cost a quarter of the
/// store's payments per second).
///
/// postgres-nio prepares by type: a ``PostgresPreparedStatement``'s static `name` and `sql`, read when it is executed.
/// The store keeps its statements where they are used, as `PostgresQuery` interpolations, so this one type stands
/// for all of them: ``run(_:named:on:logger:)`` binds the query's text and its name to the task while postgres-nio
/// reads them, in `execute`, in the calling task. Should a later postgres-nio read them anywhere else, the process
/// stops at the first statement rather than run some other text (every PostgreSQL test would fail).
struct PreparedLedgerStatement: PostgresPreparedStatement {
    /// The name and text of the statement being executed by the current task.
    @TaskLocal private static var current: (name: String, sql: String)?

    static var name: String {
        guard let current else { preconditionFailure("a prepared ledger statement was read outside its execution") }
        return current.name
    }

    static var sql: String {
        guard let current else { preconditionFailure("a prepared ledger statement was read outside its execution") }
        return current.sql
    }

    let bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    /// Runs `query` on `connection` as the prepared statement `name` and reads every row, so errors raised while it
    /// executes surface here.
    static func run(
        _ query: PostgresQuery,
        named name: String,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [PostgresRow] {
        try await $current.withValue((name, query.sql)) {
            let rows: AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> = try await connection.execute(
                PreparedLedgerStatement(bindings: query.binds),
                logger: logger
            )
            var collected: [PostgresRow] = []
            for try await row in rows { collected.append(row) }
            return collected
        }
    }
}

/// One name per distinct statement text, for the process's life: postgres-nio prepares a name once per connection
/// and from then on trusts it to mean the same text.
final class StatementNames: Sendable {
    static let shared = StatementNames()

    /// The most texts prepared. The store has about a hundred; the bound keeps a store that built texts from
    /// data by mistake from preparing without end on every connection.
    static let capacity = 1024

    private let names = Mutex<[String: String]>([:])

    /// The name `sql` is prepared under, or `nil` when ``capacity`` texts already have one (it then runs unprepared).
    func name(for sql: String) -> String? {
        names.withLock { names in
            if let name = names[sql] { return name }
            guard names.count < Self.capacity else { return nil }
            let name = "gotchu_\(names.count)"
            names[sql] = name
            return name
        }
    }
}
