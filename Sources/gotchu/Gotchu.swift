import ArgumentParser

@main
struct Gotchu: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gotchu",
        abstract: "BLE proximity payments: a ledger server, receivers that advertise, payers that scan and pay.",
        discussion: """
            Start a development ledger and use it:
              gotchu server --dev                        # ledger on http://127.0.0.1:8080, SQLite under ~/.local/share
              gotchu login --email bob@example.com       # dev login; the token is cached under ~/.config/gotchu
              gotchu wallet                              # balance and recent ledger entries

            Every command that talks to a server takes --server URL (or GOTCHU_SERVER).
            """,
        subcommands: [
            DemoCommand.self,
            ServerCommand.self,
            LoginCommand.self,
            WalletCommand.self,
            FundCommand.self,
            ReceiveCommand.self,
            PayCommand.self,
            BenchCommand.self,
        ]
    )
}
