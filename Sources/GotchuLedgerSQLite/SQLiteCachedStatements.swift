import GRDB

// The store's statements are prepared once per connection and reused from its statement cache: its SQL is fixed
// text (or one of a few variants), with every value bound as an argument.

extension Database {
    /// Runs `sql` through the connection's statement cache.
    func execute(cached sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}

extension Row {
    /// The first row of `sql`, run through the connection's statement cache.
    static func fetchOne(
        cached db: Database,
        sql: String,
        arguments: StatementArguments = StatementArguments()
    ) throws -> Row? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    /// Every row of `sql`, run through the connection's statement cache.
    static func fetchAll(
        cached db: Database,
        sql: String,
        arguments: StatementArguments = StatementArguments()
    ) throws -> [Row] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }
}

extension DatabaseValueConvertible where Self: StatementColumnConvertible {
    /// The first column of the first row of `sql`, run through the connection's statement cache.
    static func fetchOne(
        cached db: Database,
        sql: String,
        arguments: StatementArguments = StatementArguments()
    ) throws -> Self? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    /// The first column of every row of `sql`, run through the connection's statement cache.
    static func fetchAll(
        cached db: Database,
        sql: String,
        arguments: StatementArguments = StatementArguments()
    ) throws -> [Self] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }
}
