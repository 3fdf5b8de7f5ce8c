import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerTesting
import Testing

@Suite("Amounts near the limits of Int64", .timeLimit(.minutes(10)))
struct OverflowTests {
    @Test("A balance that would overflow is refused, not wrapped, and nothing moves", arguments: StoreKind.available)
    func overflow(store kind: StoreKind) async throws {
        var policy = LedgerPolicy()
        policy.maximumAmount = .max
        try await TestStore.with(kind, policy: policy, clock: ManualClock()) { store, _, services in
            try await withServices(services) {
                try await store.migrate()
                let rich = try await store.login(email: "rich@example.com")
                let other = try await store.login(email: "other@example.com")
                #expect(try await store.fund(userID: rich.id, amountCents: .max) == .max)
                // The user's balance would pass Int64.max.
                await #expect(throws: LedgerError(.invalidAmount, detail: "the resulting balance would overflow")) {
                    try await store.fund(userID: rich.id, amountCents: 1)
                }
                // The funding account's balance would pass Int64.min.
                #expect(try await store.fund(userID: other.id, amountCents: 1) == 1)
                await #expect(throws: LedgerError(.invalidAmount, detail: "the resulting balance would overflow")) {
                    try await store.fund(userID: other.id, amountCents: .max)
                }
                #expect(try await store.wallet(userID: rich.id, recentLimit: 0).balance == .max)
                #expect(try await store.wallet(userID: other.id, recentLimit: 0).balance == 1)
                let audit = try await store.audit()
                #expect(audit.isHealthy, "\(audit)")
                #expect(audit.entryCount == 4)
            }
        }
    }
}
