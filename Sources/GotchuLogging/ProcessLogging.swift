import Foundation
package import Logging

/// How a program writes its log to standard error.
package enum LogFormat: String, CaseIterable, Sendable {
    /// swift-log's text lines, for people.
    case text
    /// One JSON object per line (`time`, `level`, `label`, `message`, `source`, then the metadata), for collectors.
    case json

    /// Bootstraps the process's logging in this format at `level`. Call once, first thing.
    package func bootstrap(level: Logger.Level) {
        switch self {
        case .text:
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        case .json:
            LoggingSystem.bootstrap { label in
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }
}

/// Writes each message as one JSON object on one line of standard error.
///
/// Metadata whose key names a secret (`token`, `password`, `secret`, `authorization`, `key` but not an
/// idempotency key, `cookie`) is written as `"[redacted]"`, so a slip in a log call cannot put a credential in a
/// collector; the code never logs one on purpose either.
package struct JSONLogHandler: LogHandler {
    package var logLevel: Logger.Level = .info
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (String) -> Void

    /// A handler for `label` that writes to standard error, or to `write` (tests).
    package init(label: String, write: (@Sendable (String) -> Void)? = nil) {
        self.label = label
        self.write = write ?? { line in FileHandle.standardError.write(Data(line.utf8)) }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        var object: [String: Any] = [:]
        for (key, value) in merged { object[key] = Self.isSecret(key) ? "[redacted]" : Self.json(value) }
        // The fixed fields win over metadata of the same name.
        object["time"] = Self.timestamp()
        object["level"] = event.level.rawValue
        object["label"] = label
        object["message"] = event.message.description
        object["source"] = event.source
        if let error = event.error { object["error"] = "\(error)" }
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object,
                options: [.sortedKeys, .withoutEscapingSlashes]
            )
        else { return }
        // JSONSerialization escapes control characters, so a message with a newline stays on one line.
        write(String(decoding: data, as: UTF8.self) + "\n")
    }

    /// Whether a metadata key names a credential.
    static func isSecret(_ key: String) -> Bool {
        let lowered = key.lowercased()
        if lowered.contains("idempotency") { return false }
        return ["token", "password", "passwd", "secret", "authorization", "cookie", "key"].contains {
            lowered.contains($0)
        }
    }

    private static func json(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): text
        case .stringConvertible(let convertible): convertible.description
        case .array(let values): values.map(json)
        case .dictionary(let entries): entries.mapValues(json)
        }
    }

    private static func timestamp() -> String {
        var formatter = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        formatter.timeZone = TimeZone(identifier: "UTC")!
        return Date().formatted(formatter)
    }
}
