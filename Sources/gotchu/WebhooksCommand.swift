import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient

/// `gotchu webhooks …`: the logged-in user's webhook endpoints, over the ledger's API.
struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "Register, list and remove the URLs the ledger sends your payments' events to, signed.",
        discussion: """
            The ledger POSTs each event to every endpoint subscribed to its type, with a Gotchu-Signature \
            header (HMAC-SHA256 with the endpoint's secret), until the endpoint answers 2xx; failed \
            deliveries are retried for up to 3 days. Event types: \
            \(WebhookEventType.allCases.map(\.rawValue).joined(separator: ", ")), or * for all. \
            URLs must be https (the server's operator may allow http for some hosts).

            Examples:
              gotchu webhooks add https://shop.example.com/gotchu --events payment.succeeded,refund.succeeded
              gotchu webhooks list
              gotchu webhooks test we_…        # a signed webhook.test event, now
              gotchu webhooks deliveries we_…
              gotchu webhooks retry whd_…
              gotchu webhooks rotate we_…
              gotchu webhooks remove we_…
            """,
        subcommands: [Add.self, List.self, Test.self, Remove.self, Rotate.self, Deliveries.self, Retry.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register an endpoint and print its signing secret (shown only now)."
        )

        @Argument(help: ArgumentHelp("Where to send events (https).", valueName: "url"))
        var url: String

        @Option(
            help: ArgumentHelp(
                "Event types, separated by commas (default: *, every type).",
                valueName: "types"
            )
        )
        var events = WebhookEventType.all

        @OptionGroup var server: ServerOptions

        func run() async throws {
            let types = events.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let endpoint = try await server.client().createWebhookEndpoint(url: url, events: types)
            let console = Console()
            console.line(
                "endpoint \(endpoint.id) for \(DisplayText.quoted(endpoint.url, maximumLength: 256)) "
                    + "receives \(endpoint.events.joined(separator: ", "))"
            )
            console.line("signing secret (shown only now; keep it where your receiver reads it):")
            // The secret alone on its line, so it can be cut from the output as it is (base64url: escaping keeps it).
            Swift.print(Console.safe(endpoint.secret ?? ""))
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List your endpoints.")

        @OptionGroup var server: ServerOptions

        func run() async throws {
            let endpoints = try await server.client().webhookEndpoints()
            let console = Console()
            console.line(["ID", "STATUS", "EVENTS", "URL", "FAILING SINCE"].joined(separator: "  "))
            for endpoint in endpoints {
                console.line(WebhooksCommand.row(endpoint))
            }
        }
    }

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send an endpoint a signed test event now and say how it answered.",
            discussion: """
                The event has type \(WebhookTestData.eventType), a new id each time, and the endpoint's id in its \
                data; it is signed like every event, sent to this endpoint only (a disabled one too), and neither \
                stored nor retried. Exits 0 when the endpoint answered 2xx, 1 otherwise.
                """
        )

        @Argument(help: ArgumentHelp("The endpoint's id, as `webhooks list` shows it.", valueName: "id"))
        var id: String

        @OptionGroup var server: ServerOptions

        func run() async throws {
            let test = try await server.client().testWebhookEndpoint(id: id)
            let console = Console()
            let event = DisplayText.escaped(test.eventID, maximumLength: 64)
            let answer = test.statusCode.map { "HTTP \($0)" } ?? "no answer"
            if test.delivered {
                console.line("delivered \(event): \(answer) in \(test.durationMilliseconds) ms")
            } else {
                let reason = test.error.map { ": " + DisplayText.quoted($0, maximumLength: 300) } ?? ""
                console.line("not delivered \(event) (\(answer))\(reason)")
                throw ExitCode.failure
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an endpoint: nothing more is sent to it.")

        @Argument(help: ArgumentHelp("The endpoint's id, as `webhooks list` shows it.", valueName: "id"))
        var id: String

        @OptionGroup var server: ServerOptions

        func run() async throws {
            try await server.client().deleteWebhookEndpoint(id: id)
            Console().line("removed endpoint \(DisplayText.escaped(id, maximumLength: 64))")
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give an endpoint a new signing secret; the old one also signs for 24 hours."
        )

        @Argument(help: ArgumentHelp("The endpoint's id.", valueName: "id"))
        var id: String

        @OptionGroup var server: ServerOptions

        func run() async throws {
            let endpoint = try await server.client().rotateWebhookSecret(id: id)
            let until = endpoint.previousSecretExpiresAt.map { " until \($0.formatted(.iso8601))" } ?? ""
            Console().line(
                "new signing secret of \(endpoint.id) (shown only now; deliveries carry a signature with the old "
                    + "one too\(until)):"
            )
            Swift.print(Console.safe(endpoint.secret ?? ""))
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show an endpoint's latest deliveries.")

        @Argument(help: ArgumentHelp("The endpoint's id.", valueName: "id"))
        var id: String

        @Option(help: ArgumentHelp("How many, newest first (1 to 100).", valueName: "count"))
        var limit = 20

        @OptionGroup var server: ServerOptions

        func validate() throws {
            guard (1...100).contains(limit) else { throw ValidationError("--limit must be 1 to 100") }
        }

        func run() async throws {
            let deliveries = try await server.client().webhookDeliveries(endpointID: id, limit: limit)
            WebhooksCommand.printDeliveries(deliveries)
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a delivery again now (a failed one too), with the same event id."
        )

        @Argument(help: ArgumentHelp("The delivery's id, as `webhooks deliveries` shows it.", valueName: "id"))
        var id: String

        @OptionGroup var server: ServerOptions

        func run() async throws {
            let delivery = try await server.client().retryWebhookDelivery(id: id)
            Console().line("delivery \(delivery.id) of \(delivery.eventID) is due again now")
        }
    }

    /// One endpoint as `list` shows it; what the server sent is escaped or quoted.
    static func row(_ endpoint: WebhookEndpointResponse) -> String {
        let status = endpoint.status == "enabled" ? "enabled" : "disabled"
        var columns = [
            DisplayText.escaped(endpoint.id, maximumLength: 64), status,
            DisplayText.escaped(endpoint.events.joined(separator: ","), maximumLength: 256),
            DisplayText.quoted(endpoint.url, maximumLength: 256),
            endpoint.failingSince.map { $0.formatted(.iso8601) } ?? "-",
        ]
        if let reason = endpoint.disabledReason { columns.append("(\(DisplayText.quoted(reason)))") }
        return columns.joined(separator: "  ")
    }

    /// Deliveries as `deliveries` shows them, one a line.
    static func printDeliveries(_ deliveries: [WebhookDeliveryResponse]) {
        let console = Console()
        console.line(["DELIVERY", "EVENT", "TYPE", "STATUS", "ATTEMPTS", "LAST", "NEXT"].joined(separator: "  "))
        for delivery in deliveries {
            let last =
                delivery.lastStatusCode.map { "HTTP \($0)" }
                ?? delivery.lastError.map { DisplayText.quoted($0, maximumLength: 120) } ?? "-"
            console.line(
                [
                    DisplayText.escaped(delivery.id, maximumLength: 64),
                    DisplayText.escaped(delivery.eventID, maximumLength: 64),
                    DisplayText.escaped(delivery.eventType, maximumLength: 64),
                    DisplayText.escaped(delivery.status, maximumLength: 16), String(delivery.attempts), last,
                    delivery.nextAttemptAt.map { $0.formatted(.iso8601) } ?? "-",
                ].joined(separator: "  ")
            )
        }
    }
}
