import Crypto
import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerServer
import GotchuTesting
import PostgresNIO
import ServiceLifecycle
import Testing

/// The credentials a request can carry, in the route table below.
enum TestCredential: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case userToken = "user token"
    case createKey = "key sessions:create"
    case readKey = "key sessions:read"
    case cancelKey = "key sessions:cancel"
    case refundKey = "key refunds:create"
    case revokedKey = "revoked key"
    case unknownKey = "unknown gk_ key"
    case garbage = "garbage"
    case none = "no credentials"

    var testDescription: String { rawValue }

    /// The scope of a working key.
    var scope: APIKeyScope? {
        switch self {
        case .createKey: .sessionsCreate
        case .readKey: .sessionsRead
        case .cancelKey: .sessionsCancel
        case .refundKey: .refundsCreate
        default: nil
        }
    }
}

/// A route of the API and the action it needs, for the route table.
struct TestRoute: Sendable, CustomTestStringConvertible {
    var method: String
    var path: String
    /// The body, given the test's live session id.
    var body: @Sendable (String) -> String?
    var headers: [String: String] = [:]
    /// `nil` for a route that needs no credentials.
    var action: LedgerAction?
    /// Refusals by the ledger's rules (not by a credential check) that a credential allowed on the route may get:
    /// the test's sessions are live, not paid.
    var rulesRefusals: Set<ProblemKind> = []

    var testDescription: String { "\(method) \(path)" }

    /// Every route of a development ledger.
    static let all: [TestRoute] = [
        TestRoute(method: "GET", path: "/wallet/me", body: { _ in nil }, action: .readWallet),
        TestRoute(method: "GET", path: "/wallet/entries", body: { _ in nil }, action: .readWallet),
        TestRoute(
            method: "POST",
            path: "/sessions/create",
            body: { _ in #"{"amount_cents": 250}"# },
            action: .createSession
        ),
        TestRoute(method: "GET", path: "/sessions/{sid}", body: { _ in nil }, action: .readSession),
        TestRoute(method: "POST", path: "/sessions/cancel", body: { #"{"sid": "\#($0)"}"# }, action: .cancelSession),
        TestRoute(method: "POST", path: "/sessions/lock", body: { #"{"sid": "\#($0)"}"# }, action: .lock),
        TestRoute(method: "POST", path: "/sessions/unlock", body: { #"{"sid": "\#($0)"}"# }, action: .unlock),
        TestRoute(
            method: "POST",
            path: "/wallet/send",
            body: { #"{"sid": "\#($0)"}"# },
            headers: ["Idempotency-Key": "route-table"],
            action: .send
        ),
        TestRoute(method: "POST", path: "/dev/fund", body: { _ in #"{"amount_cents": 100}"# }, action: .fund),
        TestRoute(
            method: "POST",
            path: "/wallet/payouts",
            body: { _ in #"{"amount_cents": 100}"# },
            headers: ["Idempotency-Key": "route-table"],
            action: .payout
        ),
        TestRoute(
            method: "POST",
            path: "/sessions/resolve",
            body: { _ in #"{"eid": "0000000000"}"# },
            action: .resolve
        ),
        TestRoute(method: "POST", path: "/sessions/{sid}/eids", body: { _ in nil }, action: .rotateEID),
        TestRoute(
            method: "POST",
            path: "/sessions/{sid}/refunds",
            body: { _ in #"{"amount_cents": 100}"# },
            headers: ["Idempotency-Key": "route-table"],
            action: .refund,
            rulesRefusals: [.sessionNotPaid]
        ),
        TestRoute(method: "GET", path: "/healthz", body: { _ in nil }, action: nil),
        TestRoute(
            method: "POST",
            path: "/auth/login",
            body: { _ in #"{"email": "shop@example.com", "password": "not the password"}"# },
            action: nil
        ),
        TestRoute(method: "POST", path: "/auth/refresh", body: { _ in #"{"refresh_token": "r"}"# }, action: nil),
        TestRoute(method: "POST", path: "/auth/logout", body: { _ in #"{"refresh_token": "r"}"# }, action: nil),
        TestRoute(
            method: "POST",
            path: "/auth/dev-login",
            body: { _ in #"{"email": "someone@example.com"}"# },
            action: nil
        ),
    ]
}

@Suite("API keys: least privilege for terminals, on every route", .timeLimit(.minutes(5)))
struct APIKeyTests {
    /// Every route with every credential: a key may do exactly what its scope names, for its own payee; a user's
    /// token everything a user may; revoked, unknown and malformed credentials nothing.
    @Test(arguments: StoreKind.available)
    func everyRouteChecksEveryCredential(store kind: StoreKind) async throws {
        try await TestLedger.with(store: kind) { ledger in
            let shop = try await ledger.client("shop@example.com", funded: 1_000)
            var credentials: [TestCredential: String] = [:]
            credentials[.userToken] = shop.token
            for credential in TestCredential.allCases {
                guard let scope = credential.scope else { continue }
                credentials[credential] = try await ledger.store.createAPIKey(
                    email: "shop@example.com",
                    name: credential.rawValue,
                    scopes: [scope],
                    actor: "test"
                ).secret
            }
            let revoked = try await ledger.store.createAPIKey(
                email: "shop@example.com",
                name: "revoked",
                scopes: Set(APIKeyScope.allCases),
                actor: "test"
            )
            _ = try await ledger.store.revokeAPIKey(id: revoked.key.id, actor: "test")
            credentials[.revokedKey] = revoked.secret
            credentials[.unknownKey] = APIKeySecret.generate()
            credentials[.garbage] = "not.a.token"

            for route in TestRoute.all {
                // A route that takes no bearer credentials answers the same whatever is sent.
                var unauthenticatedStatus: Int?
                for credential in [TestCredential.none] + TestCredential.allCases.filter({ $0 != .none }) {
                    // A live session of the shop's for every request, so no answer depends on the order of the table.
                    let session = try await shop.createSession(amountCents: 300)
                    var headers = route.headers
                    if let token = credentials[credential] { headers["Authorization"] = "Bearer \(token)" }
                    let path = route.path.replacingOccurrences(of: "{sid}", with: session.sid)
                    let answer = try await ledger.raw(
                        route.method,
                        path,
                        body: route.body(session.sid),
                        headers: headers.merging(["Content-Type": "application/json"]) { $1 }
                    )
                    let kind = TestLedger.problemKind(answer.body)
                    let label =
                        "\(route.testDescription) with \(credential.rawValue): \(answer.status) \(kind?.rawValue ?? "")"
                    guard let action = route.action else {
                        if let unauthenticatedStatus {
                            #expect(answer.status == unauthenticatedStatus, "\(label)")
                        } else {
                            unauthenticatedStatus = answer.status
                        }
                        continue
                    }
                    switch credential {
                    case .revokedKey, .unknownKey, .garbage, .none:
                        #expect(answer.status == 401 && kind == .unauthorized, "\(label)")
                    case .userToken:
                        // The shop's own token: everything a user may. (Locking or unlocking its own session is
                        // refused by the ledger's rules, 403 own-session or forbidden, never by a credential check.)
                        let detail = String(decoding: answer.body, as: UTF8.self)
                        #expect(kind != .unauthorized && !detail.contains("API key"), "\(label) \(detail)")
                    case .createKey, .readKey, .cancelKey, .refundKey:
                        if action.scope == credential.scope {
                            #expect(
                                (200..<300).contains(answer.status)
                                    || route.rulesRefusals.contains(kind ?? .badRequest),
                                "\(label)"
                            )
                        } else {
                            #expect(answer.status == 403 && kind == .forbidden, "\(label)")
                        }
                    }
                }
            }
            // The keys moved no money: the shop's balance is what its own token funded, less the one payout its own
            // token asked for, and nothing was sent.
            let wallet = try await shop.wallet()
            #expect(wallet.recent.filter { $0.type != "DEV_FUND" }.map(\.type) == ["PAYOUT"])
        }
    }

    @Test("A key acts for its payee only: sessions it creates are its payee's; others' are invisible to it")
    func aKeyActsForItsPayeeOnly() async throws {
        for kind in StoreKind.available {
            try await TestLedger.with(store: kind) { ledger in
                let shop = try await ledger.client("shop@example.com")
                let other = try await ledger.client("other@example.com")
                let secret = try await ledger.store.createAPIKey(
                    email: "shop@example.com",
                    name: "till",
                    scopes: Set(APIKeyScope.allCases),
                    actor: "test"
                ).secret
                let terminal = LedgerClient(baseURL: ledger.url, token: secret)
                let created = try await terminal.createSession(amountCents: 700)
                // The shop's own token sees it as the payee's.
                #expect(try await shop.session(sid: created.sid).amountCents == 700)
                #expect(try await terminal.session(sid: created.sid).status == .advertising)
                try await terminal.cancel(sid: created.sid)
                #expect(try await shop.session(sid: created.sid).status == .cancelled)

                let foreign = try await other.createSession(amountCents: 900)
                #expect(await problemKind { try await terminal.session(sid: foreign.sid) } == .sessionNotFound)
                #expect(await problemKind { try await terminal.cancel(sid: foreign.sid) } == .forbidden)
                #expect(try await other.session(sid: foreign.sid).status == .advertising)
            }
        }
    }

    @Test("Keys are stored as SHA-256 hashes, show a prefix hint, record their last use, and stop at revocation")
    func storageUseAndRevocation() async throws {
        for kind in StoreKind.available {
            try await TestLedger.with(store: kind) { ledger in
                _ = try await ledger.client("shop@example.com")
                let (key, secret) = try await ledger.store.createAPIKey(
                    email: "Shop@Example.com",
                    name: "till 1",
                    scopes: [.sessionsRead, .sessionsCreate],
                    actor: "test"
                )
                #expect(secret.hasPrefix("gk_") && APIKeySecret.isWellFormed(secret))
                #expect(key.hint == String(secret.prefix(10)))
                #expect(key.userEmail == "shop@example.com" && key.lastUsedAt == nil && key.revokedAt == nil)
                #expect(try await storedHashes(ledger) == [APIKeySecret.hash(secret)])
                #expect(
                    APIKeySecret.hash(secret)
                        == SHA256.hash(data: Data(secret.utf8)).map { String(format: "%02x", $0) }.joined()
                )

                let terminal = LedgerClient(baseURL: ledger.url, token: secret)
                _ = try await terminal.createSession(amountCents: 100)
                let used = try #require(try await ledger.store.apiKeys(email: "shop@example.com").first)
                #expect(used.lastUsedAt == milliseconds(ledger.clock.now()))
                // Within the resolution the use is not written again; after it, it is.
                ledger.clock.advance(seconds: 30)
                _ = try await terminal.createSession(amountCents: 100)
                #expect(try await ledger.store.apiKeys(email: nil).first?.lastUsedAt == used.lastUsedAt)
                ledger.clock.advance(seconds: 31)
                _ = try await terminal.createSession(amountCents: 100)
                #expect(
                    try await ledger.store.apiKeys(email: nil).first?.lastUsedAt
                        == milliseconds(ledger.clock.now())
                )

                let revoked = try await ledger.store.revokeAPIKey(id: key.id, actor: "test")
                #expect(revoked.revokedAt == milliseconds(ledger.clock.now()))
                #expect(await problemKind { try await terminal.createSession(amountCents: 100) } == .unauthorized)
                // Revoking again keeps the first time.
                ledger.clock.advance(seconds: 5)
                #expect(try await ledger.store.revokeAPIKey(id: key.id, actor: "test").revokedAt == revoked.revokedAt)
            }
        }
    }

    @Test("Creating and revoking a key is in the audit log (never its secret); a disabled user's keys stop at once")
    func auditAndDisabledUsers() async throws {
        for kind in StoreKind.available {
            try await TestLedger.with(store: kind) { ledger in
                _ = try await ledger.client("shop@example.com")
                let (key, secret) = try await ledger.store.createAPIKey(
                    email: "shop@example.com",
                    name: "till",
                    scopes: [.sessionsCreate],
                    actor: "root (sudo by ana)"
                )
                _ = try await ledger.store.revokeAPIKey(id: key.id, actor: "root (sudo by ana)")
                let entries = try await ledger.store.auditLog(limit: 10)
                #expect(entries.map(\.action).sorted() == ["key.create", "key.revoke"])
                #expect(entries.allSatisfy { $0.actor == "root (sudo by ana)" && $0.subject == "shop@example.com" })
                #expect(entries.allSatisfy { $0.detail.contains(key.id) && !$0.detail.contains(secret) })

                let working = try await ledger.store.createAPIKey(
                    email: "shop@example.com",
                    name: "till 2",
                    scopes: [.sessionsCreate],
                    actor: "test"
                ).secret
                let terminal = LedgerClient(baseURL: ledger.url, token: working)
                _ = try await terminal.createSession(amountCents: 100)
                try await ledger.store.disableUser(email: "shop@example.com", actor: "test")
                #expect(await problemKind { try await terminal.createSession(amountCents: 100) } == .unauthorized)
            }
        }
    }

    @Test("Keys are refused without a scope, with a bad name, for an unknown user; unknown ids cannot be revoked")
    func badKeyRequestsAreRefused() async throws {
        try await TestLedger.with { ledger in
            _ = try await ledger.client("shop@example.com")
            await #expect(throws: LedgerError.self) {
                try await ledger.store.createAPIKey(email: "shop@example.com", name: "x", scopes: [], actor: "test")
            }
            await #expect(throws: LedgerError.self) {
                try await ledger.store.createAPIKey(
                    email: "shop@example.com",
                    name: "a\u{1B}[2J",
                    scopes: [.sessionsRead],
                    actor: "test"
                )
            }
            await #expect(throws: LedgerError.self) {
                try await ledger.store.createAPIKey(
                    email: "nobody@example.com",
                    name: "x",
                    scopes: [.sessionsRead],
                    actor: "test"
                )
            }
            await #expect(throws: LedgerError.self) {
                try await ledger.store.revokeAPIKey(id: "no-such-key", actor: "test")
            }
            #expect(try await ledger.store.apiKeys(email: nil).isEmpty)
            // A malformed key is refused without a lookup; a well-formed unknown one after it.
            #expect(try await ledger.store.principal(apiKey: "gk_short") == nil)
            #expect(try await ledger.store.principal(apiKey: APIKeySecret.generate()) == nil)
        }
    }

    @Test("A principal's rights: users do everything, keys only their scopes' actions")
    func principalRights() throws {
        let user = LedgerPrincipal.user("u")
        for action in LedgerAction.allCases { #expect(try user.user(for: action) == "u") }
        let key = LedgerPrincipal.apiKey(id: "k", userID: "payee", scopes: Set(APIKeyScope.allCases))
        for action in LedgerAction.allCases {
            if action.scope == nil {
                #expect(throws: LedgerError.self) { try key.user(for: action) }
            } else {
                #expect(try key.user(for: action) == "payee")
            }
        }
    }

    private func storedHashes(_ ledger: TestLedger) async throws -> [String] {
        switch ledger.database {
        case .sqlite(let path):
            return try await DatabaseQueue(path: path).read { db in
                try String.fetchAll(db, sql: "SELECT secret_hash FROM api_keys")
            }
        case .postgres(let url):
            return try await TestPostgres.withClient(url) { client in
                var hashes: [String] = []
                for try await hash in try await client.query("SELECT secret_hash FROM api_keys").decode(String.self) {
                    hashes.append(hash)
                }
                return hashes
            }
        }
    }
}

/// `gotchu admin key …` as an operator runs it, against the database (no server), on both stores.
@Suite("gotchu admin key", .serialized, .timeLimit(.minutes(5)))
struct AdminKeyCommandTests {
    @Test(arguments: StoreKind.available)
    func createListRevoke(store kind: StoreKind) async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        try await TestStore.with(kind, clock: ManualClock()) { store, database, services in
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for service in services { tasks.addTask { try await service.run() } }
                defer { tasks.cancelAll() }
                try await store.migrate()
                let shop = try await store.login(email: "shop@example.com")
                let target =
                    switch database {
                    case .sqlite(let path): path
                    case .postgres(let url):
                        "postgres://\(url.username)\(url.password.map { ":\($0)" } ?? "")@\(url.host):\(url.port)/"
                            + "\(url.database)?sslmode=\(url.sslMode)"
                    }
                let created = try await processes.run(
                    [
                        "admin", "key", "create", "--database", target, "--user", "shop@example.com",
                        "--scope", "sessions:create,sessions:read", "--name", "till 1",
                    ],
                    user: "operator"
                )
                let secret = try #require(created.last)
                #expect(created == [secret], "the key alone on standard output")
                let principal = try await store.principal(apiKey: secret)
                guard case .apiKey(let id, let userID, let scopes) = principal else {
                    Issue.record("the printed key does not authenticate: \(String(describing: principal))")
                    return
                }
                #expect(userID == shop.id && scopes == [.sessionsCreate, .sessionsRead])

                let listed = try await processes.run(["admin", "key", "list", "--database", target], user: "operator")
                let row = try #require(listed.first { $0.hasPrefix(id) })
                #expect(row.contains(String(secret.prefix(10))) && row.contains("shop@example.com"), "\(row)")
                #expect(row.contains("sessions:create sessions:read") && !row.contains(secret), "\(row)")

                let revokedLines = try await processes.run(
                    ["admin", "key", "revoke", "--database", target, id],
                    user: "operator"
                )
                #expect(revokedLines.first?.hasPrefix("revoked key \(id)") == true, "\(revokedLines)")
                #expect(try await store.principal(apiKey: secret) == nil)

                // Refusals: a scope that does not exist, a user that does not, a key id that does not.
                for arguments in [
                    ["create", "--user", "shop@example.com", "--scope", "wallet:send"],
                    ["create", "--user", "nobody@example.com", "--scope", "sessions:read"],
                    ["revoke", "no-such-id"],
                ] {
                    let command = try processes.start(
                        ["admin", "key"] + arguments + ["--database", target],
                        user: "operator"
                    )
                    let status = try await command.waitForExit(timeout: .seconds(60))
                    #expect(status != 0, "\(arguments)")
                    #expect(!command.standardError.isEmpty, "\(arguments)")
                }
                #expect(try await store.apiKeys(email: nil).count == 1)
            }
        }
    }
}

/// A time in the stores' unit: milliseconds since 1970.
private func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
