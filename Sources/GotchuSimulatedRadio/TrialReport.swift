import GotchuCore

/// How one selector ended one trial.
public struct SelectionOutcome: Hashable, Sendable, Codable {
    /// The kinds of ending.
    public enum Kind: String, Hashable, Sendable, Codable {
        /// Auto-selected the terminal the payer stood at.
        case correct
        /// Auto-selected another terminal: the payment would go to the wrong payee if the payer did not read the
        /// confirmation.
        case wrongPayee
        /// Still ambiguous at the timeout: the payer would pick from a list.
        case ambiguous
        /// Nothing near at the timeout.
        case none
    }

    /// How the trial ended.
    public var kind: Kind
    /// The selected terminal's index (0 is the intended one); for ``Kind/ambiguous``, the terminal listed first.
    public var terminal: Int?
    /// Time from the start of the scan to the selection, when one was selected.
    public var latency: Duration?

    /// An outcome of `kind`, with the selected (or first listed) terminal's index, 0 being the intended one,
    /// and the time from the start of the scan to the selection, when there are ones.
    public init(kind: Kind, terminal: Int? = nil, latency: Duration? = nil) {
        self.kind = kind
        self.terminal = terminal
        self.latency = latency
    }

    /// Whether a terminal was auto-selected (correct or not).
    public var isAutoSelected: Bool { kind == .correct || kind == .wrongPayee }

    private enum CodingKeys: String, CodingKey {
        case kind, terminal, latency
    }

    /// Decodes an outcome whose latency is in seconds.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            kind: try container.decode(Kind.self, forKey: .kind),
            terminal: try container.decodeIfPresent(Int.self, forKey: .terminal),
            latency: try container.decodeIfPresent(secondsForKey: .latency)
        )
    }

    /// Encodes the outcome with its latency in seconds.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind, forKey: .kind)
        try container.encodeIfPresent(terminal, forKey: .terminal)
        try container.encodeIfPresent(seconds: latency, forKey: .latency)
    }
}

/// One trial, with both selectors fed the same sightings.
public struct TrialResult: Hashable, Sendable, Codable {
    /// The trial's index.
    public var trial: Int
    /// The seed the trial ran with.
    public var seed: UInt64
    /// The distance from the payer to the intended terminal at the start of the scan, in metres.
    public var intendedDistance: Double
    /// The distance to the nearest other terminal, in metres.
    public var runnerUpDistance: Double
    /// The proximity selector's outcome.
    public var selector: SelectionOutcome
    /// The naive max-RSSI selector's outcome.
    public var naive: SelectionOutcome
}

/// The figures for one selector over many trials.
public struct SelectorSummary: Hashable, Sendable, Codable {
    /// Trials run.
    public var trials: Int
    /// Fraction of trials that auto-selected a terminal (right or wrong) within the timeout.
    public var coverage: Double
    /// Fraction of trials that auto-selected a terminal other than the intended one.
    public var wrongPayeeRate: Double
    /// Fraction of trials still ambiguous at the timeout.
    public var ambiguousRate: Double
    /// Fraction of trials with nothing near at the timeout.
    public var noneRate: Double
    /// Among ambiguous trials, the fraction whose list shows the intended terminal first (`nil` when none was).
    public var ambiguousListedFirstRate: Double?
    /// Latency percentiles (nearest rank) in seconds over the auto-selected trials, `nil` when there were none.
    public var latencyP50: Double?
    /// See ``latencyP50``.
    public var latencyP95: Double?
    /// See ``latencyP50``.
    public var latencyP99: Double?

    /// Summarises outcomes. `extraLatency` adds, per trial, time measured elsewhere (for example the ledger round trip
    /// of resolve, lock and send) to the selection latency.
    public init(_ outcomes: [SelectionOutcome], extraLatency: [Duration]? = nil) {
        let count = max(outcomes.count, 1)
        func rate(_ kind: SelectionOutcome.Kind) -> Double {
            Double(outcomes.count { $0.kind == kind }) / Double(count)
        }
        trials = outcomes.count
        coverage = Double(outcomes.count(where: \.isAutoSelected)) / Double(count)
        wrongPayeeRate = rate(.wrongPayee)
        ambiguousRate = rate(.ambiguous)
        noneRate = rate(.none)
        let ambiguous = outcomes.filter { $0.kind == .ambiguous }
        ambiguousListedFirstRate =
            ambiguous.isEmpty ? nil : Double(ambiguous.count { $0.terminal == 0 }) / Double(ambiguous.count)
        let latencies = outcomes.indices.compactMap { index -> Double? in
            guard let latency = outcomes[index].latency else { return nil }
            return (latency + (extraLatency?[index] ?? .zero)).seconds
        }
        .sorted()
        func percentile(_ p: Double) -> Double? {
            guard !latencies.isEmpty else { return nil }
            let rank = Int((p * Double(latencies.count)).rounded(.up))
            return latencies[min(max(rank, 1), latencies.count) - 1]
        }
        latencyP50 = percentile(0.50)
        latencyP95 = percentile(0.95)
        latencyP99 = percentile(0.99)
    }
}

/// The result of running a ``Scenario``.
public struct TrialReport: Hashable, Sendable, Codable {
    /// What was run.
    public var scenario: Scenario
    /// The proximity selector's figures.
    public var selector: SelectorSummary
    /// The naive max-RSSI selector's figures, from the same sightings.
    public var naive: SelectorSummary
    /// Every trial, for callers that add their own measurements (see ``SelectorSummary/init(_:extraLatency:)``).
    public var results: [TrialResult]

    /// Builds the report from per-trial results.
    public init(scenario: Scenario, results: [TrialResult]) {
        self.scenario = scenario
        self.results = results
        self.selector = SelectorSummary(results.map(\.selector))
        self.naive = SelectorSummary(results.map(\.naive))
    }
}
