import Crypto
import Foundation
import GotchuAPI
import GotchuLedgerClient
import GotchuPeer
import GotchuReceipts
import GotchuTesting

/// A `gotchu server` with a payer (alice, $50.00) and a payee (bob) whose terminal key is enrolled, as a terminal
/// leaves things while it is online: its key enrolled, the ledger's receipt keys pinned.
struct OfflineCounterFixture {
    let server: RunningCommand
    /// Alice, funded.
    let payer: LedgerClient
    /// Bob, the terminal's payee.
    let payee: LedgerClient
    let payeeID: String
    let key: Curve25519.Signing.PrivateKey
    let receiptKeys: ReceiptKeySet

    static func start(_ processes: GotchuProcesses) async throws -> OfflineCounterFixture {
        let (server, url) = try await processes.startServer()
        var payer = LedgerClient(baseURL: URL(string: url)!)
        payer.token = try await payer.devLogin(email: "alice@example.com").token
        _ = try await payer.fund(amountCents: 5_000)
        var payee = LedgerClient(baseURL: URL(string: url)!)
        let login = try await payee.devLogin(email: "bob@example.com")
        payee.token = login.token
        let key = Curve25519.Signing.PrivateKey()
        _ = try await payee.enrollTerminal(name: "stall 1", publicKey: key.publicKey.rawRepresentation)
        return OfflineCounterFixture(
            server: server,
            payer: payer,
            payee: payee,
            payeeID: login.userID,
            key: key,
            receiptKeys: try await payee.receiptKeys()
        )
    }

    /// A counter offering a new $12.50 charge, signed with the terminal's key, valid for ten minutes.
    func counter(reference: String = "") throws -> OfflineCounter {
        let charge = try TerminalCharge.make(
            amountCents: 1250,
            currency: "USD",
            reference: reference,
            now: Date(),
            lifetime: .seconds(600),
            key: key
        )
        return OfflineCounter(charge: charge, payeeID: payeeID, receiptKeys: receiptKeys)
    }
}
