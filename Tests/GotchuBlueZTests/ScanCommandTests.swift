import Foundation
import GotchuDBus
import GotchuTesting
import Testing

@Suite("gotchu scan --json against a fake bluetoothd", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct ScanCommandTests {
    @Test("each reception is written at once, to the pipe and to the recording, while the scan runs")
    func jsonLinesAreFlushedAndRecorded() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let recording = processes.directory.url.appendingPathComponent("taps.jsonl")
        try await withFakeBlueZ { bus, fake, _ in
            let scan = try processes.start(
                ["scan", "--json", "--bus", bus.address, "--record", recording.path, "--trace-number", "5"],
                user: "scanner"
            )
            let started = try await eventually { await fake.calls(named: "StartDiscovery").count == 1 }
            #expect(started)
            try await fake.addDevice(
                "dev_00_00_00_00_00_01",
                properties: ["RSSI": .int16(-48), "TxPower": .int16(4), "ServiceData": serviceData("a1b2c3d4e5")]
            )
            // A handful of bytes on a pipe: without a flush per line they would sit in stdio's buffer until exit.
            let line = try await scan.waitForLine(timeout: .seconds(30)) { $0.contains("a1b2c3d4e5") }
            #expect(scan.isRunning)
            #expect(line.contains(#""rssi":-48,"tx_power":4,"attenuation":52"#))
            let recorded = try await eventually(timeout: .seconds(30)) { Self.read(recording).contains("a1b2c3d4e5") }
            #expect(recorded)
            try await scan.stop(signal: SIGINT)
        }
        let text = Self.read(recording)
        #expect(text.hasPrefix(#"{"trace":5,"eid":"a1b2c3d4e5","rssi":-48,"tx_power":4,"time_ms":"#))
        #expect(text.hasSuffix("}\n"))
    }

    static func read(_ file: URL) -> String {
        (try? String(contentsOf: file, encoding: .utf8)) ?? ""
    }
}
