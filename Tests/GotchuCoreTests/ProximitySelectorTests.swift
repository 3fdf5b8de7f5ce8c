import GotchuCore
import PropertyBased
import Testing

@Suite(.timeLimit(.minutes(10))) struct ProximitySelectorTests {
    static let eids = ["aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc"].map { EID(rawValue: $0)! }
    static let (a, b, c) = (eids[0], eids[1], eids[2])

    private func sighting(_ eid: EID, _ rssi: Int16?, at ms: Int64, txPower: Int16? = 0) -> Sighting {
        Sighting(eid: eid, rssi: rssi, txPower: txPower, time: .milliseconds(ms), source: "test")
    }

    /// `count` sightings of `eid` at `rssi`, 100 ms apart, ending at `end` ms.
    private func burst(_ eid: EID, _ rssi: Int16, count: Int = 8, end: Int64 = 1000, txPower: Int16? = 0) -> [Sighting]
    {
        (0..<count).map { sighting(eid, rssi, at: end - Int64($0) * 100, txPower: txPower) }
    }

    private func selector(
        _ sightings: [Sighting],
        _ configuration: ProximitySelector.Configuration = .init()
    )
        -> ProximitySelector
    {
        var selector = ProximitySelector(configuration: configuration)
        for sighting in sightings { selector.record(sighting) }
        return selector
    }

    @Test func nothingHeardIsNone() {
        var selector = ProximitySelector()
        #expect(selector.decide(now: .seconds(1)) == .none)
    }

    @Test func aSingleNearTerminalIsSelected() {
        var selector = selector(burst(Self.a, -30))
        let decision = selector.decide(now: .seconds(1))
        #expect(decision.selected?.eid == Self.a)
        #expect(decision.selected?.attenuation == 30)
        #expect(decision.selected?.sampleCount == 8)
        #expect(decision.selected?.lastSeen == .seconds(1))
    }

    @Test func farTerminalsAreNone() {
        // Attenuation 60 dB is far beyond the default 50 dB gate.
        var selector = selector(burst(Self.a, -60) + burst(Self.b, -70))
        #expect(selector.decide(now: .seconds(1)) == .none)
    }

    @Test func leadBelowTheMarginIsAmbiguousAndRanked() {
        var selector = selector(burst(Self.a, -30) + burst(Self.b, -35))
        guard case .ambiguous(let ranked) = selector.decide(now: .seconds(1)) else {
            Issue.record("expected ambiguous")
            return
        }
        #expect(ranked.map(\.eid) == [Self.a, Self.b])
    }

    @Test func leadOfExactlyTheMarginIsSelected() {
        var selector = selector(burst(Self.a, -30) + burst(Self.b, -38))
        #expect(selector.decide(now: .seconds(1)).selected?.eid == Self.a)
    }

    @Test func outsideContactRangeTheLeadMustBeLarger() {
        // a at 42 dB is near but not at the terminal's face: a 20 dB lead is not enough, 24 dB is.
        var short = selector(burst(Self.a, -42) + burst(Self.b, -62))
        guard case .ambiguous(let ranked) = short.decide(now: .seconds(1)) else {
            Issue.record("expected ambiguous")
            return
        }
        #expect(ranked.map(\.eid) == [Self.a, Self.b])
        var enough = selector(burst(Self.a, -42) + burst(Self.b, -66))
        #expect(enough.decide(now: .seconds(1)).selected?.eid == Self.a)
        // At contact range the ordinary margin suffices.
        var contact = selector(burst(Self.a, -38) + burst(Self.b, -46))
        #expect(contact.decide(now: .seconds(1)).selected?.eid == Self.a)
        // The previous rule knew no such distinction.
        var previous = selector(burst(Self.a, -40) + burst(Self.b, -48), .previous)
        #expect(previous.decide(now: .seconds(1)).selected?.eid == Self.a)
    }

    @Test func aRiseCanStandInForTheDistantMargin() {
        // a strengthens by 18 dB over the window while b stays put: a leads by 11 dB on average, outside contact range.
        let times = (1...20).map { Int64($0) * 100 }
        let sightings =
            times.map { sighting(Self.a, $0 <= 1000 ? -50 : -32, at: $0) } + times.map { sighting(Self.b, -52, at: $0) }
        var plain = selector(sightings)
        #expect(plain.decide(now: .seconds(2)).selected == nil)
        var rising = selector(sightings, .init(minimumRise: 10))
        #expect(rising.decide(now: .seconds(2)).selected?.eid == Self.a)
        var steep = selector(sightings, .init(minimumRise: 20))
        #expect(steep.decide(now: .seconds(2)).selected == nil)
    }

    @Test func contactRangeByRSSIWhenATxPowerIsMissing() {
        var near = selector(burst(Self.a, -38, txPower: nil) + burst(Self.b, -46, txPower: nil))
        #expect(near.decide(now: .seconds(1)).selected?.eid == Self.a)
        var further = selector(burst(Self.a, -45, txPower: nil) + burst(Self.b, -60, txPower: nil))
        #expect(further.decide(now: .seconds(1)).selected == nil)
    }

    @Test func tooFewSamplesIsAmbiguous() {
        var selector = selector(burst(Self.a, -30, count: 2))
        guard case .ambiguous(let ranked) = selector.decide(now: .seconds(1)) else {
            Issue.record("expected ambiguous")
            return
        }
        #expect(ranked.map(\.eid) == [Self.a])
    }

    @Test func aRunnerUpBelowTheGateStillCountsForTheMargin() {
        // b is far from the gate but only 4 dB weaker than a: too close to call.
        let configuration = ProximitySelector.Configuration(maximumAttenuation: 31)
        var selector = selector(burst(Self.a, -30) + burst(Self.b, -34, count: 1), configuration)
        guard case .ambiguous(let ranked) = selector.decide(now: .seconds(1)) else {
            Issue.record("expected ambiguous")
            return
        }
        #expect(ranked.map(\.eid) == [Self.a, Self.b])
    }

    @Test func staleTerminalIsNeverSelectedButStillCompetesWhileInTheWindow() {
        // a was loud but was last heard 700 ms ago, beyond the 600 ms staleness timeout.
        var selector = selector(burst(Self.a, -20, end: 300) + burst(Self.b, -30, end: 1000))
        guard case .ambiguous(let ranked) = selector.decide(now: .seconds(1)) else {
            Issue.record("expected ambiguous")
            return
        }
        #expect(ranked.map(\.eid) == [Self.b])
        // Once a's samples have left the 2 s window, b is clear.
        for sighting in burst(Self.b, -30, count: 15, end: 2500) { selector.record(sighting) }
        #expect(selector.decide(now: .milliseconds(2500)).selected?.eid == Self.b)
    }

    @Test func samplesFromTheFutureWaitForTheirTime() {
        var selector = selector(burst(Self.a, -30, count: 8, end: 1100))
        #expect(selector.decide(now: .seconds(1)).selected?.sampleCount == 7)
        #expect(selector.decide(now: .milliseconds(1100)).selected?.sampleCount == 8)
    }

    @Test func samplesOutsideTheWindowAreForgotten() {
        var selector = selector(
            burst(Self.a, -90, count: 5, end: 300) + burst(Self.a, -30, count: 8, end: 1300),
            .init(window: .seconds(1))
        )
        let candidate = selector.decide(now: .milliseconds(1300)).selected
        #expect(candidate?.sampleCount == 8)
        #expect(candidate?.rssi == -30)
    }

    @Test func sightingsWithoutRSSIAreIgnored() {
        var selector = selector([sighting(Self.a, nil, at: 900), sighting(Self.a, nil, at: 1000)])
        #expect(selector.decide(now: .seconds(1)) == .none)
    }

    @Test func rssiGateAppliesWhenATxPowerIsMissing() {
        let configuration = ProximitySelector.Configuration(minimumRSSI: -45)
        var near = selector(burst(Self.a, -40, txPower: nil), configuration)
        #expect(near.decide(now: .seconds(1)).selected?.eid == Self.a)
        var far = selector(burst(Self.a, -50, txPower: nil), configuration)
        #expect(far.decide(now: .seconds(1)) == .none)
        // Mixed: b has no TX power, so both are ranked by RSSI.
        var mixed = selector(burst(Self.a, -40) + burst(Self.b, -65, txPower: nil), configuration)
        #expect(mixed.decide(now: .seconds(1)).selected?.eid == Self.a)
        #expect(mixed.rankedCandidates(now: .seconds(1)).allSatisfy { $0.eid != Self.b || $0.attenuation == nil })
    }

    @Test func attenuationComparesTerminalsWithDifferentPowers() {
        // b is louder (−32 dBm) but transmits at +10 dBm: attenuation 42 dB against a's 30 dB.
        var selector = selector(burst(Self.a, -30, txPower: 0) + burst(Self.b, -32, txPower: 10))
        #expect(selector.decide(now: .seconds(1)).selected?.eid == Self.a)
    }

    @Test func medianSmoothingIgnoresASingleDeepFade() {
        let sightings = burst(Self.a, -30, count: 7) + [sighting(Self.a, -90, at: 550)] + burst(Self.b, -42)
        var mean = selector(sightings)
        var median = selector(sightings, .init(smoothing: .median))
        #expect(mean.decide(now: .seconds(1)).selected == nil)
        #expect(median.decide(now: .seconds(1)).selected?.eid == Self.a)
    }

    @Test func naiveSelectorPicksTheStrongestLatestSample() {
        var naive = NaiveProximitySelector()
        naive.record(sighting(Self.a, -30, at: 800))
        naive.record(sighting(Self.a, -50, at: 900))
        naive.record(sighting(Self.b, -45, at: 950))
        naive.record(sighting(Self.a, -20, at: 850))  // older than a's latest: ignored
        #expect(naive.decision(now: .seconds(1)).selected?.eid == Self.b)
        #expect(naive.decision(now: .seconds(2)) == .none)
    }

    // MARK: Properties

    /// Samples as (EID index, RSSI, time in ms within the last second).
    private static let samples = zip(Gen.int(in: 0...2), Gen.int(in: -95...(-20)), Gen.int(in: 1...1000))
        .array(of: 1...30)

    private func sightings(_ samples: [(Int, Int, Int)]) -> [Sighting] {
        samples.map { sighting(Self.eids[$0.0], Int16($0.1), at: 1000 + Int64($0.2)) }
    }

    @Test func neverSelectsWithoutGateSamplesAndMargin() async {
        await propertyCheck(count: 300, input: Self.samples, Gen.int(in: 0...15)) { samples, margin in
            let configuration = ProximitySelector.Configuration(margin: Double(margin))
            var selector = selector(sightings(samples), configuration)
            guard let chosen = selector.decide(now: .seconds(2)).selected else { return }
            // Recompute independently: mean attenuation per EID (every sample is inside the window; stale EIDs still
            // compete for the margin).
            var attenuations: [Int: [Double]] = [:]
            for sample in samples { attenuations[sample.0, default: []].append(Double(-sample.1)) }
            let means = attenuations.mapValues { $0.reduce(0, +) / Double($0.count) }
            let index = Self.eids.firstIndex(of: chosen.eid)!
            #expect(means[index]! <= configuration.maximumAttenuation)
            #expect(attenuations[index]!.count >= configuration.minimumSamples)
            for (other, mean) in means where other != index {
                #expect(mean - means[index]! >= configuration.margin - 1e-9)
            }
        }
    }

    @Test func decisionIsInvariantToSightingOrder() async {
        await propertyCheck(count: 300, input: Self.samples, Gen.int(in: 0...1000)) { samples, rotation in
            let ordered = sightings(samples)
            let shift = rotation % ordered.count
            let reordered = Array((ordered[shift...] + ordered[..<shift]).reversed())
            var first = selector(ordered, .init(margin: 3))
            var second = selector(reordered, .init(margin: 3))
            #expect(first.decide(now: .seconds(2)) == second.decide(now: .seconds(2)))
        }
    }

    @Test func staleTerminalsAreNeverSelected() async {
        await propertyCheck(count: 300, input: Self.samples, Gen.int(in: 601...5000)) { samples, age in
            // EID c speaks loudest, but only long ago; the others are current.
            let stale = (0..<5).map { sighting(Self.c, -10, at: 2000 - Int64(age) - Int64($0) * 10) }
            var selector = selector(stale + sightings(samples.filter { $0.0 != 2 }), .init(margin: 0))
            #expect(selector.decide(now: .seconds(2)).selected?.eid != Self.c)
            #expect(!selector.rankedCandidates(now: .seconds(2)).contains { $0.eid == Self.c })
        }
    }
}
