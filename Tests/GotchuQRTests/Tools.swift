import Foundation
import GotchuTesting
import Testing

@testable import GotchuQR

/// What `scripts/install-dependencies` installs for these tests.
let installHint =
    "run scripts/install-dependencies (librsvg2-bin, zbar-tools, and qrcode==8.2 from Tests/requirements.txt in .venv)"

/// A directory of its own for one test's files, removed by ``remove()``.
struct ScratchDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-qr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// A finished command: its exit status, standard output and standard error.
struct CommandResult {
    var status: Int32
    var output: Data
    var error: String
}

/// Runs `executable` to its end, its standard output read through a pipe and its standard error kept in a file of
/// `directory`.
func run(_ executable: String, _ arguments: [String], in directory: ScratchDirectory) throws -> CommandResult {
    let errorFile = directory.file("stderr-\(UUID().uuidString)")
    let process = try SpawnedProcess(
        executable: executable,
        arguments: arguments,
        output: .pipe,
        error: .file(errorFile)
    )
    let output = process.output?.readToEnd() ?? Data()
    let status = process.waitUntilExit()
    let error = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
    return CommandResult(status: status, output: output, error: error)
}

/// Reads QR codes back the way a phone would: the SVG document rendered to a bitmap by librsvg's `rsvg-convert`,
/// the bitmap read by ZBar's `zbarimg`.
struct Reader {
    let rsvgConvert: String
    let zbarimg: String

    /// The reader, or `nil` (with an issue recorded) when either program is missing.
    static func find() -> Reader? {
        guard let rsvgConvert = ChildProcess.which("rsvg-convert"), let zbarimg = ChildProcess.which("zbarimg") else {
            Issue.record("rsvg-convert or zbarimg is missing: \(installHint)")
            return nil
        }
        return Reader(rsvgConvert: rsvgConvert, zbarimg: zbarimg)
    }

    /// The bytes that zbarimg reads from `svg` rendered at `scale` pixels a module, or `nil` when it finds no code.
    /// Throws when the SVG does not render (rsvg-convert refuses a document that is not well-formed XML).
    func read(svg: String, scale: Int = 3) throws -> [UInt8]? {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let svgFile = directory.file("code.svg")
        let pngFile = directory.file("code.png")
        try Data(svg.utf8).write(to: svgFile)
        let render = try run(
            rsvgConvert,
            ["--zoom", String(scale), "--output", pngFile.path, svgFile.path],
            in: directory
        )
        guard render.status == 0 else {
            throw ReaderError("rsvg-convert exited with \(render.status): \(render.error)")
        }
        // Binary mode: the symbol's bytes exactly, with no character set guessed and no line feed added.
        let scan = try run(zbarimg, ["--quiet", "--raw", "--nodbus", "-Sbinary", pngFile.path], in: directory)
        switch scan.status {
        case 0: return Array(scan.output)
        case 4: return nil  // no symbol found
        default: throw ReaderError("zbarimg exited with \(scan.status): \(scan.error)")
        }
    }
}

extension Reader {
    /// Expects `code`'s SVG to read back as exactly its text's UTF-8 bytes (no normalisation, no character set
    /// guessed); a mismatch is reported with `context` and where the bytes part.
    func expectReadsBack(
        _ code: QRCode,
        _ context: String = "",
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let expected = Array(code.text.utf8)
        let read = try read(svg: code.svg())
        guard read != expected else { return }
        let what =
            "\(expected.count) bytes \(code.text.prefix(40).debugDescription), version \(code.version) "
            + "\(code.correction) mask \(code.mask)\(context.isEmpty ? "" : "; \(context)")"
        guard let read else {
            Issue.record("no QR code found in \(what)", sourceLocation: sourceLocation)
            return
        }
        let same = zip(read, expected).prefix { $0 == $1 }.count
        Issue.record(
            "read \(read.count) bytes, first differing at byte \(same), from \(what)",
            sourceLocation: sourceLocation
        )
    }
}

struct ReaderError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The reference encoder, Python's `qrcode` module (8.2, from Tests/requirements.txt), run once over many cases.
enum ReferenceEncoder {
    /// One symbol to make: the text, the level (`L`, `M`, `Q` or `H`), the smallest version to use (`nil`: 1) and
    /// the mask; with `penalties`, also the penalty of the symbol under each of the eight masks.
    struct Job: Codable {
        var text: String
        var level: String
        var version: Int?
        var mask: Int
        var penalties: Bool = false
    }

    /// The symbol made: its version, its rows as strings of `0` (light) and `1` (dark), and the penalties asked for.
    struct Symbol: Codable {
        var version: Int
        var rows: [String]
        var penalties: [Int]?
    }

    private static let script = """
        import json, sys
        import qrcode, qrcode.util
        from qrcode.constants import ERROR_CORRECT_L, ERROR_CORRECT_M, ERROR_CORRECT_Q, ERROR_CORRECT_H

        LEVELS = {"L": ERROR_CORRECT_L, "M": ERROR_CORRECT_M, "Q": ERROR_CORRECT_Q, "H": ERROR_CORRECT_H}

        def make(job, mask):
            code = qrcode.QRCode(
                version=job.get("version"), error_correction=LEVELS[job["level"]], mask_pattern=mask, border=0
            )
            code.add_data(job["text"], optimize=0)  # one segment, in the one mode that holds all of it
            code.make(fit=True)  # the smallest version from the one given on
            return code

        with open(sys.argv[1], encoding="utf-8") as source:
            jobs = json.load(source)
        symbols = []
        for job in jobs:
            code = make(job, job["mask"])
            symbol = {
                "version": code.version,
                "rows": ["".join("1" if module else "0" for module in row) for row in code.get_matrix()],
            }
            if job.get("penalties"):
                symbol["penalties"] = [qrcode.util.lost_point(make(job, mask).modules) for mask in range(8)]
            symbols.append(symbol)
        with open(sys.argv[2], "w", encoding="utf-8") as target:
            json.dump(symbols, target)
        """

    /// The reference symbols of `jobs`, in order; `nil` (with an issue recorded) when the module is missing.
    static func symbols(_ jobs: [Job]) throws -> [Symbol]? {
        guard let python = TestPython.executable, TestPython.canImport(["qrcode"]) else {
            Issue.record("Python's qrcode module is missing: \(installHint)")
            return nil
        }
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let scriptFile = directory.file("reference.py")
        let jobsFile = directory.file("jobs.json")
        let symbolsFile = directory.file("symbols.json")
        try Data(script.utf8).write(to: scriptFile)
        try JSONEncoder().encode(jobs).write(to: jobsFile)
        let result = try run(python, [scriptFile.path, jobsFile.path, symbolsFile.path], in: directory)
        guard result.status == 0 else { throw ReaderError("the reference encoder failed: \(result.error)") }
        return try JSONDecoder().decode([Symbol].self, from: Data(contentsOf: symbolsFile))
    }
}

/// Asks the reference encoder for each case's symbol and expects the same version and modules; returns the
/// reference's symbols (none, with an issue recorded, when it is missing).
@discardableResult
func expectMatchesReference(
    _ cases: [(code: QRCode, job: ReferenceEncoder.Job)],
    context: String = "",
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> [ReferenceEncoder.Symbol] {
    guard let symbols = try ReferenceEncoder.symbols(cases.map(\.job)) else { return [] }
    try #require(symbols.count == cases.count, sourceLocation: sourceLocation)
    for ((code, job), symbol) in zip(cases, symbols) {
        let name =
            "\(job.text.count) characters \(job.text.prefix(24).debugDescription) at \(job.level), mask \(job.mask)"
            + (context.isEmpty ? "" : " (\(context))")
        #expect(code.version == symbol.version, "version of \(name)", sourceLocation: sourceLocation)
        guard code.version == symbol.version else { continue }
        let rows = code.rows
        if let y = rows.indices.first(where: { rows[$0] != symbol.rows[$0] }) {
            let x = zip(rows[y], symbol.rows[y]).prefix { $0 == $1 }.count
            Issue.record(
                "\(name), version \(code.version): module (\(x), \(y)) differs",
                sourceLocation: sourceLocation
            )
        }
    }
    return symbols
}

extension QRCode.ErrorCorrection {
    /// The level's letter, as the standard and Python's qrcode name it.
    var letter: String {
        switch self {
        case .low: "L"
        case .medium: "M"
        case .quartile: "Q"
        case .high: "H"
        }
    }
}

extension QRCode {
    /// The rows as strings of `0` (light) and `1` (dark), as ``ReferenceEncoder/Symbol/rows``.
    var rows: [String] {
        (0..<size).map { y in String((0..<size).map { x in self[x, y] ? "1" : "0" }) }
    }
}
