import Foundation
import GotchuAPI
import GotchuLedger
import GotchuLedgerAPI
import GotchuReceipts
import HTTPTypes
import Hummingbird
import NIOCore

extension LedgerRoutes {
    /// The routes of terminals: a user's token, or an API key with `terminals:manage`, enrols, lists and revokes its
    /// own terminals' keys, which sign its charges when a terminal cannot reach the ledger.
    var terminalRoutes: [LedgerRoute] {
        [
            LedgerRoute(.post, "/terminals", "enrollTerminal") { request, context in
                let payee = try await context.user(for: .manageTerminals)
                let body = try await request.decode(as: TerminalRequest.self, context: context)
                guard let key = Base64URL.decode(body.publicKey) else {
                    throw Problem(.badRequest, detail: "public_key must be base64url without padding")
                }
                let terminal = try await store.enrollTerminal(payeeID: payee, name: body.name, publicKey: key)
                return try json(TerminalResponse(terminal), status: .created)
            },
            LedgerRoute(.get, "/terminals", "listTerminals") { _, context in
                let payee = try await context.user(for: .manageTerminals)
                let terminals = try await store.terminals(payeeID: payee)
                return try json(TerminalListResponse(terminals: terminals.map(TerminalResponse.init)))
            },
            LedgerRoute(.delete, "/terminals/{id}", "revokeTerminal") { _, context in
                let payee = try await context.user(for: .manageTerminals)
                let id = try context.parameters.require("id")
                guard id.hasPrefix("term_"), id.utf8.count <= 64 else {
                    throw Problem(.notFound, detail: "no such terminal")
                }
                return try json(TerminalResponse(try await store.revokeTerminal(id: id, payeeID: payee)))
            },
        ]
    }
}

extension TerminalResponse {
    /// A terminal as the API shows it.
    init(_ terminal: TerminalRow) {
        self.init(
            id: terminal.id,
            name: terminal.name,
            keyID: terminal.keyID,
            publicKey: Base64URL.encode(terminal.publicKey),
            createdAt: Date(storeMilliseconds: terminal.createdAt),
            revokedAt: terminal.revokedAt.map(Date.init(storeMilliseconds:))
        )
    }
}
