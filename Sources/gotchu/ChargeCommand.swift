import ArgumentParser
import Foundation
import GotchuCore
import GotchuDBus
import GotchuKiosk

struct ChargeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "charge",
        abstract: "Ask the kiosk on this machine for a payment, as a point-of-sale does, and follow it to its end.",
        discussion: """
            Talks to `gotchu kiosk` over D-Bus (io.gotchu.Kiosk1 on the system bus; the bus policy lets members \
            of the gotchu-pos group call it). Prints each step of the charge and exits 0 when it is paid, 2 when \
            it expires, 3 when it is cancelled, 1 when it fails. Ctrl-C cancels the charge.

            Examples:
              gotchu charge 12.50 --reference "order 1017"
              gotchu charge 12.50 --no-wait         # print the charge id and return
              gotchu charge --show 0f4c…            # a charge's state
              gotchu charge --cancel 0f4c…
            """
    )

    @Argument(help: ArgumentHelp("Amount to charge, in dollars and cents, such as 12.50.", valueName: "amount"))
    var amount: String?

    @Option(help: ArgumentHelp("Your own reference for the charge, such as an order number.", valueName: "text"))
    var reference = ""

    @Flag(help: "Return as soon as the kiosk accepted the charge, printing its id.")
    var noWait = false

    @Option(help: ArgumentHelp("Show the charge with this id and exit.", valueName: "id"))
    var show: String?

    @Option(help: ArgumentHelp("Cancel the charge with this id and exit.", valueName: "id"))
    var cancel: String?

    @Option(
        help: ArgumentHelp(
            "Bus the kiosk is on: system (default), session, or a D-Bus address such as unix:path=/tmp/bus.",
            valueName: "bus"
        )
    )
    var bus = "system"

    func validate() throws {
        let actions = [amount != nil, show != nil, cancel != nil].filter { $0 }.count
        guard actions == 1 else { throw ValidationError("give an amount, --show ID or --cancel ID (one of them)") }
    }

    func run() async throws {
        let output = Console()
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: DBusConnection.Bus(named: bus))
        } catch {
            throw CLIError("cannot connect to the \(DBusConnection.Bus(named: bus)): \(error)")
        }
        let kiosk = KioskClient(connection: connection)
        do {
            if let show {
                output.line(Self.describe(try await kiosk.getCharge(show)))
            } else if let cancel {
                try await kiosk.cancel(cancel)
                output.line("cancelled \(cancel)")
            } else if let amount {
                let cents = try CLIAmount.parse(amount, option: "amount")
                let code = try await follow(kiosk, cents, output)
                await connection.close()
                if code != 0 { throw ExitCode(code) }
                return
            }
            await connection.close()
        } catch let error as DBusError {
            await connection.close()
            throw CLIError(Self.explain(error))
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Starts the charge and prints its steps until it ends; returns the exit code.
    private func follow(_ kiosk: KioskClient, _ cents: Cents, _ output: Console) async throws -> Int32 {
        // Listen before charging, so the first steps are not missed.
        let signals = try await kiosk.signals()
        let id = try await kiosk.charge(amountCents: cents, reference: reference)
        output.line("charge \(id): \(Money.format(cents))")
        if noWait { return 0 }
        do {
            return try await withTaskCancellationOnSignals {
                for await signal in signals where signal.argument(0, as: String.self) == id {
                    switch signal.member {
                    case "Advertising":
                        output.line("waiting for a payer (EID \(signal.argument(1, as: String.self) ?? "?"))")
                    case "Locked": output.line("a payer is paying")
                    case "PaymentSucceeded":
                        output.line(
                            "paid: \(Money.format(cents)) (session \(signal.argument(2, as: String.self) ?? "?"))"
                        )
                        return 0
                    case "Expired":
                        output.line("expired unpaid")
                        return 2
                    case "Cancelled":
                        output.line("cancelled")
                        return 3
                    case "Error":
                        let reason = signal.argument(1, as: String.self) ?? ""
                        let state = try? await kiosk.getCharge(id)["state"]?.value
                        if state == .string(KioskChargeState.failed.rawValue) {
                            output.line("failed: \(reason)")
                            return 1
                        }
                        output.line("problem, the kiosk keeps trying: \(reason)")
                    default: break
                    }
                }
                throw CLIError("the kiosk left the bus; `gotchu charge --show \(id)` tells how the charge ends")
            }
        } catch is CancellationError {
            output.line("cancelling \(id)")
            do {
                try await kiosk.cancel(id)
                output.line("cancelled")
                return 130
            } catch let error as DBusError {
                throw CLIError(Self.explain(error))
            }
        }
    }

    static func describe(_ charge: [String: DBusVariant]) -> String {
        func text(_ key: String) -> String? {
            if case .string(let value) = charge[key]?.value { return value }
            return nil
        }
        var parts = [text("id") ?? "?", text("state") ?? "?"]
        if case .int64(let cents) = charge["amount_cents"]?.value { parts.append(Money.format(cents)) }
        if let reference = text("reference"), !reference.isEmpty { parts.append("reference \(reference)") }
        if let session = text("session_id") { parts.append("session \(session)") }
        if let problem = text("problem") { parts.append("problem: \(problem)") }
        return parts.joined(separator: "  ")
    }

    static func explain(_ error: DBusError) -> String {
        switch error.name {
        case .serviceUnknown, .nameHasNoOwner:
            "no kiosk on the bus: is `gotchu kiosk` running? (systemctl status gotchu-kiosk)"
        case .accessDenied:
            "the bus refused: only members of the gotchu-pos group may call the kiosk (\(error.message))"
        default: error.message.isEmpty ? error.name.rawValue : error.message
        }
    }
}

/// The point-of-sale's side of ``KioskControl``.
struct KioskClient {
    let connection: DBusConnection

    func charge(amountCents: Cents, reference: String) async throws -> String {
        let reply = try await call("Charge", [.int64(amountCents), .string(reference)])
        guard let id = reply.first.flatMap({ String(dbusValue: $0) }) else {
            throw DBusError(.failed, "the kiosk answered Charge without an id")
        }
        return id
    }

    func cancel(_ id: String) async throws { _ = try await call("Cancel", [.string(id)]) }

    func getCharge(_ id: String) async throws -> [String: DBusVariant] {
        let reply = try await call("GetCharge", [.string(id)])
        guard let charge = reply.first.flatMap({ [String: DBusVariant](dbusValue: $0) }) else {
            throw DBusError(.failed, "the kiosk answered GetCharge with something else than a dictionary")
        }
        return charge
    }

    func signals() async throws -> AsyncStream<DBusMessage> {
        try await connection.signals(
            matching: DBusMatchRule(
                sender: KioskControl.busName,
                interface: KioskControl.interface,
                path: KioskControl.path
            )
        )
    }

    private func call(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await connection.call(
            destination: KioskControl.busName,
            path: KioskControl.path,
            interface: KioskControl.interface,
            method: method,
            arguments,
            timeout: .seconds(30)
        )
    }
}
