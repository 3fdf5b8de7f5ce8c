import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import Testing

@Suite("Concurrency", .timeLimit(.minutes(10)))
struct ConcurrencyTests {
    @Test("50 payers race to lock and pay one session: exactly one payment", arguments: StoreKind.available)
    func raceForOneSession(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let payee = try await ledger.client("payee@example.com")
            var payers: [LedgerClient] = []
            for index in 0..<50 { payers.append(try await ledger.client("payer\(index)@example.com", funded: 1_000)) }
            let session = try await payee.createSession(amountCents: 700)
            let outcomes = await withTaskGroup(of: Bool.self) { group in
                for payer in payers {
                    group.addTask {
                        do {
                            try await payer.lock(sid: session.sid)
                            _ = try await payer.send(sid: session.sid, idempotencyKey: UUID().uuidString)
                            return true
                        } catch {
                            return false
                        }
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1)
            #expect(try await payee.wallet().availableCents == 700)
            let audit = try await ledger.store.audit()
            #expect(audit.isHealthy)
            #expect(audit.entryCount == 50 * 2 + 2)
        }
    }

    @Test("200 concurrent transfers among 10 wallets: the invariants hold afterwards", arguments: StoreKind.available)
    func manyTransfers(store: StoreKind) async throws {
        // Each payer holds about 20 locks at once here; the cap on locks held has its own test.
        var policy = LedgerPolicy()
        policy.maximumLocksPerPayer = 200
        // Real time: on a starved machine a payment's lock and send can be far apart, and a lapse is not what this
        // test is about (lapses have tests on injected clocks).
        policy.lockLifetime = .seconds(3_600)
        policy.sessionLifetime = .seconds(86_400)
        try await TestLedger.with(store: store, policy: policy) { ledger in
            var wallets: [LedgerClient] = []
            // 200 flows on one server queue behind each other by design: on a loaded machine a request may wait
            // long for its turn, and this test is about the invariants, not the wait.
            for index in 0..<10 {
                wallets.append(try await ledger.client("w\(index)@example.com", funded: 50_000, timeout: 120))
            }
            let clients = wallets
            let paid = await withTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let payee = clients[index % 10]
                        let payer = clients[(index * 7 + 3) % 10]
                        do {
                            let session = try await payee.createSession(amountCents: Cents(100 + index * 13))
                            try await payer.lock(sid: session.sid)
                            _ = try await payer.send(sid: session.sid, idempotencyKey: "t\(index)")
                            return 1
                        } catch {
                            return 0
                        }
                    }
                }
                return await group.reduce(0, +)
            }
            #expect(paid == 200)
            let audit = try await ledger.store.audit()
            #expect(audit.isHealthy, "\(audit)")
            #expect(audit.entryCount == 10 * 2 + paid * 2)
            var total: Cents = 0
            for wallet in clients { total += try await wallet.wallet().availableCents }
            #expect(total == 10 * 50_000)
        }
    }
}
