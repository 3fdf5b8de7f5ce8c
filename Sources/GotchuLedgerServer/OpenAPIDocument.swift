import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedger
import Yams

/// The API contract served at `GET /openapi.yaml`: the `openapi.yaml` resource, with the numbers a server can be
/// configured with filled in from the running settings, and only the operations this server's route table serves.
/// A test checks every route and status of the server against it.
enum OpenAPIDocument {
    /// The settings the document states as numbers.
    struct Settings: Sendable {
        var policy: LedgerPolicy
        var maximumBodyBytes: Int
        var recentEntryCount: Int
        var eventStreamsPerUser: Int

        /// Each `${name}` of the resource and its value.
        var placeholders: [String: String] {
            [
                "maximum_amount_cents": String(policy.maximumAmount),
                "maximum_body_bytes": String(maximumBodyBytes),
                "recent_entry_count": String(recentEntryCount),
                "event_streams_per_user": String(eventStreamsPerUser),
                "lock_lifetime_seconds": String(policy.lockLifetime.components.seconds),
                "maximum_locks_per_payer": String(policy.maximumLocksPerPayer),
                "minimum_password_length": String(policy.minimumPasswordLength),
                "maximum_password_length": String(Passwords.maximumLength),
                "default_entry_page": String(EntryPageSize.default),
                "maximum_entry_page": String(EntryPageSize.maximum),
                "maximum_cursor_length": String(EntryCursor.maximumTokenLength),
            ]
        }
    }

    /// The document's problems against a route table: operations it documents that no route serves, routes it does
    /// not document, and routes whose `operationId` differs. Empty when the two agree.
    struct Mismatch: Error, CustomStringConvertible, Equatable {
        var problems: [String]
        var description: String { problems.joined(separator: "; ") }
    }

    /// An operation of the route table.
    struct Operation: Sendable, Hashable {
        var method: String
        var path: String
        var operationID: String
    }

    /// The resource's text, placeholders unfilled.
    static var template: String { String(decoding: PackageResources.openapi_yaml, as: UTF8.self) }

    /// The document for a server with these routes and settings.
    /// - Throws: ``Mismatch`` when a route is not documented (or under another `operationId`), or a placeholder is
    ///   unknown; a YAML error when the resource does not parse.
    static func render(routes: [Operation], settings: Settings) throws -> String {
        var text = template
        for (name, value) in settings.placeholders {
            text = text.replacingOccurrences(of: "${\(name)}", with: value)
        }
        if let unknown = text.range(of: "${") {
            let name = text[unknown.lowerBound...].prefix(while: { $0 != "}" })
            throw Mismatch(problems: ["the document uses \(name)}, which no setting fills"])
        }
        guard var root = try Yams.compose(yaml: text)?.mapping, var paths = root["paths"]?.mapping else {
            throw Mismatch(problems: ["the document has no paths"])
        }
        var problems: [String] = []
        var served: [String: [String: String]] = [:]
        for route in routes { served[route.path, default: [:]][route.method.lowercased()] = route.operationID }
        for route in routes {
            let documented = paths[route.path]?.mapping?[route.method.lowercased()]?.mapping?["operationId"]?.string
            if documented != route.operationID {
                problems.append(
                    "\(route.method) \(route.path) is documented as \(documented ?? "nothing"), not \(route.operationID)"
                )
            }
        }
        // Paths and operations this server does not serve (development routes without --dev, metrics without
        // --metrics) are left out, so a client never reads of a route that answers 404.
        for index in paths.indices.reversed() {
            let path = paths[index].key.string ?? ""
            guard var item = paths[index].value.mapping else { continue }
            for operation in item.indices.reversed() where served[path]?[item[operation].key.string ?? ""] == nil {
                item[item[operation].key] = nil
            }
            if item.isEmpty {
                paths[paths[index].key] = nil
            } else {
                paths[index] = (paths[index].key, .mapping(item))
            }
        }
        guard problems.isEmpty else { throw Mismatch(problems: problems) }
        root["paths"] = .mapping(paths)
        return try Yams.serialize(node: .mapping(root), width: -1, allowUnicode: true)
    }
}
