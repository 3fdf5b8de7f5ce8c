import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A clock the tests move by hand; the store and the token authority both read it.
final class ManualClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))

    func now() -> Date { current.withLock { $0 } }

    func advance(seconds: Double) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// A real ledger server on a free loopback port, over a SQLite file in a fresh temporary directory.
struct TestLedger: Sendable {
    let url: URL
    let store: SQLiteLedgerStore
    let clock: ManualClock
    let databasePath: String
    let tokens: TokenAuthority

    static let secret = String(repeating: "s", count: 40)

    /// Runs `body` against a started server and stops it afterwards.
    static func with<T: Sendable>(
        policy: LedgerPolicy = LedgerPolicy(),
        developmentMode: Bool = true,
        _ body: @Sendable (TestLedger) async throws -> T
    ) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gotchu-ledger-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualClock()
        let databasePath = directory.appendingPathComponent("ledger.sqlite").path
        let store = try SQLiteLedgerStore(path: databasePath, policy: policy, clock: { clock.now() })
        try await store.migrate()
        let tokens = try await TokenAuthority(secret: secret, clock: { clock.now() })
        let logger = Logger(label: "test-ledger") { _ in SwiftLogNoOpLogHandler() }
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let application = LedgerServer.application(
            store: store,
            tokens: tokens,
            port: 0,
            developmentMode: developmentMode,
            logger: logger
        ) { port in portContinuation.yield(port) }
        let group = ServiceGroup(services: [application], gracefulShutdownSignals: [], logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            let ledger = TestLedger(
                url: URL(string: "http://127.0.0.1:\(port)")!,
                store: store,
                clock: clock,
                databasePath: databasePath,
                tokens: tokens
            )
            do {
                let result = try await body(ledger)
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            } catch {
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
        }
    }

    /// A client logged in as `email`, funded with `cents` when positive.
    func client(_ email: String, funded cents: Cents = 0) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: url)
        client.token = try await client.devLogin(email: email).token
        if cents > 0 { _ = try await client.fund(amountCents: cents) }
        return client
    }

    /// A client with no token.
    var anonymous: LedgerClient { LedgerClient(baseURL: url) }

    /// A raw HTTP exchange, for bodies and headers the typed client would never send.
    func raw(
        _ method: String,
        _ path: String,
        body: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> (status: Int, body: Data, headers: [String: String]) {
        var request = URLRequest(url: URL(string: path, relativeTo: url)!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { fields["\(name)".lowercased()] = "\(value)" }
        return (http.statusCode, data, fields)
    }

    /// The problem type of a raw error response.
    static func problemKind(_ body: Data) -> ProblemKind? {
        (try? APIJSON.decoder().decode(Problem.self, from: body))?.kind
    }
}

/// The problem kind a failing call threw, or `nil` if it did not throw one.
func problemKind(_ body: () async throws -> some Any) async -> ProblemKind? {
    do {
        _ = try await body()
        return nil
    } catch let error as LedgerClientError {
        return error.problemKind
    } catch {
        return nil
    }
}
