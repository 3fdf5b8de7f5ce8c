import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerPostgres
import GotchuLedgerTesting
import Logging
import PostgresNIO
import Testing

@Suite(
    "PostgreSQL store on the database clock",
    .enabled(if: TestPostgres.server != nil, TestPostgres.skipReason),
    .timeLimit(.minutes(10))
)
struct DatabaseClockTests {
    @Test("Without an injected clock, expiry and lock lapses follow the database's clock_timestamp()")
    func databaseClock() async throws {
        // Lifetimes far longer than any step of the test takes, however busy the machine: time passes for the
        // store only when the test moves the database's clock.
        var policy = LedgerPolicy()
        policy.sessionLifetime = .seconds(600)
        policy.lockLifetime = .seconds(60)
        try await TestPostgres.withDatabase { [policy] url in
            try await TestPostgres.withClient(url) { admin in
                let clock = ShiftedDatabaseClock(admin)
                // A day behind ours: judged by our clock, every session would have expired before it was created.
                try await clock.install(shift: -86_400)
                let logger = Logger(label: "database-clock") { _ in SwiftLogNoOpLogHandler() }
                let store = PostgresLedgerStore(
                    url: url,
                    policy: policy,
                    connectionWait: TestPostgres.connectionWait,
                    logger: logger
                )
                try await withServices([store.client]) {
                    try await store.migrate()
                    let payee = try await store.login(email: "payee@example.com")
                    let first = try await store.login(email: "first@example.com")
                    let second = try await store.login(email: "second@example.com")
                    for user in [first, second] { _ = try await store.fund(userID: user.id, amountCents: 1_000) }
                    let before = try await clock.now()
                    let (session, _) = try await store.createSession(
                        payeeID: payee.id,
                        amountCents: 100,
                        idempotencyKey: nil
                    )
                    let after = try await clock.now()
                    let expiresAt = Int64((session.expiresAt.timeIntervalSince1970 * 1000).rounded())
                    #expect((before + 600_000...after + 600_000).contains(expiresAt))
                    #expect(session.expiresAt < Date().addingTimeInterval(-3_600))

                    try await store.lock(sid: session.sid, payerID: first.id)
                    await #expect(
                        throws: LedgerError(
                            .sessionLocked,
                            detail: "another payer holds this session; try again shortly"
                        )
                    ) {
                        try await store.lock(sid: session.sid, payerID: second.id)
                    }
                    // Past the first lock's lifetime on the database's clock: it lapsed, the session did not.
                    try await clock.advance(seconds: 61)
                    try await store.lock(sid: session.sid, payerID: second.id)
                    #expect(try await store.session(sid: session.sid, viewerID: payee.id).status == .locked)

                    // Past the session's lifetime.
                    try await clock.advance(seconds: 600)
                    let status = try await store.session(sid: session.sid, viewerID: payee.id)
                    #expect(status.status == .expired)
                    let outcome = try await store.send(sid: session.sid, payerID: second.id, idempotencyKey: "late").0
                    #expect(
                        outcome
                            == .refused(
                                LedgerError(.sessionExpired, detail: "this session has expired; ask for a new one")
                            )
                    )
                }
            }
        }
    }
}

/// Moves a test database's notion of time: `clock_timestamp()` there becomes the real one plus a shift the test
/// sets. A function of that name in `public`, put ahead of `pg_catalog` on the database's search path, takes the
/// place of the built-in one in every session opened afterwards.
struct ShiftedDatabaseClock {
    let client: PostgresClient

    init(_ client: PostgresClient) { self.client = client }

    /// Installs the shifted clock, `shift` seconds from the real one; call it before the store opens connections.
    func install(shift seconds: Double) async throws {
        _ = try await client.query("CREATE TABLE public.test_clock_shift (shift INTERVAL NOT NULL)")
        _ = try await client.query("INSERT INTO public.test_clock_shift VALUES (make_interval(secs => \(seconds)))")
        _ = try await client.query(
            """
            CREATE FUNCTION public.clock_timestamp() RETURNS TIMESTAMPTZ LANGUAGE sql VOLATILE
            AS $$ SELECT pg_catalog.clock_timestamp() + (SELECT shift FROM public.test_clock_shift) $$
            """
        )
        _ = try await client.query(
            """
            DO $$ BEGIN
                EXECUTE format('ALTER DATABASE %I SET search_path = public, pg_catalog', current_database());
            END $$
            """
        )
    }

    /// Moves the database's clock forward.
    func advance(seconds: Double) async throws {
        _ = try await client.query(
            "UPDATE public.test_clock_shift SET shift = shift + make_interval(secs => \(seconds))"
        )
    }

    /// The database's time now, in milliseconds since 1970, as the store reads it.
    func now() async throws -> Int64 {
        let rows = try await client.query(
            "SELECT floor(extract(epoch FROM public.clock_timestamp()) * 1000)::BIGINT"
        )
        for try await value in rows.decode(Int64.self) { return value }
        throw TestPostgresError("the database did not tell the time")
    }
}
