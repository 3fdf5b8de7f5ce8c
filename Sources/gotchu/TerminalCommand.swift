import ArgumentParser
import Crypto
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuReceipts

/// `gotchu terminal …`: the logged-in payee's terminals, whose keys sign charges while they cannot reach the ledger.
struct TerminalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "terminal",
        abstract: "Enroll this machine as one of your terminals, and list and revoke your terminals.",
        discussion: """
            A terminal that cannot reach the ledger makes its charges itself and signs them with its own \
            Ed25519 key; payers' devices carry them to the ledger, which pays each once, to the payee the key \
            is enrolled under. `enroll` makes the key (kept in a file only you can read, 0600), or uses the one \
            the file holds, and enrolls its public half under your account. Revoke the terminal of a lost \
            machine: its charges are refused from then on.

            Examples:
              gotchu terminal enroll "counter 1"
              gotchu terminal enroll "market stall" --key-file /var/lib/gotchu/terminal.key
              gotchu terminal list
              gotchu terminal revoke term_…
            """,
        subcommands: [Enroll.self, List.self, Revoke.self]
    )

    struct Enroll: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make this machine's terminal key (or use the one in --key-file) and enroll it under you."
        )

        @Argument(help: ArgumentHelp("The name you know it by, such as \"counter 1\".", valueName: "name"))
        var name: String

        @Option(
            help: ArgumentHelp(
                "Where the private key is kept (default: $XDG_STATE_HOME/gotchu/terminal.key).",
                valueName: "path"
            )
        )
        var keyFile: String?

        @OptionGroup var server: ServerOptions

        func run() async throws {
            let file = keyFile.map { URL(fileURLWithPath: $0) } ?? TerminalKeyFile.defaultLocation
            // Made and kept before it is enrolled: a failure in between leaves a key to enroll again, never an
            // enrolled key whose private half is lost.
            let key = try TerminalKeyFile.loadOrCreate(file)
            let terminal = try await server.client().enrollTerminal(
                name: name,
                publicKey: key.publicKey.rawRepresentation
            )
            Console().line(
                "terminal \(DisplayText.escaped(terminal.id, maximumLength: 64)) "
                    + "\(DisplayText.quoted(terminal.name, maximumLength: 64)) enrolled, key "
                    + "\(DisplayText.escaped(terminal.keyID, maximumLength: 64)) in \(file.path)"
            )
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List your terminals, revoked ones too.")

        @OptionGroup var server: ServerOptions

        func run() async throws {
            let console = Console()
            console.line(["ID", "KEY", "ENROLLED", "REVOKED", "NAME"].joined(separator: "  "))
            for terminal in try await server.client().terminals() {
                console.line(TerminalCommand.row(terminal))
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a terminal: the charges its key signs are refused from now on."
        )

        @Argument(help: ArgumentHelp("The terminal's id (term_…), from `gotchu terminal list`.", valueName: "id"))
        var id: String

        @OptionGroup var server: ServerOptions

        func run() async throws {
            Console().line(TerminalCommand.row(try await server.client().revokeTerminal(id: id)))
        }
    }

    /// A terminal as `list` shows it, every column from the ledger escaped.
    static func row(_ terminal: TerminalResponse) -> String {
        [
            DisplayText.escaped(terminal.id, maximumLength: 64),
            DisplayText.escaped(terminal.keyID, maximumLength: 64),
            terminal.createdAt.formatted(.iso8601),
            terminal.revokedAt.map { $0.formatted(.iso8601) } ?? "-",
            DisplayText.quoted(terminal.name, maximumLength: 64),
        ].joined(separator: "  ")
    }
}

/// A terminal's private key on disk: its raw 32 bytes in base64url on one line, readable by its owner only.
enum TerminalKeyFile {
    /// `$XDG_STATE_HOME/gotchu/terminal.key`.
    static var defaultLocation: URL { Paths.stateHome.appendingPathComponent("terminal.key") }

    /// The key the file holds, or a new one written to it (0600) when there is no file.
    /// - Throws: ``CLIError`` for a file that others may read, or that holds no key.
    static func loadOrCreate(_ file: URL) throws -> Curve25519.Signing.PrivateKey {
        guard FileManager.default.fileExists(atPath: file.path) else {
            let key = Curve25519.Signing.PrivateKey()
            do {
                try PrivateFile.write(Data((Base64URL.encode(key.rawRepresentation) + "\n").utf8), to: file)
            } catch {
                throw CLIError(error.description)
            }
            return key
        }
        let permissions = (try? FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions]) as? Int
        guard let permissions, permissions & 0o077 == 0 else {
            throw CLIError("\(file.path) may be read by others; chmod 600 it (it holds a terminal's private key)")
        }
        let text = (try? String(contentsOf: file, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let text, let raw = Base64URL.decode(text), raw.count == 32,
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        else {
            throw CLIError("\(file.path) holds no terminal key (32 bytes, base64url, on one line)")
        }
        return key
    }
}
