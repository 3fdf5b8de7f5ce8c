import GRDB
import GRDBSQLite
import GotchuLedger

// The store's hot reads decode their rows by column position, straight from the stepped statement. GRDB's `Row`
// builds a dictionary of lowercased column names for every statement it reads, copies every value, and finds each
// column by a case-insensitive name search: more work than SQLite's own for a keyed lookup.

/// The row a statement has stepped onto, read by column position. Its statement lists its columns explicitly, in the
/// order its decoder reads them.
struct SQLiteColumns {
    fileprivate let statement: SQLiteStatement

    /// The value at `index`; an error if it is NULL or not of `T`'s storage class.
    func callAsFunction<T: SQLiteColumnValue>(_ index: CInt) throws -> T {
        guard let value: T = try optional(index) else {
            throw LedgerError(.inconsistent, detail: "column \(index) of a stored row is NULL")
        }
        return value
    }

    /// The value at `index`, `nil` if it is NULL; an error if it is not of `T`'s storage class. The tables are not
    /// STRICT, so a column can hold any class; SQLite would convert text to 0 where an integer is asked for.
    func optional<T: SQLiteColumnValue>(_ index: CInt) throws -> T? {
        let storageClass = sqlite3_column_type(statement, index)
        guard storageClass != SQLITE_NULL else { return nil }
        guard storageClass == T.storageClass else {
            throw LedgerError(.inconsistent, detail: "column \(index) of a stored row is not a \(T.self)")
        }
        guard let value = T(sqliteStatement: statement, index: index) else {
            throw LedgerError(.inconsistent, detail: "column \(index) of a stored row is out of range for a \(T.self)")
        }
        return value
    }
}

/// A type a stored column decodes to, and the SQLite storage class it must have.
protocol SQLiteColumnValue: StatementColumnConvertible {
    static var storageClass: CInt { get }
}

extension Int64: SQLiteColumnValue {
    static var storageClass: CInt { SQLITE_INTEGER }
}

extension Int: SQLiteColumnValue {
    static var storageClass: CInt { SQLITE_INTEGER }
}

extension String: SQLiteColumnValue {
    static var storageClass: CInt { SQLITE_TEXT }
}

/// The rows of one run of a statement, each decoded by `decode` as it is stepped onto.
private final class DecodingCursor<Element>: DatabaseCursor {
    let _statement: Statement
    var _isDone = false
    private let decode: (SQLiteColumns) throws -> Element

    init(
        _ statement: Statement,
        arguments: StatementArguments,
        decode: @escaping (SQLiteColumns) throws -> Element
    )
        throws
    {
        _statement = statement
        self.decode = decode
        try statement.setArguments(arguments)
    }

    deinit {
        // Ends the statement's read, so a connection in autocommit mode does not keep its snapshot.
        sqlite3_reset(_statement.sqliteStatement)
    }

    func _element(sqliteStatement: SQLiteStatement) throws -> Element {
        try decode(SQLiteColumns(statement: sqliteStatement))
    }
}

extension Database {
    /// The first row of `sql` (run through the connection's statement cache), decoded by position.
    func fetchOne<T>(
        cached sql: String,
        arguments: StatementArguments = StatementArguments(),
        _ decode: @escaping (SQLiteColumns) throws -> T
    ) throws -> T? {
        try DecodingCursor(cachedStatement(sql: sql), arguments: arguments, decode: decode).next()
    }

    /// Every row of `sql` (run through the connection's statement cache), decoded by position.
    func fetchAll<T>(
        cached sql: String,
        arguments: StatementArguments = StatementArguments(),
        _ decode: @escaping (SQLiteColumns) throws -> T
    ) throws -> [T] {
        try Array(DecodingCursor(cachedStatement(sql: sql), arguments: arguments, decode: decode))
    }
}
