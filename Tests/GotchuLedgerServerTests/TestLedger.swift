import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer
// The store harness, the clock and the PostgreSQL databases, shared with the engine's tests: every file here sees
// them.
@_exported public import GotchuLedgerTesting
import GotchuOIDC
import GotchuTesting
import GotchuWebhooks
import Hummingbird
import PostgresNIO
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A real ledger server on a free loopback port, over a SQLite file in a fresh temporary directory or a fresh
/// PostgreSQL database, with a clock the test moves.
struct TestLedger: Sendable {
    let url: URL
    let store: any LedgerStore
    let clock: ManualClock
    let database: TestDatabase
    let tokens: TokenAuthority

    static let secret = String(repeating: "s", count: 40)

    /// The webhooks of the tests' servers: plain http to 127.0.0.1 allowed (every other loopback address is refused,
    /// as in production), names resolved by ``TestWebhookResolver``, never by the machine's name servers.
    static var webhooks: WebhookOptions {
        var options = WebhookOptions()
        options.allowedHosts = ["127.0.0.1"]
        options.resolver = TestWebhookResolver()
        return options
    }

    /// The SQLite file, for tests that reach under the store.
    var databasePath: String {
        get throws {
            guard case .sqlite(let path) = database else { throw TestPostgresError("not a SQLite ledger") }
            return path
        }
    }

    /// Runs `body` against a started server and stops it afterwards. The rate limits, if any, run on the test's clock.
    static func with<T: Sendable>(
        store kind: StoreKind = .sqlite,
        policy: LedgerPolicy = LedgerPolicy(),
        developmentMode: Bool = true,
        registration: Registration = .closed,
        mailer: (any RegistrationMailer)? = nil,
        limits: LedgerLimits = .unlimited,
        identities: (@Sendable (ManualClock) -> OIDCVerifier)? = nil,
        webhooks: WebhookOptions = TestLedger.webhooks,
        publicURL: PublicURL? = nil,
        _ body: @Sendable (TestLedger) async throws -> T
    ) async throws -> T {
        let clock = ManualClock()
        let limits = {
            var limits = limits
            limits.clock = { clock.now() }
            return limits
        }()
        return try await TestStore.with(kind, policy: policy, clock: clock) { store, database, services in
            let tokens = try await TokenAuthority(secret: secret, clock: { clock.now() })
            return try await LedgerServer.withRunning(
                store: store,
                services: services,
                .inProcess(tokens: tokens) {
                    $0.made.identities = identities?(clock)
                    $0.developmentMode = developmentMode
                    $0.registration = registration
                    $0.made.mailer = mailer ?? (registration == .open ? MailBox() : nil)
                    $0.limits = limits
                    $0.webhooks = webhooks
                    $0.publicURL = publicURL
                }
            ) { url in
                try await body(TestLedger(url: url, store: store, clock: clock, database: database, tokens: tokens))
            }
        }
    }

    /// A client logged in as `email`, funded with `cents` when positive, that waits `timeout` seconds of the
    /// server's silence.
    func client(_ email: String, funded cents: Cents = 0, timeout: TimeInterval = 10) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: url, timeout: timeout)
        client.token = try await client.devLogin(email: email).token
        if cents > 0 { _ = try await client.fund(amountCents: cents) }
        return client
    }

    /// How many idempotency keys of `/wallet/send` the store holds, counted under it.
    func idempotencyKeyCount() async throws -> Int {
        switch database {
        case .sqlite(let path):
            let database = try DatabaseQueue(path: path)
            return try await database.read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM idempotency_keys") ?? 0
            }
        case .postgres(let url):
            return try await TestPostgres.withClient(url) { client in
                var count = 0
                for try await value in try await client.query("SELECT COUNT(*) FROM idempotency_keys").decode(
                    Int64.self
                ) {
                    count = Int(value)
                }
                return count
            }
        }
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
