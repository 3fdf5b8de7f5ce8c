import Foundation
import GotchuCore
import GotchuSimulatedRadio
import Testing

@Suite(.timeLimit(.minutes(10))) struct TraceReplayTests {
    /// The example recordings shipped in docs/traces, made with `gotchu simulate --record-traces`.
    static let traces = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/traces")

    @Test func linesRoundTrip() throws {
        let line = TraceLine(
            trace: 7,
            sighting: Sighting(
                eid: EID(rawValue: "0123456789")!,
                rssi: -41,
                txPower: nil,
                time: .milliseconds(1250),
                source: "x"
            ),
            terminal: 2
        )
        let parsed = try TraceReplay.parse(line.json + "\n")
        #expect(parsed.count == 1)
        #expect(parsed[0].trace == 7)
        #expect(parsed[0].terminal == 2)
        #expect(parsed[0].sighting.eid == line.sighting.eid)
        #expect(parsed[0].sighting.rssi == -41)
        #expect(parsed[0].sighting.txPower == nil)
        #expect(parsed[0].sighting.time == .milliseconds(1250))
    }

    @Test func scanOutputWithATraceNumberIsARecording() throws {
        // What `gotchu scan --json` prints, with the trace number added: the extra fields are ignored.
        let text = """
            {"trace":3,"eid":"00000000ff","rssi":null,"tx_power":4,"attenuation":null,"time_ms":0,"source":"/org/bluez/hci0/dev_X"}
            {"trace":3,"eid":"00000000ff","rssi":-38,"tx_power":4,"attenuation":42,"time_ms":95,"source":"/org/bluez/hci0/dev_X"}
            """
        let lines = try TraceReplay.parse(text)
        #expect(lines.map(\.sighting.rssi) == [nil, -38])
        #expect(lines.map(\.sighting.txPower) == [4, 4])
    }

    @Test(
        "Malformed lines are refused with their line number",
        arguments: [
            (
                "{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":-40,\"tx_power\":null,\"time_ms\":5}\n\nnot json", 3,
                "not valid JSON"
            ),
            ("{\"trace\":1,\"rssi\":-40,\"time_ms\":5}", 1, "missing eid"),
            ("{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":\"-40\",\"time_ms\":5}", 1, "rssi has the wrong type"),
            ("{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":-40.5,\"time_ms\":5}", 1, "rssi must be an integer"),
            ("{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":-400,\"time_ms\":5}", 1, "outside -127...20"),
            ("{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":-40,\"tx_power\":200,\"time_ms\":5}", 1, "tx_power 200"),
            ("{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":-40,\"time_ms\":-5}", 1, "time_ms"),
            ("{\"trace\":-1,\"eid\":\"0123456789\",\"rssi\":-40,\"time_ms\":5}", 1, "trace"),
            ("{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":-40,\"time_ms\":5}\n[1,2]", 2, "not a JSON object"),
            ("{\"trace\":1,\"eid\":\"ABCDEF0123\",\"rssi\":-40,\"time_ms\":5}", 1, "eid must be 10 lowercase"),
            (
                "{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":-40,\"time_ms\":50}\n"
                    + "{\"trace\":2,\"eid\":\"0123456789\",\"rssi\":-40,\"time_ms\":10}\n"
                    + "{\"trace\":1,\"eid\":\"0123456789\",\"rssi\":-40,\"time_ms\":20}",
                3, "time order"
            ),
            (String(repeating: " ", count: 5000) + "{}", 1, "longer than"),
        ]
    )
    func malformed(text: String, line: Int, reason: String) {
        #expect {
            try TraceReplay.parse(text)
        } throws: { error in
            guard let error = error as? TraceError else { return false }
            return error.line == line && error.description.contains("line \(line): ") && error.reason.contains(reason)
        }
    }

    @Test func anEmptyTraceDecidesNothing() {
        let decision = TraceReplay.replay([])
        #expect(decision.kind == .none)
        #expect(decision.decidedAt == nil)
        #expect(
            decision.json(trace: 4) == #"{"trace":4,"decision":"none","eid":null,"candidates":[],"decided_at_ms":null}"#
        )
    }

    /// The replay and the trial runner drive the selector independently (the replay through the payer's own state
    /// machine, with its ticks); on the same sightings they must agree.
    @Test(arguments: [Scenario.Layout.counter, .crowded])
    func replayAgreesWithTheTrialRunner(layout: Scenario.Layout) throws {
        var scenario = Scenario(layout: layout, trials: layout == .counter ? 150 : 40, seed: 77)
        scenario.model.shadowingSigma = 9
        for index in 0..<scenario.trials {
            let recording = TrialRunner.record(scenario, index: index)
            let terminal = Dictionary(
                recording.map { ($0.sighting.eid, $0.terminal!) },
                uniquingKeysWith: { a, _ in a }
            )
            let decision = TraceReplay.replay(recording.map(\.sighting))
            let result = TrialRunner.runTrial(scenario, index: index)
            switch result.selector.kind {
            case .correct, .wrongPayee:
                #expect(decision.kind == .selected, "trial \(index)")
                #expect(decision.eid.flatMap { terminal[$0] } == result.selector.terminal, "trial \(index)")
                #expect(decision.decidedAt! <= result.selector.latency!, "trial \(index)")
            case .ambiguous:
                #expect(decision.kind == .ambiguous, "trial \(index)")
                #expect(decision.candidates.first.flatMap { terminal[$0.eid] } == result.selector.terminal)
            case .none:
                #expect(decision.kind != .selected, "trial \(index)")
            }
        }
    }

    /// Recordings of calibrated terminals shipped with the tests, made with `gotchu simulate --model hard
    /// --calibration-error 3 --record-traces` (contact range, seed 4242; 30 cm with mixed makes, seed 4343), with
    /// the decisions `gotchu simulate --trace` printed for them.
    static let recordings = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Recordings")

    @Test(arguments: [("counter-hard-calibrated-contact", 8), ("counter-mixed-calibrated-30cm", 3)])
    func calibratedRecordingsReplayAsRecorded(name: String, selected: Int) throws {
        let text = try String(contentsOf: Self.recordings.appendingPathComponent("\(name).jsonl"), encoding: .utf8)
        let expected = try String(
            contentsOf: Self.recordings.appendingPathComponent("\(name).decisions.jsonl"),
            encoding: .utf8
        )
        let lines = try TraceReplay.parse(text)
        #expect(lines.allSatisfy { $0.sighting.calibratedRSSI != nil })
        let terminal = Dictionary(lines.map { ($0.sighting.eid, $0.terminal!) }, uniquingKeysWith: { a, _ in a })
        let decisions = TraceReplay.traces(lines).map { ($0.trace, TraceReplay.replay($0.sightings)) }
        #expect(decisions.map { $0.1.json(trace: $0.0) + "\n" }.joined() == expected)
        #expect(decisions.count { $0.1.kind == .selected } == selected)
        #expect(!decisions.contains { $0.1.kind == .selected && terminal[$0.1.eid!] != 0 })
        // Without their calibrations the same sightings are judged on TX powers alone, and decide otherwise.
        #expect(Self.replayedWithoutCalibrations(lines) != decisions.map(\.1))
    }

    @Test func aCalibrationRoundTripsThroughARecording() throws {
        let line = TraceLine(
            trace: 1,
            sighting: Sighting(
                eid: EID(rawValue: "0123456789")!,
                rssi: -41,
                txPower: 0,
                time: .milliseconds(5),
                source: "trace 1",
                calibratedRSSI: -62
            )
        )
        #expect(line.json.contains("\"calibrated_rssi\":-62"))
        #expect(try TraceReplay.parse(line.json) == [line])
        #expect(throws: TraceError.self) {
            try TraceReplay.parse(
                #"{"trace":0,"eid":"0123456789","rssi":-40,"tx_power":0,"time_ms":0,"calibrated_rssi":300}"#
            )
        }
    }

    @Test(arguments: [
        ("counter-easy", 0), ("counter-sigma12", 1), ("counter-hard-contact", 0), ("counter-hard-30cm", 0),
    ])
    func shippedRecordingsReplayAsRecorded(name: String, wrongPayees: Int) throws {
        let text = try String(contentsOf: Self.traces.appendingPathComponent("\(name).jsonl"), encoding: .utf8)
        let expected = try String(
            contentsOf: Self.traces.appendingPathComponent("\(name).decisions.jsonl"),
            encoding: .utf8
        )
        let lines = try TraceReplay.parse(text)
        let terminal = Dictionary(lines.map { ($0.sighting.eid, $0.terminal!) }, uniquingKeysWith: { a, _ in a })
        let decisions = TraceReplay.traces(lines).map { ($0.trace, TraceReplay.replay($0.sightings)) }
        #expect(decisions.map { $0.1.json(trace: $0.0) + "\n" }.joined() == expected)
        // The recordings say which terminal the payer stood at. With 12 dB of shadowing the rule picks the wrong
        // terminal in one of the eight taps; elsewhere never.
        let wrong = decisions.count { $0.1.kind == .selected && terminal[$0.1.eid!] != 0 }
        #expect(wrong == wrongPayees)
        #expect(decisions.count == 8)
    }

    /// Each trace of `lines` replayed as if its terminals carried no calibrations.
    static func replayedWithoutCalibrations(_ lines: [TraceLine]) -> [TraceReplay.Decision] {
        TraceReplay.traces(lines).map { trace in
            TraceReplay.replay(
                trace.sightings.map {
                    var plain = $0
                    plain.calibratedRSSI = nil
                    return plain
                }
            )
        }
    }

    /// Taps made of measured phone-to-phone RSSI (docs/traces/measured): the payer 20 cm from the terminal it means,
    /// the others 1.6-4 m or 0.8-1.4 m away, every terminal calibrated at 1 m.
    static let measured = traces.appendingPathComponent("measured")

    @Test(arguments: [("hand-20cm", 24, 4), ("hand-20cm-others-near", 26, 3)])
    func measuredRecordingsReplayAsRecorded(name: String, calibrated: Int, uncalibrated: Int) throws {
        let text = try String(contentsOf: Self.measured.appendingPathComponent("\(name).jsonl"), encoding: .utf8)
        let expected = try String(
            contentsOf: Self.measured.appendingPathComponent("\(name).decisions.jsonl"),
            encoding: .utf8
        )
        let lines = try TraceReplay.parse(text)
        #expect(lines.allSatisfy { $0.sighting.calibratedRSSI != nil && $0.sighting.txPower == nil })
        let terminal = Dictionary(lines.map { ($0.sighting.eid, $0.terminal!) }, uniquingKeysWith: { a, _ in a })
        let decisions = TraceReplay.traces(lines).map { ($0.trace, TraceReplay.replay($0.sightings)) }
        #expect(decisions.count == 40)
        #expect(decisions.map { $0.1.json(trace: $0.0) + "\n" }.joined() == expected)
        // On real air the phone 20 cm away never reads as the −50 dBm today's rule asks for: its calibration is what
        // lets the selector decide, and neither rule ever picks a terminal the payer did not mean.
        let plain = Self.replayedWithoutCalibrations(lines)
        #expect(decisions.count { $0.1.kind == .selected } == calibrated)
        #expect(plain.count { $0.kind == .selected } == uncalibrated)
        for decision in decisions.map(\.1) + plain where decision.kind == .selected {
            #expect(terminal[decision.eid!] == 0)
        }
        #expect(decisions.allSatisfy { $0.1.kind != .none })
    }
}
