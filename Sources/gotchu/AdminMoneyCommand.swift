import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerAPI
import GotchuLedgerServer

/// `gotchu admin deposit …`: money entering the ledger, credited by the operator against an external reference.
struct AdminDepositCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deposit",
        abstract: "Credit a user with money that reached the operator (a bank transfer, cash at a counter).",
        discussion: """
            The money comes from the ledger's deposits account, through two ledger entries, and the deposit \
            is recorded in the audit log. The reference names the deposit outside the ledger (the bank \
            transfer's id): the same reference again is the same deposit and credits nothing more; the same \
            reference with another amount or user is refused.

            Example:
              gotchu admin deposit --database ledger.sqlite alice@example.com 50.00 --reference BANK-2026-0042
            """
    )

    @Argument(help: "The user's e-mail address.")
    var email: String

    @Argument(help: ArgumentHelp("The amount, such as 12.50.", valueName: "amount"))
    var amount: String

    @Option(help: ArgumentHelp("The deposit's external reference (1 to 128 printable characters).", valueName: "ext"))
    var reference: String

    @Option(help: ArgumentHelp("Largest amount, in cents: the server's --max-amount.", valueName: "cents"))
    var maxAmount: Int64 = LedgerPolicy().maximumAmount

    @OptionGroup var admin: AdminOptions

    func validate() throws {
        guard maxAmount > 0 else { throw ValidationError("--max-amount must be 1 or more, got \(maxAmount)") }
    }

    func run() async throws {
        let email = try checkedInput { try EmailAddress.normalize(self.email) }
        let cents = try CLIAmount.parse(amount, option: "AMOUNT")
        var policy = LedgerPolicy()
        policy.maximumAmount = maxAmount
        let reference = self.reference
        let result = try await admin.withStoreSayingRefusals(policy: policy) { store in
            try await store.deposit(email: email, amountCents: cents, reference: reference, actor: AdminOptions.actor)
        }
        let what =
            "deposit \(result.deposit.id) of \(Money.format(result.deposit.amount)) to \(email), reference "
            + DisplayText.quoted(result.deposit.reference, maximumLength: 140)
        Console().line(
            result.replayed
                ? "already deposited: \(what) (nothing more credited); balance \(Money.format(result.balance))"
                : "deposited: \(what); balance \(Money.format(result.balance))"
        )
    }
}

/// `gotchu admin payout …`: the operator's side of users' payouts.
struct AdminPayoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payout",
        abstract: "List, settle and fail users' payouts.",
        discussion: """
            A user's payout request (POST /wallet/payouts, `gotchu payout`) moves the amount from the wallet \
            into the ledger's payouts clearing account at once, pending. Once the operator has paid it out, \
            `settle` records that with the external reference: the amount moves on to the settled-payouts \
            account, out of every wallet for good. If it cannot be paid out, `fail` returns the amount to the \
            user's wallet. Only a pending payout can be settled or failed, once; both are recorded in the \
            audit log.

            Examples:
              gotchu admin payout list --database ledger.sqlite --status pending
              gotchu admin payout settle --database ledger.sqlite 5f0c… --reference SEPA-2026-11-23-7
              gotchu admin payout fail --database ledger.sqlite 5f0c… --reason "account closed"
            """,
        subcommands: [List.self, Settle.self, Fail.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List payouts, oldest first.")

        @Option(help: ArgumentHelp("Only payouts in this state: pending, settled or failed.", valueName: "status"))
        var status: String?

        @Option(help: "How many payouts at most (1...10000).")
        var limit = 1_000

        @OptionGroup var admin: AdminOptions

        func validate() throws {
            _ = try parsedStatus
            guard (1...10_000).contains(limit) else {
                throw ValidationError("--limit must be 1...10000, got \(limit)")
            }
        }

        var parsedStatus: PayoutStatus? {
            get throws {
                guard let status else { return nil }
                guard let parsed = PayoutStatus(rawValue: status.uppercased()) else {
                    throw ValidationError(
                        "--status must be pending, settled or failed, got \(DisplayText.quoted(status))"
                    )
                }
                return parsed
            }
        }

        func run() async throws {
            let status = try parsedStatus
            let limit = self.limit
            let payouts = try await admin.withStoreSayingRefusals { store in
                try await store.payouts(status: status, limit: limit)
            }
            let console = Console()
            guard !payouts.isEmpty else {
                console.line("no payouts" + (status.map { " \($0.rawValue.lowercased())" } ?? ""))
                return
            }
            let header = ["ID", "STATUS", "AMOUNT", "USER", "REQUESTED", "RESOLVED", "REFERENCE / REASON"]
            let rows = payouts.map { listing in
                let payout = listing.payout
                return [
                    payout.id, payout.status.rawValue, Money.format(payout.amount),
                    DisplayText.escaped(listing.email, maximumLength: 254), Self.time(payout.createdAt),
                    payout.resolvedAt.map(Self.time) ?? "-",
                    (payout.reference ?? payout.reason).map { DisplayText.quoted($0, maximumLength: 140) } ?? "-",
                ]
            }
            let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
            for row in [header] + rows {
                console.line(
                    zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
                        .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
                )
            }
        }

        static func time(_ milliseconds: Int64) -> String {
            ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
        }
    }

    struct Settle: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record that a pending payout was paid out; its money leaves the ledger."
        )

        @Argument(help: "The payout's id (from `payout list`).")
        var id: String

        @Option(
            help: ArgumentHelp("The payment's external reference (1 to 128 printable characters).", valueName: "ext")
        )
        var reference: String

        @OptionGroup var admin: AdminOptions

        func validate() throws { try validatePayoutID(id) }

        func run() async throws {
            let (id, reference) = (self.id.lowercased(), self.reference)
            let payout = try await admin.withStoreSayingRefusals { store in
                try await store.settlePayout(id: id, reference: reference, actor: AdminOptions.actor)
            }
            Console().line(
                "settled payout \(payout.id) of \(Money.format(payout.amount)), reference "
                    + DisplayText.quoted(payout.reference ?? "", maximumLength: 140)
            )
        }
    }

    struct Fail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record that a pending payout could not be paid out; its money goes back to the user."
        )

        @Argument(help: "The payout's id (from `payout list`).")
        var id: String

        @Option(help: ArgumentHelp("Why (1 to 200 printable characters), kept with the payout.", valueName: "reason"))
        var reason: String

        @OptionGroup var admin: AdminOptions

        func validate() throws { try validatePayoutID(id) }

        func run() async throws {
            let (id, reason) = (self.id.lowercased(), self.reason)
            let payout = try await admin.withStoreSayingRefusals { store in
                try await store.failPayout(id: id, reason: reason, actor: AdminOptions.actor)
            }
            Console().line(
                "failed payout \(payout.id): \(Money.format(payout.amount)) returned to the user, reason "
                    + DisplayText.quoted(payout.reason ?? "", maximumLength: 220)
            )
        }
    }
}

/// A payout id is a UUID; anything else is refused before the database is opened.
private func validatePayoutID(_ id: String) throws {
    guard UUID(uuidString: id) != nil, id.utf8.count == 36 else {
        throw ValidationError("the payout id must be a UUID, got \(DisplayText.quoted(id))")
    }
}

extension AdminOptions {
    /// ``withStore(policy:_:)``, with the ledger's refusals (an unknown user or payout, a reused reference, a payout
    /// settled already) said plainly.
    func withStoreSayingRefusals<T: Sendable>(
        policy: LedgerPolicy = LedgerPolicy(),
        _ body: @Sendable (any LedgerStore) async throws -> T
    ) async throws -> T {
        do {
            return try await withStore(policy: policy, body)
        } catch let refusal as LedgerError {
            throw CLIError(refusal.detail)
        }
    }
}

/// A validation's problem as the command's error.
private func checkedInput<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let problem as Problem {
        throw CLIError(problem.detail ?? problem.title)
    }
}
