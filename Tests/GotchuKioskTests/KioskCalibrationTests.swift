import Foundation
import GotchuCore
import GotchuKiosk
import GotchuSettings
import GotchuSimulatedRadio
import GotchuTesting
import Testing

@Suite(.timeLimit(.minutes(10))) struct KioskCalibrationTests {
    static let phone = EID(rawValue: "0123456789")!
    static let other = EID(rawValue: "abcdefabcd")!

    private func sightings(_ eid: EID, _ values: [Int16?]) -> [Sighting] {
        values.enumerated().map {
            Sighting(eid: eid, rssi: $0.element, txPower: nil, time: .milliseconds(Int64($0.offset) * 100), source: "t")
        }
    }

    @Test func theMedianOfThePhoneIsTheCalibration() throws {
        let heard = sightings(Self.phone, [-60, -58, -90, -61, -59, -57, nil, -62, -60, -30, -59, -61])
        let measurement = try KioskCalibration.measure(heard)
        // Eleven values with RSSI; the deep fade and the spike do not move the median.
        #expect(measurement == .init(eid: Self.phone, medianRSSI: -60, samples: 11))
    }

    @Test func tooFewSamplesSeveralAdvertisersOrAnImplausibleLevelAreRefused() throws {
        #expect(throws: KioskCalibration.Failure.self) { try KioskCalibration.measure([]) }
        #expect(throws: KioskCalibration.Failure.self) {
            try KioskCalibration.measure(sightings(Self.phone, Array(repeating: -60, count: 9)))
        }
        let two = sightings(Self.phone, Array(repeating: -60, count: 12)) + sightings(Self.other, [-70, -71])
        #expect(throws: KioskCalibration.Failure.self) { try KioskCalibration.measure(two) }
        // Naming the phone picks it out.
        #expect(try KioskCalibration.measure(two, eid: Self.phone).medianRSSI == -60)
        #expect(throws: KioskCalibration.Failure.self) {
            try KioskCalibration.measure(sightings(Self.phone, Array(repeating: -10, count: 12)))
        }
    }

    /// The procedure over the simulated air: a phone 1 m from the terminal, scanned for 5 s of virtual time.
    @Test func scanningThePhoneOneMetreAway() async throws {
        let air = SimulatedAir(seed: 21, clock: .virtual)
        let kiosk = await air.addPeer(SimulatedPeer(name: "kiosk", at: Position(x: 0, y: 0)))
        _ = await air.addBroadcaster(
            SimulatedPeer(name: "phone", at: Position(x: 1, y: 0)),
            payload: AirPayload(Advertisement(eid: Self.phone), txPower: 0)
        )
        let measuring = Task {
            try await KioskCalibration.scan(kiosk, serviceUUID: .gotchu, duration: .seconds(5))
        }
        // The scan has started once the procedure sleeps on the air's clock.
        while await air.sleeperCount == 0 { await Task.yield() }
        for _ in 0..<60 { await air.advance(by: .milliseconds(100)) }
        let measurement = try await measuring.value
        #expect(measurement.eid == Self.phone)
        #expect(measurement.samples >= 30)
        // The easy room loses 41 dB over the first metre, with 6 dB of shadowing.
        #expect((-60 ... -25).contains(measurement.medianRSSI), "\(measurement)")
    }

    @Test func theCalibrationIsWrittenIntoATomlFileAndReadBack() throws {
        let directory = try TemporaryDirectory(prefix: "kiosk-calibrate")
        defer { directory.remove() }
        let file = directory.url.appendingPathComponent("kiosk.toml")
        let original = """
            # the shop's kiosk
            server = "http://127.0.0.1:1"
            email = "shop@example.com"

            """
        try Data(original.utf8).write(to: file)
        try KioskCalibration.write(-61, to: file)
        let once = try String(contentsOf: file, encoding: .utf8)
        #expect(once.hasPrefix("# the shop's kiosk\nserver = "))
        #expect(once.contains("calibrated_rssi = \"-61\"\n"))
        // Calibrating again replaces the line.
        try KioskCalibration.write(-57, to: file)
        let twice = try String(contentsOf: file, encoding: .utf8)
        #expect(twice.components(separatedBy: "calibrated_rssi").count == 2)
        let settings = try KioskConfiguration.resolve(
            file: file,
            fileIsExplicit: true,
            environment: [:],
            flags: .init()
        )
        #expect(settings.calibratedRSSI == -57)
    }

    @Test func theCalibrationIsWrittenIntoAJsonFile() throws {
        let directory = try TemporaryDirectory(prefix: "kiosk-calibrate")
        defer { directory.remove() }
        let file = directory.url.appendingPathComponent("kiosk.json")
        try Data(#"{"server": "http://127.0.0.1:1", "email": "shop@example.com"}"#.utf8).write(to: file)
        try KioskCalibration.write(-64, to: file)
        let settings = try KioskConfiguration.resolve(
            file: file,
            fileIsExplicit: true,
            environment: [:],
            flags: .init()
        )
        #expect(settings.calibratedRSSI == -64)
        #expect(settings.credentials == .email("shop@example.com"))
    }

    @Test(arguments: ["-10", "-101", "sixty", "-59.5", ""])
    func anImplausibleCalibrationSettingIsRefused(value: String) throws {
        #expect(throws: KioskConfigurationError.self) {
            try KioskConfiguration.resolve(
                file: URL(fileURLWithPath: "/nonexistent/kiosk.toml"),
                fileIsExplicit: false,
                environment: [:],
                flags: KioskSettings {
                    $0.server = "http://127.0.0.1:1"
                    $0.email = "a@example.com"
                    $0.calibratedRSSI = value
                }
            )
        }
    }

    /// The kiosk advertises its calibration beside the EID, in service data of its own.
    @Test func theKioskAdvertisesItsCalibration() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk(
            options: Kiosk.Options(
                payeeName: "Corner Shop",
                charges: .init(statusInterval: .milliseconds(100)),
                calibratedRSSI: -58
            )
        )
        let heard = Heard()
        let phone = await harness.air.addPeer(SimulatedPeer(name: "phone", at: Position(x: 0.2, y: 0)))
        let listening = try await Heard.listen(phone, into: heard)
        defer { listening.cancel() }
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 250, reference: "calibrated")
            try await harness.advance(kiosk) { _ in await !heard.sightings.isEmpty }
        }
        #expect(await heard.sightings.allSatisfy { $0.calibratedRSSI == -58 })
    }
}
