import ArgumentParser
import Foundation
import GotchuLedgerClient

/// `--server` for commands that talk to a ledger, with the token cached by `gotchu login`.
struct ServerOptions: ParsableArguments {
    @Option(
        name: .customLong("server"),
        help: ArgumentHelp("Ledger server URL (default: $GOTCHU_SERVER, else http://127.0.0.1:8080).", valueName: "url")
    )
    var serverURL: String?

    var baseURL: URL {
        get throws {
            let text = serverURL ?? ProcessInfo.processInfo.environment["GOTCHU_SERVER"] ?? "http://127.0.0.1:8080"
            guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                throw ValidationError("--server must be an http(s) URL such as http://127.0.0.1:8080, got '\(text)'")
            }
            return url
        }
    }

    /// The file holding the token for this server.
    var tokenFile: URL {
        get throws {
            let host = try baseURL.absoluteString.map { $0.isLetter || $0.isNumber ? $0 : "_" }
            return Paths.configHome.appendingPathComponent("token-\(String(host)).json")
        }
    }

    /// A client for the server, logged in if a token is cached.
    func client(requireLogin: Bool = true) throws -> LedgerClient {
        let url = try baseURL
        let token = try? JSONDecoder().decode(CachedToken.self, from: Data(contentsOf: tokenFile)).token
        if requireLogin && token == nil {
            throw CLIError("not logged in to \(url.absoluteString): run `gotchu login --email you@example.com`")
        }
        return LedgerClient(baseURL: url, token: token)
    }

    func saveToken(_ token: CachedToken) throws {
        try Paths.writePrivate(try JSONEncoder().encode(token), to: tokenFile)
    }
}

/// What `gotchu login` caches (mode 0600).
struct CachedToken: Codable {
    var token: String
    var userID: String
    var email: String
}
