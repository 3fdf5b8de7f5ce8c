import Crypto
package import Foundation
import GotchuCore
import GotchuReceipts

extension LedgerEngine {
    /// The longest terminal name, in characters.
    package static var maximumTerminalNameLength: Int { 64 }

    /// Enrolls a terminal of `payeeID`: its Ed25519 public key (32 raw bytes), under `name` (printable, 1 to
    /// ``maximumTerminalNameLength`` characters). From then on the charges it signs offline are the payee's.
    /// - Throws: ``LedgerError/Kind/invalidInput`` for a bad name, a key that is not an Ed25519 public key, or a key
    ///   enrolled already (by this payee or another: a key signs for one payee); ``LedgerError/Kind/unknownUser``.
    package func enrollTerminal(payeeID: String, name: String, publicKey: Data) async throws -> TerminalRow {
        if let problem = PrintableText.problem(in: name, maximumLength: Self.maximumTerminalNameLength) {
            throw LedgerError(.invalidInput, detail: "name \(problem)")
        }
        guard publicKey.count == 32, (try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey)) != nil else {
            throw LedgerError(.invalidInput, detail: "public_key must be a raw Ed25519 public key of 32 bytes")
        }
        return try await measuredTransaction { transaction in
            guard let payee = try await transaction.user(id: payeeID) else { throw Self.unknownUser }
            let terminal = TerminalRow(
                id: WebhookSecrets.id("term_"),
                payeeID: payee.id,
                name: name,
                keyID: ReceiptPublicKey.keyID(rawPublicKey: publicKey),
                publicKey: publicKey,
                createdAt: transaction.now,
                revokedAt: nil
            )
            guard try await transaction.insert(terminal: terminal) else {
                throw LedgerError(
                    .invalidInput,
                    detail: "this key is enrolled already; make a new key for each terminal"
                )
            }
            try await transaction.insert(
                audit: terminal.audit(actor: payeeID, action: "terminal.enroll", at: transaction.now)
            )
            return terminal
        }
    }

    /// The terminals of `payeeID`, oldest first, revoked ones included.
    package func terminals(payeeID: String) async throws -> [TerminalRow] {
        try await measuredTransaction { transaction in try await transaction.terminals(payeeID: payeeID) }
    }

    /// The terminal whose key has `keyID`, revoked or not; `nil` if no terminal enrolled it.
    package func terminal(keyID: String) async throws -> TerminalRow? {
        try await measuredTransaction { transaction in try await transaction.terminal(keyID: keyID) }
    }

    /// Revokes a terminal of `payeeID`: its charges are refused from now on. Revoking it again keeps the first time.
    /// - Throws: ``LedgerError/Kind/notFound`` for an id that is unknown or another payee's.
    package func revokeTerminal(id: String, payeeID: String) async throws -> TerminalRow {
        try await measuredTransaction { transaction in
            guard var terminal = try await transaction.terminal(id: id), terminal.payeeID == payeeID else {
                throw LedgerError(.notFound, detail: "no such terminal")
            }
            if terminal.revokedAt == nil {
                try await transaction.revoke(terminal: id)
                terminal.revokedAt = transaction.now
                try await transaction.insert(
                    audit: terminal.audit(actor: payeeID, action: "terminal.revoke", at: transaction.now)
                )
            }
            return terminal
        }
    }
}

extension TerminalRow {
    fileprivate func audit(actor: String, action: String, at time: Int64) -> AuditEntry {
        AuditEntry(
            actor: actor,
            action: action,
            subject: payeeID,
            detail: "terminal \(id) \"\(name)\", key \(keyID)",
            at: time
        )
    }
}
