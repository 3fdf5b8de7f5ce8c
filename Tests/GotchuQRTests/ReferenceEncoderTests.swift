import Testing

@testable import GotchuQR

/// The symbols match those of an independent encoder, Python's qrcode, module for module.
@Suite(.timeLimit(.minutes(10))) struct ReferenceEncoderTests {
    /// Every version and level, each with a text in a mode of its own that needs exactly that version (half of them
    /// filled to the last character the version holds): the version chosen and every module agree.
    @Test func everyVersionAndLevelMatchesTheReference() throws {
        var cases: [(code: QRCode, job: ReferenceEncoder.Job)] = []
        for version in 1...40 {
            for (levelIndex, level) in QRCode.ErrorCorrection.allCases.enumerated() {
                let kind = TextKind.allCases[(version + levelIndex) % TextKind.allCases.count]
                let most = kind.maximumLength(version: version, correction: level)
                let fewerThan = version == 1 ? 0 : kind.maximumLength(version: version - 1, correction: level)
                let length = (version + levelIndex) % 2 == 0 ? most : (fewerThan + 1 + most) / 2
                let text = kind.text(length: length, seed: version * 4 + levelIndex)
                let mask = (version + levelIndex * 3) % 8
                let code = try QRCode(encoding: text, correction: level, mask: mask)
                #expect(code.version == version, "\(kind) text of \(length) at \(level) in version \(code.version)")
                #expect(code.mode == kind.mode)
                cases.append((code, .init(text: text, level: level.letter, version: nil, mask: mask)))
            }
        }
        try expectMatchesReference(cases)
    }

    /// Texts in symbols larger than they need, a version given: the URL the ledger will serve, the empty text, one
    /// character of each mode, and each width of the count field.
    @Test func givenVersionsMatchTheReference() throws {
        let texts: [(String, Int)] = [
            ("https://pay.example.com/p/0123456789", 3),
            ("https://pay.example.com/p/0123456789", 5),
            ("HTTPS://PAY.EXAMPLE.COM/P/0123456789", 6),
            ("", 1),
            ("7", 1),
            ("Z", 3),
            ("z", 7),
            ("€", 9),
            (String(repeating: "9", count: 500), 10),
            (String(repeating: "A", count: 300), 26),
            (String(repeating: "a", count: 256), 27),
            ("0123456789", 40),
        ]
        var cases: [(code: QRCode, job: ReferenceEncoder.Job)] = []
        for (index, (text, version)) in texts.enumerated() {
            let level = QRCode.ErrorCorrection.allCases[index % 4]
            let mask = (index * 3) % 8
            let code = try QRCode(encoding: text, correction: level, minimumVersion: version, mask: mask)
            #expect(code.version == version)
            cases.append((code, .init(text: text, level: level.letter, version: version, mask: mask)))
        }
        try expectMatchesReference(cases)
    }

    /// The penalty of each mask equals the reference's for the same symbol, and the mask chosen is the first with
    /// the lowest.
    @Test func maskPenaltiesMatchTheReference() throws {
        let texts: [(String, QRCode.ErrorCorrection)] = [
            ("https://pay.example.com/p/0123456789", .medium),
            ("HELLO WORLD", .quartile),
            ("01234567", .high),
            ("", .low),
            ("Grüße aus Köln, 东京 and 😀", .medium),
            (String(repeating: "gotchu ", count: 40), .high),
            (String(repeating: "1234567890", count: 60), .low),
            (String(repeating: "ABC-123 ", count: 120), .quartile),
        ]
        var cases: [(code: QRCode, job: ReferenceEncoder.Job)] = []
        for (text, level) in texts {
            let code = try QRCode(encoding: text, correction: level)
            cases.append((code, .init(text: text, level: level.letter, version: nil, mask: code.mask, penalties: true)))
        }
        let symbols = try expectMatchesReference(cases)
        for ((code, _), symbol) in zip(cases, symbols) {
            var grid = ModuleGrid(version: code.version)
            let structure = BlockStructure(version: code.version, correction: code.correction)
            let segment = Segment(code.text)
            grid.placeCodewords(
                structure.interleave(segment.codewords(in: code.version, capacity: structure.dataCodewords))
            )
            let ours = (0..<8).map { mask in
                MaskPattern.penalty(of: grid.masked(mask, correction: code.correction).dark, size: grid.size)
            }
            let theirs = try #require(symbol.penalties)
            #expect(ours == theirs, "penalties of \(code.text.prefix(40).debugDescription)")
            #expect(
                code.mask == theirs.firstIndex(of: theirs.min()!),
                "mask of \(code.text.prefix(40).debugDescription)"
            )
        }
    }
}

/// The kinds of text the comparisons cover, one per encoding mode and one of multi-byte UTF-8.
enum TextKind: CaseIterable, CustomStringConvertible {
    case digits
    case alphanumeric
    case ascii
    case multibyte

    var description: String {
        switch self {
        case .digits: "numeric"
        case .alphanumeric: "alphanumeric"
        case .ascii: "ASCII"
        case .multibyte: "UTF-8"
        }
    }

    var mode: QRCode.EncodingMode {
        switch self {
        case .digits: .numeric
        case .alphanumeric: .alphanumeric
        case .ascii, .multibyte: .byte
        }
    }

    /// The most characters (bytes of UTF-8 for the byte mode) that a symbol of `version` holds at `correction`.
    func maximumLength(version: Int, correction: QRCode.ErrorCorrection) -> Int {
        let bits = BlockStructure(version: version, correction: correction).dataBits - 4 - mode.countBits(in: version)
        switch mode {
        case .numeric: return bits / 10 * 3 + (bits % 10 >= 7 ? 2 : bits % 10 >= 4 ? 1 : 0)
        case .alphanumeric: return bits / 11 * 2 + (bits % 11 >= 6 ? 1 : 0)
        case .byte: return bits / 8
        }
    }

    /// A text of `length` characters (of `length` bytes of UTF-8 in the byte mode), varied by `seed`.
    func text(length: Int, seed: Int) -> String {
        switch self {
        case .digits:
            return String((0..<length).map { Character(String((($0 * 7 + seed) % 10))) })
        case .alphanumeric:
            let characters = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:")
            return String((0..<length).map { characters[($0 * 13 + seed) % characters.count] })
        case .ascii:
            let url = Array("https://pay.example.com/p/\(seed)?q=a&b=<c>\"'~`|{}[]^\\")
            return String((0..<length).map { url[$0 % url.count] })
        case .multibyte:
            let pieces = ["é", "€", "😀", "中", "a", "ß", "→", " ", "👩‍💻", "\u{301}"]
            var text = ""
            var bytes = 0
            var index = seed
            while true {
                let piece = pieces[index % pieces.count]
                guard bytes + piece.utf8.count <= length else { break }
                text.unicodeScalars.append(contentsOf: piece.unicodeScalars)
                bytes += piece.utf8.count
                index += 1
            }
            return text + String(repeating: "a", count: length - bytes)
        }
    }
}
