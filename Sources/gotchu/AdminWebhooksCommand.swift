import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerServer

/// `gotchu admin webhooks …`: every user's webhook endpoints, seen and stopped by the operator on the server machine,
/// in the database itself.
struct AdminWebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "List webhook endpoints, disable and enable them, read and retry their deliveries.",
        discussion: """
            An endpoint that fails for 3 days straight is disabled by the ledger itself; `enable` sends to it \
            again (its pending deliveries first). Disabling and enabling are recorded in the audit log.

            Examples:
              gotchu admin webhooks list --database ledger.sqlite
              gotchu admin webhooks list --user shop@example.com
              gotchu admin webhooks disable we_… --reason "answers with our own login page"
              gotchu admin webhooks enable we_…
              gotchu admin webhooks deliveries we_…
              gotchu admin webhooks retry whd_…
            """,
        subcommands: [List.self, Disable.self, Enable.self, Deliveries.self, Retry.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List endpoints: id, user, status, events, URL.")

        @OptionGroup var admin: AdminOptions

        @Option(help: ArgumentHelp("Only this user's endpoints.", valueName: "email"))
        var user: String?

        func run() async throws {
            let endpoints = try await admin.withKeyStore { store in try await store.webhookEndpoints(email: user) }
            let console = Console()
            console.line(["ID", "USER", "STATUS", "EVENTS", "URL", "FAILING SINCE"].joined(separator: "  "))
            for endpoint in endpoints {
                var columns = [
                    endpoint.id, DisplayText.escaped(endpoint.userEmail, maximumLength: 128),
                    endpoint.disabledAt == nil ? "enabled" : "disabled",
                    DisplayText.escaped(endpoint.events.joined(separator: ","), maximumLength: 256),
                    DisplayText.quoted(endpoint.url, maximumLength: 256),
                    endpoint.failingSince.map(AdminKeyCommand.List.time) ?? "-",
                ]
                if let reason = endpoint.disabledReason { columns.append("(\(DisplayText.quoted(reason)))") }
                console.line(columns.joined(separator: "  "))
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop delivering to an endpoint; its deliveries wait, pending, until it is enabled."
        )

        @OptionGroup var admin: AdminOptions

        @Argument(help: ArgumentHelp("The endpoint's id, as `webhooks list` shows it.", valueName: "id"))
        var id: String

        @Option(help: ArgumentHelp("Why, for the audit log and the endpoint's owner.", valueName: "text"))
        var reason = "disabled by the operator"

        func run() async throws {
            let endpoint = try await admin.withKeyStore { store in
                try await store.disableWebhookEndpoint(id: id, actor: AdminOptions.actor, reason: reason)
            }
            Console().line("disabled endpoint \(endpoint.id) of \(endpoint.userEmail)")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deliver to a disabled endpoint again.")

        @OptionGroup var admin: AdminOptions

        @Argument(help: ArgumentHelp("The endpoint's id.", valueName: "id"))
        var id: String

        func run() async throws {
            let endpoint = try await admin.withKeyStore { store in
                try await store.enableWebhookEndpoint(id: id, actor: AdminOptions.actor)
            }
            Console().line("enabled endpoint \(endpoint.id) of \(endpoint.userEmail)")
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show an endpoint's latest deliveries.")

        @OptionGroup var admin: AdminOptions

        @Argument(help: ArgumentHelp("The endpoint's id.", valueName: "id"))
        var id: String

        @Option(help: ArgumentHelp("How many, newest first (1 to 1000).", valueName: "count"))
        var limit = 20

        func validate() throws {
            guard (1...1000).contains(limit) else { throw ValidationError("--limit must be 1 to 1000") }
        }

        func run() async throws {
            let deliveries = try await admin.withKeyStore { store in
                try await store.webhookDeliveries(endpointID: id, userID: nil, limit: limit)
            }
            WebhooksCommand.printDeliveries(deliveries.map(WebhookDeliveryResponse.init))
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a delivery due again now (a failed one too); a running server sends it within a second."
        )

        @OptionGroup var admin: AdminOptions

        @Argument(help: ArgumentHelp("The delivery's id.", valueName: "id"))
        var id: String

        func run() async throws {
            let delivery = try await admin.withKeyStore { store in
                try await store.retryWebhookDelivery(id: id, userID: nil)
            }
            Console().line("delivery \(delivery.id) of \(delivery.eventID) is due again now")
        }
    }
}
