import Foundation
import GotchuLedger

/// One signed POST of an event's body to an endpoint: what deliveries and tests share.
enum WebhookAttempt {
    /// How it went: the answer's status (`nil` when there was none) and, unless it was 2xx, why it failed.
    struct Outcome {
        var status: Int?
        var error: String?
    }

    /// POSTs `body` to `url`, signed at `now` with every secret of `secrets` (the one a rotation replaced too,
    /// while it is honoured), with the event's id and type as headers.
    static func send(
        body: Data,
        eventID: String,
        eventType: String,
        to url: String,
        secrets: WebhookSigningSecrets,
        at now: Date,
        client: WebhookHTTPClient
    ) async -> Outcome {
        let signature = WebhookSignature.header(
            body: body,
            timestamp: Int64(now.timeIntervalSince1970),
            secrets: [secrets.current] + (secrets.previous.map { [$0] } ?? [])
        )
        do {
            let answer = try await client.post(
                url: url,
                headers: [
                    (WebhookSignature.headerName, signature), ("Gotchu-Event-Id", eventID),
                    ("Gotchu-Event-Type", eventType),
                ],
                body: Array(body)
            )
            guard !(200..<300).contains(answer.status) else { return Outcome(status: answer.status) }
            let excerpt = answer.body.prefix(200)
            return Outcome(
                status: answer.status,
                error: "answered HTTP \(answer.status)" + (excerpt.isEmpty ? "" : ": \(excerpt)")
            )
        } catch {
            return Outcome(status: nil, error: error.description)
        }
    }
}
