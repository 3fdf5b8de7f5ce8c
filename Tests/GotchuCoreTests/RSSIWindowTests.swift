import GotchuCore
import PropertyBased
import Testing

@Suite(.timeLimit(.minutes(10))) struct RSSIWindowTests {
    private func window(_ samples: [(ms: Int64, rssi: Int16)], txPower: Int16? = nil) -> RSSIWindow {
        var window = RSSIWindow(length: .seconds(1))
        for sample in samples {
            window.append(.init(time: .milliseconds(sample.ms), rssi: sample.rssi, txPower: txPower))
        }
        return window
    }

    @Test func emptyWindowHasNoFigures() {
        let window = RSSIWindow(length: .seconds(1))
        #expect(window.count == 0)
        #expect(window.lastSeen == nil)
        #expect(window.rssi(.mean) == nil)
        #expect(window.attenuation(.median) == nil)
    }

    @Test func meanAndMedian() {
        let window = window([(0, -40), (100, -50), (200, -90)])
        #expect(window.rssi(.mean) == -60)
        #expect(window.rssi(.median) == -50)
        #expect(window.lastSeen == .milliseconds(200))
    }

    @Test func medianOfAnEvenCountAveragesTheMiddlePair() {
        #expect(window([(0, -40), (1, -50), (2, -60), (3, -90)]).rssi(.median) == -55)
    }

    @Test func attenuationUsesOnlySamplesWithTxPower() {
        var window = window([(0, -40)], txPower: 0)
        window.append(.init(time: .milliseconds(10), rssi: -80, txPower: nil))
        #expect(window.attenuation(.mean) == 40)
        #expect(window.rssi(.mean) == -60)
    }

    @Test func pruneDropsSamplesOutsideTheWindowAndFromTheFuture() {
        var window = window([(0, -40), (500, -50), (1000, -60), (1600, -70)])
        window.prune(now: .milliseconds(1500))
        // Kept: (500, 1500] → 1000 only; 500 is exactly one window old, 1600 is in the future.
        #expect(window.samples.map(\.rssi) == [-60])
    }

    @Test func removeExpiredKeepsFutureSamples() {
        var window = window([(0, -40), (500, -50), (1000, -60), (1600, -70)])
        window.removeExpired(now: .milliseconds(1500))
        #expect(window.samples.map(\.rssi) == [-60, -70])
    }

    @Test func figuresDoNotDependOnArrivalOrder() async {
        let samples = zip(Gen.int(in: 0...2000), Gen.int(in: -100...(-20))).array(of: 1...20)
        await propertyCheck(input: samples, Gen.int(in: 0...1000)) { samples, rotation in
            let ordered = samples.map { (ms: Int64($0.0), rssi: Int16($0.1)) }
            let shift = rotation % ordered.count
            let rotated = Array(ordered[shift...] + ordered[..<shift]).reversed()
            let (a, b) = (window(ordered, txPower: 4), window(Array(rotated), txPower: 4))
            for smoothing in RSSIWindow.Smoothing.allCases {
                #expect(a.rssi(smoothing) == b.rssi(smoothing))
                #expect(a.attenuation(smoothing) == b.attenuation(smoothing))
            }
            #expect(a.lastSeen == b.lastSeen)
        }
    }
}
