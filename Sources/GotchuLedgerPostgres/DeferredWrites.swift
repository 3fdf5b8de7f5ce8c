import PostgresNIO

/// A statement whose text and values are kept apart until it is sent, so that several can be joined into one. Written
/// like a `PostgresQuery`, as an interpolation; postgres-nio offers no way to join two queries' bound values.
struct SQLFragment: ExpressibleByStringInterpolation, Sendable {
    enum Part: Sendable {
        case text(String)
        case value(@Sendable (inout PostgresQuery.StringInterpolation) -> Void)
    }

    var parts: [Part]

    struct StringInterpolation: StringInterpolationProtocol {
        var parts: [Part] = []

        init(literalCapacity: Int, interpolationCount: Int) {
            parts.reserveCapacity(interpolationCount * 2 + 1)
        }

        mutating func appendLiteral(_ literal: String) { parts.append(.text(literal)) }

        mutating func appendInterpolation<Value: PostgresDynamicTypeEncodable & Sendable>(_ value: Value) {
            parts.append(.value { $0.appendInterpolation(value) })
        }

        mutating func appendInterpolation<Value: PostgresDynamicTypeEncodable & Sendable>(_ value: Value?) {
            parts.append(.value { $0.appendInterpolation(value) })
        }
    }

    init(stringInterpolation: StringInterpolation) { parts = stringInterpolation.parts }

    init(stringLiteral value: String) { parts = [.text(value)] }

    /// Appends the text, binding each value as the next parameter of `query`.
    func append(to query: inout PostgresQuery.StringInterpolation) {
        for part in parts {
            switch part {
            case .text(let text): query.appendLiteral(text)
            case .value(let bind): bind(&query)
            }
        }
    }

    /// The statement on its own.
    var query: PostgresQuery {
        var query = PostgresQuery.StringInterpolation(literalCapacity: 0, interpolationCount: 0)
        append(to: &query)
        return PostgresQuery(stringInterpolation: query)
    }
}

/// Writes of a transaction that need no answer, held back and sent as one statement with the next statement that
/// needs the database, or before COMMIT: a payment's last six writes then cost one round trip instead of six.
///
/// Joined, the writes are data-modifying `WITH` clauses of one statement, which PostgreSQL runs all of, against one
/// snapshot, before it ends. That is safe for writes to different tables, whose rows cannot overlap, so a second write
/// to a table already held back sends what is held first. The one write that is a `SELECT` (`pg_notify`) ends the
/// statement. Constraints are checked at the statement's end, so a held-back write that breaks one fails that
/// statement (and with it the transaction) instead of its own call.
final class DeferredWrites {
    /// A write held back: the table it writes (`nil` for a notification) and the statement.
    private var writes: [(table: String?, statement: SQLFragment)] = []

    var isEmpty: Bool { writes.isEmpty }

    /// Holds back `statement`, which writes `table` (`nil`: it is a notification, a `SELECT`); `false` when a write to
    /// that table is held already, and the held writes must be sent first.
    func hold(_ statement: SQLFragment, writing table: String?) -> Bool {
        guard !writes.contains(where: { $0.table == table }) else { return false }
        writes.append((table, statement))
        return true
    }

    /// Forgets what is held (the transaction is rolling back).
    func discard() { writes.removeAll() }

    /// What is held, as one statement, and forgets it; `nil` when nothing is.
    func take() -> PostgresQuery? {
        defer { writes.removeAll() }
        switch writes.count {
        case 0: return nil
        case 1: return writes[0].statement.query
        default:
            var query = clauses()
            if let notification = writes.first(where: { $0.table == nil }) {
                query.appendLiteral(" ")
                notification.statement.append(to: &query)
            } else {
                query.appendLiteral(" SELECT 1")
            }
            return PostgresQuery(stringInterpolation: query)
        }
    }

    /// What is held and `read`, a `SELECT` of `table` alone, as one statement, forgetting what was held; `nil` (and
    /// nothing forgotten) when nothing is held, a notification is, or a write to `table` is. The read runs against the
    /// snapshot the writes start from, so it must not look at what they write: a table of its own.
    func take(before read: SQLFragment, reading table: String) -> PostgresQuery? {
        guard !writes.isEmpty, !writes.contains(where: { $0.table == nil || $0.table == table }) else { return nil }
        defer { writes.removeAll() }
        var query = clauses()
        query.appendLiteral(" ")
        read.append(to: &query)
        return PostgresQuery(stringInterpolation: query)
    }

    /// The held writes to tables as the `WITH` clauses of one statement.
    private func clauses() -> PostgresQuery.StringInterpolation {
        var query = PostgresQuery.StringInterpolation(literalCapacity: 0, interpolationCount: 0)
        var clauses = 0
        for write in writes where write.table != nil {
            query.appendLiteral(clauses == 0 ? "WITH w\(clauses) AS (" : ", w\(clauses) AS (")
            write.statement.append(to: &query)
            query.appendLiteral(")")
            clauses += 1
        }
        return query
    }
}
