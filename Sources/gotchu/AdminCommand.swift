import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerAPI
import GotchuLedgerServer
import GotchuLedgerStores

struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Manage a ledger's accounts on the server machine, straight in its database (no HTTP).",
        discussion: """
            Every command takes --database (the server's: a SQLite file or a postgres:// URL) and records \
            what it changed in the ledger's audit log, with the operating-system user that ran it.

            Examples:
              gotchu admin user add shop@example.com --name "Corner Shop" --password-stdin < password.txt
              gotchu admin user list
              gotchu admin user disable mallory@example.com
              gotchu admin merchant verify shop@example.com --name "Corner Shop Ltd"
              gotchu admin key create --user shop@example.com --scope sessions:create --scope sessions:read
              gotchu admin audit
              gotchu admin deposit alice@example.com 50.00 --reference BANK-2026-0042
              gotchu admin payout list --status pending
              gotchu admin webhooks list
            """,
        subcommands: [
            AdminUserCommand.self, AdminMerchantCommand.self, AdminKeyCommand.self, AdminAuditCommand.self,
            AdminDepositCommand.self, AdminPayoutCommand.self, AdminWebhooksCommand.self,
        ]
    )
}

/// The database an admin command works on, opened and migrated like the server's.
struct AdminOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "SQLite database file (default: $XDG_DATA_HOME/gotchu/ledger.sqlite) or postgres://USER@HOST:PORT/DB URL.",
            valueName: "path-or-url"
        )
    )
    var database: String?

    func validate() throws {
        if let database { _ = try LedgerDatabase.option(database) }
    }

    /// Runs `body` on the ledger's store, migrated first, with `policy`. Without `--database` the server's default
    /// SQLite file must exist.
    func withStore<T: Sendable>(
        policy: LedgerPolicy = LedgerPolicy(),
        _ body: @Sendable (any LedgerStore) async throws -> T
    ) async throws -> T {
        let path = database ?? LedgerDatabase.defaultPath
        let opened: OpenedStore
        do {
            opened = try LedgerDatabase.option(path).open(
                LedgerDatabase.Options(policy: policy, maximumConnections: 2, createsFile: database != nil)
            )
        } catch let error as LedgerDatabaseError where error.missingFile != nil {
            throw CLIError("no ledger at \(path); pass --database (the server's)")
        }
        return try await opened.withServices { store in
            try await store.migrate()
            return try await body(store)
        }
    }

    /// Who runs the command, for the audit log: the operating-system user, and the user behind `sudo` if any.
    static var actor: String {
        let uid = geteuid()
        var name = "uid \(uid)"
        if let entry = getpwuid(uid), let text = entry.pointee.pw_name { name = String(cString: text) }
        if let sudo = ProcessInfo.processInfo.environment["SUDO_USER"], !sudo.isEmpty, sudo != name {
            name += " (sudo by \(sudo))"
        }
        return DisplayText.escaped(name, maximumLength: 128)
    }
}

/// How a new password is given: on standard input, or typed twice at the terminal without echo.
struct NewPasswordOptions: ParsableArguments {
    @Flag(help: "Read the password from standard input (its first line) instead of asking at the terminal.")
    var passwordStdin = false

    @Option(
        help: ArgumentHelp(
            "bcrypt cost of the hash (\(Passwords.allowedCosts)); the server's --bcrypt-cost.",
            valueName: "cost"
        )
    )
    var bcryptCost = Passwords.defaultCost

    @Option(
        help: ArgumentHelp("The fewest characters of the password (8...72).", valueName: "count")
    )
    var minPasswordLength = Passwords.defaultMinimumLength

    func validate() throws {
        guard Passwords.allowedCosts.contains(bcryptCost) else {
            throw ValidationError("--bcrypt-cost must be \(Passwords.allowedCosts), got \(bcryptCost)")
        }
        guard (8...72).contains(minPasswordLength) else {
            throw ValidationError("--min-password-length must be 8...72, got \(minPasswordLength)")
        }
    }

    var policy: LedgerPolicy {
        var policy = LedgerPolicy()
        policy.passwordCost = bcryptCost
        policy.minimumPasswordLength = minPasswordLength
        return policy
    }

    func read() throws -> String {
        if passwordStdin { return try PasswordInput.fromStandardInput() }
        let first = try PasswordInput.ask("New password: ")
        guard try PasswordInput.ask("Again: ") == first else { throw CLIError("the two passwords differ") }
        return first
    }
}

struct AdminUserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Add, list, disable users and reset their passwords.",
        subcommands: [Add.self, List.self, Disable.self, ResetPassword.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an account with a password and an empty wallet."
        )

        @Argument(help: "The account's e-mail address.")
        var email: String

        @Option(help: "The name payers see (default: the part of the address before @).")
        var name: String?

        @OptionGroup var password: NewPasswordOptions
        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let email = try checked { try EmailAddress.normalize(self.email) }
            let name = try self.name.map { name in try checked { try EmailAddress.displayName(name) } }
            let secret = try password.read()
            let user = try await admin.withStore(policy: password.policy) { store in
                try await store.addUser(email: email, displayName: name, password: secret, actor: AdminOptions.actor)
            }
            Console().line("added \(email) (user \(user.id))")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every account, oldest first.")

        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let users = try await admin.withStore { store in try await store.users() }
            let console = Console()
            for user in users {
                var flags: [String] = []
                if user.disabled { flags.append("disabled") }
                if !user.hasPassword { flags.append("no password") }
                if let verified = user.verifiedName { flags.append("verified as \(DisplayText.quoted(verified))") }
                console.line(
                    "\(DisplayText.escaped(user.email, maximumLength: 254))  \(DisplayText.quoted(user.displayName))"
                        + (flags.isEmpty ? "" : "  [" + flags.joined(separator: ", ") + "]")
                )
            }
            if users.isEmpty { console.line("no users") }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disable an account: it can no longer log in, and its tokens stop working at once."
        )

        @Argument(help: "The account's e-mail address.")
        var email: String

        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let email = try checked { try EmailAddress.normalize(self.email) }
            try await admin.withStore { store in try await store.disableUser(email: email, actor: AdminOptions.actor) }
            Console().line("disabled \(email)")
        }
    }

    struct ResetPassword: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset-password",
            abstract: "Set a new password; the account's refresh tokens are revoked."
        )

        @Argument(help: "The account's e-mail address.")
        var email: String

        @OptionGroup var password: NewPasswordOptions
        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let email = try checked { try EmailAddress.normalize(self.email) }
            let secret = try password.read()
            try await admin.withStore(policy: password.policy) { store in
                try await store.resetPassword(email: email, password: secret, actor: AdminOptions.actor)
            }
            Console().line("reset the password of \(email)")
        }
    }
}

struct AdminMerchantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merchant",
        abstract: "Vouch for payees' names.",
        subcommands: [Verify.self]
    )

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set the name payers see for this payee, marked verified."
        )

        @Argument(help: "The payee's e-mail address.")
        var email: String

        @Option(help: "The verified name, such as the business's registered name.")
        var name: String

        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let email = try checked { try EmailAddress.normalize(self.email) }
            let name = try checked { try EmailAddress.displayName(self.name) }
            try await admin.withStore { store in
                try await store.verifyMerchant(email: email, name: name, actor: AdminOptions.actor)
            }
            Console().line("verified \(email) as \(DisplayText.quoted(name))")
        }
    }
}

struct AdminAuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Show the newest entries of the audit log: who changed what, when."
    )

    @Option(help: "How many entries (1...10000).")
    var limit = 50

    @OptionGroup var admin: AdminOptions

    func validate() throws {
        guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be 1...10000, got \(limit)") }
    }

    func run() async throws {
        let limit = self.limit
        let entries = try await admin.withStore { store in try await store.auditLog(limit: limit) }
        let console = Console()
        let formatter = ISO8601DateFormatter()
        for entry in entries {
            let when = formatter.string(from: Date(timeIntervalSince1970: Double(entry.at) / 1000))
            let detail = entry.detail.isEmpty ? "" : "  " + DisplayText.escaped(entry.detail, maximumLength: 200)
            console.line(
                "\(when)  \(DisplayText.escaped(entry.actor, maximumLength: 128))  \(entry.action)  "
                    + DisplayText.escaped(entry.subject, maximumLength: 254) + detail
            )
        }
        if entries.isEmpty { console.line("the audit log is empty") }
    }
}

/// A validation's problem as the command's error.
private func checked<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let problem as Problem {
        throw CLIError(problem.detail ?? problem.title)
    }
}
