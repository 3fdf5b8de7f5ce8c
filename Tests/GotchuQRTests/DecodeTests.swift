import GotchuTesting
import Testing

@testable import GotchuQR

/// The SVG documents, rendered and read by a real decoder, give back the exact text.
@Suite(.timeLimit(.minutes(10))) struct DecodeTests {
    struct Sample: Sendable, CustomTestStringConvertible {
        var text: String
        var correction: QRCode.ErrorCorrection
        var minimumVersion = 1
        var testDescription: String {
            "\(text.prefix(30).debugDescription) (\(text.utf8.count) bytes) at \(correction)"
        }
    }

    static let samples: [Sample] = [
        Sample(text: "https://pay.example.com/p/0123456789", correction: .low),
        Sample(text: "https://pay.example.com/p/0123456789", correction: .medium),
        Sample(text: "https://pay.example.com/p/0123456789", correction: .quartile),
        Sample(text: "https://pay.example.com/p/0123456789", correction: .high),
        Sample(text: "0123456789012345678901234567890123456789", correction: .medium),
        Sample(text: "HTTPS://PAY.EXAMPLE.COM/P/0123456789", correction: .medium),
        Sample(text: "Grüße aus Köln — 東京 😀 👩‍💻 e\u{301}", correction: .quartile),
        Sample(text: "<svg> & \"quotes\" 'apostrophes' </title>", correction: .medium),
        Sample(text: "a", correction: .high, minimumVersion: 7),
        Sample(text: String(repeating: "pay.example.com/p/0123456789 ", count: 12), correction: .medium),
        Sample(text: String(repeating: "ÄÖÜ-äöü ", count: 60), correction: .low),
        Sample(text: String(repeating: "1234567890", count: 300), correction: .low),
        Sample(text: String(repeating: "GOTCHU ", count: 250), correction: .high),
        Sample(text: String(repeating: "x", count: 2331), correction: .medium),
    ]

    @Test(arguments: samples)
    func readsBackTheText(_ sample: Sample) throws {
        guard let reader = Reader.find() else { return }
        let code = try QRCode(
            encoding: sample.text,
            correction: sample.correction,
            minimumVersion: sample.minimumVersion
        )
        try reader.expectReadsBack(code)
    }

    /// Every mask reads, not only the ones the penalty prefers.
    @Test(arguments: 0..<8)
    func everyMaskReads(_ mask: Int) throws {
        guard let reader = Reader.find() else { return }
        let text = "https://pay.example.com/p/\(mask)123456789"
        let code = try QRCode(encoding: text, correction: .medium, minimumVersion: 7, mask: mask)
        #expect(code.mask == mask)
        try reader.expectReadsBack(code)
    }

    /// Random texts of random lengths, modes, levels, masks and minimum versions read back exactly, and their
    /// symbols equal the reference encoder's; a text too long for version 40 is refused with the bits it needs. The
    /// seed is `GOTCHU_FUZZ_SEED`'s, or fresh.
    @Test func randomTextsReadBack() throws {
        guard let reader = Reader.find() else { return }
        var encoded: [(code: QRCode, job: ReferenceEncoder.Job)] = []
        let report = try Fuzz.run(iterations: 40, budget: .seconds(60)) { input in
            let text = input.randomText()
            let correction = input.pick(QRCode.ErrorCorrection.allCases)
            let mask = input.oneIn(2) ? nil : input.int(in: 0...7)
            let minimumVersion = input.oneIn(4) ? input.int(in: 1...40) : 1
            let code: QRCode
            do throws(QRCodeError) {
                code = try QRCode(encoding: text, correction: correction, minimumVersion: minimumVersion, mask: mask)
            } catch {
                let capacity = BlockStructure(version: 40, correction: correction).dataBits
                guard case .dataTooLong(let bits, capacity) = error, bits > capacity else {
                    Issue.record("\(error) for \(text.utf8.count) bytes at \(correction); \(input.replay)")
                    return
                }
                return
            }
            #expect(code.version >= minimumVersion)
            if let mask { #expect(code.mask == mask) }
            encoded.append(
                (code, .init(text: text, level: correction.letter, version: minimumVersion, mask: code.mask))
            )
            try reader.expectReadsBack(code, input.replay)
        }
        // Most texts are short enough to encode (five in six are at most 120 characters).
        #expect(!encoded.isEmpty, "\(report)")
        try expectMatchesReference(encoded, context: "fuzz seed \(report.seed)")
    }
}

extension FuzzInput {
    /// A text of one of several alphabets, usually short, now and then up to the largest symbol's capacity.
    mutating func randomText() -> String {
        let length = oneIn(6) ? int(in: 200...3000) : int(in: 1...120)
        let alphabet = int(in: 0...4)
        var text = ""
        for _ in 0..<length {
            let scalar: Unicode.Scalar
            switch alphabet {
            case 0: scalar = Unicode.Scalar(UInt8(ascii: "0") + UInt8(int(in: 0...9)))
            case 1: scalar = pick("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:".unicodeScalars)
            case 2: scalar = Unicode.Scalar(UInt8(int(in: 0x20...0x7E)))
            case 3: scalar = Unicode.Scalar(UInt8(int(in: 0...0x7F)))  // controls and NUL too
            default:
                let ranges: [ClosedRange<UInt32>] = [
                    0x20...0x7E, 0xA0...0x24F, 0x300...0x36F, 0x400...0x4FF, 0x4E00...0x9FFF, 0x1F300...0x1FAFF,
                ]
                scalar = Unicode.Scalar(UInt32.random(in: pick(ranges), using: &random))!
            }
            text.unicodeScalars.append(scalar)
        }
        return text
    }
}
