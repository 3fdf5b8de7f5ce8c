import GotchuCore

/// The shared medium of a simulation: every ``SimulatedRadio`` made by one air hears the others.
///
/// It wraps an ``AirCore`` (which generates the packets) with a clock:
/// - `.virtual`: time stands still until ``advance(by:)`` moves it; sleepers wake and scans receive their packets in
///   time order as it passes, so tests run minutes of radio traffic in milliseconds. Time moves in steps of at most
///   ``virtualStep``, and tasks woken in a step get a few scheduler turns before the next one: a task that needs more
///   sees a later clock, never an earlier one. Packets themselves are exact either way (each carries its own time);
///   ``TrialRunner`` drives ``AirCore`` directly where every instant matters.
/// - `.realTime`: time is the continuous clock since the air was created, and scans deliver each packet when the
///   wall clock reaches its time. The demo and the command line use it. Packets are generated a little ahead
///   (``realTimeHorizon``), so an advertisement that starts or stops reaches scanners within that delay.
public actor SimulatedAir {
    /// How time passes.
    public enum ClockMode: Sendable, Hashable {
        /// Time moves only when ``SimulatedAir/advance(by:)`` is called.
        case virtual
        /// Time is the continuous clock.
        case realTime
    }

    /// How time passes in this air.
    public nonisolated let clockMode: ClockMode
    /// How GATT links behave.
    public nonisolated let gattTiming: GattTiming
    /// The services served and the links to them.
    var gatt = GattLinks()

    private struct Scan {
        var peer: Int
        var filter: ScanFilter
        var start: Duration
        var continuation: AsyncThrowingStream<Sighting, any Error>.Continuation
        /// Sightings computed ahead of the wall clock in real-time mode, waiting to be delivered.
        var pending: [Sighting] = []
    }

    private struct Sleeper {
        var deadline: Duration
        var continuation: CheckedContinuation<Void, any Error>
    }

    private var core: AirCore
    private let origin = ContinuousClock.now
    private var virtualNow: Duration = .zero
    private var sleepers: [Int: Sleeper] = [:]
    private var scans: [Int: Scan] = [:]
    /// Per scanning peer, the time up to which its packets have been generated.
    private var generatedUntil: [Int: Duration] = [:]
    private var statistics: [Int: RadioStatistics] = [:]
    /// Per peer, an increasing token identifying its current advertisement.
    private var advertising: [Int: Int] = [:]
    private var nextID = 0

    /// The longest virtual step taken at once, so tasks woken by a packet see a clock close to its time.
    public static let virtualStep: Duration = .milliseconds(10)
    /// How far ahead of the wall clock real-time scans generate packets.
    public static let realTimeHorizon: Duration = .milliseconds(50)

    /// Creates an empty air.
    public init(
        model: AirModel = AirModel(),
        seed: UInt64,
        clock: ClockMode = .virtual,
        gattTiming: GattTiming = GattTiming()
    ) {
        self.core = AirCore(model: model, seed: seed)
        self.clockMode = clock
        self.gattTiming = gattTiming
    }

    /// Adds a peer and returns its radio.
    public func addPeer(_ peer: SimulatedPeer) -> SimulatedRadio {
        let index = core.addPeer(peer)
        return SimulatedRadio(air: self, peer: index, name: peer.name)
    }

    /// Adds a peer that broadcasts `payload` from now on, for as long as the air exists: how tests put other
    /// people's advertisements and malformed Gotchu advertisements on the air.
    @discardableResult
    public func addBroadcaster(_ peer: SimulatedPeer, payload: AirPayload) -> Int {
        let index = core.addPeer(peer)
        core.startAdvertising(index, payload: payload, at: now)
        return index
    }

    /// Replaces what a broadcaster sends, from now on.
    public func updateBroadcaster(_ index: Int, payload: AirPayload) {
        core.updateAdvertising(index, payload: payload, at: now)
    }

    /// Takes a broadcaster off the air.
    public func stopBroadcaster(_ index: Int) {
        core.stopAdvertising(index, at: now)
    }

    /// The current time.
    public var now: Duration {
        switch clockMode {
        case .virtual: virtualNow
        case .realTime: origin.duration(to: .now)
        }
    }

    /// How many tasks are asleep on this air's virtual clock: a driver that must not move time before a task waits
    /// on it can wait for this count first.
    public var sleeperCount: Int { sleepers.count }

    /// Moves virtual time forward by `duration`, in steps of at most ``virtualStep``: at each step scans receive their
    /// packets, sleepers whose deadline passed wake, and other tasks get a chance to run.
    public func advance(by duration: Duration) async {
        precondition(clockMode == .virtual, "only a virtual clock can be advanced")
        let target = virtualNow + duration
        repeat {
            let nextDeadline = sleepers.values.map(\.deadline).min() ?? target
            let step = min(target, virtualNow + Self.virtualStep, max(nextDeadline, virtualNow))
            generate(upTo: step)
            virtualNow = step
            for (id, sleeper) in sleepers where sleeper.deadline <= step {
                sleepers[id] = nil
                sleeper.continuation.resume()
            }
            for id in scans.keys {
                let pending = scans[id]!.pending
                scans[id]!.pending = []
                for sighting in pending { scans[id]!.continuation.yield(sighting) }
            }
            // Let woken tasks run (and perhaps sleep again or start a scan) before time moves on.
            for _ in 0..<4 { await Task.yield() }
        } while virtualNow < target
    }

    // MARK: For SimulatedRadio

    func sleep(for duration: Duration) async throws {
        switch clockMode {
        case .realTime:
            try await Task.sleep(for: duration)
        case .virtual:
            let id = makeID()
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        sleepers[id] = Sleeper(deadline: virtualNow + max(duration, .zero), continuation: continuation)
                    }
                }
            } onCancel: {
                Task { await self.cancelSleeper(id) }
            }
        }
    }

    private func cancelSleeper(_ id: Int) {
        sleepers.removeValue(forKey: id)?.continuation.resume(throwing: CancellationError())
    }

    func startAdvertising(_ peer: Int, _ advertisement: Advertisement) throws -> Int {
        guard advertising[peer] == nil else { throw SimulatedRadioError.alreadyAdvertising }
        let token = makeID()
        advertising[peer] = token
        core.startAdvertising(
            peer,
            payload: AirPayload(advertisement, txPower: core.peers[peer].txPower),
            interval: advertisement.interval?.lowerBound,
            at: now
        )
        return token
    }

    func updateAdvertising(_ peer: Int, token: Int, _ advertisement: Advertisement) throws {
        guard advertising[peer] == token else { throw SimulatedRadioError.notAdvertising }
        core.updateAdvertising(peer, payload: AirPayload(advertisement, txPower: core.peers[peer].txPower), at: now)
    }

    func stopAdvertising(_ peer: Int, token: Int) {
        guard advertising[peer] == token else { return }
        advertising[peer] = nil
        core.stopAdvertising(peer, at: now)
    }

    func scan(_ peer: Int, _ filter: ScanFilter) -> AsyncThrowingStream<Sighting, any Error> {
        let id = makeID()
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: Sighting.self,
            bufferingPolicy: .bufferingNewest(1024)
        )
        let start = now
        if generatedUntil[peer] == nil || scans.values.allSatisfy({ $0.peer != peer }) {
            generatedUntil[peer] = max(generatedUntil[peer] ?? start, start)
        }
        scans[id] = Scan(peer: peer, filter: filter, start: start, continuation: continuation)
        let pump: Task<Void, Never>? =
            clockMode == .realTime
            ? Task { [weak self] in
                while !Task.isCancelled, let self, await self.deliverRealTime(scan: id) {}
            } : nil
        continuation.onTermination = { _ in
            pump?.cancel()
            Task { await self.stopScan(id) }
        }
        return stream
    }

    func statistics(of peer: Int) -> RadioStatistics {
        statistics[peer] ?? RadioStatistics()
    }

    // MARK: Packet delivery

    private func stopScan(_ id: Int) {
        scans[id] = nil
    }

    /// Generates packets for every scanning peer up to `end` and files them as pending sightings of its scans.
    private func generate(upTo end: Duration) {
        let scanningPeers = Set(scans.values.map(\.peer))
        for peer in scanningPeers {
            let start = generatedUntil[peer] ?? end
            guard start < end else { continue }
            generatedUntil[peer] = end
            let receptions = core.receptions(for: peer, from: start, to: end)
            for reception in receptions {
                for id in scans.keys where scans[id]!.peer == peer && scans[id]!.start <= reception.time {
                    if let sighting = accept(reception, by: peer, filter: scans[id]!.filter) {
                        scans[id]!.pending.append(sighting)
                    }
                }
            }
        }
    }

    /// Applies a scan's filter, counting what it drops.
    private func accept(_ reception: Reception, by peer: Int, filter: ScanFilter) -> Sighting? {
        switch reception.payload.decode(for: filter.serviceUUID) {
        case .unrelated:
            return nil
        case .malformed:
            statistics[peer, default: .init()].malformed += 1
            return nil
        case .eid(let eid, let offline):
            if let minimum = filter.minimumRSSI, reception.rssi < minimum {
                statistics[peer, default: .init()].belowThreshold += 1
                return nil
            }
            statistics[peer, default: .init()].sightings += 1
            return Sighting(
                eid: eid,
                rssi: reception.rssi,
                txPower: reception.payload.txPower,
                time: reception.time,
                source: core.peers[reception.advertiser].name,
                calibratedRSSI: reception.payload.calibratedRSSI,
                offline: offline
            )
        }
    }

    /// One round of a real-time scan: generate a little ahead, deliver each sighting when its time comes.
    /// Returns `false` once the scan has ended.
    private func deliverRealTime(scan id: Int) async -> Bool {
        guard scans[id] != nil else { return false }
        let horizon = now + Self.realTimeHorizon
        generate(upTo: horizon)
        let batch = scans[id]?.pending ?? []
        scans[id]?.pending = []
        for sighting in batch {
            let wait = sighting.time - now
            if wait > .zero { try? await Task.sleep(for: wait) }
            guard let scan = scans[id], !Task.isCancelled else { return false }
            scan.continuation.yield(sighting)
        }
        let rest = horizon - now
        if rest > .zero { try? await Task.sleep(for: rest) }
        return scans[id] != nil && !Task.isCancelled
    }

    /// The peer named `name` (the ``Sighting/source`` of what it sends).
    func peerIndex(named name: String) -> Int? {
        core.peers.firstIndex { $0.name == name }
    }

    func peerName(_ peer: Int) -> String { core.peers[peer].name }

    func makeID() -> Int {
        nextID += 1
        return nextID
    }
}

/// Errors of the simulated radio.
public enum SimulatedRadioError: Error, Hashable, Sendable {
    /// A simulated peer advertises one advertisement at a time.
    case alreadyAdvertising
    /// The advertisement this handle controlled has stopped.
    case notAdvertising
}
