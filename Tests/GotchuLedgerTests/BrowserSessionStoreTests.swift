import Foundation
import GotchuCore
import GotchuLedger
import GotchuLedgerTesting
import Testing

/// The web checkout's browser sessions in the store, with no server: started, looked up by their secret only, ended,
/// revoked with the user's tokens, and pruned; and the checkout's view of a session by any EID it had.
@Suite("Browser sessions in the store", .timeLimit(.minutes(10)))
struct BrowserSessionStoreTests {
    @Test(
        "A session signs its user in until its end, by its secret alone, and sign-out ends it",
        arguments: StoreKind.available
    )
    func lifetime(store kind: StoreKind) async throws {
        let clock = ManualClock()
        try await TestStore.with(kind, clock: clock) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let user = try await store.login(email: "payer@example.com")
                let session = try await store.startBrowserSession(userID: user.id, lifetime: .seconds(600))
                #expect(session.token.count == BrowserSessions.tokenLength)
                #expect(session.expiresAt == clock.now().addingTimeInterval(600))
                #expect(try await store.browserSessionUser(token: session.token)?.id == user.id)
                // The digest is what is stored; presenting it signs nobody in, nor does a secret of another shape.
                #expect(try await store.browserSessionUser(token: BrowserSessions.digest(session.token)) == nil)
                #expect(try await store.browserSessionUser(token: String(session.token.dropLast())) == nil)
                #expect(try await store.browserSessionUser(token: "") == nil)
                clock.advance(seconds: 599)
                #expect(try await store.browserSessionUser(token: session.token)?.id == user.id)
                clock.advance(seconds: 1)
                #expect(try await store.browserSessionUser(token: session.token) == nil)
                #expect(try await store.pruneBrowserSessions() == 1)
                #expect(try await store.pruneBrowserSessions() == 0)
                let other = try await store.startBrowserSession(userID: user.id, lifetime: .seconds(600))
                try await store.endBrowserSession(token: other.token)
                #expect(try await store.browserSessionUser(token: other.token) == nil)
                // Ending one twice, or one that never was, is no error.
                try await store.endBrowserSession(token: other.token)
                try await store.endBrowserSession(token: "not a token")
            }
        }
    }

    @Test(
        "A session ends with its user's tokens, and none starts for a disabled or unknown user",
        arguments: StoreKind.available
    )
    func revocation(store kind: StoreKind) async throws {
        let clock = ManualClock()
        var policy = LedgerPolicy()
        policy.passwordCost = 4
        try await TestStore.with(kind, policy: policy, clock: clock) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let password = "correct horse battery"
                let user = try await store.addUser(
                    email: "a@example.com",
                    displayName: nil,
                    password: password,
                    actor: "t"
                )
                let before = try await store.startBrowserSession(userID: user.id, lifetime: .seconds(600))
                // A logout everywhere (here: its refresh token's) revokes the access tokens and this session.
                let refresh = try await store.issueRefreshToken(userID: user.id)
                clock.advance(seconds: 1)
                try await store.logout(refreshToken: refresh)
                #expect(try await store.browserSessionUser(token: before.token) == nil)
                clock.advance(seconds: 1)
                let after = try await store.startBrowserSession(userID: user.id, lifetime: .seconds(600))
                #expect(try await store.browserSessionUser(token: after.token)?.id == user.id)
                try await store.disableUser(email: "a@example.com", actor: "t")
                #expect(try await store.browserSessionUser(token: after.token) == nil)
                await #expect {
                    _ = try await store.startBrowserSession(userID: user.id, lifetime: .seconds(600))
                } throws: { ($0 as? LedgerError)?.kind == .forbidden }
                await #expect {
                    _ = try await store.startBrowserSession(userID: "no-such-user", lifetime: .seconds(600))
                } throws: { ($0 as? LedgerError)?.kind == .unknownUser }
            }
        }
    }

    @Test(
        "The checkout follows a session by any EID it had, however long ago it was rotated away",
        arguments: StoreKind.available
    )
    func checkoutStatus(store kind: StoreKind) async throws {
        let clock = ManualClock()
        try await TestStore.with(kind, clock: clock) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let payee = try await store.login(email: "payee@example.com")
                let (session, _) = try await store.createSession(
                    payeeID: payee.id,
                    amountCents: 900,
                    shares: 3,
                    idempotencyKey: nil
                )
                let first = try await store.checkoutStatus(eid: session.eid)
                #expect(first.sid == session.sid && first.status == .advertising && !first.eidRetired)
                #expect(first.shares == 3 && first.sharesPaid == 0)
                #expect(first.expiresAt == session.expiresAt && first.nextLapse == session.expiresAt)
                _ = try await store.rotateEID(sid: session.sid, payeeID: payee.id)
                clock.advance(seconds: 60)
                let rotated = try await store.checkoutStatus(eid: session.eid)
                #expect(rotated.sid == session.sid && rotated.eidRetired)
                clock.advance(seconds: 300)
                let expired = try await store.checkoutStatus(eid: session.eid)
                #expect(expired.status == .expired && expired.nextLapse == nil)
                await #expect {
                    _ = try await store.checkoutStatus(eid: EID(rawValue: "0123456789")!)
                } throws: { ($0 as? LedgerError)?.kind == .sessionNotFound }
            }
        }
    }
}
