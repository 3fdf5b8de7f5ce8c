public import GotchuCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A repeatable proximity experiment: a room layout, the radio model, the selector under test and how many seeded
/// trials to run. Every field can be overridden.
public struct Scenario: Hashable, Sendable, Codable {
    /// The room layouts.
    public enum Layout: String, Hashable, Sendable, Codable, CaseIterable {
        /// One terminal 0.2 m from the payer, two others 1.5–3 m away in random directions.
        case counter
        /// Ten terminals on a jittered 5 × 2 grid in a 10 × 10 m hall; the payer stands 0.1–0.3 m from one of them.
        case crowded
    }

    /// The room layout.
    public var layout: Layout
    /// The propagation model.
    public var model: AirModel
    /// The selector under test.
    public var selector: ProximitySelector.Configuration
    /// The terminals' advertising interval (each event adds 0–10 ms advDelay).
    public var advertisingInterval: Duration
    /// The payer's scan window and interval (equal for continuous scanning).
    public var scanWindow: Duration
    /// The payer's scan duty-cycle period.
    public var scanInterval: Duration
    /// A trial that has not auto-selected after this long counts as not covered.
    public var timeout: Duration
    /// When the naive selector decides, after the scan starts (by default one advertising interval plus advDelay).
    public var naiveDecisionDelay: Duration
    /// In the counter layout, how far the payer holds the phone from the terminal it means to pay, in metres.
    public var intendedDistance: ClosedRange<Double>
    /// In the counter layout, how far the other terminals are from the payer, in metres.
    public var otherDistance: ClosedRange<Double>
    /// Whether the terminals are of mixed makes: each announces (and radiates, before its own offset) one of
    /// ``mixedTxPowers`` instead of 0 dBm.
    public var mixedMakes: Bool
    /// When set, the payer walks up: it starts the scan 1 m further from the terminal it means to pay and reaches its
    /// place after this long. `nil`: it stands there from the start.
    public var approach: Duration?
    /// When set, every terminal carries a calibration (``Advertisement/calibratedRSSI``): what a phone read 1 m from
    /// it, including the terminal's own transmit offset, off by a normally drawn error with this deviation in dB
    /// (how well `gotchu kiosk calibrate` averages shadowing and the calibrating phone away). `nil`: uncalibrated.
    public var calibrationError: Double?
    /// How many trials to run.
    public var trials: Int
    /// The seed of trial 0; trial i uses a seed derived from it and i.
    public var seed: UInt64

    /// Creates a scenario with the defaults of the design (σ 6 dB, n 2, 100 ms advertising, continuous scanning).
    public init(
        layout: Layout,
        model: AirModel = AirModel(),
        selector: ProximitySelector.Configuration = .init(),
        advertisingInterval: Duration = .milliseconds(100),
        scanWindow: Duration = .milliseconds(100),
        scanInterval: Duration = .milliseconds(100),
        timeout: Duration = .seconds(3),
        naiveDecisionDelay: Duration? = nil,
        trials: Int = 1000,
        seed: UInt64 = 1,
        intendedDistance: ClosedRange<Double> = 0.2...0.2,
        otherDistance: ClosedRange<Double> = 1.5...3,
        mixedMakes: Bool = false,
        approach: Duration? = nil,
        calibrationError: Double? = nil
    ) {
        self.layout = layout
        self.model = model
        self.selector = selector
        self.advertisingInterval = advertisingInterval
        self.scanWindow = scanWindow
        self.scanInterval = scanInterval
        self.timeout = timeout
        self.naiveDecisionDelay = naiveDecisionDelay ?? advertisingInterval + .milliseconds(10)
        self.trials = trials
        self.seed = seed
        self.intendedDistance = intendedDistance
        self.otherDistance = otherDistance
        self.mixedMakes = mixedMakes
        self.approach = approach
        self.calibrationError = calibrationError
    }

    private enum CodingKeys: String, CodingKey {
        case layout, model, selector, advertisingInterval, scanWindow, scanInterval, timeout, naiveDecisionDelay
        case intendedDistance, otherDistance, mixedMakes, approach, trials, seed, calibrationError
    }

    /// Decodes a scenario whose durations are seconds.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            layout: try container.decode(Layout.self, forKey: .layout),
            model: try container.decode(AirModel.self, forKey: .model),
            selector: try container.decode(ProximitySelector.Configuration.self, forKey: .selector),
            advertisingInterval: try container.decode(secondsForKey: .advertisingInterval),
            scanWindow: try container.decode(secondsForKey: .scanWindow),
            scanInterval: try container.decode(secondsForKey: .scanInterval),
            timeout: try container.decode(secondsForKey: .timeout),
            naiveDecisionDelay: try container.decode(secondsForKey: .naiveDecisionDelay),
            trials: try container.decode(Int.self, forKey: .trials),
            seed: try container.decode(UInt64.self, forKey: .seed),
            intendedDistance: try container.decode(ClosedRange<Double>.self, forKey: .intendedDistance),
            otherDistance: try container.decode(ClosedRange<Double>.self, forKey: .otherDistance),
            mixedMakes: try container.decode(Bool.self, forKey: .mixedMakes),
            approach: try container.decodeIfPresent(secondsForKey: .approach),
            calibrationError: try container.decodeIfPresent(Double.self, forKey: .calibrationError)
        )
    }

    /// Encodes the scenario with its durations as seconds.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(layout, forKey: .layout)
        try container.encode(model, forKey: .model)
        try container.encode(selector, forKey: .selector)
        try container.encode(seconds: advertisingInterval, forKey: .advertisingInterval)
        try container.encode(seconds: scanWindow, forKey: .scanWindow)
        try container.encode(seconds: scanInterval, forKey: .scanInterval)
        try container.encode(seconds: timeout, forKey: .timeout)
        try container.encode(seconds: naiveDecisionDelay, forKey: .naiveDecisionDelay)
        try container.encode(intendedDistance, forKey: .intendedDistance)
        try container.encode(otherDistance, forKey: .otherDistance)
        try container.encode(mixedMakes, forKey: .mixedMakes)
        try container.encodeIfPresent(seconds: approach, forKey: .approach)
        try container.encodeIfPresent(calibrationError, forKey: .calibrationError)
        try container.encode(trials, forKey: .trials)
        try container.encode(seed, forKey: .seed)
    }

    /// The TX powers terminals of mixed makes use, in dBm: the usual settings of BLE controllers and beacons.
    public static let mixedTxPowers: [Int16] = [-8, -4, 0, 4, 8]

    /// The terminals' and the payer's positions in trial `index`, as ``TrialRunner`` lays them out; terminal 0 is the
    /// one the payer means to pay. A demo can place ``SimulatedAir`` peers with it.
    public func room(trial index: Int) -> (terminals: [Position], payer: Position) {
        var random = Xoshiro256StarStar(seed: SplitMix64.derive(seed, UInt64(index)))
        return room(using: &random)
    }

    /// The room for one trial, drawn from the trial's generator.
    func room(using random: inout Xoshiro256StarStar) -> (terminals: [Position], payer: Position) {
        func around(_ centre: Position, distance: ClosedRange<Double>) -> Position {
            let radius = distance.lowerBound + random.unit() * (distance.upperBound - distance.lowerBound)
            let angle = random.unit() * 2 * Double.pi
            return Position(x: centre.x + radius * cos(angle), y: centre.y + radius * sin(angle))
        }
        switch layout {
        case .counter:
            let payer = Position.origin
            let intended = around(payer, distance: intendedDistance)
            return ([intended, around(payer, distance: otherDistance), around(payer, distance: otherDistance)], payer)
        case .crowded:
            var grid: [Position] = []
            for row in 0..<2 {
                for column in 0..<5 {
                    grid.append(
                        Position(
                            x: 1 + 2 * Double(column) + (random.unit() - 0.5),
                            y: 3 + 4 * Double(row) + (random.unit() - 0.5)
                        )
                    )
                }
            }
            let intendedIndex = Int(random.next() % UInt64(grid.count))
            grid.swapAt(0, intendedIndex)
            return (grid, around(grid[0], distance: 0.1...0.3))
        }
    }
}
