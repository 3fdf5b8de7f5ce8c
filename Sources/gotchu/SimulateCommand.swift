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

    @Option(help: ArgumentHelp("Also write the simulated trials' sightings as a recording.", valueName: "file"))
    var recordTraces: String?

    /// Recordings larger than this are refused rather than read into memory.
    static let maximumTraceBytes = 64 << 20

    func validate() throws {
        guard trials > 0 else { throw ValidationError("--trials must be positive") }
        if let rssiThreshold, !(-127...20).contains(rssiThreshold) {
            throw ValidationError("--rssi-threshold must be between -127 and 20 dBm")
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
        var model = AirModel()
        model.shadowingSigma = sigma
        model.pathLossExponent = pathLossExponent
        model.packetLoss = loss
        var selector = ProximitySelector.Configuration()
        if let margin { selector.margin = margin }
        if let window { selector.window = .milliseconds(window) }
        let scenario = Scenario(
            layout: scenario,
            model: model,
            selector: selector,
            advertisingInterval: .milliseconds(interval),
            trials: trials,
            seed: seed
        )
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
        if let ledgerPayments, let ledgerInvariantsHold {
            lines.append(
                "ledger: \(ledgerPayments) payments over HTTP; invariants \(ledgerInvariantsHold ? "hold" : "BROKEN")"
            )
        }
        lines.append(String(format: "selection simulated in %.2f s of wall time", selectionWallSeconds))
        return lines.joined(separator: "\n")
    }
}
