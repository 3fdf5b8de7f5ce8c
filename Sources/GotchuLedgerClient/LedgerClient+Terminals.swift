public import Foundation
public import GotchuAPI
import GotchuReceipts

extension LedgerClient {
    /// `POST /terminals`: enrols a terminal's raw 32-byte Ed25519 public key under the caller, as `name`.
    public func enrollTerminal(name: String, publicKey: Data) async throws(LedgerClientError) -> TerminalResponse {
        try await request(
            "POST",
            "/terminals",
            body: TerminalRequest(name: name, publicKey: Base64URL.encode(publicKey))
        )
    }

    /// `GET /terminals`: the caller's terminals, oldest first, revoked ones included.
    public func terminals() async throws(LedgerClientError) -> [TerminalResponse] {
        let list: TerminalListResponse = try await request(
            "GET",
            "/terminals",
            body: Optional<TerminalRequest>.none
        )
        return list.terminals
    }

    /// `DELETE /terminals/{id}`: its charges are refused from now on; the terminal as it is now.
    public func revokeTerminal(id: String) async throws(LedgerClientError) -> TerminalResponse {
        try await request("DELETE", "/terminals/\(Self.pathSegment(id))", body: Optional<TerminalRequest>.none)
    }
}
