import PostgresNIO
import Testing

@testable import GotchuLedgerPostgres

@Suite("PostgreSQL writes held back and sent as one statement", .timeLimit(.minutes(10)))
struct DeferredWritesTests {
    @Test("One write is sent as it is; several become WITH clauses ending in the notification, values renumbered")
    func joined() throws {
        let writes = DeferredWrites()
        #expect(writes.take() == nil)
        #expect(writes.hold("UPDATE a SET x = \(Int64(1)) WHERE id = \("k")", writing: "a"))
        let alone = try #require(writes.take())
        #expect(alone.sql == "UPDATE a SET x = $1 WHERE id = $2")
        #expect(alone.binds.count == 2)
        #expect(writes.isEmpty)

        #expect(writes.hold("UPDATE a SET x = \(Int64(1)) WHERE id = \("k")", writing: "a"))
        #expect(writes.hold("SELECT pg_notify(\("channel"), \("payload"))", writing: nil))
        #expect(writes.hold("INSERT INTO b (y) VALUES (\(Optional<String>.none))", writing: "b"))
        let all = try #require(writes.take())
        #expect(
            all.sql
                == "WITH w0 AS (UPDATE a SET x = $1 WHERE id = $2), w1 AS (INSERT INTO b (y) VALUES ($3)) "
                + "SELECT pg_notify($4, $5)"
        )
        #expect(all.binds.count == 5)
        #expect(writes.take() == nil)
    }

    @Test("A second write to a table already held back, or a second notification, is refused until they are sent")
    func oneWritePerTable() {
        let writes = DeferredWrites()
        #expect(writes.hold("UPDATE a SET x = 1", writing: "a"))
        #expect(!writes.hold("UPDATE a SET x = 2", writing: "a"))
        #expect(writes.hold("SELECT pg_notify('c', 'p')", writing: nil))
        #expect(!writes.hold("SELECT pg_notify('c', 'q')", writing: nil))
        #expect(writes.take()?.sql == "WITH w0 AS (UPDATE a SET x = 1) SELECT pg_notify('c', 'p')")
        #expect(writes.hold("UPDATE a SET x = 2", writing: "a"))
        writes.discard()
        #expect(writes.isEmpty && writes.take() == nil)
    }

    @Test("Data writes alone end in SELECT 1")
    func withoutNotification() {
        let writes = DeferredWrites()
        #expect(writes.hold("UPDATE a SET x = 1", writing: "a"))
        #expect(writes.hold("UPDATE b SET y = 2", writing: "b"))
        #expect(writes.take()?.sql == "WITH w0 AS (UPDATE a SET x = 1), w1 AS (UPDATE b SET y = 2) SELECT 1")
    }
}
