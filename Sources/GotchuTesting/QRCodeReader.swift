package import Foundation

/// Reads QR codes back as a phone would: ZBar's `zbarimg` (Debian `zbar-tools`) on an image file, with SVG
/// rendered to PNG by librsvg's `rsvg-convert` (Debian `librsvg2-bin`) first.
package enum QRCodeReader {
    /// What installs the tools.
    package static let installHint = "run scripts/install-dependencies (zbar-tools and librsvg2-bin)"

    /// Why an image could not be read.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// The texts of the QR codes `zbarimg` finds in the image file (PNG, among others), one per symbol; empty when
    /// it finds none.
    package static func texts(inImage file: URL) throws -> [String] {
        guard let zbarimg = ChildProcess.which("zbarimg") else { throw Failure(description: installHint) }
        let errors = file.deletingLastPathComponent().appendingPathComponent("zbarimg-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: errors) }
        let scan = try SpawnedProcess(
            executable: zbarimg,
            arguments: ["--quiet", "--raw", "--nodbus", "-Sqrcode.enable", file.path],
            output: .pipe,
            error: .file(errors)
        )
        let output = scan.output?.readToEnd() ?? Data()
        switch scan.waitUntilExit() {
        case 0: return String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
        case 4: return []  // no symbol found
        case let status:
            let message = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            throw Failure(description: "zbarimg exited with \(status): \(message)")
        }
    }

    /// The texts of the QR codes drawn in `lines` of half blocks as a terminal shows them with light text on a dark
    /// ground: each character two modules, its ink (`█`, `▀`, `▄`) light, the rest dark. Throws on any other
    /// character.
    package static func texts(inHalfBlocks lines: [String]) throws -> [String] {
        let width = lines.map(\.count).max() ?? 0
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(width) \(lines.count * 2)\""
        svg += " shape-rendering=\"crispEdges\"><rect width=\"100%\" height=\"100%\"/>"
        for (row, line) in lines.enumerated() {
            for (column, character) in line.enumerated() {
                let light: (upper: Bool, lower: Bool)
                switch character {
                case "█": light = (true, true)
                case "▀": light = (true, false)
                case "▄": light = (false, true)
                case " ": light = (false, false)
                default: throw Failure(description: "\(character.debugDescription) is not a half block")
                }
                if light.upper {
                    svg += "<rect x=\"\(column)\" y=\"\(row * 2)\" width=\"1\" height=\"1\" fill=\"#fff\"/>"
                }
                if light.lower {
                    svg += "<rect x=\"\(column)\" y=\"\(row * 2 + 1)\" width=\"1\" height=\"1\" fill=\"#fff\"/>"
                }
            }
        }
        return try texts(inSVG: svg + "</svg>", zoom: 6)
    }

    /// The texts of the QR codes in `svg`, rendered at `zoom` pixels a unit.
    package static func texts(inSVG svg: String, zoom: Int = 4) throws -> [String] {
        guard let rsvgConvert = ChildProcess.which("rsvg-convert") else { throw Failure(description: installHint) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-qr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let svgFile = directory.appendingPathComponent("code.svg")
        let pngFile = directory.appendingPathComponent("code.png")
        try Data(svg.utf8).write(to: svgFile)
        let render = try SpawnedProcess(
            executable: rsvgConvert,
            arguments: ["--zoom", String(zoom), "--output", pngFile.path, svgFile.path],
            error: .file(directory.appendingPathComponent("rsvg.txt"))
        )
        guard render.waitUntilExit() == 0 else {
            let message = (try? String(contentsOf: directory.appendingPathComponent("rsvg.txt"), encoding: .utf8))
            throw Failure(description: "rsvg-convert could not render the SVG: \(message ?? "")")
        }
        return try texts(inImage: pngFile)
    }
}
