import GotchuCore
import PropertyBased
import Testing

@testable import GotchuSimulatedRadio

@Suite(.timeLimit(.minutes(10))) struct AirCoreTests {
    static let eid = EID(rawValue: "00deadbeef")!
    static let quiet = AirModel(shadowingSigma: 0, fastFadingSigma: 0, packetLoss: 0)

    /// An advertiser at the origin and a scanner `distance` metres east.
    private func room(
        _ model: AirModel = quiet,
        distance: Double = 1,
        seed: UInt64 = 1,
        scanner: SimulatedPeer? = nil
    ) -> (AirCore, advertiser: Int, scanner: Int) {
        var air = AirCore(model: model, seed: seed)
        let advertiser = air.addPeer(SimulatedPeer(name: "terminal", at: .origin))
        let scannerIndex = air.addPeer(scanner ?? SimulatedPeer(name: "payer", at: Position(x: distance, y: 0)))
        air.startAdvertising(advertiser, payload: AirPayload(Advertisement(eid: Self.eid), txPower: 0), at: .zero)
        return (air, advertiser, scannerIndex)
    }

    @Test func pathLossFollowsTheLogDistanceModel() {
        for (distance, expected) in [(1.0, Int16(-41)), (0.1, -21), (10, -61), (0.01, -15)] {
            var (air, _, scanner) = room(distance: distance)
            let receptions = air.receptions(for: scanner, from: .zero, to: .seconds(1))
            #expect(!receptions.isEmpty)
            // −41 dB at 1 m, 20 dB per decade; 0.01 m is clamped to the 0.05 m minimum distance.
            #expect(receptions.allSatisfy { $0.rssi == expected }, "at \(distance) m")
        }
    }

    @Test func deviceOffsetsAddToTheLinkAndAreNotAnnounced() {
        var scanner = SimulatedPeer(name: "payer", at: Position(x: 1, y: 0))
        scanner.receiveOffset = -6
        var air = AirCore(model: Self.quiet, seed: 1)
        var loud = SimulatedPeer(name: "loud", at: .origin)
        loud.transmitOffset = 7
        let advertiser = air.addPeer(loud)
        let payer = air.addPeer(scanner)
        air.startAdvertising(advertiser, payload: AirPayload(Advertisement(eid: Self.eid), txPower: 0), at: .zero)
        let receptions = air.receptions(for: payer, from: .zero, to: .seconds(1))
        #expect(!receptions.isEmpty)
        // −41 dB at 1 m, +7 radiated beyond what is announced, −6 read low by the receiver.
        #expect(receptions.allSatisfy { $0.rssi == -40 && $0.payload.txPower == 0 })
    }

    @Test func bodyBlockingIsFixedPerLinkAndBounded() {
        var model = Self.quiet
        model.bodyBlockingProbability = 0.5
        model.bodyBlockingMaximumLoss = 10
        var losses: [Int16] = []
        for seed in 1...40 {
            var (air, _, scanner) = room(model, seed: UInt64(seed))
            let rssis = Set(air.receptions(for: scanner, from: .zero, to: .seconds(1)).map(\.rssi))
            #expect(rssis.count == 1, "one loss per link for the whole trial")
            losses.append(-41 - rssis.first!)
        }
        #expect(losses.allSatisfy { (0...10).contains($0) })
        #expect(losses.count { $0 == 0 } >= 10)
        #expect(losses.count { $0 >= 3 } >= 5)
    }

    @Test func pathLossExponentIsConfigurable() {
        var (air, _, scanner) = room(
            AirModel(pathLossExponent: 3, shadowingSigma: 0, fastFadingSigma: 0, packetLoss: 0),
            distance: 10
        )
        #expect(air.receptions(for: scanner, from: .zero, to: .seconds(1)).first?.rssi == -71)
    }

    @Test func weakPacketsAreBelowSensitivity() {
        var (air, _, scanner) = room(distance: 1000)  // −101 dBm < −95 dBm
        #expect(air.receptions(for: scanner, from: .zero, to: .seconds(5)).isEmpty)
    }

    @Test func advertisingEventsFollowTheIntervalPlusAdvDelay() {
        var (air, _, scanner) = room()
        let times = air.receptions(for: scanner, from: .zero, to: .seconds(10)).map(\.time)
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= .milliseconds(100) && $0 <= .milliseconds(110) })
        // advDelay is random, not constant.
        #expect(Set(gaps).count > gaps.count / 2)
        #expect((90...100).contains(times.count))
    }

    @Test func packetLossDropsThatFraction() {
        var (air, _, scanner) = room(AirModel(shadowingSigma: 0, fastFadingSigma: 0, packetLoss: 0.3))
        let count = air.receptions(for: scanner, from: .zero, to: .seconds(600)).count
        // About 5,700 events in 600 s; 70 % of them arrive.
        #expect((3700...4300).contains(count))
    }

    @Test func scanDutyCycleHearsAboutItsShare() {
        let payer = SimulatedPeer(
            name: "payer",
            trajectory: .fixed(Position(x: 1, y: 0)),
            scanWindow: .milliseconds(25),
            scanInterval: .milliseconds(100)
        )
        var (air, _, scanner) = room(scanner: payer)
        let count = air.receptions(for: scanner, from: .zero, to: .seconds(600)).count
        #expect((1000...1900).contains(count))
    }

    @Test func shadowingAndFadingHaveTheConfiguredSpread() {
        var (air, _, scanner) = room(AirModel(shadowingSigma: 6, fastFadingSigma: 0, packetLoss: 0))
        // Sample the shadowing once per correlation time over many links' worth of time.
        let values = air.receptions(for: scanner, from: .zero, to: .seconds(4000)).enumerated()
            .filter { $0.offset % 50 == 0 }.map { Double($0.element.rssi) }
        let mean = values.reduce(0, +) / Double(values.count)
        let deviation = (values.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(values.count)).squareRoot()
        #expect(abs(mean - -41) < 1)
        #expect(abs(deviation - 6) < 0.7)
    }

    @Test func rssiIsClamped() {
        var (air, _, scanner) = room(
            AirModel(shadowingSigma: 0, fastFadingSigma: 0, packetLoss: 0, rssiRange: -30...(-20))
        )
        #expect(air.receptions(for: scanner, from: .zero, to: .seconds(1)).allSatisfy { $0.rssi == -30 })
    }

    @Test func stoppedAdvertisementsFallSilent() {
        var (air, advertiser, scanner) = room()
        air.stopAdvertising(advertiser, at: .seconds(1))
        #expect(!air.isAdvertising(advertiser, at: .seconds(1)))
        let receptions = air.receptions(for: scanner, from: .zero, to: .seconds(3))
        #expect(receptions.allSatisfy { $0.time < .seconds(1) })
        #expect(receptions.count >= 9)
    }

    @Test func updatesChangeThePayloadInPlace() {
        var (air, advertiser, scanner) = room()
        let next = EID(rawValue: "1111111111")!
        air.updateAdvertising(advertiser, payload: AirPayload(Advertisement(eid: next), txPower: 0), at: .seconds(1))
        let receptions = air.receptions(for: scanner, from: .zero, to: .seconds(2))
        for reception in receptions {
            let expected = reception.time < .seconds(1) ? Self.eid : next
            #expect(reception.payload.decode(for: .gotchu) == .eid(expected))
        }
        let gaps = zip(receptions.dropFirst(), receptions).map { $0.time - $1.time }
        #expect(gaps.allSatisfy { $0 <= .milliseconds(110) })
    }

    @Test func movingPeersChangeRSSI() {
        let walker = SimulatedPeer(
            name: "payer",
            trajectory: .waypoints([(.zero, Position(x: 10, y: 0)), (.seconds(10), Position(x: 0.1, y: 0))])
        )
        var (air, _, scanner) = room(scanner: walker)
        let early = air.receptions(for: scanner, from: .zero, to: .seconds(1))
        let late = air.receptions(for: scanner, from: .seconds(9), to: .seconds(11))
        #expect(early.allSatisfy { $0.rssi <= -60 })
        #expect(late.filter { $0.time >= .seconds(10) }.allSatisfy { $0.rssi == -21 })
    }

    @Test func receptionsDoNotDependOnHowTimeIsSplit() async {
        let model = AirModel(packetLoss: 0.2)
        let restarted = AirPayload(Advertisement(eid: EID(rawValue: "2222222222")!), txPower: 0)
        /// The advertiser pauses from 1.5 s to 2 s and comes back with another EID.
        func pausingRoom(_ seed: UInt64) -> (AirCore, Int) {
            var (air, advertiser, scanner) = room(model, distance: 2, seed: seed)
            air.stopAdvertising(advertiser, at: .milliseconds(1500))
            air.startAdvertising(advertiser, payload: restarted, at: .seconds(2))
            return (air, scanner)
        }
        await propertyCheck(count: 50, input: Gen.uint64(), Gen.int(in: 1...2999).array(of: 0...12)) { seed, cuts in
            var (whole, scanner) = pausingRoom(seed)
            let reference = whole.receptions(for: scanner, from: .zero, to: .seconds(3))
            var (split, _) = pausingRoom(seed)
            var pieces: [Reception] = []
            var start = Duration.zero
            for cut in Set(cuts).sorted().map({ Duration.milliseconds($0) }) + [.seconds(3)] {
                pieces += split.receptions(for: scanner, from: start, to: cut)
                start = cut
            }
            #expect(pieces == reference)
            #expect(!reference.contains { $0.time >= .milliseconds(1500) && $0.time < .seconds(2) })
            #expect(reference.contains { $0.payload == restarted })
        }
    }

    @Test func sameSeedSameAirDifferentSeedDifferentAir() {
        let model = AirModel()
        var (a, _, scanner) = room(model, seed: 9)
        var (b, _, _) = room(model, seed: 9)
        var (c, _, _) = room(model, seed: 10)
        let reference = a.receptions(for: scanner, from: .zero, to: .seconds(2))
        #expect(b.receptions(for: scanner, from: .zero, to: .seconds(2)) == reference)
        #expect(c.receptions(for: scanner, from: .zero, to: .seconds(2)) != reference)
    }

    @Test func payloadDecoding() {
        let other = BluetoothUUID("fd6f")!
        #expect(AirPayload(Advertisement(eid: Self.eid), txPower: 0).decode(for: .gotchu) == .eid(Self.eid))
        let short = AirPayload(serviceUUIDs: [.gotchu], serviceData: [.gotchu: Array("00dead".utf8)])
        #expect(short.decode(for: .gotchu) == .malformed)
        let notHex = AirPayload(serviceUUIDs: [.gotchu], serviceData: [.gotchu: Array("00deadbeeg".utf8)])
        #expect(notHex.decode(for: .gotchu) == .malformed)
        let misfiled = AirPayload(serviceUUIDs: [.gotchu], serviceData: [other: Self.eid.serviceData])
        #expect(misfiled.decode(for: .gotchu) == .malformed)
        let foreign = AirPayload(serviceUUIDs: [other], serviceData: [other: Array(repeating: 0, count: 20)])
        #expect(foreign.decode(for: .gotchu) == .unrelated)
        #expect(AirPayload(Advertisement(eid: Self.eid, includesTxPower: false), txPower: 4).txPower == nil)
    }
}
