import ArgumentParser
import Foundation
import GotchuQR

struct BenchQRCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "qr",
        abstract: "How long making the QR code of a checkout address takes: encoding, SVG and terminal text.",
        discussion: """
            Encodes --url (by default the longest checkout address of a 63-character host name: \
            https://, the host, /p/ and an EID; 84 bytes) --iterations times at error correction level M, \
            the mask chosen by penalty as the server does, and renders each symbol as the SVG that \
            GET /p/{eid}/qr.svg serves and as the half blocks of gotchu receive --qr, timing each step on \
            its own. Prints the median and 95th percentile of each, after --warmup untimed rounds.
            """
    )

    /// `https://` + a 63-character host + `/p/` + an EID: the longest checkout address of a host name of one
    /// DNS label's length.
    static let longestURL = "https://" + String(repeating: "a", count: 59) + ".com/p/0123456789"

    @Option(help: ArgumentHelp("The text to encode.", valueName: "url"))
    var url = longestURL

    @Option(help: "Timed rounds.")
    var iterations = 2_000

    @Option(help: "Untimed rounds first.")
    var warmup = 200

    func validate() throws {
        guard iterations > 0, warmup >= 0 else {
            throw ValidationError("--iterations must be positive and --warmup not negative")
        }
    }

    func run() throws {
        let url = self.url
        let first = try QRCode(encoding: url, correction: .medium)
        print(
            "QR code of \(url.utf8.count) bytes: version \(first.version) (\(first.size)×\(first.size) modules), "
                + "mode \(first.mode), level M, mask \(first.mask); SVG \(first.svg().utf8.count) bytes"
        )
        var encoding: [Duration] = []
        var svg: [Duration] = []
        var terminal: [Duration] = []
        encoding.reserveCapacity(iterations)
        svg.reserveCapacity(iterations)
        terminal.reserveCapacity(iterations)
        // Summed and printed, so no step can be left out as unused.
        var checksum = 0
        let clock = ContinuousClock()
        for round in 0..<(warmup + iterations) {
            let start = clock.now
            let code = try QRCode(encoding: url, correction: .medium)
            let encoded = clock.now
            let image = code.svg()
            let drawn = clock.now
            let text = code.terminalText()
            let written = clock.now
            checksum &+= code.mask &+ image.utf8.count &+ text.utf8.count
            guard round >= warmup else { continue }
            encoding.append(encoded - start)
            svg.append(drawn - encoded)
            terminal.append(written - drawn)
        }
        for (name, samples) in [("encode", encoding), ("SVG", svg), ("terminal text", terminal)] {
            let sorted = samples.sorted()
            print(
                name.padding(toLength: 14, withPad: " ", startingAt: 0)
                    + String(
                        format: "median %8.1f µs   p95 %8.1f µs",
                        Self.microseconds(sorted[sorted.count / 2]),
                        Self.microseconds(sorted[min(sorted.count - 1, sorted.count * 95 / 100)])
                    )
            )
        }
        print("(\(iterations) rounds; checksum \(checksum))")
    }

    static func microseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1e6 + Double(attoseconds) / 1e12
    }
}
