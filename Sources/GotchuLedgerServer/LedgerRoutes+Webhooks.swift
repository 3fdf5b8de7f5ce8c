import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerAPI
import GotchuWebhooks
import HTTPTypes
import Hummingbird
import NIOCore

extension LedgerRoutes {
    /// The routes of webhook endpoints: a user's token, or an API key with `webhooks:manage`, registers, lists,
    /// deletes and rotates its own endpoints and reads and retries their deliveries. A URL is checked before it is
    /// stored (``WebhookAddressPolicy``: `https`, public addresses only, but for the allowed hosts); its signing
    /// secret is shown once, in the answer that made or rotated it.
    var webhookRoutes: [LedgerRoute] {
        [
            LedgerRoute(.post, "/webhooks/endpoints", "createWebhookEndpoint") { request, context in
                let user = try await context.user(for: .manageWebhooks)
                let body = try await request.decode(as: WebhookEndpointRequest.self, context: context)
                // What needs no network first, then the addresses the host resolves to now.
                let events = try WebhookSecrets.validate(events: body.events)
                let url = try WebhookSecrets.validate(url: body.url)
                do {
                    _ = try await webhooks.policy.check(url: url, resolver: webhooks.resolver, within: webhooks.timeout)
                } catch {
                    throw Problem(.badRequest, detail: "\(error)")
                }
                let (endpoint, secret) = try await store.createWebhookEndpoint(userID: user, url: url, events: events)
                var answer = WebhookEndpointResponse(endpoint)
                answer.secret = secret
                return try json(answer, status: .created)
            },
            LedgerRoute(.get, "/webhooks/endpoints", "listWebhookEndpoints") { _, context in
                let user = try await context.user(for: .manageWebhooks)
                let endpoints = try await store.webhookEndpoints(userID: user)
                return try json(
                    WebhookEndpointsResponse(endpoints: endpoints.map(WebhookEndpointResponse.init))
                )
            },
            LedgerRoute(.delete, "/webhooks/endpoints/{id}", "deleteWebhookEndpoint") { _, context in
                let user = try await context.user(for: .manageWebhooks)
                let id = try Self.webhookID(context, prefix: "we_", what: "webhook endpoint")
                try await store.deleteWebhookEndpoint(id: id, userID: user)
                return try json(WebhookEndpointDeletedResponse(id: id))
            },
            LedgerRoute(.post, "/webhooks/endpoints/{id}/rotate-secret", "rotateWebhookSecret") { _, context in
                let user = try await context.user(for: .manageWebhooks)
                let id = try Self.webhookID(context, prefix: "we_", what: "webhook endpoint")
                let (endpoint, secret) = try await store.rotateWebhookSecret(id: id, userID: user)
                var answer = WebhookEndpointResponse(endpoint)
                answer.secret = secret
                return try json(answer)
            },
            LedgerRoute(.post, "/webhooks/endpoints/{id}/test", "testWebhookEndpoint") { _, context in
                let user = try await context.user(for: .manageWebhooks)
                let id = try Self.webhookID(context, prefix: "we_", what: "webhook endpoint")
                guard let endpoint = try await store.webhookEndpoints(userID: user).first(where: { $0.id == id })
                else { throw Problem(.notFound, detail: "no such webhook endpoint") }
                try limiters.webhookTestPerUser?.take(user)
                let secrets = try await store.webhookSecrets(endpointID: id)
                return try json(
                    await WebhookBody.test(endpoint, secrets: secrets, client: webhooks.client())
                )
            },
            LedgerRoute(.get, "/webhooks/endpoints/{id}/deliveries", "listWebhookDeliveries") { request, context in
                let user = try await context.user(for: .manageWebhooks)
                let id = try Self.webhookID(context, prefix: "we_", what: "webhook endpoint")
                let limit = try Self.deliveryLimit(request)
                let deliveries = try await store.webhookDeliveries(endpointID: id, userID: user, limit: limit)
                return try json(
                    WebhookDeliveriesResponse(deliveries: deliveries.map(WebhookDeliveryResponse.init))
                )
            },
            LedgerRoute(.post, "/webhooks/deliveries/{id}/retry", "retryWebhookDelivery") { _, context in
                let user = try await context.user(for: .manageWebhooks)
                let id = try Self.webhookID(context, prefix: "whd_", what: "webhook delivery")
                let delivery = try await store.retryWebhookDelivery(id: id, userID: user)
                // The worker is woken as by a commit: the delivery is due now.
                store.webhookOutbox.notify()
                return try json(WebhookDeliveryResponse(delivery))
            },
        ]
    }

    /// How many deliveries `GET /webhooks/endpoints/{id}/deliveries` lists at most, and by default.
    static var maximumDeliveryPage: Int { 100 }
    static var defaultDeliveryPage: Int { 50 }

    /// The `limit` query of the deliveries' list, given at most once: 1 to ``maximumDeliveryPage``.
    private static func deliveryLimit(_ request: Request) throws -> Int {
        let values = request.uri.queryParameters.getAll("limit")
        guard values.count <= 1 else { throw Problem(.badRequest, detail: "give limit at most once") }
        guard let text = values.first else { return defaultDeliveryPage }
        guard (1...3).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            let value = Int(text), (1...maximumDeliveryPage).contains(value)
        else {
            throw Problem(.badRequest, detail: "limit must be a whole number from 1 to \(maximumDeliveryPage)")
        }
        return value
    }

    /// The `{id}` of the path, if it has the shape of the store's ids (`prefix` and 32 lowercase hex digits); any
    /// other is no such thing (404), and never reaches the store.
    private static func webhookID(_ context: LedgerRequestContext, prefix: String, what: String) throws -> String {
        let id = try context.parameters.require("id")
        let digits = id.utf8.dropFirst(prefix.utf8.count)
        guard id.hasPrefix(prefix), digits.count == 32,
            digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { throw Problem(.notFound, detail: "no such \(what)") }
        return id
    }
}

extension WebhookEndpointResponse {
    /// An endpoint as the API lists it, without its secret.
    package init(_ endpoint: WebhookEndpoint) {
        self.init(
            id: endpoint.id,
            url: endpoint.url,
            events: endpoint.events,
            status: endpoint.disabledAt == nil ? "enabled" : "disabled",
            disabledReason: endpoint.disabledReason,
            failingSince: endpoint.failingSince.map(Date.init(storeMilliseconds:)),
            previousSecretExpiresAt: endpoint.previousSecretExpiresAt.map(Date.init(storeMilliseconds:)),
            createdAt: Date(storeMilliseconds: endpoint.createdAt)
        )
    }
}

extension WebhookDeliveryResponse {
    /// A delivery as the API lists it.
    package init(_ delivery: WebhookDelivery) {
        self.init(
            id: delivery.id,
            eventID: delivery.eventID,
            eventType: delivery.eventType.rawValue,
            endpointID: delivery.endpointID,
            status: delivery.status.rawValue.lowercased(),
            attempts: delivery.attempts,
            lastAttemptAt: delivery.lastAttemptAt.map(Date.init(storeMilliseconds:)),
            lastStatusCode: delivery.lastStatusCode,
            lastError: delivery.lastError,
            nextAttemptAt: delivery.nextAttemptAt.map(Date.init(storeMilliseconds:)),
            deliveredAt: delivery.deliveredAt.map(Date.init(storeMilliseconds:)),
            createdAt: Date(storeMilliseconds: delivery.createdAt)
        )
    }
}
