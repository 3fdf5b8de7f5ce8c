import Foundation
import GotchuKiosk

/// A stand-in for the kiosk whose status the test sets, and which counts the display's subscriptions. Like the
/// kiosk, it stamps each status it hands out with the time it does so.
actor SettableStatusSource: KioskStatusSource {
    private var current: KioskStatus
    private var subscribers: [UUID: AsyncStream<KioskStatus>.Continuation] = [:]
    /// How many subscriptions were ever opened.
    private(set) var subscriptionCount = 0
    /// When set, every subscription gets the current status and then ends, as if the kiosk stopped at once. A
    /// browser then reconnects on its own; headless Chromium's virtual time, which stands still while a request is
    /// open, moves on in between.
    private let endsEachSubscription: Bool
    /// Becomes the status right after the first subscription's first status.
    private var nextAfterFirstSubscription: KioskStatus?

    init(_ status: KioskStatus, endsEachSubscription: Bool = false, nextAfterFirstSubscription: KioskStatus? = nil) {
        current = status
        self.endsEachSubscription = endsEachSubscription
        self.nextAfterFirstSubscription = nextAfterFirstSubscription
    }

    /// Subscriptions still open.
    var liveSubscriptions: Int { subscribers.count }

    func status() -> KioskStatus { stamped(current) }

    func statusUpdates() -> AsyncStream<KioskStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: KioskStatus.self)
        subscriptionCount += 1
        continuation.yield(stamped(current))
        if endsEachSubscription {
            continuation.finish()
        } else {
            let id = UUID()
            subscribers[id] = continuation
            continuation.onTermination = { _ in Task { await self.unsubscribe(id) } }
        }
        if let next = nextAfterFirstSubscription {
            nextAfterFirstSubscription = nil
            set(next)
        }
        return stream
    }

    /// Makes `status` current and sends it to every subscriber.
    func set(_ status: KioskStatus) {
        current = status
        for subscriber in subscribers.values { subscriber.yield(stamped(status)) }
    }

    /// Ends every subscription, as the kiosk does when it stops.
    func finishAll() {
        for subscriber in subscribers.values { subscriber.finish() }
    }

    /// Waits until no subscription is open, for at most `timeout` (which only bounds a hang); returns whether that
    /// happened.
    func waitUntilNoSubscriptions(timeout: Duration = .seconds(60)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !subscribers.isEmpty, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        return subscribers.isEmpty
    }

    private func stamped(_ status: KioskStatus) -> KioskStatus {
        var status = status
        status.now = Date()
        return status
    }

    private func unsubscribe(_ id: UUID) { subscribers[id] = nil }
}
