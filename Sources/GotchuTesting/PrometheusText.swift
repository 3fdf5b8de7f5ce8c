package import Foundation

/// The Prometheus text format read by Python's `prometheus_client.parser`: a real parser, not this project's
/// reading of its own output.
package enum PrometheusText {
    /// One sample of a scrape.
    package struct Sample: Decodable, Sendable {
        /// The sample's name (`…_total`, `…_bucket`, …).
        package var name: String
        /// Its labels.
        package var labels: [String: String]
        /// Its value.
        package var value: Double
        /// Its family's type as the parser read it (`counter`, `gauge`, `histogram`, …).
        package var type: String
    }

    /// Parses `text`, written to a file in `directory` for the parser.
    /// - Throws: when there is no Python with `prometheus_client` (scripts/install-dependencies installs it) or the
    ///   parser refuses the text.
    package static func parse(_ text: String, in directory: URL) throws -> [Sample] {
        guard let python = TestPython.executable else {
            throw RunningCommandError("no Python: run scripts/install-dependencies")
        }
        guard TestPython.canImport(["prometheus_client.parser"]) else {
            throw RunningCommandError("prometheus-client is missing: run scripts/install-dependencies")
        }
        let input = directory.appendingPathComponent("scrape-\(UUID().uuidString).txt")
        try Data(text.utf8).write(to: input)
        let arguments = [
            "-c",
            """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            samples = []
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                for sample in family.samples:
                    samples.append({"name": sample.name, "labels": sample.labels, "value": sample.value,
                                    "type": family.type})
            print(json.dumps(samples))
            """,
            input.path,
        ]
        // The parser's error output is small: reading standard output to its end first cannot block on it.
        let process = try SpawnedProcess(executable: python, arguments: arguments, output: .pipe, error: .pipe)
        let data = process.output?.readToEnd() ?? Data()
        let errorText = String(decoding: process.error?.readToEnd() ?? Data(), as: UTF8.self)
        guard process.waitUntilExit() == 0 else {
            throw RunningCommandError("the parser refused the scrape: \(errorText)\n\(text)")
        }
        return try JSONDecoder().decode([Sample].self, from: data)
    }
}
