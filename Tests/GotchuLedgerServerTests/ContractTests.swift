import Crypto
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerSQLite
import GotchuReceipts
import GotchuTesting
import HTTPTypes
import Testing
import Yams

@testable import GotchuLedgerServer

/// Keeps `/openapi.yaml` true: every operation is exercised, and every status and problem type the server sends
/// is one the document lists for that operation.
@Suite("OpenAPI contract", .timeLimit(.minutes(10)))
struct ContractTests {
    struct Operation: Hashable {
        var method: String
        var path: String
    }

    /// Documented problem types per operation and status, from the "(problem types: …)" of each response.
    struct Contract {
        var responses: [Operation: [Int: Set<String>]] = [:]
        /// The media types documented per operation and status.
        var mediaTypes: [Operation: [Int: Set<String>]] = [:]

        init(yaml: String) throws {
            let document = try #require(try Yams.load(yaml: yaml) as? [String: Any])
            let paths = try #require(document["paths"] as? [String: Any])
            let shared = (document["components"] as? [String: Any])?["responses"] as? [String: Any] ?? [:]
            for (path, item) in paths {
                for (method, value) in try #require(item as? [String: Any]) {
                    let operation = try #require(value as? [String: Any])
                    let responses = try #require(operation["responses"] as? [String: Any])
                    var statuses: [Int: Set<String>] = [:]
                    var types: [Int: Set<String>] = [:]
                    for (status, response) in responses {
                        var response = try #require(response as? [String: Any])
                        if let reference = response["$ref"] as? String {
                            let name = String(reference.dropFirst("#/components/responses/".count))
                            response = try #require(shared[name] as? [String: Any], "\(reference) is not defined")
                        }
                        let description = response["description"] as? String ?? ""
                        var kinds = Set<String>()
                        if let range = description.range(of: "(problem types: ") {
                            let list = description[range.upperBound...].prefix(while: { $0 != ")" })
                            kinds = Set(list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                        }
                        statuses[Int(status)!] = kinds
                        types[Int(status)!] = Set((response["content"] as? [String: Any] ?? [:]).keys)
                    }
                    self.responses[Operation(method: method.uppercased(), path: path)] = statuses
                    self.mediaTypes[Operation(method: method.uppercased(), path: path)] = types
                }
            }
        }
    }

    @Test(
        "Every operation in the document answers only with documented statuses and problem types",
        arguments: StoreKind.available
    )
    func contract(store: StoreKind) async throws {
        // Small enough that the calls below run into each limit once; the test's clock stands still, so nothing
        // refills: six resolves, six locks and six sends by the payer pass the rate limits, the next does not.
        var policy = LedgerPolicy()
        policy.maximumLocksPerPayer = 1
        var limits = LedgerLimits.unlimited
        limits.resolvePerAddress = RateLimit(perSecond: 0.001, burst: 6)
        limits.lockPerUser = RateLimit(perSecond: 0.001, burst: 6)
        limits.sendPerUser = RateLimit(perSecond: 0.001, burst: 6)
        // Two wrong passwords for one account, then it must wait; four registrations and confirmations from this
        // address, then wait.
        var backoff = LoginBackoff()
        backoff.freeFailuresPerAccount = 2
        limits.loginBackoff = backoff
        limits.registerPerAddress = RateLimit(perSecond: 0.001, burst: 4)
        policy.passwordCost = 4
        let mail = MailBox()
        try await TestLedger.with(store: store, policy: policy, registration: .open, mailer: mail, limits: limits) {
            ledger in
            let yaml = try await ledger.raw("GET", "/openapi.yaml")
            #expect(yaml.status == 200)
            let contract = try Contract(yaml: String(decoding: yaml.body, as: UTF8.self))

            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            let payee = try await ledger.client("payee@example.com")
            let session = try await payee.createSession(amountCents: 400)
            let other = try await payee.createSession(amountCents: 400)
            let cancelled = try await payee.createSession(amountCents: 400)
            try await payee.cancel(sid: cancelled.sid)
            let rotated = try await payee.createSession(amountCents: 400)
            let payerAuth = ["Authorization": "Bearer \(payer.token!)"]
            let payeeAuth = ["Authorization": "Bearer \(payee.token!)"]
            // Payouts come from a wallet of their own, so they change nothing the payments below depend on.
            let saver = try await ledger.client("saver@example.com", funded: 100)
            let saverAuth = ["Authorization": "Bearer \(saver.token!)"]
            // An API key of the payee's that may only read sessions: refused 403 everywhere else.
            let readKey = try await ledger.store.createAPIKey(
                email: "payee@example.com",
                name: "reader",
                scopes: [.sessionsRead],
                actor: "test"
            ).secret
            let keyAuth = ["Authorization": "Bearer \(readKey)"]
            let huge = String(repeating: "x", count: 17_000)
            let unknown = "00000000-0000-4000-8000-000000000000"
            let password = "correct horse battery"
            for email in ["pw@example.com", "off@example.com"] {
                _ = try await ledger.store.addUser(email: email, displayName: nil, password: password, actor: "test")
            }
            try await ledger.store.disableUser(email: "off@example.com", actor: "test")
            // A registration whose code the calls below confirm (the first of the four the limit lets through).
            _ = try await ledger.anonymous.register(email: "c@example.com", password: password)
            let code = try #require(mail.code(for: "c@example.com"))
            let wrongCode = code == "00000000" ? "11111111" : "00000000"
            let refresh = try #require(
                try await ledger.anonymous.login(email: "pw@example.com", password: password).refreshToken
            )
            let logoutToken = try #require(
                try await ledger.anonymous.login(email: "pw@example.com", password: password).refreshToken
            )
            // Webhook endpoints on a port nothing listens on: the payee's receives no event of this test; the saver's
            // has a delivery (of a deposit) to retry, then is deleted, after which its delivery cannot be retried.
            let hook = try await payee.createWebhookEndpoint(
                url: "http://127.0.0.1:9/hook",
                events: ["payout.failed"]
            )
            let savings = try await saver.createWebhookEndpoint(
                url: "http://127.0.0.1:9/s",
                events: ["deposit.received"]
            )
            _ = try await saver.fund(amountCents: 1)
            let saverDelivery = try #require(try await saver.webhookDeliveries(endpointID: savings.id).first).id
            let hookBody = #"{"url":"http://127.0.0.1:9/hook","events":["*"]}"#
            let terminal = try await payee.enrollTerminal(
                name: "counter 1",
                publicKey: Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
            )
            let terminalKey = Base64URL.encode(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)
            let terminalBody = #"{"name":"counter 2","public_key":""# + terminalKey + #""}"#
            // Charges of the payee's enrolled terminal: one to pay, one no terminal signed.
            let terminalSigner = Curve25519.Signing.PrivateKey()
            _ = try await payee.enrollTerminal(name: "stall", publicKey: terminalSigner.publicKey.rawRepresentation)
            func chargeBody(_ key: Curve25519.Signing.PrivateKey, _ cents: Int64 = 100) throws -> String {
                let charge = try TerminalCharge.make(
                    amountCents: cents,
                    currency: "USD",
                    now: ledger.clock.now(),
                    lifetime: .seconds(300),
                    key: key
                )
                return #"{"charge":""# + Base64URL.encode(Data(charge.encoded)) + #""}"#
            }
            let charge = try chargeBody(terminalSigner)
            let strangerCharge = try chargeBody(Curve25519.Signing.PrivateKey())

            typealias Call = (String, String, String, String?, [String: String])
            let calls: [Call] = [
                ("GET", "/healthz", "/healthz", nil, [:]),
                ("GET", "/livez", "/livez", nil, [:]),
                ("GET", "/readyz", "/readyz", nil, [:]),
                ("GET", "/openapi.yaml", "/openapi.yaml", nil, [:]),
                ("GET", "/.well-known/gotchu-receipt-keys", "/.well-known/gotchu-receipt-keys", nil, [:]),
                ("POST", "/auth/dev-login", "/auth/dev-login", #"{"email":"x@example.com"}"#, [:]),
                ("POST", "/auth/dev-login", "/auth/dev-login", #"{"email":1}"#, [:]),
                ("POST", "/auth/dev-login", "/auth/dev-login", huge, [:]),
                ("POST", "/auth/dev-login", "/auth/dev-login", #"{"email":"off@example.com"}"#, [:]),
                ("POST", "/auth/login", "/auth/login", #"{"email":"pw@example.com","password":"\#(password)"}"#, [:]),
                ("POST", "/auth/login", "/auth/login", #"{"email":1}"#, [:]),
                ("POST", "/auth/login", "/auth/login", #"{"email":"off@example.com","password":"\#(password)"}"#, [:]),
                ("POST", "/auth/login", "/auth/login", #"{"email":"pw@example.com","password":"wrong one"}"#, [:]),
                ("POST", "/auth/login", "/auth/login", #"{"email":"pw@example.com","password":"wrong two"}"#, [:]),
                ("POST", "/auth/login", "/auth/login", #"{"email":"pw@example.com","password":"\#(password)"}"#, [:]),
                ("POST", "/auth/refresh", "/auth/refresh", #"{"refresh_token":"\#(refresh)"}"#, [:]),
                ("POST", "/auth/refresh", "/auth/refresh", #"{"refresh_token":"\#(refresh)"}"#, [:]),
                ("POST", "/auth/refresh", "/auth/refresh", #"{"refresh_token":5}"#, [:]),
                ("POST", "/auth/logout", "/auth/logout", #"{"refresh_token":"\#(logoutToken)"}"#, [:]),
                ("POST", "/auth/logout", "/auth/logout", #"{}"#, [:]),
                (
                    "POST", "/auth/register", "/auth/register", #"{"email":"r@example.com","password":"\#(password)"}"#,
                    [:]
                ),
                (
                    "POST", "/auth/register/confirm", "/auth/register/confirm",
                    #"{"email":"c@example.com","code":"\#(wrongCode)","password":"\#(password)"}"#, [:]
                ),
                (
                    "POST", "/auth/register/confirm", "/auth/register/confirm",
                    #"{"email":"c@example.com","code":"\#(code)","password":"\#(password)"}"#, [:]
                ),
                ("POST", "/auth/register/confirm", "/auth/register/confirm", #"{"email":1}"#, [:]),
                ("POST", "/auth/register", "/auth/register", #"{"email":"s@example.com","password":"short"}"#, [:]),
                (
                    "POST", "/auth/register", "/auth/register", #"{"email":"t@example.com","password":"\#(password)"}"#,
                    [:]
                ),
                ("GET", "/wallet/me", "/wallet/me", nil, payerAuth),
                ("GET", "/wallet/me", "/wallet/me", nil, [:]),
                ("GET", "/wallet/entries", "/wallet/entries?limit=2", nil, payerAuth),
                ("GET", "/wallet/entries", "/wallet/entries?limit=0", nil, payerAuth),
                ("GET", "/wallet/entries", "/wallet/entries?cursor=bm90LWEtY3Vyc29y", nil, payerAuth),
                ("GET", "/wallet/entries", "/wallet/entries", nil, [:]),
                ("POST", "/dev/fund", "/dev/fund", #"{"amount_cents":5}"#, payerAuth),
                ("POST", "/dev/fund", "/dev/fund", #"{"amount_cents":-5}"#, payerAuth),
                ("POST", "/dev/fund", "/dev/fund", #"{"amount_cents":5}"#, [:]),
                ("POST", "/sessions/create", "/sessions/create", #"{"amount_cents":5}"#, payeeAuth),
                ("POST", "/sessions/create", "/sessions/create", #"{"amount_cents":"5"}"#, payeeAuth),
                ("POST", "/sessions/create", "/sessions/create", #"{"amount_cents":5}"#, [:]),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":5}"#,
                    payeeAuth.merging(["Idempotency-Key": "s"]) { $1 }
                ),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":5}"#,
                    payeeAuth.merging(["Idempotency-Key": "s"]) { $1 }
                ),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":6}"#,
                    payeeAuth.merging(["Idempotency-Key": "s"]) { $1 }
                ),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":5}"#,
                    payeeAuth.merging(["Idempotency-Key": "a b"]) { $1 }
                ),
                ("POST", "/sessions/resolve", "/sessions/resolve", #"{"eid":"\#(session.eid)"}"#, payerAuth),
                ("POST", "/sessions/resolve", "/sessions/resolve", #"{"eid":"\#(session.eid)"}"#, [:]),
                ("POST", "/sessions/resolve", "/sessions/resolve", #"{"eid":"0000000000"}"#, payerAuth),
                ("POST", "/sessions/resolve", "/sessions/resolve", #"{"eid":"zz"}"#, payerAuth),
                ("POST", "/sessions/{sid}/eids", "/sessions/\(rotated.sid)/eids", nil, payeeAuth),
                ("POST", "/sessions/{sid}/eids", "/sessions/\(rotated.sid)/eids", nil, payerAuth),
                ("POST", "/sessions/{sid}/eids", "/sessions/\(rotated.sid)/eids", nil, [:]),
                ("POST", "/sessions/{sid}/eids", "/sessions/nope/eids", nil, payeeAuth),
                ("POST", "/sessions/{sid}/eids", "/sessions/\(unknown)/eids", nil, payeeAuth),
                ("POST", "/sessions/{sid}/eids", "/sessions/\(cancelled.sid)/eids", nil, payeeAuth),
                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(session.sid)"}"#, payeeAuth),
                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"nope"}"#, payerAuth),
                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(unknown)"}"#, payerAuth),
                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(session.sid)"}"#, payerAuth),
                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(other.sid)"}"#, payerAuth),
                ("GET", "/sessions/{sid}", "/sessions/\(session.sid)", nil, payeeAuth),
                ("GET", "/sessions/{sid}", "/sessions/nope", nil, payeeAuth),
                ("GET", "/sessions/{sid}", "/sessions/\(unknown)", nil, payeeAuth),
                ("GET", "/sessions/{sid}", "/sessions/\(session.sid)", nil, [:]),
                // A cancelled session's stream sends its state and ends, so it can be read to its end.
                ("GET", "/sessions/{sid}/events", "/sessions/\(cancelled.sid)/events", nil, payeeAuth),
                ("GET", "/sessions/{sid}/events", "/sessions/\(cancelled.sid)/events", nil, payerAuth),
                ("GET", "/sessions/{sid}/events", "/sessions/nope/events", nil, payeeAuth),
                ("GET", "/sessions/{sid}/events", "/sessions/\(session.sid)/events", nil, [:]),
                ("POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(session.sid)"}"#, payerAuth),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(session.sid)"}"#,
                    payeeAuth.merging(["Idempotency-Key": "p"]) { $1 }
                ),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(session.sid)"}"#,
                    payerAuth.merging(["Idempotency-Key": "k"]) { $1 }
                ),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(session.sid)"}"#,
                    payerAuth.merging(["Idempotency-Key": "k"]) { $1 }
                ),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"nope"}"#,
                    payerAuth.merging(["Idempotency-Key": "k"]) { $1 }
                ),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(unknown)"}"#,
                    payerAuth.merging(["Idempotency-Key": "u"]) { $1 }
                ),
                (
                    "POST", "/wallet/payouts", "/wallet/payouts", #"{"amount_cents":5}"#,
                    saverAuth.merging(["Idempotency-Key": "w"]) { $1 }
                ),
                (
                    "POST", "/wallet/payouts", "/wallet/payouts", #"{"amount_cents":5}"#,
                    saverAuth.merging(["Idempotency-Key": "w"]) { $1 }
                ),
                (
                    "POST", "/wallet/payouts", "/wallet/payouts", #"{"amount_cents":6}"#,
                    saverAuth.merging(["Idempotency-Key": "w"]) { $1 }
                ),
                (
                    "POST", "/wallet/payouts", "/wallet/payouts", #"{"amount_cents":500}"#,
                    saverAuth.merging(["Idempotency-Key": "x"]) { $1 }
                ),
                (
                    "POST", "/wallet/payouts", "/wallet/payouts", #"{"amount_cents":0}"#,
                    saverAuth.merging(["Idempotency-Key": "y"]) { $1 }
                ),
                ("POST", "/wallet/payouts", "/wallet/payouts", #"{"amount_cents":5}"#, saverAuth),
                ("POST", "/wallet/payouts", "/wallet/payouts", #"{"amount_cents":5}"#, [:]),
                (
                    "POST", "/wallet/payouts", "/wallet/payouts", #"{"amount_cents":5}"#,
                    keyAuth.merging(["Idempotency-Key": "z"]) { $1 }
                ),

                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(session.sid)"}"#, payerAuth),
                ("POST", "/sessions/resolve", "/sessions/resolve", #"{"eid":"\#(session.eid)"}"#, payerAuth),
                ("POST", "/sessions/cancel", "/sessions/cancel", #"{"sid":"\#(session.sid)"}"#, payeeAuth),
                ("POST", "/sessions/cancel", "/sessions/cancel", #"{"sid":"\#(session.sid)"}"#, payerAuth),
                ("POST", "/sessions/cancel", "/sessions/cancel", #"{"sid":"nope"}"#, payeeAuth),
                ("POST", "/sessions/cancel", "/sessions/cancel", #"{"sid":"\#(unknown)"}"#, payeeAuth),
                ("POST", "/sessions/unlock", "/sessions/unlock", #"{"sid":"\#(other.sid)"}"#, payeeAuth),
                ("POST", "/sessions/unlock", "/sessions/unlock", #"{"sid":"\#(unknown)"}"#, payerAuth),
                ("POST", "/sessions/unlock", "/sessions/unlock", #"{"sid":"nope"}"#, payerAuth),
                ("POST", "/sessions/unlock", "/sessions/unlock", #"{"sid":"\#(session.sid)"}"#, payerAuth),
                ("POST", "/sessions/resolve", "/sessions/resolve", #"{"eid":"\#(cancelled.eid)"}"#, payerAuth),
                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(cancelled.sid)"}"#, payerAuth),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(cancelled.sid)"}"#,
                    payerAuth.merging(["Idempotency-Key": "c"]) { $1 }
                ),
                ("POST", "/sessions/resolve", "/sessions/resolve", #"{"eid":"\#(other.eid)"}"#, payerAuth),
                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(other.sid)"}"#, payerAuth),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(other.sid)"}"#,
                    payerAuth.merging(["Idempotency-Key": "r"]) { $1 }
                ),
                ("GET", "/sessions/{sid}", "/sessions/\(session.sid)", nil, keyAuth),
                ("GET", "/wallet/me", "/wallet/me", nil, keyAuth),
                ("GET", "/wallet/entries", "/wallet/entries", nil, keyAuth),
                ("POST", "/dev/fund", "/dev/fund", #"{"amount_cents":5}"#, keyAuth),
                ("POST", "/sessions/create", "/sessions/create", #"{"amount_cents":5}"#, keyAuth),
                ("POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(other.sid)"}"#, keyAuth),
                ("POST", "/sessions/unlock", "/sessions/unlock", #"{"sid":"\#(other.sid)"}"#, keyAuth),
                ("POST", "/sessions/cancel", "/sessions/cancel", #"{"sid":"\#(other.sid)"}"#, keyAuth),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(other.sid)"}"#,
                    keyAuth.merging(["Idempotency-Key": "key"]) { $1 }
                ),
                (
                    "GET", "/sessions/{sid}", "/sessions/\(session.sid)", nil,
                    ["Authorization": "Bearer gk_unknown"]
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":100}"#,
                    payeeAuth.merging(["Idempotency-Key": "f1"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":100}"#,
                    payeeAuth.merging(["Idempotency-Key": "f1"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":101}"#,
                    payeeAuth.merging(["Idempotency-Key": "f1"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":400}"#,
                    payeeAuth.merging(["Idempotency-Key": "f2"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":-5}"#,
                    payeeAuth.merging(["Idempotency-Key": "f3"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", huge,
                    payeeAuth.merging(["Idempotency-Key": "f3"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":1}"#,
                    payeeAuth
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":1}"#,
                    payerAuth.merging(["Idempotency-Key": "f4"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":1}"#,
                    keyAuth.merging(["Idempotency-Key": "f5"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(other.sid)/refunds", #"{"amount_cents":1}"#,
                    ["Idempotency-Key": "f6"]
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(cancelled.sid)/refunds", #"{"amount_cents":1}"#,
                    payeeAuth.merging(["Idempotency-Key": "f7"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(unknown)/refunds", #"{"amount_cents":1}"#,
                    payeeAuth.merging(["Idempotency-Key": "f8"]) { $1 }
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/nope/refunds", #"{"amount_cents":1}"#,
                    payeeAuth.merging(["Idempotency-Key": "f9"]) { $1 }
                ),
                ("POST", "/charges/resolve", "/charges/resolve", charge, payerAuth),
                ("POST", "/charges/resolve", "/charges/resolve", strangerCharge, payerAuth),
                ("POST", "/charges/resolve", "/charges/resolve", #"{"charge":"AAAA"}"#, payerAuth),
                ("POST", "/charges/resolve", "/charges/resolve", huge, payerAuth),
                ("POST", "/charges/resolve", "/charges/resolve", charge, keyAuth),
                ("POST", "/charges/resolve", "/charges/resolve", charge, [:]),
                ("POST", "/charges/pay", "/charges/pay", charge, payerAuth.merging(["Idempotency-Key": "ch1"]) { $1 }),
                ("POST", "/charges/pay", "/charges/pay", charge, payerAuth.merging(["Idempotency-Key": "ch1"]) { $1 }),
                ("POST", "/charges/pay", "/charges/pay", charge, saverAuth.merging(["Idempotency-Key": "ch2"]) { $1 }),
                (
                    "POST", "/charges/pay", "/charges/pay", try chargeBody(terminalSigner),
                    payeeAuth.merging(["Idempotency-Key": "ch3"]) { $1 }
                ),
                (
                    "POST", "/charges/pay", "/charges/pay", try chargeBody(terminalSigner, 99_000_000),
                    saverAuth.merging(["Idempotency-Key": "ch4"]) { $1 }
                ),
                (
                    "POST", "/charges/pay", "/charges/pay", strangerCharge,
                    payerAuth.merging(["Idempotency-Key": "ch5"]) { $1 }
                ),
                (
                    "POST", "/charges/pay", "/charges/pay", #"{"charge":5}"#,
                    payerAuth.merging(["Idempotency-Key": "ch6"]) { $1 }
                ),
                ("POST", "/charges/pay", "/charges/pay", charge, payerAuth),
                ("POST", "/charges/pay", "/charges/pay", huge, payerAuth.merging(["Idempotency-Key": "ch7"]) { $1 }),
                ("POST", "/charges/pay", "/charges/pay", charge, keyAuth.merging(["Idempotency-Key": "ch8"]) { $1 }),
                ("POST", "/charges/pay", "/charges/pay", charge, ["Idempotency-Key": "ch9"]),
                ("POST", "/terminals", "/terminals", terminalBody, payeeAuth),
                // The same key again, a key that is no key, and a name that is not printable.
                ("POST", "/terminals", "/terminals", terminalBody, payeeAuth),
                ("POST", "/terminals", "/terminals", #"{"name":"x","public_key":"AAAA"}"#, payeeAuth),
                (
                    "POST", "/terminals", "/terminals",
                    terminalBody.replacingOccurrences(of: "counter 2", with: "\\u0007"), payeeAuth
                ),
                ("POST", "/terminals", "/terminals", #"{"name":5}"#, payeeAuth),
                ("POST", "/terminals", "/terminals", huge, payeeAuth),
                ("POST", "/terminals", "/terminals", terminalBody, keyAuth),
                ("POST", "/terminals", "/terminals", terminalBody, [:]),
                ("GET", "/terminals", "/terminals", nil, payeeAuth),
                ("GET", "/terminals", "/terminals", nil, keyAuth),
                ("GET", "/terminals", "/terminals", nil, [:]),
                ("DELETE", "/terminals/{id}", "/terminals/\(terminal.id)", nil, payerAuth),
                ("DELETE", "/terminals/{id}", "/terminals/\(terminal.id)", nil, payeeAuth),
                ("DELETE", "/terminals/{id}", "/terminals/\(terminal.id)", nil, keyAuth),
                ("DELETE", "/terminals/{id}", "/terminals/\(terminal.id)", nil, [:]),
                ("DELETE", "/terminals/{id}", "/terminals/term_nope", nil, payeeAuth),
                ("POST", "/webhooks/endpoints", "/webhooks/endpoints", hookBody, payeeAuth),
                (
                    "POST", "/webhooks/endpoints", "/webhooks/endpoints",
                    #"{"url":"http://127.0.0.2:9/hook","events":["*"]}"#, payeeAuth
                ),
                ("POST", "/webhooks/endpoints", "/webhooks/endpoints", #"{"url":5}"#, payeeAuth),
                ("POST", "/webhooks/endpoints", "/webhooks/endpoints", huge, payeeAuth),
                ("POST", "/webhooks/endpoints", "/webhooks/endpoints", hookBody, keyAuth),
                ("POST", "/webhooks/endpoints", "/webhooks/endpoints", hookBody, [:]),
                ("GET", "/webhooks/endpoints", "/webhooks/endpoints", nil, payeeAuth),
                ("GET", "/webhooks/endpoints", "/webhooks/endpoints", nil, keyAuth),
                ("GET", "/webhooks/endpoints", "/webhooks/endpoints", nil, [:]),
                (
                    "POST", "/webhooks/endpoints/{id}/rotate-secret", "/webhooks/endpoints/\(hook.id)/rotate-secret",
                    nil, payeeAuth
                ),
                (
                    "POST", "/webhooks/endpoints/{id}/rotate-secret", "/webhooks/endpoints/\(hook.id)/rotate-secret",
                    nil, payerAuth
                ),
                (
                    "POST", "/webhooks/endpoints/{id}/rotate-secret", "/webhooks/endpoints/\(hook.id)/rotate-secret",
                    nil, keyAuth
                ),
                (
                    "POST", "/webhooks/endpoints/{id}/rotate-secret", "/webhooks/endpoints/\(hook.id)/rotate-secret",
                    nil, [:]
                ),
                ("POST", "/webhooks/endpoints/{id}/test", "/webhooks/endpoints/\(hook.id)/test", nil, payeeAuth),
                ("POST", "/webhooks/endpoints/{id}/test", "/webhooks/endpoints/\(hook.id)/test", nil, payerAuth),
                ("POST", "/webhooks/endpoints/{id}/test", "/webhooks/endpoints/\(hook.id)/test", nil, keyAuth),
                ("POST", "/webhooks/endpoints/{id}/test", "/webhooks/endpoints/\(hook.id)/test", nil, [:]),
                (
                    "GET", "/webhooks/endpoints/{id}/deliveries", "/webhooks/endpoints/\(savings.id)/deliveries", nil,
                    saverAuth
                ),
                (
                    "GET", "/webhooks/endpoints/{id}/deliveries",
                    "/webhooks/endpoints/\(savings.id)/deliveries?limit=0", nil, saverAuth
                ),
                (
                    "GET", "/webhooks/endpoints/{id}/deliveries", "/webhooks/endpoints/\(savings.id)/deliveries", nil,
                    payeeAuth
                ),
                ("GET", "/webhooks/endpoints/{id}/deliveries", "/webhooks/endpoints/we_x/deliveries", nil, keyAuth),
                ("GET", "/webhooks/endpoints/{id}/deliveries", "/webhooks/endpoints/we_x/deliveries", nil, [:]),
                (
                    "POST", "/webhooks/deliveries/{id}/retry", "/webhooks/deliveries/\(saverDelivery)/retry", nil,
                    saverAuth
                ),
                (
                    "POST", "/webhooks/deliveries/{id}/retry", "/webhooks/deliveries/\(saverDelivery)/retry", nil,
                    payeeAuth
                ),
                ("POST", "/webhooks/deliveries/{id}/retry", "/webhooks/deliveries/whd_x/retry", nil, keyAuth),
                ("POST", "/webhooks/deliveries/{id}/retry", "/webhooks/deliveries/whd_x/retry", nil, [:]),
                ("DELETE", "/webhooks/endpoints/{id}", "/webhooks/endpoints/\(savings.id)", nil, saverAuth),
                ("DELETE", "/webhooks/endpoints/{id}", "/webhooks/endpoints/\(savings.id)", nil, saverAuth),
                ("DELETE", "/webhooks/endpoints/{id}", "/webhooks/endpoints/\(hook.id)", nil, keyAuth),
                ("DELETE", "/webhooks/endpoints/{id}", "/webhooks/endpoints/\(hook.id)", nil, [:]),
                (
                    "POST", "/webhooks/deliveries/{id}/retry", "/webhooks/deliveries/\(saverDelivery)/retry", nil,
                    saverAuth
                ),
                // This server has no public URL: no QR codes, whatever the EID.
                ("GET", "/p/{eid}/qr.svg", "/p/\(session.eid)/qr.svg", nil, [:]),
                ("GET", "/p/{eid}/qr.svg", "/p/ABCDEF0123/qr.svg", nil, [:]),
                // The web checkout: pages for people, answered in HTML (the client here follows redirects, so no
                // call below succeeds at one).
                ("GET", "/p/{eid}", "/p/\(session.eid)", nil, [:]),
                ("GET", "/p/{eid}", "/p/NOT-AN-EID", nil, [:]),
                ("POST", "/p/{eid}/sign-in", "/p/\(session.eid)/sign-in", "email=pw%40example.com&password=wrong", [:]),
                ("POST", "/p/{eid}/sign-in", "/p/\(session.eid)/sign-in", "email=", [:]),
                (
                    "POST", "/p/{eid}/sign-out", "/p/\(session.eid)/sign-out", "csrf=x",
                    ["Sec-Fetch-Site": "cross-site"]
                ),
                ("POST", "/p/{eid}/pay", "/p/\(session.eid)/pay", "view=x", [:]),
                ("GET", "/p/{eid}/receipt", "/p/\(session.eid)/receipt?sid=\(session.sid)", nil, [:]),
                ("GET", "/p/{eid}/receipt.json", "/p/\(session.eid)/receipt.json?sid=\(session.sid)", nil, [:]),
                ("GET", "/p/{eid}/events", "/p/\(session.eid)/events", nil, [:]),
                ("GET", "/p/assets/{name}", "/p/assets/checkout.css", nil, [:]),
                ("GET", "/p/assets/{name}", "/p/assets/nothing.js", nil, [:]),
            ]
            var exercised = Set<Operation>()
            var seenStatuses = Set<Int>()
            for (method, template, path, body, headers) in calls {
                let operation = Operation(method: method, path: template)
                exercised.insert(operation)
                let response = try await ledger.raw(method, path, body: body, headers: headers)
                seenStatuses.insert(response.status)
                let documented = try #require(contract.responses[operation], "\(method) \(template) is not documented")
                let kinds = try #require(
                    documented[response.status],
                    "\(method) \(path) answered undocumented \(response.status)"
                )
                if response.status == 429 {
                    #expect(Int(response.headers["retry-after"] ?? "").map { $0 >= 1 } == true)
                }
                if response.headers["content-type"]?.hasPrefix("text/html") == true {
                    // A page for a person: its status must be documented as one.
                    #expect(
                        contract.mediaTypes[operation]?[response.status]?.contains("text/html") == true,
                        "\(method) \(path) → \(response.status) as HTML is not documented"
                    )
                } else if response.status >= 400 {
                    #expect(response.headers["content-type"] == Problem.mediaType)
                    let kind = try #require(
                        TestLedger.problemKind(response.body),
                        "\(method) \(path): not a problem body"
                    )
                    #expect(
                        kinds.contains(kind.rawValue),
                        "\(method) \(path) → \(response.status) \(kind.rawValue) not documented"
                    )
                }
            }
            #expect(exercised == Set(contract.responses.keys), "operations in the document but not exercised here")
            #expect(seenStatuses.isSuperset(of: [200, 400, 401, 403, 404, 409, 410, 413, 422, 429]))
        }
    }

    @Test("A method a documented path does not serve gets 405 method-not-allowed with Allow, not 404")
    func otherMethods() async throws {
        try await TestLedger.with(registration: .open) { ledger in
            let yaml = String(decoding: try await ledger.raw("GET", "/openapi.yaml").body, as: UTF8.self)
            let contract = try Contract(yaml: yaml)
            // Each path once, with every method it serves.
            for (template, operations) in Dictionary(grouping: contract.responses.keys, by: \.path) {
                let methods = Set(operations.map(\.method))
                let path = template.replacingOccurrences(of: "{id}", with: "some-id")
                    .replacingOccurrences(of: "{sid}", with: "some-sid")
                    .replacingOccurrences(of: "{eid}", with: "0123456789")
                    .replacingOccurrences(of: "{name}", with: "checkout.css")
                let other = ["DELETE", "GET", "PATCH"].first { !methods.contains($0) }!
                for method in [other, "TRACE", "PUT"] {
                    let response = try await ledger.raw(method, path)
                    #expect(response.status == 405, "\(method) \(path)")
                    // A GET path also answers HEAD.
                    let allowed = response.headers["allow"]?.split(separator: ",").map {
                        $0.trimmingCharacters(in: .whitespaces)
                    }
                    #expect(
                        Set(allowed ?? []) == methods.union(methods.contains("GET") ? ["HEAD"] : []),
                        "\(method) \(path): \(allowed ?? [])"
                    )
                    #expect(TestLedger.problemKind(response.body) == .methodNotAllowed, "\(method) \(path)")
                }
            }
            // The paths still serve their own method, and unknown paths stay 404.
            #expect(try await ledger.raw("GET", "/healthz").status == 200)
            #expect(try await ledger.raw("GET", "/sessions/create").status == 405)
            #expect(try await ledger.raw("GET", "/no/such/path").status == 404)
        }
    }

    @Test(
        "Every problem kind the API can send is listed in the document's Problem schema",
        arguments: StoreKind.available
    )
    func problemTypes(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let yaml = String(decoding: try await ledger.raw("GET", "/openapi.yaml").body, as: UTF8.self)
            for kind in ProblemKind.allCases {
                #expect(yaml.contains("\"\(kind.typeURI)\""), "\(kind.typeURI) missing")
            }
        }
    }

    @Test(
        "The document lists exactly the route table's operations, with the running settings' numbers",
        arguments: [false, true],
        [false, true]
    )
    func routeTable(developmentMode: Bool, withMetrics: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-contract")
        defer { directory.remove() }
        var policy = LedgerPolicy()
        policy.maximumLocksPerPayer = 7
        policy.lockLifetime = .seconds(45)
        policy.maximumAmount = 123_456
        policy.minimumPasswordLength = 20
        let store = try SQLiteLedgerStore(path: directory.url.appendingPathComponent("l.sqlite").path, policy: policy)
        let routes = LedgerRoutes(
            store: store,
            tokens: try await TokenAuthority(secret: String(repeating: "s", count: 32)),
            developmentMode: developmentMode,
            limits: .unlimited,
            metrics: withMetrics ? LedgerMetrics() : nil
        )
        let yaml = try OpenAPIDocument.render(
            routes: routes.table.map { $0.documented },
            settings: routes.documentSettings
        )
        let documented = Set(try Contract(yaml: yaml).responses.keys)
        let served = Set(routes.table.map { Operation(method: $0.method.rawValue, path: $0.path) })
        #expect(documented == served)
        #expect(served.contains(Operation(method: "POST", path: "/dev/fund")) == developmentMode)
        #expect(served.contains(Operation(method: "GET", path: "/metrics")) == withMetrics)
        #expect(!yaml.contains("${"))
        #expect(yaml.contains("at most 7 live locks"))
        #expect(yaml.contains("lapses after 45 s"))
        #expect(yaml.contains("maximum: 123456"))
        #expect(yaml.contains("minLength: 20"))
        #expect(yaml.contains("Body over \(LedgerRequestContext.maximumBodySize) bytes"))
    }

    @Test("A route the document does not describe, or describes under another operationId, is found")
    func undocumentedRoute() throws {
        let settings = OpenAPIDocument.Settings(
            policy: LedgerPolicy(),
            maximumBodyBytes: 1,
            recentEntryCount: 1,
            eventStreamsPerUser: 1
        )
        let health = OpenAPIDocument.Operation(method: "GET", path: "/healthz", operationID: "health")
        #expect(throws: Never.self) { try OpenAPIDocument.render(routes: [health], settings: settings) }
        for wrong in [
            OpenAPIDocument.Operation(method: "GET", path: "/nowhere", operationID: "nowhere"),
            OpenAPIDocument.Operation(method: "GET", path: "/healthz", operationID: "other"),
            OpenAPIDocument.Operation(method: "POST", path: "/healthz", operationID: "health"),
        ] {
            #expect(throws: OpenAPIDocument.Mismatch.self) {
                try OpenAPIDocument.render(routes: [health, wrong], settings: settings)
            }
        }
    }
}
