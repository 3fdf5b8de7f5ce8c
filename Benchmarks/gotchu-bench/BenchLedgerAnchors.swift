import Foundation
import GRDBSQLite
import GotchuCore
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import Logging
import PostgresNIO

/// The SQLite anchor in this binary: the statements the SQLite store issues for one payment, as raw SQL through the
/// SQLite C API on one connection, each statement prepared once, no framework, no task hop, one thread. It stores
/// the chain's hashes and the receipt without computing them (no SHA-256, no signature, no JSON).
///
/// With `transactionsPerCommit` above one it is the ceiling of group commit: each payment's transactions are
/// savepoints, as the store's writer runs them, in one shared transaction committed every that many. Its resolve reads
/// through the writing connection, which sees what is not yet committed; the store's resolve waits for the commit.
enum RawSQLiteAnchor {
    /// The store's own statements (``SQLiteLedgerStatements``), by the index the payment below runs them at; the
    /// transaction's `BEGIN IMMEDIATE` and `COMMIT` are GRDB's.
    private static let statements: [String] = [
        "BEGIN IMMEDIATE",  // 0
        "COMMIT",  // 1
        SQLiteLedgerStatements.walletByUser,  // 2
        SQLiteLedgerStatements.eidAllocated,  // 3
        SQLiteLedgerStatements.insertSession,  // 4
        SQLiteLedgerStatements.insertEID,  // 5
        SQLiteLedgerStatements.sessionByEID,  // 6
        SQLiteLedgerStatements.sessionByID,  // 7
        SQLiteLedgerStatements.locksHeld,  // 8
        SQLiteLedgerStatements.lockSession,  // 9
        SQLiteLedgerStatements.idempotencyRecord,  // 10
        SQLiteLedgerStatements.insertInFlight,  // 11
        SQLiteLedgerStatements.walletsForUpdate(accounts: 0, users: 2),  // 12
        SQLiteLedgerStatements.setBalances(count: 2),  // 13
        SQLiteLedgerStatements.insertEntries(count: 2),  // 14
        SQLiteLedgerStatements.paySession,  // 15
        SQLiteLedgerStatements.recordOutcome,  // 16
        SQLiteLedgerStatements.chainHead,  // 17
        SQLiteLedgerStatements.setChainHead,  // 18
        SQLiteLedgerStatements.insertReceipt,  // 19
        SQLiteLedgerStatements.savepoint,  // 20
        SQLiteLedgerStatements.releaseSavepoint,  // 21
    ]

    /// A receipt's stored body is about this long; the anchor stores a fixed one (no signing, no JSON).
    private static let receiptBody = String(repeating: "r", count: 640)

    /// A chain hash's length (SHA-256 in hex); the anchor stores random text of it (no hashing).
    private static func fakeHash() -> String {
        (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// Runs `payments` payments from `payer` to `payee` on the file at `path`.
    static func run(
        path: String,
        payer: String,
        payee: String,
        payments: Int,
        transactionsPerCommit: Int = 1
    ) throws -> BenchFigure {
        let writer = try Connection(path: path)
        let reader = try Connection(path: path)
        let prepared = try statements.map { try writer.prepare($0) }
        let resolve = transactionsPerCommit > 1 ? prepared[6] : try reader.prepare(statements[6])
        let resolver = transactionsPerCommit > 1 ? writer : reader
        var uncommitted = 0
        func begin() throws {
            if uncommitted == 0 { try writer.step(prepared[0], []) }
            if transactionsPerCommit > 1 { try writer.step(prepared[20], []) }
        }
        func commit() throws {
            if transactionsPerCommit > 1 { try writer.step(prepared[21], []) }
            uncommitted += 1
            if uncommitted == transactionsPerCommit {
                try writer.step(prepared[1], [])
                uncommitted = 0
            }
        }
        var latencies: [Duration] = []
        latencies.reserveCapacity(payments)
        var chainCount = 0
        let cpu = BenchCPU.now()
        let start = ContinuousClock.now
        for index in 0..<payments {
            let began = ContinuousClock.now
            // Create.
            var now = Self.now()
            try begin()
            try writer.step(prepared[2], [.text(payee)])
            let eid = EID.random().rawValue
            try writer.step(prepared[3], [.text(eid)])
            let sid = UUID().uuidString.lowercased()
            try writer.step(
                prepared[4],
                [
                    .text(sid), .text(payee), .integer(1), .text("ADVERTISING"), .integer(now),
                    .integer(now + 300_000), .null, .integer(1),
                ]
            )
            try writer.step(prepared[5], [.text(eid), .text(sid), .integer(now)])
            try commit()
            // Resolve.
            guard try resolver.step(resolve, [.text(eid)]) == sid else { throw CLIError("resolve failed") }
            // Lock.
            now = Self.now()
            try begin()
            try writer.step(prepared[7], [.text(sid)])
            try writer.step(prepared[8], [.text(payer), .text("LOCKED"), .integer(now), .integer(now), .text(sid)])
            try writer.step(prepared[2], [.text(payer)])
            try writer.step(prepared[9], [.text("LOCKED"), .text(payer), .integer(now + 30_000), .text(sid)])
            try commit()
            // Send: one transaction, as the store's (the key admitted in flight, paid, its outcome recorded).
            let key = "\(index)"
            now = Self.now()
            try begin()
            try writer.step(prepared[10], [.text(payer), .text(key)])
            try writer.step(prepared[7], [.text(sid)])
            try writer.step(
                prepared[11],
                [.text(payer), .text(key), .text(sid), .text("IN_FLIGHT"), .integer(now), .integer(now)]
            )
            let wallets = try writer.rows(prepared[12], [.text(payer), .text(payee)])
            guard let source = wallets.first(where: { $0.user == payer }),
                let target = wallets.first(where: { $0.user == payee })
            else { throw CLIError("wallets missing") }
            try writer.step(
                prepared[13],
                [
                    .text(source.id), .integer(source.balance - 1), .text(target.id), .integer(target.balance + 1),
                    .text(source.id), .text(target.id),
                ]
            )
            try writer.step(prepared[17], [])
            let transfer = UUID().uuidString.lowercased()
            let (debitHash, creditHash) = (Self.fakeHash(), Self.fakeHash())
            try writer.step(
                prepared[14],
                [
                    .text(UUID().uuidString.lowercased()), .text(transfer), .text(source.id), .text("DEBIT"),
                    .integer(1), .text("SEND_P2P"), .text("session"), .text(sid), .integer(now), .text(debitHash),
                    .text(UUID().uuidString.lowercased()), .text(transfer), .text(target.id), .text("CREDIT"),
                    .integer(1), .text("RECEIVE_P2P"), .text("session"), .text(sid), .integer(now), .text(creditHash),
                ]
            )
            chainCount += 2
            try writer.step(prepared[18], [.text(creditHash), .integer(Int64(chainCount))])
            try writer.step(prepared[15], [.text("PAID"), .text(payer), .integer(now), .integer(0), .text(sid)])
            try writer.step(
                prepared[19],
                [
                    .text(UUID().uuidString.lowercased()), .text("payment"), .text(sid), .text(receiptBody),
                    .integer(now),
                ]
            )
            try writer.step(
                prepared[16],
                [
                    .text(payer), .text(key), .text(sid), .text("DONE"), .integer(source.balance - 1), .null, .null,
                    .integer(now), .integer(now), .null,
                ]
            )
            try commit()
            latencies.append(ContinuousClock.now - began)
        }
        if uncommitted > 0 { try writer.step(prepared[1], []) }
        return BenchFigure(payments: payments, elapsed: ContinuousClock.now - start, latencies: latencies)
            .with(cpu: BenchCPU.since(cpu).own)
    }

    private static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    enum Value {
        case integer(Int64)
        case text(String)
        case null
    }

    /// A bare connection: WAL, `synchronous=FULL`, foreign keys on, as the store's.
    final class Connection {
        let handle: OpaquePointer
        private var prepared: [OpaquePointer] = []

        init(path: String) throws {
            var handle: OpaquePointer?
            guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
                let handle
            else { throw CLIError("cannot open \(path)") }
            self.handle = handle
            sqlite3_busy_timeout(handle, 10_000)
            for pragma in ["PRAGMA foreign_keys = ON", "PRAGMA synchronous = FULL"] {
                guard sqlite3_exec(handle, pragma, nil, nil, nil) == SQLITE_OK else { throw failure(pragma) }
            }
        }

        deinit {
            for statement in prepared { sqlite3_finalize(statement) }
            sqlite3_close_v2(handle)
        }

        func prepare(_ sql: String) throws -> OpaquePointer {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
                let statement
            else { throw failure(sql) }
            prepared.append(statement)
            return statement
        }

        /// Runs a statement; the first column of its first row as text, if there is one.
        @discardableResult
        func step(_ statement: OpaquePointer, _ values: [Value]) throws -> String? {
            bind(statement, values)
            defer { sqlite3_reset(statement) }
            switch sqlite3_step(statement) {
            case SQLITE_DONE: return nil
            case SQLITE_ROW: return sqlite3_column_text(statement, 0).map { String(cString: $0) }
            default: throw failure("step")
            }
        }

        /// The wallets of a transfer: id, user, balance.
        func rows(_ statement: OpaquePointer, _ values: [Value]) throws -> [(id: String, user: String?, balance: Int64)]
        {
            bind(statement, values)
            defer { sqlite3_reset(statement) }
            var rows: [(id: String, user: String?, balance: Int64)] = []
            while true {
                switch sqlite3_step(statement) {
                case SQLITE_DONE: return rows
                case SQLITE_ROW:
                    rows.append(
                        (
                            String(cString: sqlite3_column_text(statement, 0)),
                            sqlite3_column_text(statement, 1).map { String(cString: $0) },
                            sqlite3_column_int64(statement, 2)
                        )
                    )
                default: throw failure("step")
                }
            }
        }

        private func bind(_ statement: OpaquePointer, _ values: [Value]) {
            for (index, value) in values.enumerated() {
                let position = Int32(index + 1)
                switch value {
                case .integer(let value): sqlite3_bind_int64(statement, position, value)
                case .text(let value): sqlite3_bind_text(statement, position, value, -1, transient)
                case .null: sqlite3_bind_null(statement, position)
                }
            }
        }

        private func failure(_ what: String) -> CLIError {
            CLIError("SQLite: \(String(cString: sqlite3_errmsg(handle))) (\(what.prefix(60)))")
        }
    }

    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
}

/// The Python anchor: `Benchmarks/ledger_sqlite.py` (the same statements from Python's sqlite3 module).
enum PythonAnchor {
    static func run(script: String, path: String, payer: String, payee: String, payments: Int) throws -> BenchFigure {
        guard FileManager.default.fileExists(atPath: script) else {
            print("  (Python anchor skipped: \(script) not found; give its path with --python-script)")
            return .skipped
        }
        let cpu = BenchCPU.now()
        let result = try BenchProcess.run("python3", [script, path, payer, payee, "\(payments)"])
        let used = BenchCPU.since(cpu).children
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any],
            let seconds = object["seconds"] as? Double, let latencies = object["latencies_us"] as? [Int]
        else {
            print("  (Python anchor failed: exit \(result.status))")
            return .skipped
        }
        // The CPU of the script's whole run, its start and set-up included.
        return BenchFigure(payments: payments, elapsed: .seconds(seconds), microseconds: latencies).with(cpu: used)
    }
}

/// The server measured from outside with wrk: one connection and one thread per pair, each running the payment's four
/// requests in turn from a generated Lua script that carries the pair's tokens and picks the ids out of the JSON.
enum WrkAnchor {
    static func run(
        store: any LedgerStore,
        tokens: TokenAuthority,
        pairs: Int,
        seconds: Int
    ) async throws
        -> BenchFigure
    {
        guard BenchProcess.find("wrk") != nil else {
            print("  (wrk anchor skipped: wrk not found; apt-get install wrk)")
            return .skipped
        }
        let users = try await BenchLedgerCommand.users(store, pairs: pairs, payments: 1_000_000)
        var table = "local pairs = {\n"
        for (payer, payee) in users {
            table += "  {payer = \"\(try await tokens.issue(userID: payer.id))\", "
            table += "payee = \"\(try await tokens.issue(userID: payee.id))\"},\n"
        }
        table += "}\n"
        let script = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gotchu-wrk-\(UUID().uuidString).lua"
        )
        try (table + luaScript).write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        return try await LedgerServer.withRunning(
            store: store,
            .inProcess(tokens: tokens) { $0.developmentMode = false }
        ) { url in
            let cpu = BenchCPU.now()
            let result = try await BenchProcess.runDetached(
                "wrk",
                [
                    "-t", "\(pairs)", "-c", "\(pairs)", "-d", "\(seconds)s", "--timeout", "10s", "-s", script.path,
                    url.absoluteString,
                ]
            )
            guard result.status == 0,
                let line = result.output.split(separator: "\n").last(where: { $0.hasPrefix("GOTCHU ") })
            else {
                print("  (wrk failed: exit \(result.status))")
                return .skipped
            }
            let fields = line.split(separator: " ").dropFirst().compactMap { Int($0) }
            guard fields.count == 5 else { return .skipped }
            let (paid, failures, microseconds, p50, p99) = (fields[0], fields[1], fields[2], fields[3], fields[4])
            if failures > 0 { print("  (wrk: \(failures) requests answered with an error)") }
            return BenchFigure(
                payments: paid,
                elapsed: .microseconds(microseconds),
                latencies: .reported(p50: UInt64(p50), p99: UInt64(p99))
            ).with(cpu: BenchCPU.since(cpu).own)
        }
    }

    /// The per-connection state machine: create (payee) → resolve → lock → send (payer), then again.
    private static let luaScript = #"""
        local index = 0
        local threads = {}

        function setup(thread)
          index = index + 1
          thread:set("pair", index)
          table.insert(threads, thread)
        end

        function init(args)
          payer = "Bearer " .. pairs[pair].payer
          payee = "Bearer " .. pairs[pair].payee
          step, paid, failures, key = 0, 0, 0, 0
        end

        local function post(path, token, body, extra)
          local headers = {["Content-Type"] = "application/json"}
          if token then headers["Authorization"] = token end
          if extra then headers["Idempotency-Key"] = extra end
          return wrk.format("POST", path, headers, body)
        end

        function request()
          if step == 0 then
            return post("/sessions/create", payee, '{"amount_cents":1}')
          elseif step == 1 then
            return post("/sessions/resolve", payer, '{"eid":"' .. eid .. '"}')
          elseif step == 2 then
            return post("/sessions/lock", payer, '{"sid":"' .. sid .. '"}')
          else
            key = key + 1
            return post("/wallet/send", payer, '{"sid":"' .. sid .. '"}', "wrk-" .. key)
          end
        end

        function response(status, headers, body)
          if status ~= 200 then
            failures = failures + 1
            step = 0
            return
          end
          if step == 0 then
            sid = body:match('"sid"%s*:%s*"([^"]+)"')
            eid = body:match('"eid"%s*:%s*"([^"]+)"')
            step = 1
          elseif step == 3 then
            paid = paid + 1
            step = 0
          else
            step = step + 1
          end
        end

        function done(summary, latency, requests)
          local paid, failures = 0, 0
          for _, thread in ipairs(threads) do
            paid = paid + thread:get("paid")
            failures = failures + thread:get("failures")
          end
          io.write(string.format("GOTCHU %d %d %d %d %d\n", paid, failures, summary.duration,
            latency:percentile(50), latency:percentile(99)))
        end
        """#
}

/// The PostgreSQL anchor: pgbench running the statements the PostgreSQL store issues for one payment (one pgbench
/// transaction), with one client per pair, on a fresh database with the store's schema.
enum PgbenchAnchor {
    /// How pgbench sends its statements (its `-M`).
    enum Mode: String, CaseIterable {
        /// Each statement prepared once per connection, then only bound and run, as the store sends them.
        case prepared
        /// Each statement parsed and planned every time it runs: what parsing costs the database.
        case extended
    }

    static func run(server: PostgresURL, clients: Int, payments: Int, mode: Mode) async throws -> BenchFigure? {
        guard BenchProcess.find("pgbench") != nil else {
            print("  (pgbench anchor skipped: pgbench not found; apt-get install postgresql-client)")
            return nil
        }
        let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let name = "gotchu_pgbench_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
        try await BenchBackend.administer(server, "CREATE DATABASE \(name)", logger: logger)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-pgbench-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let url = server.with(database: name)
            let store = PostgresLedgerStore(url: url, logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { pool in
                pool.addTask { await store.client.run() }
                defer { pool.cancelAll() }
                try await store.migrate()
                // pgbench numbers its clients from 0: users and wallets named after them, funded for the run.
                for client in 0..<clients {
                    for role in ["payer", "payee"] {
                        let user = "pgbench-\(role)-\(client)"
                        let balance: Int64 = role == "payer" ? 1_000_000_000 : 0
                        _ = try await store.client.query(
                            """
                            INSERT INTO users (id, email, display_name, created_at)
                            VALUES (\(user), \(user + "@bench.example"), \(user), 0)
                            """,
                            logger: logger
                        ).collect()
                        _ = try await store.client.query(
                            """
                            INSERT INTO wallet_accounts (id, user_id, kind, available_cents, created_at)
                            VALUES (\("wallet-" + user), \(user), 'USER', \(balance), 0)
                            """,
                            logger: logger
                        ).collect()
                    }
                }
            }
            let script = directory.appendingPathComponent("payment.sql")
            try pgbenchScript.write(to: script, atomically: true, encoding: .utf8)
            let arguments = [
                "-n", "-M", mode.rawValue, "-c", "\(clients)", "-j", "\(min(clients, 2))", "-t", "\(payments)",
                "-f", script.path, "-l", "--log-prefix", directory.appendingPathComponent("log").path,
                "-h", url.host, "-p", "\(url.port)", "-U", url.username, name,
            ]
            let cpu = BenchCPU.now()
            let start = ContinuousClock.now
            let result = try await BenchProcess.runDetached("pgbench", arguments, withErrors: true)
            let elapsed = ContinuousClock.now - start
            let used = BenchCPU.since(cpu).children
            try await BenchBackend.administer(server, "DROP DATABASE \(name) WITH (FORCE)", logger: logger)
            guard result.status == 0 else {
                print("  (pgbench failed: exit \(result.status)) \(result.output.suffix(400))")
                return nil
            }
            // pgbench's own rate excludes its connection set-up; the wall time is the fairer comparison with ours.
            var latencies: [Int] = []
            for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasPrefix("log")
            {
                let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let fields = line.split(separator: " ")
                    if fields.count > 2, let microseconds = Int(fields[2]) { latencies.append(microseconds) }
                }
            }
            let tps = result.output.split(separator: "\n").first { $0.hasPrefix("tps = ") }
            if let tps { print("    pgbench: \(tps)") }
            return BenchFigure(payments: clients * payments, elapsed: elapsed, microseconds: latencies).with(cpu: used)
        } catch {
            try? await BenchBackend.administer(server, "DROP DATABASE \(name) WITH (FORCE)", logger: logger)
            throw error
        }
    }

    /// One payment as the PostgreSQL store runs it: the same statements, transactions and round trips, with the writes
    /// it holds back joined as it joins them (pgbench's variables are parameters of unknown type in prepared mode,
    /// hence the casts).
    static let pgbenchScript = """
        \\set n random(1, 1000000000000000)
        \\set e random(0, 1099511627775)
        BEGIN ISOLATION LEVEL READ COMMITTED;
        SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT AS now \\gset
        SELECT id, user_id, available_cents, kind FROM wallet_accounts WHERE user_id = 'pgbench-payee-' || :client_id::TEXT;
        SELECT pg_advisory_xact_lock(hashtextextended(lpad(to_hex(:e::BIGINT), 10, '0'), 0));
        SELECT EXISTS (SELECT 1 FROM session_eids WHERE eid = lpad(to_hex(:e::BIGINT), 10, '0'));
        INSERT INTO payment_sessions (id, payee_id, amount_cents, status, created_at, exp_at, create_key) VALUES ('s-' || :n::TEXT, 'pgbench-payee-' || :client_id::TEXT, 1, 'ADVERTISING', :now::BIGINT, :now::BIGINT + 300000, NULL) ON CONFLICT (payee_id, create_key) DO NOTHING RETURNING 1;
        INSERT INTO session_eids (eid, session_id, created_at) VALUES (lpad(to_hex(:e::BIGINT), 10, '0'), 's-' || :n::TEXT, :now::BIGINT);
        COMMIT;
        SELECT s.id, s.payee_id, s.amount_cents, s.status, s.exp_at, s.locked_by, s.lock_exp_at, s.paid_by, s.paid_at, u.display_name, u.email, u.verified_name, e.retired_at, floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT AS read_at FROM session_eids e JOIN payment_sessions s ON s.id = e.session_id JOIN users u ON u.id = s.payee_id WHERE e.eid = lpad(to_hex(:e::BIGINT), 10, '0') ORDER BY s.created_at DESC, s.seq DESC LIMIT 1;
        BEGIN ISOLATION LEVEL READ COMMITTED;
        SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT AS now \\gset
        SELECT pg_advisory_xact_lock(hashtext('pgbench-payer-' || :client_id::TEXT));
        SELECT s.id, s.payee_id, s.amount_cents, s.status, s.exp_at, s.locked_by, s.lock_exp_at, s.paid_by, s.paid_at FROM payment_sessions s WHERE s.id = 's-' || :n::TEXT FOR UPDATE;
        SELECT COUNT(*), COALESCE(SUM(amount_cents), 0)::BIGINT FROM payment_sessions WHERE locked_by = 'pgbench-payer-' || :client_id::TEXT AND status = 'LOCKED' AND lock_exp_at > :now::BIGINT AND exp_at > :now::BIGINT AND id <> 's-' || :n::TEXT;
        SELECT id, user_id, available_cents, kind FROM wallet_accounts WHERE user_id = 'pgbench-payer-' || :client_id::TEXT;
        WITH w0 AS (UPDATE payment_sessions SET status = 'LOCKED', locked_by = 'pgbench-payer-' || :client_id::TEXT, lock_exp_at = :now::BIGINT + 30000 WHERE id = 's-' || :n::TEXT) SELECT pg_notify('gotchu_session_changes', 's-' || :n::TEXT);
        COMMIT;
        BEGIN ISOLATION LEVEL READ COMMITTED;
        SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT AS now \\gset
        SELECT pg_try_advisory_xact_lock(hashtextextended('pgbench-payer-' || :client_id::TEXT || E'\\n' || :n::TEXT, 1));
        SELECT sid, state, updated_at, balance_cents, problem_type, problem_detail FROM idempotency_keys WHERE user_id = 'pgbench-payer-' || :client_id::TEXT AND key = 'k' || :n::TEXT FOR UPDATE;
        SELECT s.id, s.payee_id, s.amount_cents, s.status, s.exp_at, s.locked_by, s.lock_exp_at, s.paid_by, s.paid_at FROM payment_sessions s WHERE s.id = 's-' || :n::TEXT FOR UPDATE;
        INSERT INTO idempotency_keys (user_id, key, sid, state, created_at, updated_at) VALUES ('pgbench-payer-' || :client_id::TEXT, 'k' || :n::TEXT, 's-' || :n::TEXT, 'IN_FLIGHT', :now::BIGINT, :now::BIGINT) ON CONFLICT (user_id, key) DO NOTHING RETURNING 1;
        SELECT max(available_cents) FILTER (WHERE user_id = 'pgbench-payer-' || :client_id::TEXT) AS payer_balance, max(available_cents) FILTER (WHERE user_id = 'pgbench-payee-' || :client_id::TEXT) AS payee_balance FROM (SELECT id, user_id, available_cents, kind FROM wallet_accounts WHERE id = ANY('{}'::TEXT[]) OR user_id = ANY(ARRAY['pgbench-payer-' || :client_id::TEXT, 'pgbench-payee-' || :client_id::TEXT]) ORDER BY id FOR UPDATE) w \\gset
        WITH w0 AS (UPDATE wallet_accounts w SET available_cents = b.balance FROM UNNEST(ARRAY['wallet-pgbench-payer-' || :client_id::TEXT, 'wallet-pgbench-payee-' || :client_id::TEXT], ARRAY[:payer_balance::BIGINT - 1, :payee_balance::BIGINT + 1]::BIGINT[]) AS b(id, balance) WHERE w.id = b.id) SELECT head_hash, entry_count FROM ledger_chain WHERE id = 1 FOR UPDATE \\gset
        WITH w0 AS (INSERT INTO ledger_entries (id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id, created_at, hash) SELECT e.id, e.transfer_id, e.wallet_id, e.direction, e.amount_cents, e.type, e.ref_type, e.ref_id, e.created_at, e.hash FROM UNNEST(ARRAY['d-' || :n::TEXT, 'c-' || :n::TEXT], ARRAY['t-' || :n::TEXT, 't-' || :n::TEXT], ARRAY['wallet-pgbench-payer-' || :client_id::TEXT, 'wallet-pgbench-payee-' || :client_id::TEXT], ARRAY['DEBIT', 'CREDIT'], ARRAY[1, 1]::BIGINT[], ARRAY['SEND_P2P', 'RECEIVE_P2P'], ARRAY['session', 'session'], ARRAY['s-' || :n::TEXT, 's-' || :n::TEXT], ARRAY[:now::BIGINT, :now::BIGINT], ARRAY[md5('d' || :n::TEXT) || md5('h' || :n::TEXT), md5('c' || :n::TEXT) || md5('h' || :n::TEXT)]) WITH ORDINALITY AS e(id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id, created_at, hash, position) ORDER BY e.position), w1 AS (UPDATE ledger_chain SET head_hash = md5('c' || :n::TEXT) || md5('h' || :n::TEXT), entry_count = :entry_count::BIGINT + 2 WHERE id = 1), w2 AS (UPDATE payment_sessions SET status = 'PAID', paid_by = 'pgbench-payer-' || :client_id::TEXT, paid_at = :now::BIGINT, locked_by = NULL, lock_exp_at = NULL WHERE id = 's-' || :n::TEXT), w3 AS (INSERT INTO receipts (id, kind, session_id, body, created_at) VALUES ('r-' || :n::TEXT, 'payment', 's-' || :n::TEXT, repeat('r', 640), :now::BIGINT)), w4 AS (INSERT INTO idempotency_keys (user_id, key, sid, state, balance_cents, problem_type, problem_detail, created_at, updated_at) VALUES ('pgbench-payer-' || :client_id::TEXT, 'k' || :n::TEXT, 's-' || :n::TEXT, 'DONE', :payer_balance::BIGINT - 1, NULL, NULL, :now::BIGINT, :now::BIGINT) ON CONFLICT (user_id, key) DO UPDATE SET state = EXCLUDED.state, balance_cents = EXCLUDED.balance_cents, problem_type = EXCLUDED.problem_type, problem_detail = EXCLUDED.problem_detail, updated_at = EXCLUDED.updated_at) SELECT pg_notify('gotchu_session_changes', 's-' || :n::TEXT);
        COMMIT;

        """
}

/// Runs the anchors' tools.
enum BenchProcess {
    /// The executable's path on `PATH`, if any.
    static func find(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// Runs the tool to its end on this thread; its exit status and standard output (with its standard error when
    /// `withErrors`).
    static func run(
        _ name: String,
        _ arguments: [String],
        withErrors: Bool = false
    ) throws -> (status: Int32, output: String) {
        guard let path = find(name) else { throw CLIError("\(name) not found on PATH") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        if withErrors { process.standardError = output }
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Runs the tool on a thread of its own, so the server this process runs meanwhile keeps every other thread.
    static func runDetached(
        _ name: String,
        _ arguments: [String],
        withErrors: Bool = false
    ) async throws -> (status: Int32, output: String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try run(name, arguments, withErrors: withErrors) })
            }
        }
    }
}
