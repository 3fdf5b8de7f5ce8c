import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient

/// A client of the development ledger at `url`, logged in as `email` and funded with `funded` cents when positive.
func loggedIn(_ url: String, _ email: String, funded: Cents = 0) async throws -> LedgerClient {
    var client = LedgerClient(baseURL: URL(string: url)!)
    client.token = try await client.devLogin(email: email).token
    if funded > 0 { _ = try await client.fund(amountCents: funded) }
    return client
}
