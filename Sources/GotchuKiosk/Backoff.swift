/// Delays between retries of something that keeps failing: doubling from `initial` up to `maximum`, with jitter so
/// terminals that lost the same server do not all come back at once.
package struct Backoff: Hashable, Sendable {
    /// The first delay.
    package var initial: Duration
    /// The longest delay.
    package var maximum: Duration
    /// The fraction of the doubled delay actually waited, drawn at random from this range for each retry.
    package var jitter: ClosedRange<Double>

    /// Creates a policy.
    package init(
        initial: Duration = .milliseconds(500),
        maximum: Duration = .seconds(30),
        jitter: ClosedRange<Double> = 0.8...1.0
    ) {
        self.initial = initial
        self.maximum = max(initial, maximum)
        self.jitter = jitter
    }

    /// The delay before retry number `attempt` (1 for the first retry): a fraction in ``jitter`` (80 % to 100 % by
    /// default) of the doubled delay.
    package func delay(attempt: Int) -> Duration {
        var delay = initial
        for _ in 1..<max(1, min(attempt, 32)) where delay < maximum { delay *= 2 }
        delay = min(delay, maximum)
        return delay * Double.random(in: jitter)
    }
}
