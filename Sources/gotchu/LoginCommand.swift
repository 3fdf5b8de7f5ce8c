import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient

struct LoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in to a ledger and cache the tokens.",
        discussion: """
            Asks for the account's password without echoing it (or reads it from standard input with \
            --password-stdin). On a server started with --dev and without --password-stdin, it logs in \
            by e-mail alone (development login), creating the account if needed. The tokens are cached \
            per server under $XDG_CONFIG_HOME/gotchu (default ~/.config/gotchu) with mode 0600, used by \
            wallet, fund, receive and pay, and refreshed when the server refuses the short-lived access \
            token. `gotchu logout` ends the login.
            """
    )

    @Option(help: "The account's e-mail address.")
    var email: String

    @Flag(help: "Read the password from standard input (its first line) instead of asking at the terminal.")
    var passwordStdin = false

    @Flag(help: "Development login by e-mail alone (a server started with --dev); never asks for a password.")
    var dev = false

    @OptionGroup var server: ServerOptions

    func validate() throws {
        guard !(dev && passwordStdin) else { throw ValidationError("--dev takes no password: drop --password-stdin") }
    }

    func run() async throws {
        let client = try server.client(requireLogin: false)
        let login: LoginResponse
        if passwordStdin {
            login = try await client.login(email: email, password: try PasswordInput.fromStandardInput())
        } else if dev {
            login = try await client.devLogin(email: email)
        } else if let development = try await developmentLogin(client) {
            login = development
        } else {
            // Not a development server: a real login.
            let password = try PasswordInput.ask("Password for \(Console.safe(email)): ")
            login = try await client.login(email: email, password: password)
        }
        try server.saveToken(
            CachedToken(token: login.token, userID: login.userID, email: email, refreshToken: login.refreshToken)
        )
        let user = DisplayText.escaped(login.userID, maximumLength: 64)
        Console().line("logged in as \(email) (user \(user)) on \(client.baseURL.absoluteString)")
    }

    /// The development login, or `nil` when the server has none (it was not started with --dev).
    private func developmentLogin(_ client: LedgerClient) async throws -> LoginResponse? {
        do {
            return try await client.devLogin(email: email)
        } catch {
            let kind = error.problemKind
            if kind == .notFound || kind == .methodNotAllowed { return nil }
            throw error
        }
    }
}

struct LogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "End the login to a ledger: its refresh token is revoked and the cached tokens deleted."
    )

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let file = try server.tokenFile
        guard let cached = try? JSONDecoder().decode(CachedToken.self, from: Data(contentsOf: file)) else {
            Console().line("not logged in to \(try server.baseURL.absoluteString)")
            return
        }
        var revokeError: (any Error)?
        if let refreshToken = cached.refreshToken {
            do {
                try await server.client(requireLogin: false).logout(refreshToken: refreshToken)
            } catch {
                revokeError = error
            }
        }
        // Deleted whatever the server said: the tokens are of no use to this machine any more.
        try? FileManager.default.removeItem(at: file)
        if let revokeError {
            throw CLIError("deleted the cached tokens, but the server could not revoke the login: \(revokeError)")
        }
        Console().line("logged out of \(try server.baseURL.absoluteString)")
    }
}
