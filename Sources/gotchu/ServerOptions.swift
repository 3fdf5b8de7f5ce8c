import ArgumentParser
import Foundation
import GotchuAPI
import GotchuLedgerClient

/// `--server` for commands that talk to a ledger, with the token cached by `gotchu login`.
struct ServerOptions: ParsableArguments {
    @Option(
        name: .customLong("server"),
        help: ArgumentHelp("Ledger server URL (default: $GOTCHU_SERVER, else http://127.0.0.1:8080).", valueName: "url")
    )
    var serverURL: String?

    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp(
            "PEM file of the private CA that signed an https server's certificate (default: $GOTCHU_CA_FILE; else the system's CAs).",
            valueName: "path"
        )
    )
    var caFile: String?

    /// The private CA to trust, if one is named.
    var trust: LedgerTrust? {
        get throws {
            guard let path = caFile ?? ProcessInfo.processInfo.environment["GOTCHU_CA_FILE"], !path.isEmpty else {
                return nil
            }
            do {
                return try LedgerTrust(caFile: URL(fileURLWithPath: path))
            } catch {
                throw CLIError("--ca-file: \(error)")
            }
        }
    }

    var baseURL: URL {
        get throws {
            let text = serverURL ?? ProcessInfo.processInfo.environment["GOTCHU_SERVER"] ?? "http://127.0.0.1:8080"
            guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                throw ValidationError("--server must be an http(s) URL such as http://127.0.0.1:8080, got '\(text)'")
            }
            return url
        }
    }

    /// The file holding the token for this server's origin.
    var tokenFile: URL {
        get throws {
            let name = try Self.tokenFileName(for: try baseURL)
            return Paths.configHome.appendingPathComponent(name)
        }
    }

    /// `token-SCHEME-HOST-PORT.json` for the origin of `url`: the scheme, the host lowercased and the port, the
    /// default one filled in. A token is sent only to the origin it was issued by, so the name must differ for every
    /// origin: the host keeps only `a-z`, `0-9`, `.` and `-` and has every other byte percent-encoded, and neither
    /// the scheme nor the port can hold a `-`, so no two origins share a file. The path is left out because the
    /// client sends every request to an absolute path on the origin.
    static func tokenFileName(for url: URL) throws -> String {
        let scheme = (url.scheme ?? "").lowercased()
        guard scheme == "http" || scheme == "https", let host = url.host?.lowercased(), !host.isEmpty else {
            throw CLIError("--server must be an http(s) URL with a host, got '\(url.absoluteString)'")
        }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        var encodedHost = ""
        for byte in host.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."),
                UInt8(ascii: "-"):
                encodedHost.append(Character(Unicode.Scalar(byte)))
            default:
                encodedHost += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        let name = "token-\(scheme)-\(encodedHost)-\(port).json"
        // NAME_MAX on Linux file systems.
        guard name.utf8.count <= 255 else { throw CLIError("the server's host name is too long to cache a token for") }
        return name
    }

    /// A client for the server, logged in if a token is cached; with a cached refresh token it refreshes the access
    /// token when the server refuses it, and keeps the new pair in the cache.
    func client(requireLogin: Bool = true) throws -> LedgerClient {
        let url = try baseURL
        let file = try tokenFile
        let cached = try? JSONDecoder().decode(CachedToken.self, from: Data(contentsOf: file))
        if requireLogin && cached == nil {
            throw CLIError("not logged in to \(url.absoluteString): run `gotchu login --email you@example.com`")
        }
        var client = LedgerClient(baseURL: url, token: cached?.token, trust: try trust)
        if let cached, let refreshToken = cached.refreshToken {
            client.credentials = LedgerLogin(accessToken: cached.token, refreshToken: refreshToken) { pair in
                var updated = cached
                updated.token = pair.token
                updated.refreshToken = pair.refreshToken
                // A failed write leaves the old pair, whose refresh token is now used up: the next command asks
                // for a new login rather than guessing.
                try? Paths.writePrivate(try JSONEncoder().encode(updated), to: file)
            }
        }
        return client
    }

    /// The receipt keys to trust for this server: those in `keysFile` if given, else those pinned for its origin at
    /// first contact (`receipt-keys-SCHEME-HOST-PORT.json` beside the tokens).
    func receiptTrust(keysFile: String?) throws -> ReceiptTrust {
        if let keysFile {
            do {
                return try ReceiptTrust.keyFile(URL(fileURLWithPath: keysFile))
            } catch {
                throw CLIError("--receipt-keys: \(error)")
            }
        }
        let name = "receipt-keys-" + (try Self.tokenFileName(for: try baseURL)).dropFirst("token-".count)
        return ReceiptTrust(.pinned(file: Paths.configHome.appendingPathComponent(name)))
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
    /// The refresh token of the login (absent for logins cached before refresh tokens).
    var refreshToken: String?
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: Swift.max(0, length - count)) + self
    }
}
