import Foundation
public import GotchuCore

/// One line of a recording: a sighting of one tap (`trace`), as `gotchu scan --json --record` writes it.
///
/// `{"trace": N, "eid": "…", "rssi": INT|null, "tx_power": INT|null, "time_ms": INT}`, plus `"calibrated_rssi": INT`
/// when the terminal carries a calibration; other fields (`attenuation`, `source`, the simulator's `terminal`) are
/// ignored. Times are milliseconds since the tap's scan started.
public struct TraceLine: Hashable, Sendable {
    /// Which tap the sighting belongs to.
    public var trace: Int
    /// The sighting, with ``Sighting/time`` relative to the start of the tap's scan.
    public var sighting: Sighting
    /// In recordings made by the simulator, the index of the terminal that sent it (0 is the one the payer meant).
    public var terminal: Int?

    /// A line of trace `trace` holding `sighting`; `terminal` is the index of the terminal that sent
    /// it in the simulator's recordings (0 is the one the payer meant).
    public init(trace: Int, sighting: Sighting, terminal: Int? = nil) {
        self.trace = trace
        self.sighting = sighting
        self.terminal = terminal
    }

    /// The line as JSON, without a line feed.
    public var json: String {
        func number(_ value: Int16?) -> String { value.map(String.init) ?? "null" }
        var text =
            "{\"trace\":\(trace),\"eid\":\"\(sighting.eid)\",\"rssi\":\(number(sighting.rssi)),"
            + "\"tx_power\":\(number(sighting.txPower)),\"time_ms\":\(TraceLine.milliseconds(sighting.time))"
        if let calibrated = sighting.calibratedRSSI { text += ",\"calibrated_rssi\":\(calibrated)" }
        if let terminal { text += ",\"terminal\":\(terminal)" }
        return text + "}"
    }

    /// Whole milliseconds of `time`, rounded down.
    public static func milliseconds(_ time: Duration) -> Int64 {
        time.components.seconds * 1000 + time.components.attoseconds / 1_000_000_000_000_000
    }
}

/// Why a recording was refused; ``description`` names the line.
public struct TraceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The 1-based line number.
    public var line: Int
    /// What is wrong with it.
    public var reason: String

    /// A trace refused at `line` (1-based), for `reason`.
    public init(line: Int, reason: String) {
        self.line = line
        self.reason = reason
    }

    public var description: String { "line \(line): \(reason)" }
}

/// Reads recordings and replays each tap through the payer's selection, exactly as `gotchu pay` runs it.
public enum TraceReplay {
    /// Lines longer than this are refused rather than parsed.
    public static let maximumLineLength = 4096
    /// The latest `time_ms` accepted: a tap is seconds long, a day is certainly a mistake.
    public static let maximumTimeMilliseconds: Int64 = 86_400_000

    /// Numbers are read as `Double` and checked here, so a fraction or a huge value gets a precise message.
    private struct Wire: Decodable {
        var trace: Double
        var eid: String
        var rssi: Double?
        var txPower: Double?
        var timeMs: Double
        var terminal: Double?
        var calibratedRSSI: Double?

        enum CodingKeys: String, CodingKey {
            case trace, eid, rssi, terminal
            case txPower = "tx_power"
            case calibratedRSSI = "calibrated_rssi"
            case timeMs = "time_ms"
        }
    }

    /// Parses a recording: one JSON object per line, blank lines skipped. Each trace's lines must be in time order;
    /// traces may interleave.
    public static func parse(_ text: String) throws(TraceError) -> [TraceLine] {
        var lines: [TraceLine] = []
        var lastTime: [Int: Int64] = [:]
        var number = 0
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            number += 1
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            let parsed = try parseLine(String(line), number: number)
            if let previous = lastTime[parsed.trace], previous > TraceLine.milliseconds(parsed.sighting.time) {
                throw TraceError(
                    line: number,
                    reason: "time_ms \(TraceLine.milliseconds(parsed.sighting.time)) is before \(previous), "
                        + "the previous sighting of trace \(parsed.trace): a trace's lines must be in time order"
                )
            }
            lastTime[parsed.trace] = TraceLine.milliseconds(parsed.sighting.time)
            lines.append(parsed)
        }
        return lines
    }

    /// Parses one line; `number` is only for the error.
    public static func parseLine(_ line: String, number: Int) throws(TraceError) -> TraceLine {
        guard line.utf8.count <= maximumLineLength else {
            throw TraceError(line: number, reason: "longer than \(maximumLineLength) bytes")
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(line.utf8))
        } catch let error as DecodingError {
            throw TraceError(line: number, reason: describe(error))
        } catch {
            throw TraceError(line: number, reason: "not a JSON object")
        }
        func integer(
            _ value: Double,
            _ field: String,
            _ range: ClosedRange<Int64>,
            _ unit: String = ""
        ) throws(TraceError)
            -> Int64
        {
            guard value.rounded() == value else {
                throw TraceError(line: number, reason: "\(field) must be an integer")
            }
            guard Double(range.lowerBound) <= value, value <= Double(range.upperBound) else {
                throw TraceError(
                    line: number,
                    reason:
                        "\(field) \(String(format: "%.0f", value)) is outside \(range.lowerBound)...\(range.upperBound)\(unit)"
                )
            }
            return Int64(value)
        }
        let trace = try integer(wire.trace, "trace", 0...Int64(Int32.max))
        guard let eid = EID(rawValue: wire.eid) else {
            throw TraceError(line: number, reason: "eid must be \(EID.length) lowercase hexadecimal characters")
        }
        // The HCI range of a reported RSSI is −127…20 dBm; a TX Power Level AD is −127…127 dBm.
        var rssi: Int16?
        if let value = wire.rssi { rssi = Int16(try integer(value, "rssi", -127...20, " dBm")) }
        var txPower: Int16?
        if let value = wire.txPower { txPower = Int16(try integer(value, "tx_power", -127...127, " dBm")) }
        // One signed byte on the air; whether it is plausible is the selector's judgement, as for a live sighting.
        var calibratedRSSI: Int16?
        if let value = wire.calibratedRSSI {
            calibratedRSSI = Int16(try integer(value, "calibrated_rssi", -128...127, " dBm"))
        }
        let time = try integer(wire.timeMs, "time_ms", 0...maximumTimeMilliseconds)
        var terminal: Int?
        if let value = wire.terminal { terminal = Int(try integer(value, "terminal", 0...1000)) }
        return TraceLine(
            trace: Int(trace),
            sighting: Sighting(
                eid: eid,
                rssi: rssi,
                txPower: txPower,
                time: .milliseconds(time),
                source: "trace \(trace)",
                calibratedRSSI: calibratedRSSI
            ),
            terminal: terminal
        )
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, _): return "missing \(key.stringValue)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            let field = path(context)
            return field.isEmpty ? "not a JSON object" : "\(field) has the wrong type"
        case .dataCorrupted(let context):
            let field = path(context)
            return field.isEmpty ? "not valid JSON" : "\(field) is not valid"
        @unknown default: return "not valid"
        }
    }

    /// The sightings of each trace, by trace number, in the order they were read.
    public static func traces(_ lines: [TraceLine]) -> [(trace: Int, sightings: [Sighting])] {
        var byTrace: [Int: [Sighting]] = [:]
        for line in lines { byTrace[line.trace, default: []].append(line.sighting) }
        return byTrace.keys.sorted().map { ($0, byTrace[$0]!) }
    }

    /// What the payer made of one tap.
    public struct Decision: Hashable, Sendable {
        /// The kinds of decision.
        public enum Kind: String, Hashable, Sendable {
            /// The payer auto-selected ``Decision/eid``.
            case selected
            /// The payer would show ``Decision/candidates`` to choose from.
            case ambiguous
            /// Nothing near.
            case none
        }

        /// The decision.
        public var kind: Kind
        /// The selected EID.
        public var eid: EID?
        /// The candidates at the time of the decision, nearest first.
        public var candidates: [ProximityCandidate]
        /// When the payer decided, from the start of the scan; `nil` when the recording ended first.
        public var decidedAt: Duration?

        /// A decision of `kind`, for `eid` when one was selected, with the candidates nearest first, and when it
        /// was made from the start of the scan (`nil` when the recording ended first).
        public init(kind: Kind, eid: EID?, candidates: [ProximityCandidate], decidedAt: Duration?) {
            self.kind = kind
            self.eid = eid
            self.candidates = candidates
            self.decidedAt = decidedAt
        }

        /// The decision as one JSON line (without the line feed) for trace `trace`.
        public func json(trace: Int) -> String {
            func number(_ value: Double?) -> String { value.map { String(format: "%.1f", $0) } ?? "null" }
            let list = candidates.map {
                "{\"eid\":\"\($0.eid)\",\"rssi\":\(number($0.rssi)),\"attenuation\":\(number($0.attenuation)),"
                    + "\"samples\":\($0.sampleCount)}"
            }
            return "{\"trace\":\(trace),\"decision\":\"\(kind.rawValue)\","
                + "\"eid\":\(eid.map { "\"\($0)\"" } ?? "null"),\"candidates\":[\(list.joined(separator: ","))],"
                + "\"decided_at_ms\":\(decidedAt.map { String(TraceLine.milliseconds($0)) } ?? "null")}"
        }
    }

    /// Replays one tap's sightings (times from the start of the scan, in order) through ``PayerStateMachine`` as the
    /// payer drives it: started at time 0, fed each sighting at its time and a tick every `tick` in between.
    ///
    /// The decision is the first one the machine takes: auto-select, the list after its selection timeout, or `none`
    /// at its scan timeout. When the recording ends first, the payer goes on ticking without sightings, as it does
    /// on the air, and may still select on a tick.
    public static func replay(
        _ sightings: [Sighting],
        configuration: PayerStateMachine.Configuration = .init(),
        tick: Duration = .milliseconds(100)
    ) -> Decision {
        var machine = PayerStateMachine(configuration: configuration)
        // Fed the same sightings, for the candidate list shown with an auto-selection or at the end.
        var shadow = ProximitySelector(configuration: configuration.selector)
        _ = machine.receive(.start, now: .zero)
        func decision(_ action: PayerStateMachine.Action, at time: Duration) -> Decision? {
            switch action {
            case .stopScanAndResolve(let eid):
                return Decision(
                    kind: .selected,
                    eid: eid,
                    candidates: shadow.rankedCandidates(now: time),
                    decidedAt: time
                )
            case .stopScanAndPresentCandidates(let candidates):
                return Decision(kind: .ambiguous, eid: nil, candidates: candidates, decidedAt: time)
            case .stopScanAndReport:
                return Decision(kind: .none, eid: nil, candidates: [], decidedAt: time)
            default:
                return nil
            }
        }
        var nextTick = tick
        for sighting in sightings {
            while nextTick < sighting.time {
                if let decided = decision(machine.receive(.tick, now: nextTick), at: nextTick) { return decided }
                nextTick += tick
            }
            shadow.record(sighting)
            if let decided = decision(machine.receive(.sighting(sighting), now: sighting.time), at: sighting.time) {
                return decided
            }
        }
        // The payer goes on ticking after the last sighting until it decides (a window that lets old samples go
        // may select on a tick), lists its candidates or gives up, as the trial runner's payer does.
        while !sightings.isEmpty, nextTick <= configuration.scanTimeout {
            if let decided = decision(machine.receive(.tick, now: nextTick), at: nextTick) { return decided }
            nextTick += tick
        }
        let ranked = shadow.rankedCandidates(now: sightings.last?.time ?? .zero)
        return Decision(kind: ranked.isEmpty ? .none : .ambiguous, eid: nil, candidates: ranked, decidedAt: nil)
    }
}
