import Foundation
import GotchuTesting
import Testing

@testable import GotchuQR

/// The terminal rendering: its half blocks read back as the symbol's modules with their quiet zone, and as a text
/// that a real decoder finds.
@Suite(.timeLimit(.minutes(10))) struct TerminalTextTests {
    /// The longest checkout address a public URL allows to be made today of a 63-character host.
    static let longURL = "https://" + String(repeating: "a", count: 59) + ".com/p/0123456789"

    /// The light modules a terminal text draws, row by row with its quiet zone: each character two rows, `true`
    /// for light. Throws on a character that is not a half block or a space, or on ragged lines.
    static func lightModules(of text: String) throws -> [[Bool]] {
        var rows: [[Bool]] = []
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        try #require(lines.last == "", "the text ends with a line feed")
        for line in lines.dropLast() {
            var upper: [Bool] = []
            var lower: [Bool] = []
            for character in line {
                switch character {
                case "█": (upper, lower) = (upper + [true], lower + [true])
                case "▀": (upper, lower) = (upper + [true], lower + [false])
                case "▄": (upper, lower) = (upper + [false], lower + [true])
                case " ": (upper, lower) = (upper + [false], lower + [false])
                default: throw ReaderError("unexpected character \(character.debugDescription)")
                }
            }
            rows += [upper, lower]
        }
        try #require(Set(rows.map(\.count)).count == 1, "every line is as long")
        return rows
    }

    /// What the encoder says each module of the text's area is: light in the quiet zone and below the symbol's
    /// last row.
    static func expectedLight(_ code: QRCode, rows: Int) -> [[Bool]] {
        let zone = QRCode.quietZone
        let side = code.size + 2 * zone
        return (0..<rows).map { y in
            (0..<side).map { x in
                let (column, row) = (x - zone, y - zone)
                guard column >= 0, column < code.size, row >= 0, row < code.size else { return true }
                return !code[column, row]
            }
        }
    }

    @Test(arguments: [1, 2, 5, 7, 10, 40])
    func halfBlocksAreTheModules(_ version: Int) throws {
        let code = try QRCode(encoding: "https://pay.example.com/p/0123456789", minimumVersion: version)
        let text = code.terminalText()
        let side = code.size + 2 * QRCode.quietZone
        let light = try Self.lightModules(of: text)
        #expect(light.count == side + 1, "an odd number of rows: the last line's lower half is quiet zone")
        #expect(light.first?.count == side)
        #expect(light == Self.expectedLight(code, rows: side + 1))
        // The quiet zone is drawn: the first two lines are full blocks, as is each line's first four characters.
        let lines = text.split(separator: "\n")
        #expect(lines[0] == Substring(String(repeating: "█", count: side)))
        #expect(lines.allSatisfy { $0.hasPrefix("████") && $0.hasSuffix("████") })
    }

    @Test func colorsFrameEachLineAndChangeNothingElse() throws {
        let code = try QRCode(encoding: Self.longURL)
        let plain = code.terminalText()
        let colored = code.terminalText(colors: true)
        let lines = colored.split(separator: "\n")
        #expect(lines.count == plain.split(separator: "\n").count)
        #expect(lines.allSatisfy { $0.hasPrefix("\u{1B}[97;40m") && $0.hasSuffix("\u{1B}[0m") })
        let stripped = colored.replacingOccurrences(of: "\u{1B}[97;40m", with: "")
            .replacingOccurrences(of: "\u{1B}[0m", with: "")
        #expect(stripped == plain)
        #expect(!plain.contains("\u{1B}"))
    }

    /// The text, drawn as a person sees it on a terminal that paints its text light on a dark ground (each light
    /// half block as light modules), is read back by zbarimg as the exact address.
    @Test(arguments: [
        "https://pay.example.com/p/0123456789", longURL, "http://127.0.0.1:8080/gotchu/p/abcdef0123",
    ])
    func zbarReadsTheText(_ url: String) throws {
        guard let reader = Reader.find() else { return }
        let code = try QRCode(encoding: url)
        let light = try Self.lightModules(of: code.terminalText())
        // The drawing: one SVG unit a module, dark where the text leaves the ground showing.
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(light[0].count) \(light.count)\""
        svg += " shape-rendering=\"crispEdges\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
        for (y, row) in light.enumerated() {
            for (x, isLight) in row.enumerated() where !isLight {
                svg += "<rect x=\"\(x)\" y=\"\(y)\" width=\"1\" height=\"1\"/>"
            }
        }
        svg += "</svg>"
        #expect(try reader.read(svg: svg) == Array(url.utf8))
    }
}
