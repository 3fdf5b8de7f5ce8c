import GotchuLedgerServer
import GotchuWebhooks
import NIOCore

/// The tests' webhook resolver: the names a test gives, `localhost` as `/etc/hosts` has it, numeric addresses (in
/// every form the system's resolver reads, through it: no name server is asked for those), and no other name. A test
/// never waits on the machine's name servers for a name that resolves nowhere.
struct TestWebhookResolver: WebhookResolver {
    /// Names and the addresses they resolve to.
    var names: [String: [String]] = [:]

    func addresses(host: String, port: Int) async throws -> [SocketAddress] {
        if let listed = names[host] { return try listed.map { try SocketAddress(ipAddress: $0, port: port) } }
        if host == "localhost" {
            return [
                try SocketAddress(ipAddress: "127.0.0.1", port: port), try SocketAddress(ipAddress: "::1", port: port),
            ]
        }
        if !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" || $0 == "x" || $0 == "X" }),
            host.contains(where: \.isNumber)
        {
            return try await SystemWebhookResolver().addresses(host: host, port: port)
        }
        throw WebhookDeliveryError("\(host) does not resolve (Name or service not known)")
    }
}
