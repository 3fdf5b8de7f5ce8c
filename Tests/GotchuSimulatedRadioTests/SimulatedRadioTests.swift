import GotchuCore
import GotchuSimulatedRadio
import Testing

/// Collects what a scan yields, from a task of its own.
private actor Collector {
    private(set) var sightings: [Sighting] = []
    func add(_ sighting: Sighting) { sightings.append(sighting) }
}

@Suite(.timeLimit(.minutes(10))) struct SimulatedRadioTests {
    static let eid = EID(rawValue: "00deadbeef")!
    static let quiet = AirModel(shadowingSigma: 0, fastFadingSigma: 0, packetLoss: 0)

    private func collect(
        _ stream: AsyncThrowingStream<Sighting, any Error>,
        into collector: Collector
    ) -> Task<Void, Never> {
        Task {
            do {
                for try await sighting in stream { await collector.add(sighting) }
            } catch {}
        }
    }

    /// Waits until the collecting task has every sighting the air delivered to `scanner`: the air counts each one in
    /// the scanner's statistics as it hands it to the scan, so nothing depends on how soon the task gets to run.
    private func settle(_ collector: Collector, _ scanner: SimulatedRadio) async throws {
        let caughtUp = await waitUntil {
            await collector.sightings.count >= scanner.statistics().sightings
        }
        try #require(caughtUp, "the collector did not catch up with the air")
    }

    /// Polls `condition` until it holds, for at most a minute (which only bounds a hang); returns whether it held.
    private func waitUntil(_ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return await condition()
    }

    @Test func scanReceivesAdvertisementsOnVirtualTime() async throws {
        let air = SimulatedAir(model: Self.quiet, seed: 1)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: Position(x: 1, y: 0)))
        let collector = Collector()
        let scan = collect(try await payer.scan(ScanFilter()), into: collector)

        try await terminal.withAdvertisement(Advertisement(eid: Self.eid)) { _ in
            await air.advance(by: .seconds(1))
        }
        await air.advance(by: .seconds(1))
        try await settle(collector, payer)
        scan.cancel()

        let sightings = await collector.sightings
        #expect((8...10).contains(sightings.count))
        #expect(
            sightings.allSatisfy { $0.eid == Self.eid && $0.rssi == -41 && $0.txPower == 0 && $0.source == "terminal" }
        )
        // Nothing after the advertisement's scope ended.
        #expect(sightings.allSatisfy { $0.time < .seconds(1) })
        #expect(await payer.statistics().sightings == sightings.count)
        #expect(await payer.now() == .seconds(2))
    }

    @Test func updateChangesTheEIDInPlace() async throws {
        let air = SimulatedAir(model: Self.quiet, seed: 2)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: Position(x: 1, y: 0)))
        let collector = Collector()
        let scan = collect(try await payer.scan(ScanFilter()), into: collector)
        let next = EID(rawValue: "0123456789")!
        try await terminal.withAdvertisement(Advertisement(eid: Self.eid)) { handle in
            await air.advance(by: .milliseconds(500))
            try await handle.update(Advertisement(eid: next))
            await air.advance(by: .milliseconds(500))
        }
        try await settle(collector, payer)
        scan.cancel()
        let eids = await collector.sightings.map(\.eid)
        #expect(eids.first == Self.eid && eids.last == next)
        #expect(eids.firstIndex(of: next)! > eids.lastIndex(of: Self.eid)!)
    }

    @Test func advertisementStopsWhenTheBodyThrows() async throws {
        struct Boom: Error {}
        let air = SimulatedAir(model: Self.quiet, seed: 3)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: Position(x: 1, y: 0)))
        let collector = Collector()
        let scan = collect(try await payer.scan(ScanFilter()), into: collector)
        await #expect(throws: Boom.self) {
            try await terminal.withAdvertisement(Advertisement(eid: Self.eid)) { _ in throw Boom() }
        }
        await air.advance(by: .seconds(1))
        try await settle(collector, payer)
        scan.cancel()
        #expect(await collector.sightings.isEmpty)
        // The peer can advertise again once the first scope ended.
        let again = try await terminal.withAdvertisement(Advertisement(eid: Self.eid)) { _ in 7 }
        #expect(again == 7)
    }

    @Test func onePeerAdvertisesOneThingAtATime() async throws {
        let air = SimulatedAir(model: Self.quiet, seed: 4)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        _ = try await terminal.withAdvertisement(Advertisement(eid: Self.eid)) { _ in
            await #expect(throws: SimulatedRadioError.alreadyAdvertising) {
                try await terminal.withAdvertisement(Advertisement(eid: Self.eid)) { _ in }
            }
        }
    }

    @Test func filterAppliesMinimumRSSIAndServiceUUID() async throws {
        let air = SimulatedAir(model: Self.quiet, seed: 5)
        let near = await air.addPeer(SimulatedPeer(name: "near", at: Position(x: 0.1, y: 0)))  // −21 dBm
        let far = await air.addPeer(SimulatedPeer(name: "far", at: Position(x: 10, y: 0)))  // −61 dBm
        let other = BluetoothUUID("0000abcd-0000-1000-8000-00805f9b34fb")!
        let strong = await air.addPeer(SimulatedPeer(name: "other-service", at: Position(x: 0.1, y: 0)))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: .origin))
        let collector = Collector()
        let scan = collect(try await payer.scan(ScanFilter(minimumRSSI: -50)), into: collector)
        try await near.withAdvertisement(Advertisement(eid: Self.eid)) { _ in
            try await far.withAdvertisement(Advertisement(eid: EID(rawValue: "1111111111")!)) { _ in
                try await strong.withAdvertisement(Advertisement(eid: EID(rawValue: "2222222222")!, serviceUUID: other))
                { _ in
                    await air.advance(by: .seconds(1))
                }
            }
        }
        try await settle(collector, payer)
        scan.cancel()
        let sightings = await collector.sightings
        #expect(!sightings.isEmpty)
        #expect(sightings.allSatisfy { $0.source == "near" })
        let statistics = await payer.statistics()
        #expect(statistics.sightings == sightings.count)
        #expect(statistics.belowThreshold >= 8)
        #expect(statistics.malformed == 0)
    }

    @Test func malformedAdvertisementsAreCountedNeverYielded() async throws {
        let air = SimulatedAir(model: Self.quiet, seed: 6)
        let payloads = [
            AirPayload(serviceUUIDs: [.gotchu], serviceData: [.gotchu: Array("00dead".utf8)]),
            AirPayload(serviceUUIDs: [.gotchu], serviceData: [.gotchu: Array("00DEADBEEF".utf8)]),
            AirPayload(serviceUUIDs: [.gotchu], serviceData: [.gotchu: [0xFF, 0x00, 0x80]]),
            AirPayload(serviceUUIDs: [.gotchu], serviceData: [BluetoothUUID("fd6f")!: Self.eid.serviceData]),
        ]
        for (index, payload) in payloads.enumerated() {
            await air.addBroadcaster(SimulatedPeer(name: "junk-\(index)", at: Position(x: 1, y: 0)), payload: payload)
        }
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: .origin))
        let collector = Collector()
        let scan = collect(try await payer.scan(ScanFilter()), into: collector)
        await air.advance(by: .seconds(1))
        try await settle(collector, payer)
        scan.cancel()
        #expect(await collector.sightings.isEmpty)
        let statistics = await payer.statistics()
        #expect(statistics.malformed >= 4 * 8)
        #expect(statistics.sightings == 0)
    }

    @Test func sleepWakesWhenVirtualTimePassesTheDeadline() async throws {
        let air = SimulatedAir(seed: 7)
        let radio = await air.addPeer(SimulatedPeer(name: "peer", at: .origin))
        let sleeper = Task {
            try await radio.sleep(for: .milliseconds(250))
            return await radio.now()
        }
        // Time moves once the sleeper waits on it, so its deadline is 250 ms of virtual time.
        #expect(await waitUntil { await air.sleeperCount == 1 })
        await air.advance(by: .milliseconds(249))
        #expect(await air.sleeperCount == 1)
        await air.advance(by: .milliseconds(1))
        #expect(await air.sleeperCount == 0)
        // Nothing moves the clock on meanwhile: the woken task sees the deadline itself.
        let wokeAt = try await sleeper.value
        #expect(wokeAt == .milliseconds(250))
        await air.advance(by: .seconds(1))
        #expect(await radio.now() == .milliseconds(1_250))
    }

    @Test func cancelledSleepThrows() async throws {
        let air = SimulatedAir(seed: 8)
        let radio = await air.addPeer(SimulatedPeer(name: "peer", at: .origin))
        let sleeper = Task { try await radio.sleep(for: .seconds(60)) }
        await air.advance(by: .milliseconds(10))
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
    }

    @Test func realTimeModeDeliversOnTheWallClock() async throws {
        let air = SimulatedAir(model: Self.quiet, seed: 9, clock: .realTime)
        let terminal = await air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        let payer = await air.addPeer(SimulatedPeer(name: "payer", at: Position(x: 1, y: 0)))
        let first = try await terminal.withAdvertisement(Advertisement(eid: Self.eid)) { _ in
            let stream = try await payer.scan(ScanFilter())
            var iterator = stream.makeAsyncIterator()
            return try await iterator.next()
        }
        let sighting = try #require(first)
        #expect(sighting.eid == Self.eid)
        // Delivered no earlier than its own time on the air's clock.
        #expect(await payer.now() >= sighting.time)
    }
}
