import Foundation
public import GotchuAPI

extension LedgerClient {
    /// `POST /webhooks/endpoints`: registers `url` for `events` (``WebhookEventType`` raw values, or `*`); the answer
    /// holds the endpoint's signing secret, shown this once.
    public func createWebhookEndpoint(
        url: String,
        events: [String]
    ) async throws(LedgerClientError) -> WebhookEndpointResponse {
        try await request("POST", "/webhooks/endpoints", body: WebhookEndpointRequest(url: url, events: events))
    }

    /// `GET /webhooks/endpoints`: the caller's endpoints, without their secrets.
    public func webhookEndpoints() async throws(LedgerClientError) -> [WebhookEndpointResponse] {
        let list: WebhookEndpointsResponse = try await request(
            "GET",
            "/webhooks/endpoints",
            body: Optional<WebhookEndpointRequest>.none
        )
        return list.endpoints
    }

    /// `DELETE /webhooks/endpoints/{id}`: nothing more is delivered to it.
    public func deleteWebhookEndpoint(id: String) async throws(LedgerClientError) {
        let _: WebhookEndpointDeletedResponse = try await request(
            "DELETE",
            "/webhooks/endpoints/\(Self.pathSegment(id))",
            body: Optional<WebhookEndpointRequest>.none
        )
    }

    /// `POST /webhooks/endpoints/{id}/rotate-secret`: a new secret, shown this once; deliveries carry a signature
    /// with the old one too for a day.
    public func rotateWebhookSecret(id: String) async throws(LedgerClientError) -> WebhookEndpointResponse {
        try await request(
            "POST",
            "/webhooks/endpoints/\(Self.pathSegment(id))/rotate-secret",
            body: Optional<WebhookEndpointRequest>.none
        )
    }

    /// `GET /webhooks/endpoints/{id}/deliveries`: the endpoint's latest deliveries, newest first.
    public func webhookDeliveries(
        endpointID: String,
        limit: Int? = nil
    ) async throws(LedgerClientError) -> [WebhookDeliveryResponse] {
        let query = limit.map { "?limit=\($0)" } ?? ""
        let list: WebhookDeliveriesResponse = try await request(
            "GET",
            "/webhooks/endpoints/\(Self.pathSegment(endpointID))/deliveries\(query)",
            body: Optional<WebhookEndpointRequest>.none
        )
        return list.deliveries
    }

    /// `POST /webhooks/endpoints/{id}/test`: a signed `webhook.test` event sent to the endpoint alone, now; the
    /// answer says how it answered (a receiver that refuses is not an error here).
    public func testWebhookEndpoint(id: String) async throws(LedgerClientError) -> WebhookTestResponse {
        try await request(
            "POST",
            "/webhooks/endpoints/\(Self.pathSegment(id))/test",
            body: Optional<WebhookEndpointRequest>.none
        )
    }

    /// `POST /webhooks/deliveries/{id}/retry`: the delivery is due again now, failed or not.
    public func retryWebhookDelivery(id: String) async throws(LedgerClientError) -> WebhookDeliveryResponse {
        try await request(
            "POST",
            "/webhooks/deliveries/\(Self.pathSegment(id))/retry",
            body: Optional<WebhookEndpointRequest>.none
        )
    }

    /// `text` as one path segment: what is not a plain character escaped, `/` too.
    static func pathSegment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? text
    }
}
