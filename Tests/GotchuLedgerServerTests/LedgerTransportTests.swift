import Foundation
import GotchuLedgerClient
import GotchuTesting
import HTTPTypes
import Hummingbird
import Synchronization
import Testing

@Suite("The ledger client's transport", .timeLimit(.minutes(10)))
struct LedgerTransportTests {
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

    @Test("A server that refuses the connection is reported at once, not tried again until the timeout")
    func refusedConnectionFailsFast() async throws {
        // A port that was free a moment ago: nothing listens there.
        let port = try freeLoopbackPort()
        let client = LedgerClient(baseURL: try #require(URL(string: "http://127.0.0.1:\(port)")), timeout: 600)
        let start = ContinuousClock.now
        do {
            _ = try await client.health()
            Issue.record("a closed port answered")
        } catch {
            #expect("\(error)".contains("cannot reach the server"), "\(error)")
        }
        // Only bounds a hang: retrying the connection would wait out the 600 s timeout.
        #expect(ContinuousClock.now - start < .seconds(120))
    }
}
