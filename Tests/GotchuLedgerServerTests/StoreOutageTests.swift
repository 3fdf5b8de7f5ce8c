import Foundation
import GotchuAPI
import GotchuLedger
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuTesting
import Logging
import Synchronization
import Testing

@testable import GotchuLedgerServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server around an outage of its store: a database that goes away and comes back, a disk that fills and frees.
/// Each refusal is quick and says why, health splits into liveness and readiness, and nothing is half-written.
@Suite("Store outages", .timeLimit(.minutes(3)))
struct StoreOutageTests {
    @Test(
        "PostgreSQL away: 503 database-unavailable with Retry-After at once, not-ready, live; logins are not held against the account",
        .enabled(if: TestPostgres.isConfigured, TestPostgres.skipReason)
    )
    func postgresAway() async throws {
        try await TestPostgres.withDatabase { database in
            let relayPort = try freeLoopbackPort()
            let relay = try await TCPRelay(listening: relayPort, to: database.host, database.port)
            defer { relay.kill() }
            var url = database
            url.host = "127.0.0.1"
            url.port = relayPort
            let logger = Logger(label: "outage") { _ in SwiftLogNoOpLogHandler() }
            let store = PostgresLedgerStore(
                url: url,
                maximumConnections: 4,
                connectionWait: .seconds(1),
                logger: logger
            )
            let tokens = try await TokenAuthority(secret: TestLedger.secret)
            // The login back-off on, as a server runs it.
            var limits = LedgerLimits.unlimited
            limits.loginBackoff = LoginBackoff()
            try await LedgerServer.withRunning(
                store: store,
                services: [store.client],
                .inProcess(tokens: tokens) { $0.limits = limits }
            ) { base in
                _ = try await store.addUser(
                    email: "zoe@example.com",
                    displayName: nil,
                    password: "correct horse battery",
                    actor: "test"
                )
                let client = LedgerClient(baseURL: base)
                #expect(try await raw(base, "GET", "/readyz").status == 200)

                await relay.stop()
                #expect(try await raw(base, "GET", "/livez").status == 200)
                for path in ["/healthz", "/readyz"] {
                    let answer = try await raw(base, "GET", path)
                    #expect(answer.status == 503, "\(path)")
                    #expect(TestLedger.problemKind(answer.body) == .databaseUnavailable, "\(path)")
                    #expect(answer.headers["retry-after"] == "5", "\(path)")
                }
                // More correct logins than the account's free failures, all refused by the outage.
                for _ in 0..<(LoginBackoff().freeFailuresPerAccount + 2) {
                    let kind = await problemKind {
                        try await client.login(email: "zoe@example.com", password: "correct horse battery")
                    }
                    #expect(kind == .databaseUnavailable)
                }

                try await relay.start()
                // The pool reconnects on its own; the deadline only bounds a hang.
                #expect(try await eventually { try await raw(base, "GET", "/readyz").status == 200 })
                // The outage counted nothing against the account: the next correct password logs in.
                let login = try await client.login(email: "zoe@example.com", password: "correct horse battery")
                #expect(!login.token.isEmpty)
            }
        }
    }

    @Test(
        "SQLite disk full: 507 storage-full with Retry-After, not ready, nothing half-written; space freed, it resumes",
        .enabled(if: getuid() == 0, "mounting a small file system for the ledger needs root (CI runs as root)")
    )
    func sqliteDiskFull() async throws {
        let disk = try SmallDisk(megabytes: 2)
        defer { disk.remove() }
        let clock = ManualClock()
        let path = disk.directory + "/ledger.sqlite"
        let store = try SQLiteLedgerStore(path: path, clock: { clock.now() })
        let tokens = try await TokenAuthority(secret: TestLedger.secret, clock: { clock.now() })
        try await LedgerServer.withRunning(store: store, .inProcess(tokens: tokens)) { base in
            var payer = LedgerClient(baseURL: base)
            payer.token = try await payer.devLogin(email: "payer@example.com").token
            let funded = try await payer.fund(amountCents: 100)
            #expect(funded.newBalanceCents == 100)
            let filler = try disk.fill()

            // Each refused fund was undone whole: the balance counts only what was answered 200.
            var answered: Int64 = 100
            var refusal: (status: Int, body: Data, headers: [String: String])?
            for _ in 0..<5_000 {
                let answer = try await raw(base, "POST", "/dev/fund", body: #"{"amount_cents":1}"#, token: payer.token)
                if answer.status == 200 {
                    answered += 1
                    continue
                }
                refusal = answer
                break
            }
            let refused = try #require(refusal, "writes kept succeeding on a full disk")
            #expect(refused.status == 507)
            #expect(TestLedger.problemKind(refused.body) == .storageFull)
            #expect(refused.headers["retry-after"] == "30")
            let ready = try await raw(base, "GET", "/readyz")
            #expect(ready.status == 507)
            #expect(TestLedger.problemKind(ready.body) == .storageFull)
            // Reads still work, and say so.
            #expect(try await raw(base, "GET", "/livez").status == 200)
            #expect(try await payer.wallet().availableCents == answered)

            try FileManager.default.removeItem(atPath: filler)
            #expect(try await raw(base, "GET", "/readyz").status == 200)
            #expect(try await payer.fund(amountCents: 1).newBalanceCents == answered + 1)
        }
        let report = try await store.verify()
        #expect(report.isValid, "\(report.failure ?? "")")
    }

    @Test("An outage is logged once when it begins, again only if its cause changes, and once when it ends")
    func outageLoggedOncePerEpisode() {
        let records = LogRecords()
        let logger = Logger(label: "outage-test") { _ in CapturingLogHandler(records) }
        let outage = StoreOutage()
        let away = LedgerError(.databaseUnavailable, detail: "away")
        let full = LedgerError(.storageFull, detail: "full")
        for _ in 0..<100 { outage.failed(away, logger: logger) }
        for _ in 0..<100 { outage.failed(full, logger: logger) }
        outage.recovered(logger: logger)
        outage.recovered(logger: logger)
        let lines = records.all.map { ($0.level, $0.metadata["reason"] ?? "") }
        #expect(lines.map(\.0) == [.error, .error, .notice])
        #expect(lines.map(\.1) == ["database-unavailable", "storage-full", "storage-full"])
    }

    @Test("Logins that fail for the server's reasons are taken back from the back-off; wrong passwords still count")
    func loginThrottleCountsOnlyWrongCredentials() throws {
        var backoff = LoginBackoff()
        backoff.freeFailuresPerAccount = 2
        let throttle = LoginThrottle(backoff: backoff, capacity: 100, clock: Date.init)
        for _ in 0..<10 {
            try throttle.begin(account: "zoe@example.com", address: "192.0.2.1")
            throttle.withdrawn(account: "zoe@example.com", address: "192.0.2.1")
        }
        try throttle.begin(account: "zoe@example.com", address: "192.0.2.1")
        try throttle.begin(account: "zoe@example.com", address: "192.0.2.1")
        #expect(throws: RateLimiter.Exceeded.self) {
            try throttle.begin(account: "zoe@example.com", address: "192.0.2.1")
        }
    }

    /// A raw exchange with the server at `base`.
    private func raw(
        _ base: URL,
        _ method: String,
        _ path: String,
        body: String? = nil,
        token: String? = nil
    ) async throws -> (status: Int, body: Data, headers: [String: String]) {
        var request = URLRequest(url: URL(string: path, relativeTo: base)!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { fields["\(name)".lowercased()] = "\(value)" }
        return (http.statusCode, data, fields)
    }
}

/// A TCP relay on a loopback port to a server, in a child process: stopping it (SIGKILL) cuts every connection at
/// once, as a database that goes down does, and starting it again on the same port is the database coming back. Its
/// output is read and its exit awaited off the tasks' threads, so a busy machine's test run never blocks on it.
private final class TCPRelay: Sendable {
    private let arguments: [String]
    private let command = Mutex<RunningCommand?>(nil)

    init(listening port: Int, to host: String, _ targetPort: Int) async throws {
        arguments = ["-c", Self.script, String(port), host, String(targetPort)]
        try await start()
    }

    /// Starts relaying, and returns once the relay listens.
    func start() async throws {
        let command = try RunningCommand(URL(fileURLWithPath: "/usr/bin/python3"), arguments)
        self.command.withLock { $0 = command }
        _ = try await command.waitForLine { $0 == "listening" }
    }

    /// Cuts every connection and waits for the relay to be gone.
    func stop() async {
        guard let command = command.withLock({ $0.take() }) else { return }
        _ = try? await command.stop(signal: SIGKILL)
    }

    /// Cuts every connection without waiting (for a `defer`).
    func kill() {
        guard let command = command.withLock({ $0.take() }) else { return }
        try? command.stopNow()
    }

    private static let script = """
        import asyncio, sys
        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            finally:
                writer.close()
        async def serve(client_reader, client_writer):
            try:
                server_reader, server_writer = await asyncio.open_connection(sys.argv[2], int(sys.argv[3]))
            except OSError:
                client_writer.close()
                return
            await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer),
                                 return_exceptions=True)
        async def main():
            server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]), reuse_address=True)
            print("listening", flush=True)
            await server.serve_forever()
        asyncio.run(main())
        """
}

/// A small tmpfs mounted for one test, so that its disk can be filled for real.
private struct SmallDisk {
    let directory: String

    init(megabytes: Int) throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-disk-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let mount = try SpawnedProcess(
            executable: "/bin/mount",
            arguments: ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", directory]
        )
        guard mount.waitUntilExit() == 0 else { throw TestPostgresError("could not mount a tmpfs at \(directory)") }
    }

    /// Writes a file until the disk has no room left; returns its path.
    func fill() throws -> String {
        let path = directory + "/filler"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw TestPostgresError("could not create \(path)") }
        defer { close(descriptor) }
        let block = [UInt8](repeating: 0xA5, count: 4096)
        while block.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        return path
    }

    func remove() {
        _ = try? SpawnedProcess(executable: "/bin/umount", arguments: [directory]).waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
