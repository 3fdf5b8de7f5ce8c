package import GRDB

/// A SQLite ledger file whose payments fail at their last write, the outcome under their key, until lifted: what a
/// crash or a full disk at that moment leaves behind.
package enum OutcomeFailure {
    package static func impose(on database: DatabaseQueue) async throws {
        try await database.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER refuse_outcome BEFORE UPDATE ON idempotency_keys WHEN NEW.state = 'DONE'
                    BEGIN SELECT RAISE(ABORT, 'simulated failure'); END;
                    """
            )
        }
    }

    package static func lift(on database: DatabaseQueue) async throws {
        try await database.write { db in try db.execute(sql: "DROP TRIGGER refuse_outcome") }
    }
}
