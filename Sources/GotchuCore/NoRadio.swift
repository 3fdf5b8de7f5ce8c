/// No radio at all: nothing goes on the air and nothing is heard. A terminal on a machine without Bluetooth (or that
/// should stay off the air) still takes payments through its web checkout, its QR code: the flows run as with any
/// radio, and an advertisement is simply not sent.
public struct NoRadio: Radio {
    private let origin = ContinuousClock.now

    /// Why a scan is refused: there is nothing to hear with.
    public struct CannotScan: Error, Sendable, CustomStringConvertible {
        public var description: String {
            "there is no radio to scan with (--radio none only takes payments on the web checkout)"
        }
    }

    private struct Handle: AdvertisingHandle {
        func update(_ advertisement: Advertisement) async throws {}
    }

    /// No radio.
    public init() {}

    /// The time since the radio was made, on the continuous clock.
    public func now() async -> Duration { ContinuousClock.now - origin }

    /// Sleeps on the continuous clock.
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }

    /// Runs `body` with nothing on the air.
    public func withAdvertisement<Result: Sendable>(
        _ advertisement: Advertisement,
        _ body: @Sendable (any AdvertisingHandle) async throws -> Result
    ) async throws -> Result {
        try await body(Handle())
    }

    /// Refused: ``CannotScan``.
    public func scan(_ filter: ScanFilter) async throws -> AsyncThrowingStream<Sighting, any Error> {
        throw CannotScan()
    }

    /// Nothing heard.
    public func statistics() async -> RadioStatistics { RadioStatistics() }
}
