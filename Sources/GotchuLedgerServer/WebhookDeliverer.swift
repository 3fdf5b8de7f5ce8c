import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import Logging
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
struct WebhookDeliverer<Store: LedgerStore>: Service {
    let store: Store
    let migration: Migration
    let options: WebhookOptions
    let metrics: LedgerMetrics?
    let logger: Logger

    /// How long a claim keeps a delivery from other workers: longer than an attempt may take (its timeout) and the
    /// recording after it, so two attempts of one delivery never overlap; a server that dies mid-attempt leaves it
    /// to be claimed again once this passed.
    var lease: Duration { options.timeout * 2 + .seconds(10) }

    func run() async throws {
        try await migration.run()
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
            metrics?.webhookAttempt(outcome: "delivered", duration: duration)
            logger.debug("webhook delivered", metadata: metadata)
        case .failed(_, let error, let duration, let retryAfter):
            metrics?.webhookAttempt(outcome: retryAfter == nil ? "given-up" : "failed", duration: duration)
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

extension WebhookBody {
    /// Sends `endpoint` a `webhook.test` event now, signed as deliveries are, through `client` (whose address
    /// checks every delivery passes); how it answered, a refusal too. Nothing is stored or retried.
    static func test(
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

/// The body of a webhook delivery: `{"id":"evt_…","type":"…","created":UNIX_SECONDS,"data":{…}}`, where `data` is
/// the object the API answers with for that thing (the session as its payee reads it, with the payment's receipt; the
/// refund; the payout; the deposit).
enum WebhookBody {
    /// The event's body.
    static func render(_ detail: WebhookEventDetail) throws -> Data {
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

extension PayoutResponse {
    /// A payout as it ended, in the data of `payout.settled` and `payout.failed`.
    package init(_ payout: PayoutRow) {
        self.init(
            payoutID: payout.id,
            amountCents: payout.amount,
            status: payout.status.rawValue,
            newBalanceCents: payout.balanceAfter
        )
        self.reference = payout.reference
        self.failureReason = payout.reason
        self.resolvedAt = payout.resolvedAt.map(Date.init(storeMilliseconds:))
    }
}

/// How many deliveries are in flight on this server.
private final class InFlightCount: Sendable {
    private let count = Atomic<Int>(0)

    var value: Int { count.load(ordering: .relaxed) }

    func add(_ delta: Int) { count.add(delta, ordering: .relaxed) }
}
