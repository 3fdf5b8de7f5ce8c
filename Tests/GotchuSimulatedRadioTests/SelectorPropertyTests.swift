import GotchuCore
import GotchuSimulatedRadio
import PropertyBased
import Testing

/// The payer's selector against the hard room: whatever the seed, distance and makes, it only ever selects a terminal
/// whose lead, recomputed here from the raw sightings, is the one its rule demands.
@Suite(.timeLimit(.minutes(10))) struct SelectorPropertyTests {
    @Test func everySelectionLeadsEveryOtherTerminalByItsMargin() async {
        await propertyCheck(count: 60, input: Gen.uint64(), Gen.int(in: 1...60), Gen.bool) { seed, centimetres, mixed in
            let distance = Double(centimetres) / 100
            let scenario = Scenario(
                layout: .counter,
                model: .hard,
                trials: 1,
                seed: seed,
                intendedDistance: distance...distance,
                mixedMakes: mixed
            )
            let configuration = ProximitySelector.Configuration()
            let sightings = TrialRunner.record(scenario, index: 0).map(\.sighting)
            var selector = ProximitySelector(configuration: configuration)
            for (index, sighting) in sightings.enumerated() {
                selector.record(sighting)
                guard let chosen = selector.decide(now: sighting.time).selected else { continue }
                // The window's samples, by EID, as the selector should have seen them.
                let window = sightings[...index].filter { sighting.time - $0.time < configuration.window }
                let attenuation = Dictionary(grouping: window, by: \.eid).mapValues { samples in
                    samples.map { Double($0.attenuation!) }.reduce(0, +) / Double(samples.count)
                }
                let own = attenuation[chosen.eid]!
                #expect(abs(own - chosen.attenuation!) < 1e-9)
                #expect(own <= configuration.maximumAttenuation)
                #expect(window.count { $0.eid == chosen.eid } >= configuration.minimumSamples)
                let margin =
                    own <= configuration.contactAttenuation ? configuration.margin : configuration.distantMargin
                for (eid, other) in attenuation where eid != chosen.eid {
                    #expect(other - own >= margin, "seed \(seed), \(centimetres) cm")
                }
                break
            }
        }
    }

    /// Whatever the seed, the recording of a trial replays through the payer's state machine to the same decision
    /// the trial runner reached feeding the selector directly; with calibrated terminals (odd seeds) too.
    @Test func replayAgreesWithTheTrialRunnerInTheHardRoom() async {
        await propertyCheck(count: 60, input: Gen.uint64(), Gen.int(in: 1...60), Gen.bool) { seed, centimetres, mixed in
            let distance = Double(centimetres) / 100
            var scenario = Scenario(
                layout: .counter,
                model: .hard,
                trials: 1,
                seed: seed,
                intendedDistance: distance...distance,
                mixedMakes: mixed
            )
            scenario.calibrationError = seed % 2 == 1 ? 3 : nil
            let recording = TrialRunner.record(scenario, index: 0)
            let terminal = Dictionary(
                recording.map { ($0.sighting.eid, $0.terminal!) },
                uniquingKeysWith: { a, _ in a }
            )
            let decision = TraceReplay.replay(recording.map(\.sighting))
            let result = TrialRunner.runTrial(scenario, index: 0)
            if result.selector.isAutoSelected {
                #expect(decision.kind == .selected)
                #expect(decision.eid.flatMap { terminal[$0] } == result.selector.terminal)
            } else {
                #expect(decision.kind != .selected)
            }
        }
    }

    /// A trial whose selection came on the payer's tick at the end of its selection timeout, after the last sighting:
    /// the replay ticks on past the recording's end as the payer does, and selects there too.
    @Test func replaySelectsOnATickAfterTheLastSighting() {
        var scenario = Scenario(
            layout: .counter,
            model: .hard,
            trials: 1,
            seed: 9_767_596_709_372_575_003,
            intendedDistance: 0.01...0.01,
            mixedMakes: false
        )
        scenario.calibrationError = 3
        let recording = TrialRunner.record(scenario, index: 0)
        let result = TrialRunner.runTrial(scenario, index: 0)
        #expect(result.selector.terminal == 0 && result.selector.latency == .seconds(3))
        #expect(recording.last!.sighting.time < .seconds(3))
        let decision = TraceReplay.replay(recording.map(\.sighting))
        #expect(decision.kind == .selected)
        #expect(decision.decidedAt == .seconds(3))
    }

    /// Calibrated terminals in the hard room: whatever the seed, distance and makes, a selection is near its terminal
    /// by its calibration, and leads every other terminal by the rule's margin on the calibrated scale.
    @Test func calibratedSelectionsAreNearAndLeadByTheirMargin() async {
        await propertyCheck(count: 60, input: Gen.uint64(), Gen.int(in: 1...60), Gen.bool) { seed, centimetres, mixed in
            let distance = Double(centimetres) / 100
            var scenario = Scenario(
                layout: .counter,
                model: .hard,
                trials: 1,
                seed: seed,
                intendedDistance: distance...distance,
                mixedMakes: mixed
            )
            scenario.calibrationError = 3
            let configuration = ProximitySelector.Configuration()
            let sightings = TrialRunner.record(scenario, index: 0).map(\.sighting)
            #expect(sightings.allSatisfy { $0.calibratedRSSI != nil })
            var selector = ProximitySelector(configuration: configuration)
            for (index, sighting) in sightings.enumerated() {
                selector.record(sighting)
                guard let chosen = selector.decide(now: sighting.time).selected else { continue }
                let window = sightings[...index].filter { sighting.time - $0.time < configuration.window }
                // Recomputed by hand: the calibration plus 41 dB, minus the RSSI.
                let attenuation = Dictionary(grouping: window, by: \.eid).mapValues { samples in
                    samples.map { Double($0.calibratedRSSI! + 41 - $0.rssi!) }.reduce(0, +) / Double(samples.count)
                }
                let own = attenuation[chosen.eid]!
                #expect(chosen.isCalibrated)
                #expect(abs(own - chosen.attenuation!) < 1e-9)
                let margin =
                    own <= configuration.calibratedContactAttenuation!
                    ? configuration.margin : configuration.calibratedDistantMargin
                for (eid, other) in attenuation where eid != chosen.eid {
                    #expect(other - own >= margin, "seed \(seed), \(centimetres) cm")
                }
                break
            }
        }
    }

    /// A bounded run of the hard room at contact range with calibrated terminals (seed fixed, not one the defaults
    /// were tuned on): most taps auto-select, and none picks the wrong terminal.
    @Test func calibratedContactTapsInTheHardRoom() {
        var scenario = Scenario(layout: .counter, model: .hard, trials: 300, seed: 99, intendedDistance: 0.01...0.05)
        scenario.calibrationError = 3
        let report = TrialRunner.run(scenario)
        #expect(report.selector.wrongPayeeRate == 0)
        #expect(report.selector.coverage >= 0.75)
        // The naive rule, on the same sightings, picks wrong terminals.
        #expect(report.naive.wrongPayeeRate > 0.02)
    }
}
