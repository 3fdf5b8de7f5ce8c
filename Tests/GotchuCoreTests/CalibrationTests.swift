import Foundation
import GotchuCore
import Testing

@Suite(.timeLimit(.minutes(10))) struct CalibrationTests {
    static let (a, b) = (EID(rawValue: "aaaaaaaaaa")!, EID(rawValue: "bbbbbbbbbb")!)

    /// `count` sightings 100 ms apart ending at 1 s.
    private func burst(_ eid: EID, _ rssi: Int16, txPower: Int16?, calibrated: Int16?) -> [Sighting] {
        (0..<8).map {
            Sighting(
                eid: eid,
                rssi: rssi,
                txPower: txPower,
                time: .milliseconds(1000 - Int64($0) * 100),
                source: "test",
                calibratedRSSI: calibrated
            )
        }
    }

    @Test func aCalibrationIsMeasuredAgainstTheFirstMetre() {
        let sighting = Sighting(eid: Self.a, rssi: -40, txPower: 4, time: .zero, source: "t", calibratedRSSI: -59)
        #expect(sighting.referencePower == -59 + Calibration.referenceLoss)
        // −59 + 41 = −18 dBm of reference, 22 dB above the −40 dBm heard.
        let expected: Int16 = 22
        #expect(sighting.attenuation == expected)
        #expect(Calibration.calibratedRSSI(serviceData: Calibration.serviceData(-59)) == -59)
        #expect(Calibration.calibratedRSSI(serviceData: [0xC5, 0]) == nil)
        #expect(Calibration.calibratedRSSI(serviceData: []) == nil)
    }

    @Test(arguments: [Int16(-127), -101, -19, 0, 127])
    func anImplausibleCalibrationIsIgnoredForTheTxPower(calibrated: Int16) {
        let sighting = Sighting(
            eid: Self.a,
            rssi: -40,
            txPower: 4,
            time: .zero,
            source: "t",
            calibratedRSSI: calibrated
        )
        #expect(sighting.referencePower == 4)
    }

    @Test(arguments: [Int16(-127), -41, 21, 100, 126])
    func anImplausibleTxPowerIsNoReference(txPower: Int16) {
        let sighting = Sighting(eid: Self.a, rssi: -40, txPower: txPower, time: .zero, source: "t")
        #expect(sighting.referencePower == nil)
        #expect(sighting.attenuation == nil)
    }

    /// A: a strong radiator (8 dBm) heard at −50 dBm, calibrated −70 at 1 m; B: a weak one (−8 dBm) heard at −55,
    /// calibrated −45. By TX power B looks nearer (47 dB against 58); against the calibrations A is (21 dB against
    /// 51), and so it is.
    @Test func terminalsAreRankedAgainstTheirCalibrations() {
        var selector = ProximitySelector()
        for sighting in burst(Self.a, -50, txPower: 8, calibrated: -70)
            + burst(Self.b, -55, txPower: -8, calibrated: -45)
        {
            selector.record(sighting)
        }
        let ranked = selector.rankedCandidates(now: .seconds(1))
        #expect(ranked.map(\.eid) == [Self.a, Self.b])
        #expect(ranked.allSatisfy { $0.isCalibrated })
        #expect(ranked.first?.attenuation == 21)
        #expect(selector.decide(now: .seconds(1)).selected?.eid == Self.a)

        var uncalibrated = ProximitySelector()
        for sighting in burst(Self.a, -50, txPower: 8, calibrated: nil)
            + burst(Self.b, -55, txPower: -8, calibrated: nil)
        {
            uncalibrated.record(sighting)
        }
        #expect(uncalibrated.rankedCandidates(now: .seconds(1)).map(\.eid) == [Self.b, Self.a])
    }

    /// A terminal claiming an absurd TX power does not look near: without a plausible reference the candidates are
    /// ranked by RSSI, where it is the farther one.
    @Test func garbageTxPowerIsNotTrusted() {
        var selector = ProximitySelector()
        for sighting in burst(Self.a, -70, txPower: 120, calibrated: nil)
            + burst(Self.b, -40, txPower: 0, calibrated: nil)
        {
            selector.record(sighting)
        }
        let ranked = selector.rankedCandidates(now: .seconds(1))
        #expect(ranked.map(\.eid) == [Self.b, Self.a])
        #expect(ranked.last?.attenuation == nil)
    }

    /// Calibrated, contact range is judged on the calibrated scale: 25 dB is outside it (about 20 cm), so an
    /// 8 dB lead is not enough there, though it would be against a TX power.
    @Test func calibratedContactRangeIsNarrower() {
        let configuration = ProximitySelector.Configuration()
        var selector = ProximitySelector(configuration: configuration)
        // A: −59 + 41 − (−43) = 25 dB; B: 37 dB, a 12 dB lead.
        for sighting in burst(Self.a, -43, txPower: 0, calibrated: -59)
            + burst(Self.b, -31, txPower: 0, calibrated: -35)
        {
            selector.record(sighting)
        }
        guard case .ambiguous(let ranked) = selector.decide(now: .seconds(1)) else {
            Issue.record("selected outside calibrated contact range")
            return
        }
        #expect(ranked.first?.eid == Self.a)
        // At 15 dB the same lead is enough.
        var near = ProximitySelector(configuration: configuration)
        for sighting in burst(Self.a, -33, txPower: 0, calibrated: -59)
            + burst(Self.b, -21, txPower: 0, calibrated: -35)
        {
            near.record(sighting)
        }
        #expect(near.decide(now: .seconds(1)).selected?.eid == Self.a)
    }

    @Test func theConfigurationRoundTripsWithItsCalibratedSettings() throws {
        var configuration = ProximitySelector.Configuration()
        configuration.tapRise = 12
        let data = try JSONEncoder().encode(configuration)
        #expect(try JSONDecoder().decode(ProximitySelector.Configuration.self, from: data) == configuration)
    }
}
