import ArgumentParser
import GotchuKioskCLI

@main
struct Gotchu: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gotchu",
        abstract: "BLE proximity payments: a ledger server, receivers that advertise, payers that scan and pay.",
        discussion: """
            Try it with no hardware: `gotchu demo`.

            A development ledger and a payment between two terminals on this machine:
              gotchu server --dev
              gotchu login --email bob@example.com
              gotchu receive --amount 12.50 --radio sim
            and, as another user (another XDG_CONFIG_HOME):
              gotchu login --email alice@example.com
              gotchu fund --amount 50.00
              gotchu pay --radio sim

            Commands that talk to a ledger take --server URL (or GOTCHU_SERVER).
            """,
        subcommands: [
            DemoCommand.self,
            ServerCommand.self,
            AdminCommand.self,
            LoginCommand.self,
            LogoutCommand.self,
            WalletCommand.self,
            FundCommand.self,
            PayoutCommand.self,
            WebhooksCommand.self,
            TerminalCommand.self,
            ReceiveCommand.self,
            PayCommand.self,
            RefundCommand.self,
            StatusCommand.self,
            SimulateCommand.self,
            AdvertiseCommand.self,
            ScanCommand.self,
            DoctorCommand.self,
            KioskCommand.self,
            ChargeCommand.self,
            ReceiptCommand.self,
            LedgerCommand.self,
            BenchMovedCommand.self,
        ]
    )

    /// Runs the command the arguments name, with broken pipes reported as errors rather than signals, so every
    /// command ends quietly when its reader goes away (``StandardOutput``).
    static func main() async {
        StandardOutput.ignoreBrokenPipes()
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}
