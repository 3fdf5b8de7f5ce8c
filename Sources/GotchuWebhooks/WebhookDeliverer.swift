import Foundation
import GotchuCore
package import GotchuLedger
package import Logging
import ServiceLifecycle
import Synchronization

/// Delivers the webhook events the store's outbox holds, until graceful shutdown: claims the due deliveries (each
/// leased to this server alone, across replicas), renders each event's body once (pinned in the store, so every
/// attempt and every endpoint gets the same bytes), signs it, POSTs it and records the outcome; a failed attempt is
/// tried again on the ``WebhookRetrySchedule``.
///
/// At most ``WebhookOptions/concurrencyPerEndpoint`` deliveries to one endpoint are in flight at once (the store
/// counts every replica's leases), and at most ``WebhookOptions/concurrency`` in all on this server, each in a task of
/// its own: a slow endpoint holds up its own deliveries only. The worker wakes when this server commits an event
/// (``LedgerStore/webhookOutbox``) and when a delivery ends, and polls every ``WebhookOptions/pollInterval`` for the
/// events of other servers and the retries coming due.
package struct WebhookDeliverer<Store: LedgerStore>: Service {
    let store: Store
    /// Awaited before the first claim: the server's schema migration, which its other services await too.
    let ready: @Sendable () async throws -> Void
    let options: WebhookOptions
    /// Counts each attempt by outcome (`delivered`, `failed`, `given-up`) and how long it took.
    let countAttempt: (@Sendable (_ outcome: String, _ duration: Duration) -> Void)?
    let logger: Logger

    /// A worker over `store`'s outbox that starts once `ready` returns.
    package init(
        store: Store,
        ready: @escaping @Sendable () async throws -> Void,
        options: WebhookOptions,
        countAttempt: (@Sendable (_ outcome: String, _ duration: Duration) -> Void)?,
        logger: Logger
    ) {
        self.store = store
        self.ready = ready
        self.options = options
        self.countAttempt = countAttempt
        self.logger = logger
    }

    /// How long a claim keeps a delivery from other workers: longer than an attempt may take (its timeout) and the
    /// recording after it, so two attempts of one delivery never overlap; a server that dies mid-attempt leaves it
    /// to be claimed again once this passed.
    var lease: Duration { options.timeout * 2 + .seconds(10) }

    package func run() async throws {
        try await ready()
        let client = options.client()
        if let unavailable = client.tlsUnavailable {
            logger.warning("webhook deliveries to https receivers will fail", metadata: ["reason": "\(unavailable)"])
        }
        let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        // Subscribed before the first claim, so no commit falls between the two.
        let outbox = store.webhookOutbox.wakeups()
        await withTaskGroup(of: Void.self) { helpers in
            // Commits of this server and the poll wake the loop below; both stop with it.
            helpers.addTask {
                for await _ in outbox { wake.yield() }
            }
            helpers.addTask { [interval = options.pollInterval] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    wake.yield()
                }
            }
            // Graceful shutdown ends the wake-ups, and so the loop; the deliveries in flight end on their own (their
            // timeout bounds them) and are recorded before the group returns.
            await withGracefulShutdownHandler {
                await withDiscardingTaskGroup { deliveries in
                    await deliver(into: &deliveries, client: client, wakes: wakes, wake: wake)
                }
            } onGracefulShutdown: {
                wake.finish()
            }
            helpers.cancelAll()
        }
    }

    /// Claims and starts deliveries while there is room, then waits to be woken, until the wake-ups end.
    private func deliver(
        into deliveries: inout DiscardingTaskGroup,
        client: WebhookHTTPClient,
        wakes: AsyncStream<Void>,
        wake: AsyncStream<Void>.Continuation
    ) async {
        let inFlight = InFlightCount()
        var failing: String?
        var iterator = wakes.makeAsyncIterator()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let room = options.concurrency - inFlight.value
            var claimedAll = false
            if room > 0 {
                do {
                    let claimed = try await store.claimWebhookDeliveries(
                        limit: room,
                        perEndpoint: options.concurrencyPerEndpoint,
                        lease: lease
                    )
                    if failing != nil { logger.notice("claiming webhook deliveries works again") }
                    failing = nil
                    claimedAll = claimed.count == room
                    for delivery in claimed {
                        inFlight.add(1)
                        deliveries.addTask {
                            await attempt(delivery, client: client)
                            inFlight.add(-1)
                            wake.yield()
                        }
                    }
                } catch {
                    // Logged when a failure begins or changes, not every second it lasts (a database outage).
                    let description = "\(error)"
                    if description != failing {
                        logger.warning("claiming webhook deliveries failed", metadata: ["error": "\(description)"])
                    }
                    failing = description
                }
            }
            // More may be due right away when the claim filled every free slot; else wait for news.
            if claimedAll { continue }
            guard await iterator.next() != nil else { return }
        }
    }

    /// One attempt of `claimed`: its body, signed now, POSTed; the outcome recorded under the claim's lease.
    func attempt(_ claimed: ClaimedWebhookDelivery, client: WebhookHTTPClient) async {
        let delivery = claimed.delivery
        var metadata: Logger.Metadata = [
            "delivery": "\(delivery.id)", "event": "\(claimed.event.id)", "endpoint": "\(claimed.endpoint.id)",
            "attempt": "\(claimed.attempt)",
        ]
        let started = ContinuousClock.now
        let outcome: WebhookAttemptOutcome
        do {
            let sent = await WebhookAttempt.send(
                body: try await self.body(of: claimed),
                eventID: claimed.event.id,
                eventType: claimed.event.type.rawValue,
                to: claimed.endpoint.url,
                secrets: claimed.secrets,
                at: Date(),
                client: client
            )
            let duration = ContinuousClock.now - started
            if let status = sent.status { metadata["status"] = "\(status)" }
            if let error = sent.error {
                outcome = failure(claimed, status: sent.status, error: error, duration: duration)
            } else {
                outcome = .delivered(statusCode: sent.status ?? 200, duration: duration)
            }
        } catch {
            // The event could not be read or its body pinned (the store failed): not the receiver's fault, and not
            // an attempt; the lease lapses and a worker tries again.
            logger.warning("reading a webhook event failed", metadata: metadata.merging(["error": "\(error)"]) { $1 })
            return
        }
        record(outcome, of: claimed, metadata: metadata)
        do {
            let result = try await store.recordWebhookAttempt(
                deliveryID: delivery.id,
                leaseToken: claimed.leaseToken,
                outcome: outcome
            )
            if !result.recorded {
                logger.notice(
                    "a webhook attempt outlived its lease; another worker has the delivery",
                    metadata: metadata
                )
            }
            if result.endpointDisabled {
                logger.warning(
                    "webhook endpoint disabled after failing since \(result.failingSince.map(String.init) ?? "?")",
                    metadata: metadata
                )
            }
        } catch {
            // Not recorded: the lease lapses and the delivery is attempted again (the same event id, so the receiver
            // can tell).
            logger.warning(
                "recording a webhook attempt failed",
                metadata: metadata.merging(["error": "\(error)"]) { $1 }
            )
        }
    }

    /// A failed attempt: retried after the schedule's next delay, or given up when that falls outside its window.
    private func failure(
        _ claimed: ClaimedWebhookDelivery,
        status: Int?,
        error: String,
        duration: Duration
    ) -> WebhookAttemptOutcome {
        let age = Duration.milliseconds(max(0, claimed.now - claimed.delivery.createdAt))
        return .failed(
            statusCode: status,
            error: error,
            duration: duration,
            retryAfter: options.schedule.delay(afterAttempt: claimed.attempt, age: age)
        )
    }

    /// Logs and counts an attempt's outcome.
    private func record(_ outcome: WebhookAttemptOutcome, of claimed: ClaimedWebhookDelivery, metadata: Logger.Metadata)
    {
        switch outcome {
        case .delivered(_, let duration):
            countAttempt?("delivered", duration)
            logger.debug("webhook delivered", metadata: metadata)
        case .failed(_, let error, let duration, let retryAfter):
            countAttempt?(retryAfter == nil ? "given-up" : "failed", duration)
            var metadata = metadata
            metadata["error"] = "\(error)"
            if let retryAfter {
                metadata["retry_in_s"] = "\(retryAfter.components.seconds)"
                logger.info("webhook attempt failed", metadata: metadata)
            } else {
                logger.warning("webhook delivery failed for good", metadata: metadata)
            }
        }
    }

    /// The event's body: pinned already, or rendered now and pinned (the first render stored wins, so every attempt
    /// of every delivery of the event sends the same bytes).
    private func body(of claimed: ClaimedWebhookDelivery) async throws -> Data {
        if let body = claimed.event.body { return body }
        let detail = try await store.webhookEvent(id: claimed.event.id)
        return try await store.pinWebhookBody(eventID: claimed.event.id, body: try WebhookBody.render(detail))
    }
}

/// How many deliveries are in flight on this server.
private final class InFlightCount: Sendable {
    private let count = Atomic<Int>(0)

    var value: Int { count.load(ordering: .relaxed) }

    func add(_ delta: Int) { count.add(delta, ordering: .relaxed) }
}
