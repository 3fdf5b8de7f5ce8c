import Foundation
import GotchuAPI
import GotchuLedger
import GotchuLedgerClient
import GotchuLedgerServer
import Testing

/// An access token ends with its login: a logout, or a refresh token used twice (a copy exists), refuses the access
/// tokens issued before it at once, on every replica, not when they expire.
@Suite("Access token revocation", .timeLimit(.minutes(10)))
struct AccessTokenRevocationTests {
    @Test("Logout refuses the login's access token at once; a new login works", arguments: StoreKind.available)
    func logout(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (client, login) = try await Self.login(ledger)
            #expect(try await client.wallet().availableCents == 0)
            ledger.clock.advance(seconds: 1)
            try await client.logout(refreshToken: try #require(login.refreshToken))
            #expect(await problemKind { try await client.wallet() } == .unauthorized)
            // Logging in again, at the same instant, gives a token that works.
            let (again, _) = try await Self.login(ledger)
            #expect(try await again.wallet().availableCents == 0)
        }
    }

    @Test("A refresh token used twice refuses every access token of the user", arguments: StoreKind.available)
    func reuse(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let (_, login) = try await Self.login(ledger)
            var rotated = LedgerClient(baseURL: ledger.url)
            let first = try #require(login.refreshToken)
            let next = try await rotated.refresh(refreshToken: first)
            rotated.token = next.token
            #expect(try await rotated.wallet().availableCents == 0)
            ledger.clock.advance(seconds: 1)
            // The first refresh token again: someone holds a copy.
            #expect(await problemKind { try await rotated.refresh(refreshToken: first) } == .unauthorized)
            #expect(await problemKind { try await rotated.wallet() } == .unauthorized)
        }
    }

    /// A password account logged in over HTTP, and a client that sends its access token.
    private static func login(_ ledger: TestLedger) async throws -> (LedgerClient, LoginResponse) {
        if try await ledger.store.users().isEmpty {
            _ = try await ledger.store.addUser(
                email: "zoe@example.com",
                displayName: nil,
                password: "correct horse battery",
                actor: "test"
            )
        }
        var client = LedgerClient(baseURL: ledger.url)
        let login = try await client.login(email: "zoe@example.com", password: "correct horse battery")
        client.token = login.token
        return (client, login)
    }
}
