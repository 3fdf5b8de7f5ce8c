public import GotchuCore

/// One simulated peer's radio: a ``Radio`` whose packets travel through a ``SimulatedAir``.
///
/// Time is the air's: on a virtual air, ``sleep(for:)`` returns when a driver of the air advances past the deadline.
public struct SimulatedRadio: Radio {
    /// The air this radio transmits into.
    public let air: SimulatedAir
    /// The peer's index in the air.
    public let peer: Int
    /// The peer's name, the ``Sighting/source`` others see.
    public let name: String

    public func now() async -> Duration {
        await air.now
    }

    public func sleep(for duration: Duration) async throws {
        try await air.sleep(for: duration)
    }

    public func withAdvertisement<Result: Sendable>(
        _ advertisement: Advertisement,
        _ body: @Sendable (any AdvertisingHandle) async throws -> Result
    ) async throws -> Result {
        let token = try await air.startAdvertising(peer, advertisement)
        let handle = Handle(air: air, peer: peer, token: token)
        do {
            let result = try await body(handle)
            await air.stopAdvertising(peer, token: token)
            return result
        } catch {
            await air.stopAdvertising(peer, token: token)
            throw error
        }
    }

    public func scan(_ filter: ScanFilter) async throws -> AsyncThrowingStream<Sighting, any Error> {
        await air.scan(peer, filter)
    }

    public func statistics() async -> RadioStatistics {
        await air.statistics(of: peer)
    }

    private struct Handle: AdvertisingHandle {
        let air: SimulatedAir
        let peer: Int
        let token: Int

        func update(_ advertisement: Advertisement) async throws {
            try await air.updateAdvertising(peer, token: token, advertisement)
        }
    }
}
