import Foundation
import GotchuLedgerClient
import HTTPTypes
import Hummingbird
import Synchronization
import Testing

@Suite("The ledger client follows no redirect")
struct ClientRedirectTests {
    @Test("A redirect to another origin is an error, and the bearer token never reaches that origin")
    func redirectNotFollowed() async throws {
        let seen = Mutex<[String]>([])
        let elsewhere = Router()
        elsewhere.get("/wallet/me") { request, _ -> Response in
            seen.withLock { $0.append(request.headers[.authorization] ?? "none") }
            return Response(status: .ok)
        }
        try await withLoopbackApplication(elsewhere) { elsewhereURL in
            let ledger = Router()
            ledger.get("/wallet/me") { _, _ -> Response in
                var headers = HTTPFields()
                headers[.location] = elsewhereURL + "/wallet/me"
                return Response(status: .temporaryRedirect, headers: headers)
            }
            try await withLoopbackApplication(ledger) { ledgerURL in
                let client = LedgerClient(baseURL: try #require(URL(string: ledgerURL)), token: "secret-token")
                do {
                    _ = try await client.wallet()
                    Issue.record("the redirect was followed")
                } catch {
                    #expect("\(error)".contains("307"), "\(error)")
                }
            }
        }
        #expect(seen.withLock { $0 }.isEmpty)
    }
}
