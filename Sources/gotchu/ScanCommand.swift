import ArgumentParser
import Foundation
import GotchuBlueZ
import GotchuCore
import GotchuSimulatedRadio
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `gotchu scan`: lists the EIDs in range, live.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for Gotchu advertisements through BlueZ and show the EIDs in range.",
        discussion: """
            Each row is one EID: its latest RSSI (dBm, closer to 0 is stronger), the
            advertiser's TX power, the attenuation (TX power - RSSI: lower is closer,
            and it compares across devices), the age of the last reception and how
            many were heard. RSSI "?" means the controller reported none (127).

            Examples:
              gotchu scan
              gotchu scan --rssi-threshold -60     # only strong (near) advertisers
              gotchu scan --json | jq .            # one JSON object per reception
              gotchu scan --json --record taps.jsonl --trace-number 3
                                                   # record one tap to replay with
                                                   # gotchu simulate --trace taps.jsonl

            Each JSON line is written as soon as it is received. --record appends the
            same receptions to a file as a recording for `gotchu simulate --trace`:
            time_ms counts from the start of this scan and every line carries the
            --trace-number, so record each tap (start the scan, walk up, tap) with
            its own number into the same file.

            The threshold is applied here, not in BlueZ: a BlueZ RSSI filter makes
            the kernel drop every report without RSSI, and is merged with the
            filters of other apps.
            """
    )

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Drop receptions weaker than this, in dBm (such as -60).", valueName: "dBm")
    )
    var rssiThreshold: Int16?

    @Option(help: ArgumentHelp("Service UUID: 16-bit (feed) or 128-bit.", valueName: "uuid"))
    var serviceUUID = "feed"

    @Flag(help: "Print one JSON object per reception instead of the live table.")
    var json = false

    @Option(help: ArgumentHelp("Append each reception to this file as a recording of one tap.", valueName: "file"))
    var record: String?

    @Option(help: ArgumentHelp("The trace number written with --record.", valueName: "N"))
    var traceNumber = 0

    @OptionGroup var options: BlueZCommandOptions

    func validate() throws {
        guard traceNumber >= 0 else { throw ValidationError("--trace-number must be 0 or more") }
        guard BluetoothUUID(serviceUUID) != nil else {
            throw ValidationError("--service-uuid must be a 16-bit (feed) or 128-bit Bluetooth UUID")
        }
    }

    func run() async throws {
        guard let uuid = BluetoothUUID(serviceUUID) else { throw ValidationError("invalid --service-uuid") }
        // JSON lines go to standard output, so only warnings may be logged alongside them.
        var logger = Logger(label: "gotchu.bluez")
        if json { logger.logLevel = .warning }
        let radio = try await BlueZRadio.connect(
            to: try options.dbusBus,
            configuration: .init(adapter: options.adapter),
            logger: logger
        )
        let recording: FileHandle?
        if let record {
            let descriptor = open(record, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else {
                await radio.close()
                throw CLIError("cannot open \(record): \(String(cString: strerror(errno)))")
            }
            recording = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        } else {
            recording = nil
        }
        let scanStart = await radio.now()
        let stream = try await radio.scan(ScanFilter(serviceUUID: uuid, minimumRSSI: rssiThreshold))
        let json = self.json
        let traceNumber = self.traceNumber
        let consumer = Task {
            var table: [EID: (sighting: Sighting, count: Int)] = [:]
            var lastDraw = Duration.zero
            for try await sighting in stream {
                if let recording {
                    var relative = sighting
                    relative.time = max(.zero, sighting.time - scanStart)
                    // One write per line, straight to the descriptor: a recording cut short loses no whole line.
                    recording.write(Data((TraceLine(trace: traceNumber, sighting: relative).json + "\n").utf8))
                }
                if json {
                    // Written straight to the descriptor, not through stdio's block buffer, so a pipe sees each
                    // reception as it happens.
                    StandardOutput.write(Self.jsonLine(sighting) + "\n")
                    continue
                }
                table[sighting.eid] = (sighting, (table[sighting.eid]?.count ?? 0) + 1)
                let now = await radio.now()
                if now - lastDraw >= .milliseconds(250) {
                    lastDraw = now
                    Self.draw(table, now: now)
                }
            }
        }
        await withTaskCancellationHandler {
            await waitForInterrupt()
        } onCancel: {
            consumer.cancel()
        }
        consumer.cancel()
        _ = await consumer.result
        let statistics = await radio.statistics()
        await radio.close()
        if !json {
            print(
                "\(statistics.sightings) receptions, \(statistics.belowThreshold) below threshold, "
                    + "\(statistics.malformed) malformed"
            )
        }
    }

    static func jsonLine(_ sighting: Sighting) -> String {
        func number(_ value: Int16?) -> String { value.map(String.init) ?? "null" }
        let milliseconds =
            sighting.time.components.seconds * 1000
            + sighting.time.components.attoseconds / 1_000_000_000_000_000
        return
            "{\"eid\":\"\(sighting.eid)\",\"rssi\":\(number(sighting.rssi)),\"tx_power\":\(number(sighting.txPower)),"
            + "\"attenuation\":\(number(sighting.attenuation)),\"time_ms\":\(milliseconds),"
            + (sighting.calibratedRSSI.map { "\"calibrated_rssi\":\($0)," } ?? "")
            + "\"source\":\"\(jsonEscaped(sighting.source))\"}"
    }

    /// `text` as the inside of a JSON string: the source comes from the system bus and is not trusted to be plain.
    static func jsonEscaped(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value):
                escaped += String(format: "\\u%04x", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    static func draw(_ table: [EID: (sighting: Sighting, count: Int)], now: Duration) {
        func column(_ text: String, _ width: Int) -> String {
            String(repeating: " ", count: max(0, width - text.count)) + text
        }
        func value(_ number: Int16?) -> String { number.map(String.init) ?? "?" }
        var lines = ["\u{1B}[H\u{1B}[2J" + "EID          RSSI   TX  ATTEN    AGE  SEEN"]
        let rows = table.values.sorted { ($0.sighting.attenuation ?? .max) < ($1.sighting.attenuation ?? .max) }
        for row in rows {
            let age = now - row.sighting.time
            let ageText = "\(age.components.seconds).\(age.components.attoseconds / 100_000_000_000_000_000)s"
            lines.append(
                row.sighting.eid.rawValue + " " + column(value(row.sighting.rssi), 5) + " "
                    + column(value(row.sighting.txPower), 4) + " " + column(value(row.sighting.attenuation), 6) + " "
                    + column(ageText, 6) + " " + column(String(row.count), 5)
            )
        }
        print(lines.joined(separator: "\n"))
    }
}
