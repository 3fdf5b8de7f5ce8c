import Foundation
import GotchuAPI
import GotchuCore
import Testing

@Suite("Client decoding", .timeLimit(.minutes(10)))
struct ClientDecodingTests {
    @Test("Amounts sent as JSON strings (PostgreSQL bigint through other servers) are accepted by the client")
    func bigintStrings() throws {
        let wallet = try APIJSON.decoder().decode(
            WalletResponse.self,
            from: Data(
                #"""
                {"wallet_id":"w","available_cents":"5000","recent":[{"id":"e","direction":"DEBIT","amount_cents":"5000",
                "type":"SEND_P2P","ref_type":"session","ref_id":"s","created_at":"2026-11-21T10:00:00Z"}]}
                """#.utf8
            )
        )
        #expect(wallet.availableCents == 5_000)
        #expect(wallet.recent.first?.amountCents == 5_000)
        let resolved = try APIJSON.decoder().decode(
            ResolveResponse.self,
            from: Data(#"{"sid":"s","amount_cents":"12","payee_display":{"name":"bob"}}"#.utf8)
        )
        #expect(resolved.amountCents == 12)
        #expect(throws: (any Error).self) {
            try APIJSON.decoder().decode(
                BalanceResponse.self,
                from: Data(#"{"ok":true,"new_balance_cents":"12.5"}"#.utf8)
            )
        }
    }

    @Test("Timestamps round-trip with milliseconds")
    func timestamps() throws {
        let date = Date(timeIntervalSince1970: 1_800_000_000.123)
        let response = SessionStatusResponse(sid: "s", status: .paid, amountCents: 1, expiresAt: date, paidAt: date)
        let decoded = try APIJSON.decoder().decode(SessionStatusResponse.self, from: APIJSON.encoder().encode(response))
        #expect(abs(decoded.expiresAt.timeIntervalSince(date)) < 0.001)
    }
}
