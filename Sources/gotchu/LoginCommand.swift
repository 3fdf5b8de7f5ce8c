import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient

struct LoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in to a development ledger by e-mail and cache the token.",
        discussion: """
            Needs a server started with --dev. The token is cached per server under \
            $XDG_CONFIG_HOME/gotchu (default ~/.config/gotchu) with mode 0600, and used by wallet, \
            fund, receive and pay.
            """
    )

    @Option(help: "The e-mail to log in as; the part before @ is the name payers see.")
    var email: String

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let client = try server.client(requireLogin: false)
        let login = try await client.devLogin(email: email)
        try server.saveToken(CachedToken(token: login.token, userID: login.userID, email: email))
        let user = DisplayText.escaped(login.userID, maximumLength: 64)
        Console().line("logged in as \(email) (user \(user)) on \(client.baseURL.absoluteString)")
    }
}
