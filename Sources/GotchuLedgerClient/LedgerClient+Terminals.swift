public import Foundation
public import GotchuAPI
public import GotchuCore
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

extension LedgerClient {
    /// `POST /charges/resolve`: what a terminal's charge (its bytes, as read over Bluetooth) asks, and of whom.
    public func resolveCharge(_ charge: [UInt8]) async throws(LedgerClientError) -> ChargeResponse {
        try await request("POST", "/charges/resolve", body: ChargeRequest(charge: Base64URL.encode(Data(charge))))
    }

    /// `POST /charges/pay`: pays a terminal's charge under `idempotencyKey` (send it again with the same key after a
    /// lost answer), with `tipCents` on top; the balance holds the receipt the terminal checks, and whether the answer
    /// replays an earlier one.
    public func payCharge(
        _ charge: [UInt8],
        idempotencyKey: String,
        tipCents: Cents = 0
    ) async throws(LedgerClientError) -> SendResult {
        try await payment(
            "/charges/pay",
            body: ChargeRequest(charge: Base64URL.encode(Data(charge)), tipCents: tipCents == 0 ? nil : tipCents),
            idempotencyKey: idempotencyKey
        )
    }
}
