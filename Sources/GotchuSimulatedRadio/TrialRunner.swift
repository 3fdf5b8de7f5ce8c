import GotchuCore

/// Runs a ``Scenario`` on virtual time: ten simulated minutes take milliseconds.
///
/// Each trial builds a fresh room from its own seed, lets the terminals advertise for a while, then starts the payer's
/// scan and feeds the same sightings to ``ProximitySelector`` and ``NaiveProximitySelector``. Results are identical
/// for identical scenarios, whatever the machine.
public enum TrialRunner {
    /// Runs every trial of `scenario` and summarises them.
    public static func run(_ scenario: Scenario) -> TrialReport {
        TrialReport(scenario: scenario, results: (0..<scenario.trials).map { runTrial(scenario, index: $0) })
    }

    /// One trial's room on the air, ready to scan.
    private struct Trial {
        var air: AirCore
        var payer: Int
        var terminalOf: [EID: Int]
        var room: (terminals: [Position], payer: Position)
        var scanStart: Duration
        var scanEnd: Duration
        var seed: UInt64
    }

    private static func prepare(_ scenario: Scenario, index: Int) -> Trial {
        let seed = SplitMix64.derive(scenario.seed, UInt64(index))
        var random = Xoshiro256StarStar(seed: seed)
        let room = scenario.room(using: &random)
        var air = AirCore(model: scenario.model, seed: seed)
        // Hardware comes from a stream of its own, so an ideal model draws the same rooms and packets as before.
        var hardware = Xoshiro256StarStar(seed: SplitMix64.derive(seed, 5))
        // So does calibration.
        var calibration = Xoshiro256StarStar(seed: SplitMix64.derive(seed, 6))

        var terminalOf: [EID: Int] = [:]
        for (index, position) in room.terminals.enumerated() {
            var terminal = SimulatedPeer(
                name: "terminal-\(index)",
                trajectory: .fixed(position),
                advertisingInterval: scenario.advertisingInterval
            )
            terminal.transmitOffset = hardware.gaussian() * scenario.model.transmitOffsetSigma
            if scenario.mixedMakes {
                terminal.txPower = Scenario.mixedTxPowers[Int(hardware.next() % UInt64(Scenario.mixedTxPowers.count))]
            }
            let peer = air.addPeer(terminal)
            var eid = EID.random(using: &random)
            while terminalOf[eid] != nil { eid = EID.random(using: &random) }
            terminalOf[eid] = index
            var advertisement = Advertisement(eid: eid)
            if let error = scenario.calibrationError {
                // What a phone reads 1 m away: the terminal's real radiated power less the first metre's loss.
                let measured =
                    Double(terminal.txPower) + terminal.transmitOffset - scenario.model.lossAtOneMetre
                    + calibration.gaussian() * error
                advertisement.calibratedRSSI = Int16(measured.rounded())
            }
            air.startAdvertising(
                peer,
                payload: AirPayload(advertisement, txPower: air.peers[peer].txPower),
                at: .seconds(fraction: random.unit() * scenario.advertisingInterval.seconds)
            )
        }
        // Every terminal is already advertising, each at its own phase, when the scan starts. Shadowing starts from
        // its stationary distribution, so no warm-up is needed.
        let scanStart =
            scenario.advertisingInterval + .seconds(fraction: random.unit() * scenario.advertisingInterval.seconds)
        var trajectory = Trajectory.fixed(room.payer)
        if let approach = scenario.approach {
            // From 1 m further out along the line from the terminal through the payer's place.
            let (terminal, place) = (room.terminals[0], room.payer)
            let length = max(terminal.distance(to: place), 1e-9)
            let start = Position(
                x: place.x + (place.x - terminal.x) / length,
                y: place.y + (place.y - terminal.y) / length
            )
            trajectory = .waypoints([(scanStart, start), (scanStart + approach, place)])
        }
        var payerPeer = SimulatedPeer(
            name: "payer",
            trajectory: trajectory,
            scanWindow: scenario.scanWindow,
            scanInterval: scenario.scanInterval
        )
        payerPeer.receiveOffset = hardware.gaussian() * scenario.model.receiveOffsetSigma
        let payer = air.addPeer(payerPeer)

        return Trial(
            air: air,
            payer: payer,
            terminalOf: terminalOf,
            room: room,
            scanStart: scanStart,
            scanEnd: scanStart + scenario.timeout,
            seed: seed
        )
    }

    /// The sightings the payer's scan receives in trial `index`, from the start of the scan to the timeout, as a
    /// recording: times count from the start of the scan, `trace` is `index` and each line names its terminal.
    public static func record(_ scenario: Scenario, index: Int) -> [TraceLine] {
        var trial = prepare(scenario, index: index)
        return trial.air.receptions(
            for: trial.payer,
            from: trial.scanStart,
            to: trial.scanEnd,
            scanOrigin: trial.scanStart
        )
        .compactMap { reception in
            guard case .eid(let eid, _) = reception.payload.decode(for: .gotchu) else { return nil }
            return TraceLine(
                trace: index,
                sighting: Sighting(
                    eid: eid,
                    rssi: reception.rssi,
                    txPower: reception.payload.txPower,
                    time: reception.time - trial.scanStart,
                    source: trial.air.peers[reception.advertiser].name,
                    calibratedRSSI: reception.payload.calibratedRSSI
                ),
                terminal: trial.terminalOf[eid]
            )
        }
    }

    /// Runs trial `index` of `scenario`.
    public static func runTrial(_ scenario: Scenario, index: Int) -> TrialResult {
        let trial = prepare(scenario, index: index)
        var air = trial.air
        let (payer, terminalOf, room, scanStart, scanEnd, seed) = (
            trial.payer, trial.terminalOf, trial.room, trial.scanStart, trial.scanEnd, trial.seed
        )

        var selector = ProximitySelector(configuration: scenario.selector)
        var naive = NaiveProximitySelector(staleAfter: scenario.selector.staleAfter)
        var ours: SelectionOutcome?
        var theirs: SelectionOutcome?
        func outcome(_ candidate: ProximityCandidate, at time: Duration) -> SelectionOutcome {
            let terminal = terminalOf[candidate.eid]!
            return SelectionOutcome(
                kind: terminal == 0 ? .correct : .wrongPayee,
                terminal: terminal,
                latency: time - scanStart
            )
        }
        // Generated 100 ms at a time (the payer's tick), so a trial stops as soon as both selectors have decided; the
        // air's packets do not depend on how time is split.
        var chunkStart = scanStart
        chunks: while chunkStart < scanEnd {
            let chunkEnd = min(chunkStart + .milliseconds(100), scanEnd)
            for reception in air.receptions(for: payer, from: chunkStart, to: chunkEnd, scanOrigin: scanStart) {
                guard case .eid(let eid, _) = reception.payload.decode(for: .gotchu) else { continue }
                let sighting = Sighting(
                    eid: eid,
                    rssi: reception.rssi,
                    txPower: reception.payload.txPower,
                    time: reception.time,
                    source: air.peers[reception.advertiser].name,
                    calibratedRSSI: reception.payload.calibratedRSSI
                )
                if ours == nil {
                    selector.record(sighting)
                    if let candidate = selector.decide(now: sighting.time).selected {
                        ours = outcome(candidate, at: sighting.time)
                    }
                }
                if theirs == nil {
                    naive.record(sighting)
                    if sighting.time - scanStart >= scenario.naiveDecisionDelay,
                        let candidate = naive.decision(now: sighting.time).selected
                    {
                        theirs = outcome(candidate, at: sighting.time)
                    }
                }
                if ours != nil && theirs != nil { break chunks }
            }
            // The payer also decides on its clock's ticks, every 100 ms from the start of its scan, between
            // sightings: a window that has let old samples go may decide where no sighting did.
            if ours == nil, (chunkEnd - scanStart).nanosecondsValue % 100_000_000 == 0,
                let candidate = selector.decide(now: chunkEnd).selected
            {
                ours = outcome(candidate, at: chunkEnd)
                if theirs != nil { break chunks }
            }
            chunkStart = chunkEnd
        }
        func unresolved(_ decision: ProximityDecision) -> SelectionOutcome {
            // The list the payer would choose from: remember which terminal it shows first.
            if case .ambiguous(let ranked) = decision {
                return SelectionOutcome(kind: .ambiguous, terminal: ranked.first.flatMap { terminalOf[$0.eid] })
            }
            return SelectionOutcome(kind: .none)
        }
        let distances = room.terminals.map { $0.distance(to: room.payer) }
        return TrialResult(
            trial: index,
            seed: seed,
            intendedDistance: distances[0],
            runnerUpDistance: distances.dropFirst().min() ?? .infinity,
            selector: ours ?? unresolved(selector.decide(now: scanEnd)),
            naive: theirs ?? unresolved(naive.decision(now: scanEnd))
        )
    }
}
