import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuSimulatedRadio

struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Measure proximity selection and tap-to-paid over many simulated trials.",
        discussion: """
            Each trial places terminals and a payer (counter: the payer 0.2 m from one terminal, two \
            others 1.5-3 m away; crowded: 10 terminals in a 10 x 10 m hall, the payer 0.1-0.3 m from \
            one), runs the radio on a virtual clock from the moment the payer starts scanning, and \
            records what our selector and a naive single-sample max-RSSI rule decide. Unless \
            --no-ledger, every auto-selected trial then pays the selected terminal's session through \
            a ledger server in this process (resolve, lock, send over HTTP), and that measured time \
            is added to the selection time: tap-to-paid.

            Example: gotchu simulate crowded --trials 5000 --sigma 8 --json

            With --trace FILE it instead replays a recording (JSON lines {"trace": N, "eid": "...", \
            "rssi": INT|null, "tx_power": INT|null, "time_ms": INT}, as `gotchu scan --json --record` \
            writes them; "-" reads standard input) through the payer's own selection, each trace from \
            time 0, and prints one JSON line per trace: {"trace": N, "decision": \
            "selected"|"ambiguous"|"none", "eid": ...|null, "candidates": [...nearest first], \
            "decided_at_ms": INT|null}. --record-traces FILE writes the simulated trials as such a \
            recording (the extra "terminal" field is 0 for the terminal the payer stood at).

            Examples:
              gotchu simulate --trace taps.jsonl
              gotchu simulate counter --trials 20 --record-traces counter.jsonl --no-ledger
            """
    )

    @Argument(help: "Scenario: counter or crowded.")
    var scenario: Scenario.Layout = .counter

    @Option(help: "Number of trials.")
    var trials = 1_000

    @Option(help: "Seed of trial 0; the same seed replays the same trials.")
    var seed: UInt64 = 1

    @Option(help: ArgumentHelp("Shadowing standard deviation, dB.", valueName: "dB"))
    var sigma = 6.0

    @Option(name: .customLong("path-loss-exponent"), help: ArgumentHelp("Path-loss exponent n.", valueName: "n"))
    var pathLossExponent = 2.0

    @Option(help: ArgumentHelp("Advertising interval, milliseconds.", valueName: "ms"))
    var interval = 100

    @Option(help: ArgumentHelp("Packet loss, 0 to 1.", valueName: "fraction"))
    var loss = 0.1

    @Option(help: ArgumentHelp("Selector margin over the runner-up, dB.", valueName: "dB"))
    var margin: Double?

    @Option(help: ArgumentHelp("Selector smoothing window, milliseconds.", valueName: "ms"))
    var window: Int?

    @Flag(help: "Measure selection only, without the ledger round trip.")
    var noLedger = false

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Option(
        help: ArgumentHelp(
            "Replay a recording of taps instead of simulating (\"-\": standard input).",
            valueName: "file"
        )
    )
    var trace: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("With --trace: replay as `gotchu pay --rssi-threshold` would select.", valueName: "dBm")
    )
    var rssiThreshold: Int16?

    @Option(help: ArgumentHelp("Counter layout: the payer's distance to the terminal it pays, metres.", valueName: "m"))
    var distance: Double?

    @Option(help: "Room: easy (tunable with --sigma and --path-loss-exponent) or hard (fitted to measurements).")
    var model: RoomModel = .easy

    @Option(
        help: ArgumentHelp("Selector: a rise over the runner-up that stands in for the distant lead.", valueName: "dB")
    )
    var rise: Double?

    @Option(
        help: ArgumentHelp("The payer walks up from 1 m further out over this long, milliseconds.", valueName: "ms")
    )
    var approach: Int?

    @Flag(help: "Terminals of mixed makes: each announces and radiates one of -8, -4, 0, 4 or 8 dBm.")
    var mixedMakes = false

    @Flag(help: "Print the comparison table instead: model x distance x rule.")
    var table = false

    @Option(
        name: .customLong("table-model"),
        help: "With --table: only this model (easy, hard or mixed); repeat for several. Default: all three."
    )
    var tableModels: [TableModel] = []

    @Option(
        name: .customLong("table-distance"),
        help: "With --table: only this distance (contact, 20cm, 30cm, 30cm-walking); repeat for several."
    )
    var tableDistances: [String] = []

    @Option(
        help: ArgumentHelp(
            "Terminals carry calibrations, off by a normal error of this deviation (dB, such as 3).",
            valueName: "dB"
        )
    )
    var calibrationError: Double?

    @Option(help: ArgumentHelp("Selector: contact range against a calibration (attenuation).", valueName: "dB"))
    var calibratedContact: Double?

    @Option(help: ArgumentHelp("Selector: the tap's plateau against a calibration (attenuation).", valueName: "dB"))
    var plateau: Double?

    @Flag(help: "Selector: no plateau rule (calibrated terminals then need the distant lead outside contact range).")
    var noPlateau = false

    @Option(help: ArgumentHelp("Selector: the rise over the runner-up the plateau rule needs.", valueName: "dB"))
    var tapRise: Double?

    @Option(help: ArgumentHelp("Selector: the lead outside contact range, calibrated.", valueName: "dB"))
    var calibratedDistantMargin: Double?

    @Option(help: ArgumentHelp("Also write the simulated trials' sightings as a recording.", valueName: "file"))
    var recordTraces: String?

    /// Recordings larger than this are refused rather than read into memory.
    static let maximumTraceBytes = 64 << 20

    func validate() throws {
        guard trials > 0 else { throw ValidationError("--trials must be positive") }
        if let rssiThreshold, !(-127...20).contains(rssiThreshold) {
            throw ValidationError("--rssi-threshold must be between -127 and 20 dBm")
        }
        if let rise, !(0...60).contains(rise) { throw ValidationError("--rise must be from 0 to 60 dB") }
        if let approach, !(1...10_000).contains(approach) {
            throw ValidationError("--approach must be from 1 to 10000 milliseconds")
        }
        if let bad = tableDistances.first(where: { !SimulationTable.distanceNames.contains($0) }) {
            throw ValidationError(
                "unknown --table-distance \(bad); one of \(SimulationTable.distanceNames.joined(separator: ", "))"
            )
        }
        if let calibrationError, !(0...20).contains(calibrationError) {
            throw ValidationError("--calibration-error must be from 0 to 20 dB")
        }
        for value in [calibratedContact, plateau, tapRise, calibratedDistantMargin].compactMap({ $0 })
        where !(0...100).contains(value) {
            throw ValidationError(
                "--calibrated-contact, --plateau, --tap-rise and --calibrated-distant-margin must be from 0 to 100 dB"
            )
        }
        if let distance, !(0.01...5).contains(distance) {
            throw ValidationError("--distance must be from 0.01 to 5 metres")
        }
        guard sigma >= 0, pathLossExponent > 0, interval >= 20, (0..<1).contains(loss) else {
            throw ValidationError("need --sigma ≥ 0, --path-loss-exponent > 0, --interval ≥ 20 ms, 0 ≤ --loss < 1")
        }
    }

    func run() async throws {
        if let trace {
            try replay(trace)
            return
        }
        if table {
            let models = tableModels.isEmpty ? TableModel.allCases : tableModels
            Console().line(
                SimulationTable.run(trials: trials, seed: seed, models: models, distances: tableDistances).markdown
            )
            return
        }
        var model = AirModel.easy
        model.shadowingSigma = sigma
        model.pathLossExponent = pathLossExponent
        if self.model == .hard { model = .hard }
        model.packetLoss = loss
        var selector = ProximitySelector.Configuration()
        if let margin { selector.margin = margin }
        if let window { selector.window = .milliseconds(window) }
        if let rise { selector.minimumRise = rise }
        if let calibratedContact { selector.calibratedContactAttenuation = calibratedContact }
        if let plateau { selector.calibratedPlateauAttenuation = plateau }
        if noPlateau { selector.calibratedPlateauAttenuation = nil }
        if let tapRise { selector.tapRise = tapRise }
        if let calibratedDistantMargin { selector.calibratedDistantMargin = calibratedDistantMargin }
        var scenario = Scenario(
            layout: scenario,
            model: model,
            selector: selector,
            advertisingInterval: .milliseconds(interval),
            trials: trials,
            seed: seed,
            mixedMakes: mixedMakes
        )
        if let distance { scenario.intendedDistance = distance...distance }
        if let approach { scenario.approach = .milliseconds(approach) }
        scenario.calibrationError = calibrationError
        // The same trials in the harder room, so nobody tunes to the easy one.
        var hardScenario = scenario
        hardScenario.model = .hard
        hardScenario.model.packetLoss = loss
        let hard = TrialRunner.run(hardScenario)
        if let recordTraces {
            let lines = (0..<trials).flatMap { TrialRunner.record(scenario, index: $0) }
            let text = lines.map { $0.json + "\n" }.joined()
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: recordTraces))
            } catch {
                throw CLIError("cannot write \(recordTraces): \(error.localizedDescription)")
            }
        }
        let started = ContinuousClock.now
        let report = TrialRunner.run(scenario)
        let selectionTime = ContinuousClock.now - started
        let ledger = noLedger ? nil : try await LedgerTrials.run(report)
        let result = SimulationResult(
            scenario: scenario,
            selector: SelectorSummary(report.results.map(\.selector), extraLatency: ledger?.durations),
            naive: SelectorSummary(report.results.map(\.naive), extraLatency: ledger?.durations),
            hard: HardModelResult(model: hardScenario.model, selector: hard.selector, naive: hard.naive),
            ledgerPayments: ledger?.payments,
            ledgerInvariantsHold: ledger?.healthy,
            selectionWallSeconds: selectionTime / .seconds(1)
        )
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            Console().line(String(decoding: try encoder.encode(result), as: UTF8.self))
        } else {
            Console().line(result.table)
        }
        if ledger?.healthy == false { throw CLIError("the ledger's invariants do not hold after the run") }
    }
}

extension SimulateCommand {
    /// Replays every trace of a recording through the payer's selection and prints one decision per trace.
    func replay(_ path: String) throws {
        let data: Data
        do {
            if path == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
                defer { try? handle.close() }
                data = try handle.read(upToCount: Self.maximumTraceBytes + 1) ?? Data()
            }
        } catch {
            throw CLIError("cannot read \(path): \(error.localizedDescription)")
        }
        guard data.count <= Self.maximumTraceBytes else {
            throw CLIError("\(path) is larger than \(Self.maximumTraceBytes >> 20) MiB")
        }
        guard let text = String(validating: data, as: UTF8.self) else {
            throw CLIError("\(path) is not UTF-8 text")
        }
        let lines: [TraceLine]
        do {
            lines = try TraceReplay.parse(text)
        } catch {
            throw CLIError("\(path): \(error)")
        }
        let console = Console()
        let configuration = PaySelection.configuration(rssiThreshold: rssiThreshold)
        for (number, sightings) in TraceReplay.traces(lines) {
            let heard = sightings.filter { PaySelection.accepts($0, rssiThreshold: rssiThreshold) }
            console.line(TraceReplay.replay(heard, configuration: configuration).json(trace: number))
        }
    }
}

/// Pays, through a real ledger server, the terminal each trial auto-selected.
private enum LedgerTrials {
    struct Measured {
        var durations: [Duration]
        var payments: Int
        var healthy: Bool
    }

    static func run(_ report: TrialReport) async throws -> Measured {
        let terminalCount = report.scenario.room(trial: 0).terminals.count
        return try await TemporaryLedger.with { ledger in
            try await ledger.serving { url in
                var terminals: [LedgerClient] = []
                for index in 0..<terminalCount {
                    terminals.append(try await login(url, "terminal\(index)@sim.example"))
                }
                let payer = try await login(url, "payer@sim.example")
                var durations: [Duration] = []
                var payments = 0
                for result in report.results {
                    guard let terminal = result.selector.terminal ?? result.naive.terminal,
                        result.selector.isAutoSelected || result.naive.isAutoSelected,
                        terminals.indices.contains(terminal)
                    else {
                        durations.append(.zero)
                        continue
                    }
                    if payments % 500 == 0 { _ = try await payer.fund(amountCents: 500 * 100) }
                    let session = try await terminals[terminal].createSession(amountCents: 100)
                    let start = ContinuousClock.now
                    let resolved = try await payer.resolve(eid: session.eid)
                    try await payer.lock(sid: resolved.sid)
                    _ = try await payer.send(sid: resolved.sid, idempotencyKey: "trial-\(result.trial)")
                    durations.append(ContinuousClock.now - start)
                    payments += 1
                }
                let audit = try await ledger.store.audit()
                return Measured(durations: durations, payments: payments, healthy: audit.isHealthy)
            }
        }
    }

    private static func login(_ url: URL, _ email: String) async throws -> LedgerClient {
        var client = LedgerClient(baseURL: url)
        client.token = try await client.devLogin(email: email).token
        return client
    }
}

/// What `gotchu simulate` reports.
private struct SimulationResult: Encodable {
    var scenario: Scenario
    var selector: SelectorSummary
    var naive: SelectorSummary
    /// The same trials in ``AirModel/hard``, selection only.
    var hard: HardModelResult
    var ledgerPayments: Int?
    var ledgerInvariantsHold: Bool?
    var selectionWallSeconds: Double

    var table: String {
        let model = scenario.model
        var lines = [
            "scenario \(scenario.layout.rawValue): \(selector.trials) trials, seed \(scenario.seed), "
                + String(
                    format: "σ %.1f dB, n %.1f, advertising %d ms, loss %.0f %%",
                    model.shadowingSigma,
                    model.pathLossExponent,
                    Int(scenario.advertisingInterval / .milliseconds(1)),
                    model.packetLoss * 100
                ),
            "",
            "                          ours       naive max-RSSI",
        ]
        func row(_ name: String, _ ours: String, _ naive: String) {
            lines.append(
                name.padding(toLength: 26, withPad: " ", startingAt: 0)
                    + ours.padding(toLength: 11, withPad: " ", startingAt: 0) + naive
            )
        }
        func percent(_ value: Double) -> String { String(format: "%.2f %%", value * 100) }
        func seconds(_ value: Double?) -> String { value.map { String(format: "%.2f s", $0) } ?? "-" }
        let label = ledgerPayments == nil ? "tap-to-select" : "tap-to-paid"
        row("auto-select coverage", percent(selector.coverage), percent(naive.coverage))
        row("wrong payee", percent(selector.wrongPayeeRate), percent(naive.wrongPayeeRate))
        row("ambiguous (list shown)", percent(selector.ambiguousRate), percent(naive.ambiguousRate))
        row("nothing near", percent(selector.noneRate), percent(naive.noneRate))
        row("\(label) p50", seconds(selector.latencyP50), seconds(naive.latencyP50))
        row("\(label) p95", seconds(selector.latencyP95), seconds(naive.latencyP95))
        row("\(label) p99", seconds(selector.latencyP99), seconds(naive.latencyP99))
        lines.append("")
        lines.append(
            String(
                format:
                    "the same trials in the harder room (σ %.1f dB, n %.1f, %.0f dB at 1 m, device offsets σ %.0f/%.0f dB, "
                    + "blocking %.0f %% of links up to %.0f dB), selection only:",
                hard.model.shadowingSigma,
                hard.model.pathLossExponent,
                hard.model.lossAtOneMetre,
                hard.model.transmitOffsetSigma,
                hard.model.receiveOffsetSigma,
                hard.model.bodyBlockingProbability * 100,
                hard.model.bodyBlockingMaximumLoss
            )
        )
        row("auto-select coverage", percent(hard.selector.coverage), percent(hard.naive.coverage))
        row("wrong payee", percent(hard.selector.wrongPayeeRate), percent(hard.naive.wrongPayeeRate))
        row("ambiguous (list shown)", percent(hard.selector.ambiguousRate), percent(hard.naive.ambiguousRate))
        row("tap-to-select p95", seconds(hard.selector.latencyP95), seconds(hard.naive.latencyP95))
        lines.append("")
        if let ledgerPayments, let ledgerInvariantsHold {
            lines.append(
                "ledger: \(ledgerPayments) payments over HTTP; invariants \(ledgerInvariantsHold ? "hold" : "BROKEN")"
            )
        }
        lines.append(String(format: "selection simulated in %.2f s of wall time", selectionWallSeconds))
        return lines.joined(separator: "\n")
    }
}

/// The models `gotchu simulate --table --table-model` offers.
enum TableModel: String, ExpressibleByArgument, CaseIterable {
    case easy, hard, mixed
}

/// The rooms `gotchu simulate --model` offers.
enum RoomModel: String, ExpressibleByArgument, CaseIterable {
    case easy, hard
}

/// One model's figures in `gotchu simulate`'s report.
private struct HardModelResult: Encodable {
    var model: AirModel
    var selector: SelectorSummary
    var naive: SelectorSummary
}

/// `gotchu simulate --table`: every rule on the same trials, per model and distance.
enum SimulationTable {
    struct Row {
        var model: String
        var distance: String
        var rule: String
        var summary: SelectorSummary
    }

    /// The models compared: the easy one, the hard one, and the hard one with terminals of mixed makes.
    static let models: [TableModel: (name: String, model: AirModel, mixedMakes: Bool)] = [
        .easy: ("easy", .easy, false), .hard: ("hard", .hard, false), .mixed: ("hard, mixed makes", .hard, true),
    ]
    /// The payer's distances to the terminal it pays, and whether it walks up to it (from 1 m further out, in 1 s).
    static let distances: [(name: String, range: ClosedRange<Double>, approach: Duration?)] = [
        ("contact (1-5 cm)", 0.01...0.05, nil), ("20 cm", 0.2...0.2, nil), ("30 cm", 0.3...0.3, nil),
        ("30 cm, walking up", 0.3...0.3, .seconds(1)),
    ]
    /// `--table-distance`: the distances by short name.
    static let distanceNames = ["contact", "20cm", "30cm", "30cm-walking"]
    /// How far off a calibration is in the "new" rows, dB (σ): what averaging a minute of readings at 1 m leaves.
    static let calibrationError = 3.0

    struct Table {
        var rows: [Row]
        var trials: Int
        var seed: UInt64

        /// A Markdown table, one row per model, distance and rule.
        var markdown: String {
            func percent(_ value: Double) -> String { String(format: "%.2f %%", value * 100) }
            var lines = [
                "counter layout, two other terminals 1.5-3 m away, \(trials) trials per row, seed \(seed); "
                    + "new: terminals calibrated (error σ \(SimulationTable.calibrationError) dB), today's rule otherwise; "
                    + "95 % Wilson interval of the wrong-payee rate",
                "",
                "| model | distance | rule | coverage | wrong payee | 95 % CI | ambiguous | p95 decision |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for row in rows {
                let p95 = row.summary.latencyP95.map { String(format: "%.2f s", $0) } ?? "-"
                let (low, high) = SimulationTable.wilson(row.summary.wrongPayeeRate, trials: row.summary.trials)
                lines.append(
                    "| \(row.model) | \(row.distance) | \(row.rule) | \(percent(row.summary.coverage)) | "
                        + "\(percent(row.summary.wrongPayeeRate)) | \(percent(low))-\(percent(high)) | "
                        + "\(percent(row.summary.ambiguousRate)) | \(p95) |"
                )
            }
            return lines.joined(separator: "\n")
        }
    }

    /// The 95 % Wilson score interval of a rate measured over `trials`.
    static func wilson(_ rate: Double, trials: Int) -> (Double, Double) {
        guard trials > 0 else { return (0, 1) }
        let (n, z) = (Double(trials), 1.959964)
        let centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
        let half = z / (1 + z * z / n) * (rate * (1 - rate) / n + z * z / (4 * n * n)).squareRoot()
        return (max(0, centre - half), min(1, centre + half))
    }

    static func run(trials: Int, seed: UInt64, models chosen: [TableModel], distances names: [String] = []) -> Table {
        var rows: [Row] = []
        let picked = distances.indices.filter { names.isEmpty || names.contains(distanceNames[$0]) }.map {
            distances[$0]
        }
        for (modelName, model, mixedMakes) in chosen.compactMap({ models[$0] }) {
            for (distanceName, range, approach) in picked {
                var scenario = Scenario(
                    layout: .counter,
                    model: model,
                    selector: .init(),
                    trials: trials,
                    seed: seed,
                    intendedDistance: range,
                    mixedMakes: mixedMakes,
                    approach: approach
                )
                let today = TrialRunner.run(scenario)
                scenario.calibrationError = calibrationError
                let calibrated = TrialRunner.run(scenario)
                for (rule, summary) in [
                    ("naive", today.naive), ("today", today.selector), ("new", calibrated.selector),
                ] {
                    rows.append(Row(model: modelName, distance: distanceName, rule: rule, summary: summary))
                }
            }
        }
        return Table(rows: rows, trials: trials, seed: seed)
    }
}
