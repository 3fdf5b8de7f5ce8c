import ArgumentParser
import Foundation
import GotchuCore
import GotchuPeer

struct ReceiveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receive",
        abstract: "Ask for a payment: create a session and advertise its EID until it is paid.",
        discussion: """
            Log in first with `gotchu login`. The session expires after the server's session lifetime \
            (5 minutes by default); --recreate starts a new one each time until paid. Ctrl-C cancels \
            the session and reports what the ledger says: paid if it was paid first (exit 0), \
            cancelled (exit 130), or, when the ledger cannot confirm the cancel, that the session may \
            still be paid until it expires (exit 4).

            Exit status: 0 paid, 2 expired unpaid, 130 cancelled, 4 cancel not confirmed by the ledger, \
            1 any other failure.

            Examples:
              gotchu receive --amount 12.50                # advertise through BlueZ
              gotchu receive --amount 12.50 --radio sim    # the simulated air of this machine
            """
    )

    @Option(help: ArgumentHelp("Amount to ask, in dollars and cents, such as 12.50.", valueName: "amount"))
    var amount: String

    @Flag(help: "When the session expires unpaid, create a new one (at most 12).")
    var recreate = false

    @OptionGroup var radio: RadioOptions
    @OptionGroup var server: ServerOptions

    func run() async throws {
        let cents = try CLIAmount.parse(amount, option: "--amount")
        let ledger = try server.client()
        let radio = try await self.radio.makeRadio(role: .receiver)
        let output = Console()
        var configured = Receiver.Options(amountCents: cents, serviceUUID: try self.radio.serviceUUID)
        configured.flow = .init(recreateOnExpiry: recreate, maximumSessions: recreate ? 12 : 1)
        let options = configured
        let outcome = try await withTaskCancellationOnSignals {
            await Receiver(radio: radio, ledger: ledger).run(options) { output.receiver($0) }
        }
        switch outcome {
        case .paid(let session):
            output.line("paid: \(Money.format(cents)) received (session \(session.sessionID))")
        case .expired:
            output.line("expired unpaid")
            throw ExitCode(2)
        case .cancelled:
            output.line("cancelled")
            throw ExitCode(130)
        case .cancelUnconfirmed(let session, let reason):
            // The session's expiry is held on the radio's clock; bring it back to the wall clock to show it.
            let remaining = session.expiresAt - (await radio.now())
            let expiresAt = Date(timeIntervalSinceNow: Double(remaining.components.seconds))
            output.line(
                "could not confirm the cancel (\(reason)); the session may still be paid until it expires at "
                    + expiresAt.formatted(.iso8601)
            )
            throw ExitCode(4)
        case .createFailed(let reason):
            throw CLIError("could not create a session: \(reason)")
        case .advertisingFailed(let reason):
            throw CLIError("could not advertise: \(reason)")
        }
    }
}
