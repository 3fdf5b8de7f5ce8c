import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import Testing

@testable import GotchuLedgerServer

/// Keeps `/openapi.yaml` true of splits and tips: each answer the split requests get, refusals included, is a
/// status and problem type the document lists for that operation.
@Suite("OpenAPI contract: splits and tips", .timeLimit(.minutes(10)))
struct SplitContractTests {
    @Test(
        "Split and tip requests answer only with documented statuses and problem types",
        arguments: StoreKind.available
    )
    func splitContract(store: StoreKind) async throws {
        try await TestLedger.with(store: store) { ledger in
            let yaml = try await ledger.raw("GET", "/openapi.yaml")
            let contract = try ContractTests.Contract(yaml: String(decoding: yaml.body, as: UTF8.self))
            let payee = try await ledger.client("payee@example.com")
            let ann = try await ledger.client("ann@example.com", funded: 10_000)
            let bob = try await ledger.client("bob@example.com", funded: 10_000)
            let split = try await payee.createSession(amountCents: 1_001, shares: 4)
            let paid = try await payee.createSession(amountCents: 600, shares: 2)
            let single = try await payee.createSession(amountCents: 300)
            let unknown = "00000000-0000-4000-8000-000000000000"
            func auth(_ client: LedgerClient, key: String? = nil) -> [String: String] {
                var headers = ["Authorization": "Bearer \(client.token!)"]
                if let key { headers["Idempotency-Key"] = key }
                return headers
            }
            // The paid split's two payments, for its refunds.
            var paymentIDs: [String] = []
            for (index, payer) in [ann, bob].enumerated() {
                _ = try await payer.lock(sid: paid.sid, shares: 1)
                let sent = try await payer.send(sid: paid.sid, idempotencyKey: "paid-\(index)", tipCents: 5)
                paymentIDs.append(try #require(sent.balance.paymentID))
            }

            typealias Call = (String, String, String, String?, [String: String], Int, ProblemKind?)
            let calls: [Call] = [
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":9,"shares":3}"#, auth(payee), 200,
                    nil
                ),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":9,"shares":0}"#, auth(payee), 400,
                    .invalidShares
                ),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":3,"shares":4}"#, auth(payee), 400,
                    .invalidShares
                ),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":9,"shares":"3"}"#, auth(payee),
                    400,
                    .badRequest
                ),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":9,"shares":3}"#,
                    auth(payee, key: "c"), 200, nil
                ),
                (
                    "POST", "/sessions/create", "/sessions/create", #"{"amount_cents":9,"shares":2}"#,
                    auth(payee, key: "c"), 422, .idempotencyKeyReused
                ),
                ("POST", "/sessions/resolve", "/sessions/resolve", #"{"eid":"\#(split.eid)"}"#, auth(ann), 200, nil),
                (
                    "POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(split.sid)","shares":2}"#, auth(ann), 200,
                    nil
                ),
                (
                    "POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(split.sid)","shares":51}"#, auth(bob), 400,
                    .invalidShares
                ),
                (
                    "POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(split.sid)","shares":3}"#, auth(bob), 409,
                    .noFreeShare
                ),
                (
                    "POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(single.sid)","shares":2}"#, auth(bob), 409,
                    .noFreeShare
                ),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(split.sid)","tip_cents":-1}"#,
                    auth(ann, key: "s"),
                    400, .invalidTip
                ),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(split.sid)","tip_cents":502}"#,
                    auth(ann, key: "s"), 400, .invalidTip
                ),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(split.sid)","tip_cents":"1"}"#,
                    auth(ann, key: "s"), 400, .badRequest
                ),
                (
                    "POST", "/wallet/send", "/wallet/send", #"{"sid":"\#(split.sid)","tip_cents":50}"#,
                    auth(ann, key: "s"),
                    200, nil
                ),
                ("GET", "/sessions/{sid}", "/sessions/\(split.sid)", nil, auth(payee), 200, nil),
                ("GET", "/sessions/{sid}", "/sessions/\(split.sid)", nil, auth(ann), 200, nil),
                ("POST", "/sessions/unlock", "/sessions/unlock", #"{"sid":"\#(split.sid)"}"#, auth(ann), 200, nil),
                (
                    "POST", "/sessions/unlock", "/sessions/unlock", #"{"sid":"\#(split.sid)"}"#, auth(bob), 403,
                    .forbidden
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(paid.sid)/refunds", #"{"amount_cents":10}"#,
                    auth(payee, key: "r1"), 400, .badRequest
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(paid.sid)/refunds",
                    #"{"amount_cents":10,"payment_id":"x"}"#, auth(payee, key: "r2"), 400, .badRequest
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(paid.sid)/refunds",
                    #"{"amount_cents":10,"payment_id":"\#(unknown)"}"#, auth(payee, key: "r3"), 404, .notFound
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(paid.sid)/refunds",
                    #"{"amount_cents":306,"payment_id":"\#(paymentIDs[0])"}"#, auth(payee, key: "r4"), 409,
                    .refundExceedsPayment
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(paid.sid)/refunds",
                    #"{"amount_cents":305,"payment_id":"\#(paymentIDs[0])"}"#, auth(payee, key: "r5"), 200, nil
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(split.sid)/refunds",
                    #"{"amount_cents":5,"payment_id":"\#(paymentIDs[1])"}"#, auth(payee, key: "r6"), 409,
                    .sessionNotPaid
                ),
                (
                    "POST", "/sessions/{sid}/refunds", "/sessions/\(single.sid)/refunds",
                    #"{"amount_cents":5,"payment_id":"\#(paymentIDs[1])"}"#, auth(payee, key: "r7"), 409,
                    .sessionNotPaid
                ),
                (
                    "POST", "/sessions/cancel", "/sessions/cancel", #"{"sid":"\#(paid.sid)"}"#, auth(payee), 409,
                    .sessionAlreadyPaid
                ),
                ("POST", "/sessions/cancel", "/sessions/cancel", #"{"sid":"\#(split.sid)"}"#, auth(payee), 200, nil),
                ("GET", "/sessions/{sid}/events", "/sessions/\(split.sid)/events", nil, auth(payee), 200, nil),
                (
                    "POST", "/sessions/lock", "/sessions/lock", #"{"sid":"\#(split.sid)","shares":1}"#, auth(bob), 410,
                    .sessionCancelled
                ),
            ]
            for (method, template, path, body, headers, status, kind) in calls {
                let response = try await ledger.raw(method, path, body: body, headers: headers)
                let answered = TestLedger.problemKind(response.body)
                #expect(response.status == status, "\(method) \(path) \(body ?? ""): \(String(describing: answered))")
                if let kind { #expect(answered == kind, "\(method) \(path) \(body ?? "")") }
                let documented = try #require(
                    contract.responses[ContractTests.Operation(method: method, path: template)],
                    "\(method) \(template) is not documented"
                )
                let kinds = try #require(
                    documented[response.status],
                    "\(method) \(path) answered undocumented \(response.status)"
                )
                if response.status >= 400 {
                    #expect(
                        kinds.contains(answered?.rawValue ?? "none"),
                        "\(method) \(path) → \(response.status) \(answered?.rawValue ?? "none") not documented"
                    )
                }
            }
            // The cancelled split gave Ann back her share and her tip.
            let view = try await payee.session(sid: split.sid)
            #expect(view.status == .cancelled && view.refundedCents == 501 + 50)
        }
    }
}
