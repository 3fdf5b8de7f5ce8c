/// How a driver learns a session's status from the ledger, without I/O: by waiting on the session's event stream,
/// re-reading the status when the stream breaks (after a backoff) or stays quiet too long, and polling when the
/// server has no event streams.
///
/// The driver performs each ``Step`` and reports how it went as an ``Outcome``; the statuses themselves go to the
/// driver's flow (``ReceiverStateMachine``), which decides what they mean.
public struct StatusWatch: Sendable, Hashable {
    /// How the watch behaves.
    public struct Configuration: Hashable, Sendable {
        /// Use the event stream; `false` polls only.
        public var live: Bool
        /// How often the status is read when polling.
        public var pollInterval: Duration
        /// The longest wait on the stream before the status is read anyway: bounds how late a change whose event
        /// was lost is seen.
        public var safetyInterval: Duration
        /// The wait before the re-read after the first broken stream; each further one doubles, up to
        /// ``maximumBackoff``.
        public var backoff: Duration
        /// The longest wait after a broken stream.
        public var maximumBackoff: Duration

        /// The watch's behaviour; the defaults follow the event stream, re-read the status at least every 30 s,
        /// poll every 250 ms when not live, and back off from 250 ms up to 5 s after a broken stream.
        public init(
            live: Bool = true,
            pollInterval: Duration = .milliseconds(250),
            safetyInterval: Duration = .seconds(30),
            backoff: Duration = .milliseconds(250),
            maximumBackoff: Duration = .seconds(5)
        ) {
            self.live = live
            self.pollInterval = pollInterval
            self.safetyInterval = safetyInterval
            self.backoff = backoff
            self.maximumBackoff = maximumBackoff
        }
    }

    /// What the driver does next.
    public enum Step: Hashable, Sendable {
        /// Wait on the event stream for a change from the last status seen, at most `timeout`: another status, or
        /// of a split session, more shares paid (each share's payment is a change while it stays partially paid).
        case awaitChange(timeout: Duration)
        /// Read the status once, after `delay`.
        case read(after: Duration)
    }

    /// How the last step went.
    public enum Outcome: Hashable, Sendable {
        /// The stream brought a new status (or more shares paid).
        case changed
        /// The wait ran out without one.
        case timedOut
        /// The stream could not be opened or broke.
        case streamFailed
        /// The server has no event streams (it predates them).
        case streamUnsupported
        /// The read returned a status.
        case read
        /// The read failed.
        case readFailed
    }

    /// The configuration in use.
    public let configuration: Configuration
    /// Whether the server turned out to have no event streams.
    public private(set) var polling: Bool
    /// Broken streams and failed reads in a row.
    public private(set) var failures = 0

    /// A watch that starts on the stream (or polling, if not ``Configuration/live``).
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.polling = !configuration.live
    }

    /// The first step.
    public var first: Step {
        // The stream's first event is the current state: no separate read is needed.
        polling ? .read(after: .zero) : .awaitChange(timeout: configuration.safetyInterval)
    }

    /// The step after `outcome`.
    public mutating func next(after outcome: Outcome) -> Step {
        switch outcome {
        case .changed:
            failures = 0
            return .awaitChange(timeout: configuration.safetyInterval)
        case .timedOut:
            return .read(after: .zero)
        case .streamUnsupported:
            polling = true
            return .read(after: .zero)
        case .streamFailed, .readFailed:
            failures += 1
            if polling { return .read(after: configuration.pollInterval) }
            // The re-read after the backoff also catches what changed while the stream was down.
            let delay = configuration.backoff * (1 << min(failures - 1, 16))
            return .read(after: min(delay, configuration.maximumBackoff))
        case .read:
            if polling { return .read(after: configuration.pollInterval) }
            // Failures are forgiven only by a stream that works: one refused at once each time keeps backing off.
            return .awaitChange(timeout: configuration.safetyInterval)
        }
    }
}
