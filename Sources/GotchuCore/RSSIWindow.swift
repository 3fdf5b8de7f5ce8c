/// The recent RSSI samples of one advertiser, kept over a sliding time window.
///
/// A value type fed `(time, RSSI, TX power)` samples; it never reads a clock. Samples may arrive out of order (two
/// radios, reordered reports): every statistic it offers depends only on the set of samples, not their order.
public struct RSSIWindow: Hashable, Sendable {
    /// One reception.
    public struct Sample: Hashable, Sendable {
        /// When it was received, on the radio's clock.
        public var time: Duration
        /// Received signal strength in dBm.
        public var rssi: Int16
        /// The advertiser's reference power in dBm (its TX power, or its calibration on the same scale: see
        /// ``Calibration``), when it has one.
        public var txPower: Int16?
        /// Whether ``txPower`` comes from the advertiser's calibration rather than its announced TX power.
        public var calibrated: Bool

        /// A reception at `time` (radio clock) with `rssi` in dBm and the advertiser's reference power `txPower` in
        /// dBm, from its calibration when `calibrated`.
        public init(time: Duration, rssi: Int16, txPower: Int16? = nil, calibrated: Bool = false) {
            self.time = time
            self.rssi = rssi
            self.txPower = txPower
            self.calibrated = calibrated
        }

        /// TX power − RSSI in dB, when the TX power is known.
        public var attenuation: Int16? { txPower.map { $0 - rssi } }
    }

    /// How samples are combined into one figure.
    public enum Smoothing: String, Hashable, Sendable, Codable, CaseIterable {
        /// Arithmetic mean of the dBm values.
        case mean
        /// Median of the dBm values (mean of the two middle ones for an even count): robust to single deep fades.
        case median
    }

    /// How far back samples are kept, relative to the newest time the window was pruned at.
    public var length: Duration
    /// The samples currently in the window, in arrival order.
    public private(set) var samples: [Sample] = []

    /// Creates an empty window of the given length.
    public init(length: Duration) {
        self.length = length
    }

    /// Adds a sample.
    public mutating func append(_ sample: Sample) {
        samples.append(sample)
    }

    /// Drops samples older than `now − length` and samples from the future (`time > now`).
    public mutating func prune(now: Duration) {
        let oldest = now - length
        samples.removeAll { $0.time <= oldest || $0.time > now }
    }

    /// Drops samples older than `now − length` for good, keeping any from the future for later.
    public mutating func removeExpired(now: Duration) {
        let oldest = now - length
        samples.removeAll { $0.time <= oldest }
    }

    /// The number of samples in the window.
    public var count: Int { samples.count }

    /// Whether every sample in the window carries a calibration (and the window is not empty).
    public var isCalibrated: Bool { !samples.isEmpty && samples.allSatisfy(\.calibrated) }

    /// The time of the newest sample, or `nil` when the window is empty.
    public var lastSeen: Duration? { samples.lazy.map(\.time).max() }

    /// The smoothed RSSI in dBm, or `nil` when the window is empty.
    public func rssi(_ smoothing: Smoothing) -> Double? {
        Self.combine(samples.map { Double($0.rssi) }, smoothing)
    }

    /// The smoothed attenuation in dB over the samples that carry a TX power, or `nil` when none does.
    public func attenuation(_ smoothing: Smoothing) -> Double? {
        Self.combine(samples.compactMap { $0.attenuation.map(Double.init) }, smoothing)
    }

    private static func combine(_ values: [Double], _ smoothing: Smoothing) -> Double? {
        guard !values.isEmpty else { return nil }
        switch smoothing {
        case .mean:
            // Summing sorted values makes the result bit-identical whatever the arrival order.
            return values.sorted().reduce(0, +) / Double(values.count)
        case .median:
            let sorted = values.sorted()
            let middle = sorted.count / 2
            return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        }
    }
}
