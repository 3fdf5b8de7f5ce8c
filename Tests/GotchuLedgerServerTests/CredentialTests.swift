import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import ServiceLifecycle
import Synchronization
import Testing

/// Accounts with passwords, refresh tokens, disabled accounts, login back-off, registration and verified payees, on
/// every store, over real HTTP.
@Suite("Accounts and credentials", .timeLimit(.minutes(10)))
struct CredentialTests {
    static let password = "correct horse battery"

    /// The lowest bcrypt cost: the tests check the rules, not the hash's strength.
    static var policy: LedgerPolicy {
        var policy = LedgerPolicy()
        policy.passwordCost = 4
        return policy
    }

    @Test(
        "Login by password: a working access token and a refresh token; a wrong password and an unknown address get one answer",
        arguments: StoreKind.available
    )
    func login(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy, developmentMode: false) { ledger in
            let added = try await ledger.store.addUser(
                email: "Bob@Example.com",
                displayName: "Bob's Stall",
                password: Self.password,
                actor: "tester"
            )
            var client = ledger.anonymous
            let login = try await client.login(email: "bob@example.com", password: Self.password)
            #expect(login.userID == added.id)
            #expect(login.refreshToken?.hasPrefix(RefreshTokens.prefix) == true)
            #expect(login.expiresIn == 12 * 3600)
            client.token = login.token
            #expect(try await client.wallet().availableCents == 0)

            let wrong = try await ledger.raw(
                "POST",
                "/auth/login",
                body: #"{"email":"bob@example.com","password":"not the password"}"#
            )
            let unknown = try await ledger.raw(
                "POST",
                "/auth/login",
                body: #"{"email":"nobody@example.com","password":"not the password"}"#
            )
            #expect(wrong.status == 401 && unknown.status == 401)
            #expect(wrong.body == unknown.body, "the answers must not tell the two apart")
            // No development login on a server without --dev.
            #expect(await problemKind { try await ledger.anonymous.devLogin(email: "bob@example.com") } == .notFound)
            // The store keeps only digests: no token appears in the database's refresh tokens.
            #expect(try await ledger.store.users().map(\.email) == ["bob@example.com"])
        }
    }

    @Test(
        "Short, over-long and NUL passwords are refused with a reason, and nothing is stored",
        arguments: StoreKind.available
    )
    func passwordRules(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            for bad in ["short", String(repeating: "x", count: 73), "twelve chars\u{0}!"] {
                await #expect(throws: LedgerError.self) {
                    try await ledger.store.addUser(email: "a@example.com", displayName: nil, password: bad, actor: "t")
                }
            }
            let users = try await ledger.store.users()
            let log = try await ledger.store.auditLog(limit: 10)
            #expect(users.isEmpty)
            #expect(log.isEmpty)
        }
    }

    @Test(
        "A password of 72 characters beyond bcrypt's 72 bytes counts to its last byte",
        arguments: StoreKind.available
    )
    func longPasswords(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            // 72 characters, 144 bytes: bcrypt alone would read only the first 36.
            let long = String(repeating: "é", count: 71) + "a"
            _ = try await ledger.store.addUser(email: "a@example.com", displayName: nil, password: long, actor: "t")
            let client = ledger.anonymous
            #expect(try await client.login(email: "a@example.com", password: long).userID.isEmpty == false)
            let sameStart = String(repeating: "é", count: 71) + "b"
            #expect(
                await problemKind { try await client.login(email: "a@example.com", password: sameStart) }
                    == .unauthorized
            )
        }
    }

    @Test(
        "Refresh rotates the token; a used one presented again revokes the whole login",
        arguments: StoreKind.available
    )
    func refreshRotation(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            _ = try await ledger.store.addUser(
                email: "a@example.com",
                displayName: nil,
                password: Self.password,
                actor: "t"
            )
            let client = ledger.anonymous
            let first = try #require(
                try await client.login(email: "a@example.com", password: Self.password).refreshToken
            )
            let second = try await client.refresh(refreshToken: first)
            let secondToken = try #require(second.refreshToken)
            #expect(secondToken != first)
            var authorized = client
            authorized.token = second.token
            #expect(try await authorized.wallet().availableCents == 0)
            let third = try #require(try await client.refresh(refreshToken: secondToken).refreshToken)

            // The first token again: someone holds a copy. It is refused, and so is the newest of its family.
            #expect(await problemKind { try await client.refresh(refreshToken: first) } == .unauthorized)
            #expect(await problemKind { try await client.refresh(refreshToken: third) } == .unauthorized)
            // Another login is a family of its own, untouched.
            let other = try #require(
                try await client.login(email: "a@example.com", password: Self.password).refreshToken
            )
            #expect(try await client.refresh(refreshToken: other).refreshToken != nil)
            #expect(await problemKind { try await client.refresh(refreshToken: "grt_made-up") } == .unauthorized)
        }
    }

    @Test(
        "Two refreshes racing with one token: one gets the next token, and the reuse then revokes it too",
        arguments: StoreKind.available
    )
    func concurrentRefresh(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            _ = try await ledger.store.addUser(
                email: "a@example.com",
                displayName: nil,
                password: Self.password,
                actor: "t"
            )
            let client = ledger.anonymous
            let token = try #require(
                try await client.login(email: "a@example.com", password: Self.password).refreshToken
            )
            let results = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<2 { group.addTask { try? await client.refresh(refreshToken: token).refreshToken } }
                var results: [String?] = []
                for try await result in group { results.append(result) }
                return results
            }
            let winners = results.compactMap { $0 }
            #expect(winners.count == 1, "\(results)")
            let next = try #require(winners.first)
            #expect(await problemKind { try await client.refresh(refreshToken: next) } == .unauthorized)
        }
    }

    @Test("Logout revokes the login's refresh tokens", arguments: StoreKind.available)
    func logout(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            _ = try await ledger.store.addUser(
                email: "a@example.com",
                displayName: nil,
                password: Self.password,
                actor: "t"
            )
            let client = ledger.anonymous
            let token = try #require(
                try await client.login(email: "a@example.com", password: Self.password).refreshToken
            )
            try await client.logout(refreshToken: token)
            #expect(await problemKind { try await client.refresh(refreshToken: token) } == .unauthorized)
            // Logging out twice, or with a token nobody issued, is not an error.
            try await client.logout(refreshToken: token)
            try await client.logout(refreshToken: "grt_unknown")
        }
    }

    @Test("A refresh token expires after its lifetime", arguments: StoreKind.available)
    func refreshExpiry(store: StoreKind) async throws {
        var policy = Self.policy
        policy.refreshTokenLifetime = .seconds(3600)
        try await TestLedger.with(store: store, policy: policy) { ledger in
            _ = try await ledger.store.addUser(
                email: "a@example.com",
                displayName: nil,
                password: Self.password,
                actor: "t"
            )
            let client = ledger.anonymous
            let token = try #require(
                try await client.login(email: "a@example.com", password: Self.password).refreshToken
            )
            ledger.clock.advance(seconds: 3601)
            #expect(await problemKind { try await client.refresh(refreshToken: token) } == .unauthorized)
        }
    }

    @Test(
        "A disabled account cannot log in, and its tokens stop working at the next request",
        arguments: StoreKind.available
    )
    func disabled(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            _ = try await ledger.store.addUser(
                email: "a@example.com",
                displayName: nil,
                password: Self.password,
                actor: "t"
            )
            var client = ledger.anonymous
            let login = try await client.login(email: "a@example.com", password: Self.password)
            client.token = login.token
            // The token works, and its user is now known to the server.
            #expect(try await client.wallet().availableCents == 0)
            try await ledger.store.disableUser(email: "a@example.com", actor: "t")
            #expect(await problemKind { try await client.wallet() } == .unauthorized)
            #expect(
                await problemKind { try await client.refresh(refreshToken: try #require(login.refreshToken)) }
                    == .unauthorized
            )
            #expect(
                await problemKind { try await client.login(email: "a@example.com", password: Self.password) }
                    == .forbidden
            )
            // A wrong password says nothing of the account being disabled.
            #expect(
                await problemKind { try await client.login(email: "a@example.com", password: "wrong password!") }
                    == .unauthorized
            )
            let users = try await ledger.store.users()
            #expect(users.map(\.disabled) == [true])
        }
    }

    @Test(
        "Repeated failures back off per account and per address: 429 with a growing Retry-After, before any password check",
        arguments: StoreKind.available
    )
    func bruteForce(store: StoreKind) async throws {
        var limits = LedgerLimits.unlimited
        var backoff = LoginBackoff()
        backoff.freeFailuresPerAccount = 3
        backoff.freeFailuresPerAddress = 6
        backoff.firstDelay = .seconds(2)
        limits.loginBackoff = backoff
        try await TestLedger.with(store: store, policy: Self.policy, limits: limits) { ledger in
            _ = try await ledger.store.addUser(
                email: "a@example.com",
                displayName: nil,
                password: Self.password,
                actor: "t"
            )
            func attempt(_ email: String, _ password: String) async throws -> (Int, String?) {
                let body = String(
                    decoding: try APIJSON.encoder().encode(PasswordLoginRequest(email: email, password: password)),
                    as: UTF8.self
                )
                let response = try await ledger.raw("POST", "/auth/login", body: body)
                return (response.status, response.headers["retry-after"])
            }
            // Three failures pass (the third starts a 2 s wait), the fourth attempt waits, right password or not.
            for _ in 0..<3 { #expect(try await attempt("a@example.com", "wrong password!").0 == 401) }
            #expect(try await attempt("a@example.com", Self.password) == (429, "2"))
            ledger.clock.advance(seconds: 2)
            // One more failure doubles the wait.
            #expect(try await attempt("a@example.com", "wrong password!").0 == 401)
            #expect(try await attempt("a@example.com", "wrong password!") == (429, "4"))
            ledger.clock.advance(seconds: 4)
            // The right password after the wait logs in, and the account starts afresh.
            #expect(try await attempt("a@example.com", Self.password).0 == 200)
            #expect(try await attempt("a@example.com", "wrong password!").0 == 401)

            // The address: failures spread over other accounts still add up (6 free, 5 counted so far).
            #expect(try await attempt("b@example.com", "wrong password!").0 == 401)
            let refused = try await attempt("c@example.com", "wrong password!")
            #expect(refused.0 == 429 && Int(refused.1 ?? "") ?? 0 >= 1)
        }
    }

    @Test(
        "Open registration creates an account that logs in once confirmed; a taken address gets the same 202; closed has no route",
        arguments: StoreKind.available
    )
    func registration(store: StoreKind) async throws {
        let mail = MailBox()
        try await TestLedger.with(store: store, policy: Self.policy, registration: .open, mailer: mail) { ledger in
            let client = ledger.anonymous
            _ = try await client.register(email: "new@example.com", password: Self.password)
            let registered = try await client.confirmRegistration(
                email: "new@example.com",
                code: try #require(mail.code(for: "new@example.com")),
                password: Self.password
            )
            #expect(registered.refreshToken != nil)
            #expect(
                try await client.login(email: "new@example.com", password: Self.password).userID == registered.userID
            )
            // No 409 tells anyone the address is taken.
            #expect(
                await problemKind { try await client.register(email: "NEW@example.com", password: Self.password) }
                    == nil
            )
            #expect(
                await problemKind { try await client.register(email: "x@example.com", password: "short") }
                    == .badRequest
            )
            #expect(
                await problemKind {
                    try await client.register(email: "bad\u{202E}@example.com", password: Self.password)
                }
                    == .badRequest
            )
        }
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            #expect(
                await problemKind {
                    try await ledger.anonymous.register(email: "new@example.com", password: Self.password)
                }
                    == .notFound
            )
        }
    }

    @Test(
        "Resolve shows a verified payee's verified name marked verified, and another's chosen name marked unverified",
        arguments: StoreKind.available
    )
    func verifiedMerchant(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            let shop = try await ledger.client("shop@example.com")
            let bob = try await ledger.client("bob@example.com")
            try await ledger.store.verifyMerchant(email: "shop@example.com", name: "Corner Shop Ltd", actor: "operator")
            let shopSession = try await shop.createSession(amountCents: 100)
            let bobSession = try await bob.createSession(amountCents: 100)
            let payer = try await ledger.client("payer@example.com")
            let verified = try await payer.resolve(eid: shopSession.eid).payeeDisplay
            #expect(verified == PayeeDisplay(name: "Corner Shop Ltd", domain: "example.com", verified: true))
            let chosen = try await payer.resolve(eid: bobSession.eid).payeeDisplay
            #expect(chosen == PayeeDisplay(name: "bob", domain: "example.com", verified: false))
            await #expect(throws: LedgerError.self) {
                try await ledger.store.verifyMerchant(email: "nobody@example.com", name: "X", actor: "operator")
            }
        }
    }

    @Test(
        "Every administrative change is in the audit log with its actor, newest first",
        arguments: StoreKind.available
    )
    func audit(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            _ = try await ledger.store.addUser(
                email: "a@example.com",
                displayName: "A",
                password: Self.password,
                actor: "alice"
            )
            try await ledger.store.resetPassword(email: "a@example.com", password: Self.password + "!", actor: "bob")
            try await ledger.store.verifyMerchant(email: "a@example.com", name: "A Ltd", actor: "carol")
            try await ledger.store.disableUser(email: "a@example.com", actor: "dave")
            // A refused change leaves no entry.
            _ = try? await ledger.store.disableUser(email: "nobody@example.com", actor: "eve")
            let log = try await ledger.store.auditLog(limit: 10)
            #expect(log.map(\.actor) == ["dave", "carol", "bob", "alice"])
            #expect(log.map(\.action) == ["user.disable", "merchant.verify", "user.reset-password", "user.add"])
            #expect(log.allSatisfy { $0.subject == "a@example.com" && $0.at == log[0].at })
            #expect(!log.contains { $0.detail.contains(Self.password) })
        }
    }

    @Test(
        "The client refreshes an expired access token by itself and keeps the new pair",
        arguments: StoreKind.available
    )
    func transparentRefresh(store: StoreKind) async throws {
        try await TestLedger.with(store: store, policy: Self.policy) { ledger in
            _ = try await ledger.store.addUser(
                email: "a@example.com",
                displayName: nil,
                password: Self.password,
                actor: "t"
            )
            let login = try await ledger.anonymous.login(email: "a@example.com", password: Self.password)
            let saved = Mutex<[LoginResponse]>([])
            var client = ledger.anonymous
            client.credentials = LedgerLogin(
                accessToken: login.token,
                refreshToken: try #require(login.refreshToken)
            ) { pair in saved.withLock { $0.append(pair) } }
            #expect(try await client.wallet().availableCents == 0)
            #expect(saved.withLock { $0.isEmpty })
            // Past the access token's lifetime: refused, refreshed once for both concurrent calls, sent again.
            ledger.clock.advance(seconds: 13 * 3600)
            let shared = client
            async let first = shared.wallet()
            async let second = shared.wallet()
            #expect(try await first.availableCents == 0)
            #expect(try await second.availableCents == 0)
            #expect(saved.withLock { $0.count } == 1)
            let pair = try #require(saved.withLock { $0.first })
            #expect(await client.credentials?.refreshToken == pair.refreshToken)
        }
    }

    @Test(
        "A hash made at another cost is remade at the configured one at the next login",
        arguments: StoreKind.available
    )
    func costUpgrade(store: StoreKind) async throws {
        try await TestStore.with(store, policy: Self.policy, clock: ManualClock()) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                switch store {
                case let sqlite as SQLiteLedgerStore: try await Self.checkCostUpgrade(sqlite)
                case let postgres as PostgresLedgerStore: try await Self.checkCostUpgrade(postgres)
                default: Issue.record("an unknown store")
                }
            }
        }
    }

    static func checkCostUpgrade<Backend: LedgerBackend>(_ engine: LedgerEngine<Backend>) async throws {
        _ = try await engine.addUser(email: "a@example.com", displayName: nil, password: password, actor: "t")
        let backend: Backend = engine.backend
        func storedHash() async throws -> String {
            let found: UserCredentials? = try await backend.credentials(email: "a@example.com")
            guard let hash = found?.passwordHash else { throw TestPostgresError("the user has no password hash") }
            return hash
        }
        #expect(try await storedHash().contains("$04$"))
        var stronger = engine.policy
        stronger.passwordCost = 5
        let upgraded = LedgerEngine(backend: engine.backend, policy: stronger)
        await #expect(throws: LedgerError.self) { try await upgraded.login(email: "a@example.com", password: "wrong!") }
        #expect(try await storedHash().contains("$04$"), "a wrong password changes nothing")
        _ = try await upgraded.login(email: "a@example.com", password: password)
        #expect(try await storedHash().contains("$05$"))
        // The new hash still takes the password, at either policy.
        _ = try await upgraded.login(email: "a@example.com", password: password)
        _ = try await engine.login(email: "a@example.com", password: password)
        #expect(try await storedHash().contains("$04$"))
    }
}
