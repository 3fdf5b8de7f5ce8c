/// One advertiser as the proximity selector sees it after smoothing.
public struct ProximityCandidate: Hashable, Sendable, Codable {
    /// The advertised EID.
    public var eid: EID
    /// Smoothed RSSI over the window, in dBm; `nil` for a terminal heard only without RSSI (some controllers never
    /// report one), which the selector never picks but a payer may choose from a list.
    public var rssi: Double?
    /// Smoothed attenuation (TX power − RSSI) in dB, when the advertiser announces its TX power.
    public var attenuation: Double?
    /// Samples in the window.
    public var sampleCount: Int
    /// Time of the newest sample, on the radio's clock.
    public var lastSeen: Duration
    /// Whether ``attenuation`` is measured against the terminal's calibration (see ``Calibration``) in every sample.
    public var isCalibrated: Bool

    /// A candidate with smoothed `rssi` (dBm) and `attenuation` (dB) from `sampleCount` samples, the newest at
    /// `lastSeen` on the radio's clock; made by the selector, or by tests and the simulator.
    public init(
        eid: EID,
        rssi: Double?,
        attenuation: Double?,
        sampleCount: Int,
        lastSeen: Duration,
        isCalibrated: Bool = false
    ) {
        self.eid = eid
        self.rssi = rssi
        self.attenuation = attenuation
        self.sampleCount = sampleCount
        self.lastSeen = lastSeen
        self.isCalibrated = isCalibrated
    }
}

/// What the selector concluded at one instant.
public enum ProximityDecision: Hashable, Sendable {
    /// No fresh advertiser passes the gate: nothing is near.
    case none
    /// Advertisers are near but none clears the gate, the sample count and the margin: show them, best first.
    case ambiguous([ProximityCandidate])
    /// One advertiser is clearly the nearest.
    case selected(ProximityCandidate)

    /// The selected candidate, if any.
    public var selected: ProximityCandidate? {
        if case .selected(let candidate) = self { return candidate }
        return nil
    }
}

/// Picks the nearest advertiser from noisy RSSI, or refuses to guess.
///
/// Single samples rank two terminals at 1 m and 2 m wrongly about a quarter of the time (σ ≈ 6 dB), so the selector
/// smooths each EID over a window, drops stale EIDs, gates on attenuation (or RSSI when no TX power is known), needs a
/// minimum number of samples, and requires a lead over the runner-up. Otherwise the decision is
/// ``ProximityDecision/ambiguous(_:)`` and the payer chooses from a list.
///
/// Sans-IO: it is fed sightings and asked for a decision at a given time; it never reads a clock.
public struct ProximitySelector: Sendable {
    /// Tunables. The defaults were chosen on the simulator's `counter` scenario in both rooms (``Configuration/previous``
    /// was tuned on the easy one alone): a 2 s mean, six samples, and a lead over the runner-up that depends on how
    /// near the best terminal is. At contact range (attenuation ≤ 38 dB) no other terminal can plausibly be as near and
    /// 8 dB suffices; further away, per-device offsets and shadowing that no window averages away leave only a 24 dB
    /// lead trustworthy. The gate (50 dB attenuation, or −50 dBm) only says something is near. On 3,000 trials per
    /// figure (`gotchu simulate --table --trials 3000`): the easy room at 20 cm auto-selects 97.3 % with 0.13 % wrong
    /// payee (previous rule 97.6 %, 0.13 %); the hard room at contact range 87.4 %, 0.13 % wrong (previous 83.5 %,
    /// 0.13 %), at 30 cm 33.6 %, 0.70 % wrong (previous 24.6 %, 0.77 %).
    /// With slower advertising, six samples take proportionally longer to arrive.
    public struct Configuration: Hashable, Sendable, Codable {
        /// How far back samples are smoothed.
        public var window: Duration
        /// An EID not heard for longer than this is neither selected nor listed (it stopped advertising or walked
        /// away), though its samples still count against the margin until they leave the window. Keep it at several
        /// advertising intervals, and above the gap of a duty-cycled scan.
        public var staleAfter: Duration
        /// Samples an EID needs in the window before it can be selected.
        public var minimumSamples: Int
        /// Lead in dB the best candidate needs over the runner-up.
        public var margin: Double
        /// Gate when every fresh candidate announces its TX power: the best must have at most this attenuation (dB).
        public var maximumAttenuation: Double
        /// Gate otherwise: the best must have at least this smoothed RSSI (dBm).
        public var minimumRSSI: Double
        /// How samples in the window are combined.
        public var smoothing: RSSIWindow.Smoothing
        /// Contact range, by attenuation: a best candidate at most this far (dB) is at the terminal's face, where no
        /// other terminal can plausibly be as near, and needs only ``margin``.
        public var contactAttenuation: Double
        /// Contact range by RSSI (dBm), when ranking by RSSI.
        public var contactRSSI: Double
        /// Lead in dB a best candidate outside contact range needs over the runner-up: held further away, its lead
        /// is smaller and the per-device offsets and shadowing that no window averages away weigh more.
        public var distantMargin: Double
        /// The tap's shape: when set, a best candidate outside contact range is also selected with only ``margin`` if
        /// over the window it rose by at least this many dB more than the runner-up. A payer walking up to a terminal
        /// raises that terminal's level far more than any other's, and a rise cancels the per-device offsets and
        /// blocking that are constant over a tap. `nil` turns it off.
        public var minimumRise: Double?
        /// Contact range against a calibration: when the best and the runner-up both carry calibrations (so their
        /// attenuations are on one scale whatever their hardware, 41 dB at 1 m), a best candidate at most this far
        /// (dB) is at the terminal's face and needs only ``margin``. `nil`: calibrations are ranked on, but contact
        /// is judged by ``contactAttenuation`` as for TX powers.
        public var calibratedContactAttenuation: Double?
        /// With calibrations, the tap's plateau: the best candidate must be at most this far (dB, against its
        /// calibration) over the newest quarter of the window to be selected at all, so a payer still walking up is
        /// not matched to whatever terminal it passes; and one that also rose by ``tapRise`` more than the runner-up
        /// needs only ``margin``. `nil` turns both off.
        public var calibratedPlateauAttenuation: Double?
        /// With calibrations, the lead a best candidate outside contact range needs without the tap's rise (dB).
        public var calibratedDistantMargin: Double
        /// With calibrations, the rise over the runner-up (dB, newest quarter of the window against the oldest) that
        /// lets a best candidate at the plateau be selected with only ``margin``. `nil` (the default) turns it off:
        /// standing still, the rise is only shadowing drifting, and on the hard model the rule cost more wrong
        /// payees than the coverage it bought.
        public var tapRise: Double?

        /// Creates a configuration; every parameter has a measured default.
        public init(
            window: Duration = .seconds(2),
            staleAfter: Duration = .milliseconds(600),
            minimumSamples: Int = 6,
            margin: Double = 8,
            maximumAttenuation: Double = 50,
            minimumRSSI: Double = -50,
            smoothing: RSSIWindow.Smoothing = .mean,
            contactAttenuation: Double = 38,
            contactRSSI: Double = -38,
            distantMargin: Double = 24,
            minimumRise: Double? = nil,
            calibratedContactAttenuation: Double? = 18,
            calibratedPlateauAttenuation: Double? = 34,
            tapRise: Double? = nil,
            calibratedDistantMargin: Double = 28
        ) {
            self.window = window
            self.staleAfter = staleAfter
            self.minimumSamples = minimumSamples
            self.margin = margin
            self.maximumAttenuation = maximumAttenuation
            self.minimumRSSI = minimumRSSI
            self.smoothing = smoothing
            self.contactAttenuation = contactAttenuation
            self.contactRSSI = contactRSSI
            self.distantMargin = distantMargin
            self.minimumRise = minimumRise
            self.calibratedContactAttenuation = calibratedContactAttenuation
            self.calibratedPlateauAttenuation = calibratedPlateauAttenuation
            self.tapRise = tapRise
            self.calibratedDistantMargin = calibratedDistantMargin
        }

        private enum CodingKeys: String, CodingKey {
            case window, staleAfter, minimumSamples, margin, maximumAttenuation, minimumRSSI, smoothing
            case contactAttenuation, contactRSSI, distantMargin, minimumRise
            case calibratedContactAttenuation, calibratedPlateauAttenuation, tapRise, calibratedDistantMargin
        }

        /// Decodes a configuration whose durations are seconds.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                window: try container.decode(secondsForKey: .window),
                staleAfter: try container.decode(secondsForKey: .staleAfter),
                minimumSamples: try container.decode(Int.self, forKey: .minimumSamples),
                margin: try container.decode(Double.self, forKey: .margin),
                maximumAttenuation: try container.decode(Double.self, forKey: .maximumAttenuation),
                minimumRSSI: try container.decode(Double.self, forKey: .minimumRSSI),
                smoothing: try container.decode(RSSIWindow.Smoothing.self, forKey: .smoothing),
                contactAttenuation: try container.decode(Double.self, forKey: .contactAttenuation),
                contactRSSI: try container.decode(Double.self, forKey: .contactRSSI),
                distantMargin: try container.decode(Double.self, forKey: .distantMargin),
                minimumRise: try container.decodeIfPresent(Double.self, forKey: .minimumRise),
                calibratedContactAttenuation: try container.decodeIfPresent(
                    Double.self,
                    forKey: .calibratedContactAttenuation
                ),
                calibratedPlateauAttenuation: try container.decodeIfPresent(
                    Double.self,
                    forKey: .calibratedPlateauAttenuation
                ),
                tapRise: try container.decodeIfPresent(Double.self, forKey: .tapRise),
                calibratedDistantMargin: try container.decodeIfPresent(Double.self, forKey: .calibratedDistantMargin)
                    ?? 28
            )
        }

        /// Encodes the configuration with its durations as seconds.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(seconds: window, forKey: .window)
            try container.encode(seconds: staleAfter, forKey: .staleAfter)
            try container.encode(minimumSamples, forKey: .minimumSamples)
            try container.encode(margin, forKey: .margin)
            try container.encode(maximumAttenuation, forKey: .maximumAttenuation)
            try container.encode(minimumRSSI, forKey: .minimumRSSI)
            try container.encode(smoothing, forKey: .smoothing)
            try container.encode(contactAttenuation, forKey: .contactAttenuation)
            try container.encode(contactRSSI, forKey: .contactRSSI)
            try container.encode(distantMargin, forKey: .distantMargin)
            try container.encodeIfPresent(minimumRise, forKey: .minimumRise)
            try container.encodeIfPresent(calibratedContactAttenuation, forKey: .calibratedContactAttenuation)
            try container.encodeIfPresent(calibratedPlateauAttenuation, forKey: .calibratedPlateauAttenuation)
            try container.encodeIfPresent(tapRise, forKey: .tapRise)
            try container.encode(calibratedDistantMargin, forKey: .calibratedDistantMargin)
        }

        /// The rule before hardware spread was modelled: a 2 s mean, at least 6 samples, 8 dB of margin, and a gate
        /// of 40 dB attenuation or −50 dBm. Kept for comparison.
        public static let previous = Configuration(
            window: .seconds(2),
            staleAfter: .milliseconds(600),
            minimumSamples: 6,
            margin: 8,
            maximumAttenuation: 40,
            minimumRSSI: -50,
            smoothing: .mean,
            contactAttenuation: 40,
            contactRSSI: -50,
            distantMargin: 8,
            calibratedContactAttenuation: nil,
            calibratedPlateauAttenuation: nil
        )
    }

    /// The tunables in use.
    public let configuration: Configuration
    private var windows: [EID: RSSIWindow] = [:]

    /// Creates a selector with no samples.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Records a sighting. Sightings without RSSI carry no distance information and are ignored. Attenuation is
    /// measured against the sighting's ``Sighting/referencePower``: its calibration when it carries a plausible one,
    /// else its TX power when plausible; an implausible value counts as absent.
    public mutating func record(_ sighting: Sighting) {
        guard let rssi = sighting.rssi else { return }
        windows[sighting.eid, default: RSSIWindow(length: configuration.window)]
            .append(
                .init(
                    time: sighting.time,
                    rssi: rssi,
                    txPower: sighting.referencePower,
                    calibrated: sighting.calibratedRSSI.map(Calibration.plausibleCalibratedRSSI.contains) ?? false
                )
            )
    }

    /// Forgets every sample.
    public mutating func reset() {
        windows.removeAll()
    }

    /// Fresh candidates at `now`, nearest first (ties broken by EID so the order is deterministic).
    ///
    /// Candidates are compared by attenuation when every EID in the window announces a TX power, by RSSI otherwise:
    /// mixing the two would compare numbers on different scales.
    public func rankedCandidates(now: Duration) -> [ProximityCandidate] {
        inWindow(now: now).candidates.filter { isFresh($0, now: now) }
    }

    /// The decision at `now`, after dropping samples that left the window.
    public mutating func decide(now: Duration) -> ProximityDecision {
        for eid in Array(windows.keys) {
            windows[eid]!.removeExpired(now: now)
            if windows[eid]!.count == 0 { windows[eid] = nil }
        }
        return decision(now: now)
    }

    /// The decision at `now` without modifying the selector.
    public func decision(now: Duration) -> ProximityDecision {
        let (all, byAttenuation) = inWindow(now: now)
        let ranked = all.filter { isFresh($0, now: now) }
        guard let best = ranked.first, ranked.contains(where: { passesGate($0, byAttenuation) }) else { return .none }
        guard passesGate(best, byAttenuation), best.sampleCount >= configuration.minimumSamples else {
            return .ambiguous(ranked)
        }
        // Every EID heard in the window competes for the margin, even a stale one, one below the gate or one with a
        // single sample: a competitor that missed a few packets (a duty-cycled scan, a body in the way) has not
        // walked away, and picking the only fresh terminal in that moment is exactly the dangerous guess.
        guard let runnerUp = all.first(where: { $0.eid != best.eid }) else { return .selected(best) }
        let lead = strength(best, byAttenuation) - strength(runnerUp, byAttenuation)
        // Calibrated, the tap's shape: the best levelled off near its terminal, and is at its face, far ahead, or
        // rose well above the runner-up on the way there.
        let calibratedPair = byAttenuation && best.isCalibrated && runnerUp.isCalibrated
        if calibratedPair, let plateau = configuration.calibratedPlateauAttenuation {
            guard let level = recentAttenuation(best.eid, now: now), level <= plateau else { return .ambiguous(ranked) }
            if isContact(best, runnerUp, byAttenuation)
                ? lead >= configuration.margin
                : lead >= configuration.calibratedDistantMargin
            {
                return .selected(best)
            }
            if let tapRise = configuration.tapRise, lead >= configuration.margin,
                let bestRise = rise(best.eid, now: now, byAttenuation),
                let runnerUpRise = rise(runnerUp.eid, now: now, byAttenuation),
                bestRise - runnerUpRise >= tapRise
            {
                return .selected(best)
            }
            return .ambiguous(ranked)
        }
        if isContact(best, runnerUp, byAttenuation) ? lead >= configuration.margin : lead >= configuration.distantMargin
        {
            return .selected(best)
        }
        if let minimumRise = configuration.minimumRise, lead >= configuration.margin,
            let bestRise = rise(best.eid, now: now, byAttenuation),
            let runnerUpRise = rise(runnerUp.eid, now: now, byAttenuation),
            bestRise - runnerUpRise >= minimumRise
        {
            return .selected(best)
        }
        return .ambiguous(ranked)
    }

    /// Every EID with samples in the window at `now`, stale or not, nearest first, and the scale they are ranked on.
    private func inWindow(now: Duration) -> (candidates: [ProximityCandidate], byAttenuation: Bool) {
        var candidates: [ProximityCandidate] = []
        for (eid, var window) in windows {
            window.prune(now: now)
            guard let lastSeen = window.lastSeen, let rssi = window.rssi(configuration.smoothing) else { continue }
            candidates.append(
                .init(
                    eid: eid,
                    rssi: rssi,
                    attenuation: window.attenuation(configuration.smoothing),
                    sampleCount: window.count,
                    lastSeen: lastSeen,
                    isCalibrated: window.isCalibrated
                )
            )
        }
        let byAttenuation = candidates.allSatisfy { $0.attenuation != nil }
        let sorted = candidates.sorted { lhs, rhs in
            let (left, right) = (strength(lhs, byAttenuation), strength(rhs, byAttenuation))
            return left != right ? left > right : lhs.eid < rhs.eid
        }
        return (sorted, byAttenuation)
    }

    private func isFresh(_ candidate: ProximityCandidate, now: Duration) -> Bool {
        now - candidate.lastSeen <= configuration.staleAfter
    }

    private func passesGate(_ candidate: ProximityCandidate, _ byAttenuation: Bool) -> Bool {
        if byAttenuation, let attenuation = candidate.attenuation {
            return attenuation <= configuration.maximumAttenuation
        }
        return candidate.rssi.map { $0 >= configuration.minimumRSSI } ?? false
    }

    /// How much `eid` strengthened over the window: the mean of its samples in the newest quarter of the window minus
    /// the mean of those in the oldest quarter, in dB; `nil` without two samples in each.
    private func rise(_ eid: EID, now: Duration, _ byAttenuation: Bool) -> Double? {
        guard var window = windows[eid] else { return nil }
        window.prune(now: now)
        let quarter = configuration.window / 4
        let oldest = now - configuration.window
        func level(_ sample: RSSIWindow.Sample) -> Double {
            if byAttenuation, let attenuation = sample.attenuation { return -Double(attenuation) }
            return Double(sample.rssi)
        }
        let early = window.samples.filter { $0.time <= oldest + quarter }.map(level)
        let late = window.samples.filter { $0.time > now - quarter }.map(level)
        guard early.count >= 2, late.count >= 2 else { return nil }
        return late.reduce(0, +) / Double(late.count) - early.reduce(0, +) / Double(early.count)
    }

    /// The mean attenuation of `eid`'s samples in the newest quarter of the window; `nil` without two of them.
    private func recentAttenuation(_ eid: EID, now: Duration) -> Double? {
        guard var window = windows[eid] else { return nil }
        window.prune(now: now)
        let late = window.samples.filter { $0.time > now - configuration.window / 4 }.compactMap(\.attenuation)
        guard late.count >= 2 else { return nil }
        return late.map(Double.init).reduce(0, +) / Double(late.count)
    }

    private func isContact(
        _ candidate: ProximityCandidate,
        _ runnerUp: ProximityCandidate,
        _ byAttenuation: Bool
    ) -> Bool {
        if byAttenuation, let attenuation = candidate.attenuation {
            if let calibrated = configuration.calibratedContactAttenuation, candidate.isCalibrated,
                runnerUp.isCalibrated
            {
                return attenuation <= calibrated
            }
            return attenuation <= configuration.contactAttenuation
        }
        return candidate.rssi.map { $0 >= configuration.contactRSSI } ?? false
    }

    /// Higher is nearer, in dB.
    private func strength(_ candidate: ProximityCandidate, _ byAttenuation: Bool) -> Double {
        if byAttenuation, let attenuation = candidate.attenuation { return -attenuation }
        return candidate.rssi ?? -.infinity
    }
}

/// The naive rule for comparison: the EID whose latest single sample is the strongest wins, with no smoothing, gate
/// or margin. It is what the simulator measures ``ProximitySelector`` against.
public struct NaiveProximitySelector: Sendable {
    /// An EID not heard for longer than this is ignored.
    public var staleAfter: Duration
    private var latest: [EID: RSSIWindow.Sample] = [:]

    /// Creates an empty selector.
    public init(staleAfter: Duration = .milliseconds(600)) {
        self.staleAfter = staleAfter
    }

    /// Records a sighting, keeping only the newest sample per EID. Sightings without RSSI are ignored.
    public mutating func record(_ sighting: Sighting) {
        guard let rssi = sighting.rssi else { return }
        if let previous = latest[sighting.eid], previous.time > sighting.time { return }
        latest[sighting.eid] = .init(time: sighting.time, rssi: rssi, txPower: sighting.referencePower)
    }

    /// The EID with the strongest latest sample at `now`: `.selected` whenever anything fresh was heard.
    public func decision(now: Duration) -> ProximityDecision {
        let fresh = latest.filter { now - $0.value.time <= staleAfter && $0.value.time <= now }
        let best = fresh.max { lhs, rhs in
            lhs.value.rssi != rhs.value.rssi ? lhs.value.rssi < rhs.value.rssi : lhs.key > rhs.key
        }
        guard let (eid, sample) = best else { return .none }
        return .selected(
            .init(
                eid: eid,
                rssi: Double(sample.rssi),
                attenuation: sample.attenuation.map(Double.init),
                sampleCount: 1,
                lastSeen: sample.time
            )
        )
    }
}
