package import Foundation
package import GotchuAPI
import GotchuCore
package import GotchuLedger
import GotchuLedgerAPI

/// The body of a webhook delivery: `{"id":"evt_…","type":"…","created":UNIX_SECONDS,"data":{…}}`, where `data` is
/// the object the API answers with for that thing (the session as its payee reads it, with the payment's receipt; the
/// refund; the payout; the deposit).
package enum WebhookBody {
    /// The event's body.
    package static func render(_ detail: WebhookEventDetail) throws -> Data {
        let encoder = APIJSON.encoder()
        let data: Data
        switch detail.data {
        case .session(let view, _, let receipt):
            var session = SessionStatusResponse(view)
            if let receipt { session.receipt = receipt }
            data = try encoder.encode(session)
        case .refund(let refund):
            data = try encoder.encode(RefundResponse(refund))
        case .payout(let payout):
            data = try encoder.encode(PayoutResponse(payout))
        case .deposit(let deposit):
            data = try encoder.encode(
                WebhookDepositData(
                    depositID: deposit.id,
                    amountCents: deposit.amount,
                    reference: deposit.reference,
                    createdAt: Date(storeMilliseconds: deposit.createdAt)
                )
            )
        }
        let event = detail.event
        return try envelope(id: event.id, type: event.type.rawValue, created: event.createdAt / 1000, data: data)
    }

    /// `{"id":…,"type":…,"created":…,"data":…}`: the envelope's members in the documented order around `data`, as
    /// the API encodes it.
    static func envelope(id: String, type: String, created: Int64, data: Data) throws -> Data {
        let encoder = APIJSON.encoder()
        var body = Data("{\"id\":".utf8)
        body.append(try encoder.encode(id))
        body.append(contentsOf: Array(",\"type\":".utf8))
        body.append(try encoder.encode(type))
        body.append(contentsOf: Array(",\"created\":\(created),\"data\":".utf8))
        body.append(data)
        body.append(UInt8(ascii: "}"))
        return body
    }
}

extension WebhookBody {
    /// Sends `endpoint` a `webhook.test` event now, signed as deliveries are, through `client` (whose address
    /// checks every delivery passes); how it answered, a refusal too. Nothing is stored or retried.
    package static func test(
        _ endpoint: WebhookEndpoint,
        secrets: WebhookSigningSecrets,
        client: WebhookHTTPClient
    ) async throws -> WebhookTestResponse {
        let eventID = WebhookSecrets.id("evt_")
        let now = Date()
        let data = WebhookTestData(
            endpointID: endpoint.id,
            message: "A test event sent on request; no money moved."
        )
        let body = try envelope(
            id: eventID,
            type: WebhookTestData.eventType,
            created: Int64(now.timeIntervalSince1970),
            data: APIJSON.encoder().encode(data)
        )
        let started = ContinuousClock.now
        let outcome = await WebhookAttempt.send(
            body: body,
            eventID: eventID,
            eventType: WebhookTestData.eventType,
            to: endpoint.url,
            secrets: secrets,
            at: now,
            client: client
        )
        let elapsed = (ContinuousClock.now - started).components
        return WebhookTestResponse(
            eventID: eventID,
            delivered: outcome.error == nil,
            statusCode: outcome.status,
            error: outcome.error,
            durationMilliseconds: elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
        )
    }
}
