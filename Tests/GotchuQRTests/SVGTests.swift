import Foundation
import GotchuTesting
import Testing

@testable import GotchuQR

/// The SVG document: one path that covers exactly the dark modules, a quiet zone, a title escaped for XML, nothing
/// from outside.
@Suite(.timeLimit(.minutes(10))) struct SVGTests {
    static let url = "https://pay.example.com/p/0123456789"

    @Test func documentShape() throws {
        let code = try QRCode(encoding: Self.url)
        let svg = code.svg()
        let side = code.size + 8
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\" "))
        #expect(svg.hasSuffix("</svg>"))
        #expect(svg.contains(" viewBox=\"0 0 \(side) \(side)\""))
        #expect(svg.contains(" shape-rendering=\"crispEdges\""))
        #expect(svg.contains("<title>\(Self.url)</title>"))
        #expect(svg.contains("<rect width=\"\(side)\" height=\"\(side)\" fill=\"#fff\"/>"))
        #expect(svg.components(separatedBy: "<path ").count == 2, "one path")
        #expect(svg.components(separatedBy: "<title>").count == 2, "one title")
        // Nothing loaded from outside: no link, style, script or image, and no address but the SVG namespace.
        let markup = svg.replacingOccurrences(of: "<title>\(Self.url)</title>", with: "")
            .replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "")
        for outside in ["href", "url(", "<script", "<image", "<style", "style=", "<foreignObject", "@import", "//"] {
            #expect(!markup.contains(outside), "\(outside) in the document")
        }
        // The title is the only place the text appears.
        #expect(svg.components(separatedBy: Self.url).count == 2)
        // Small: a version 3 symbol in well under 3 KB.
        #expect(svg.utf8.count < 3000, "\(svg.utf8.count) bytes")
    }

    /// The path's rectangles, one module high, fill exactly the dark modules, shifted by the quiet zone, and none
    /// of them overlap or stray into it.
    @Test(arguments: [1, 2, 7, 21, 40])
    func pathCoversExactlyTheDarkModules(_ version: Int) throws {
        let code = try QRCode(encoding: "gotchu \(version)", minimumVersion: version)
        let svg = code.svg()
        let data = try #require(svg.firstMatch(of: /<path fill="#000" d="([^"]*)"\/>/)?.output.1)
        var painted = [Int](repeating: 0, count: code.size * code.size)
        var rest = Substring(data)
        while !rest.isEmpty {
            let match = try #require(
                rest.prefixMatch(of: /M(\d+) (\d+)h(\d+)v1H(\d+)z/),
                "unexpected path data \(rest.prefix(20))"
            )
            let (left, top, width, back) = (Int(match.1)!, Int(match.2)!, Int(match.3)!, Int(match.4)!)
            #expect(back == left && width > 0)
            let x = left - QRCode.quietZone
            let y = top - QRCode.quietZone
            try #require(x >= 0 && y >= 0 && y < code.size && x + width <= code.size, "rectangle outside the symbol")
            for column in x..<(x + width) { painted[y * code.size + column] += 1 }
            rest = rest[match.range.upperBound...]
        }
        for y in 0..<code.size {
            for x in 0..<code.size {
                #expect(painted[y * code.size + x] == (code[x, y] ? 1 : 0), "module (\(x), \(y))")
            }
        }
    }

    @Test func titleEscapesAndReplacesWhatXMLCannotCarry() throws {
        #expect(QRCode.escapedForXML(#"a<b>&"c"'d'"#) == "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;")
        #expect(QRCode.escapedForXML("tab\tline\nreturn\r") == "tab\tline\nreturn&#13;")
        #expect(
            QRCode.escapedForXML("nul\u{0} bell\u{7} esc\u{1B} \u{FFFE}\u{FFFF}")
                == "nul\u{FFFD} bell\u{FFFD} esc\u{FFFD} \u{FFFD}\u{FFFD}"
        )
        #expect(QRCode.escapedForXML("Köln 東京 😀 \u{7F}") == "Köln 東京 😀 \u{7F}")
        let code = try QRCode(encoding: "x")
        #expect(code.svg().contains("<title>x</title>"))
        #expect(code.svg(title: "Pay <here>").contains("<title>Pay &lt;here&gt;</title>"))
    }

    /// An XML parser (Python's ElementTree) reads each title back as the text it was made from, with the characters
    /// XML cannot carry replaced.
    @Test func titlesParseBackAsTheirText() throws {
        guard let python = TestPython.executable else {
            Issue.record("no Python: \(installHint)")
            return
        }
        let titles = [
            Self.url, "<script>alert('x')</script>", "a & b; &amp; \"q\"", "]]> <!-- --> <?pi?>", "line\nbreak\r\nx\ty",
            "nul\u{0}bell\u{7}del\u{7F}", "Grüße 東京 😀 e\u{301}", "\u{FFFE}\u{FFFF}\u{FEFF}",
        ]
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let code = try QRCode(encoding: "title test")
        for (index, title) in titles.enumerated() {
            try Data(code.svg(title: title).utf8).write(to: directory.file("\(index).svg"))
        }
        let script = """
            import json, sys
            import xml.etree.ElementTree as ElementTree
            titles = []
            for index in range(int(sys.argv[2])):
                root = ElementTree.parse(f"{sys.argv[1]}/{index}.svg").getroot()
                assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
                titles.append(root.find("{http://www.w3.org/2000/svg}title").text or "")
            sys.stdout.write(json.dumps(titles))
            """
        let result = try run(python, ["-c", script, directory.url.path, String(titles.count)], in: directory)
        try #require(result.status == 0, "\(result.error)")
        let parsed = try JSONDecoder().decode([String].self, from: result.output)
        let expected = titles.map { title in
            String(
                String.UnicodeScalarView(
                    title.unicodeScalars.map { scalar in
                        switch scalar.value {
                        case 0x9, 0xA, 0xD: scalar
                        case 0...0x1F, 0xFFFE, 0xFFFF: "\u{FFFD}"
                        default: scalar
                        }
                    }
                )
            )
        }
        #expect(parsed == expected)
    }
}
