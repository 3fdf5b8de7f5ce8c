import Crypto
package import GotchuCore
package import GotchuReceipts

/// What a payer's device is told of a terminal's charge before it asks its payer to pay it.
public struct ChargeView: Sendable, Hashable {
    /// Whether it may be paid now.
    public enum Status: String, Sendable, Hashable {
        /// Not paid, not expired, its terminal not revoked.
        case payable
        /// Paid (by anyone).
        case paid
        /// Past its expiry, and not paid.
        case expired
        /// Its terminal was revoked, and it was not paid.
        case revoked
    }

    /// The session the ledger opens for it (``TerminalCharge/sessionID``).
    public var sid: String
    /// Who is paid: the payee the terminal's key is enrolled under, shown as payees are.
    public var payee: Counterparty
    /// The terminal's name, as its payee gave it.
    public var terminalName: String
    /// Whether it may be paid.
    public var status: Status

    /// A charge as a payer is shown it.
    public init(sid: String, payee: Counterparty, terminalName: String, status: Status) {
        self.sid = sid
        self.payee = payee
        self.terminalName = terminalName
        self.status = status
    }
}

extension LedgerEngine {
    /// The create key of a charge's session: the terminal's key and the nonce, so each charge is opened once.
    static func createKey(_ charge: TerminalCharge) -> String { "charge:\(charge.keyIDText):\(charge.nonceText)" }

    /// The charge's terminal, its payee, its session (if opened) and the store's time, once the charge is one this ledger may pay: its key is
    /// enrolled and signed it, in this ledger's currency, of an amount the policy takes.
    /// - Throws: ``LedgerError/Kind/notFound`` for a key no terminal enrolled; ``LedgerError/Kind/invalidInput`` for a
    ///   signature that does not verify or another currency; ``LedgerError/Kind/invalidAmount``.
    private func checked(
        _ charge: TerminalCharge
    ) async throws -> (terminal: TerminalRow, payee: Counterparty, session: SessionRow?, now: Int64) {
        try policy.validate(amount: charge.amountCents)
        guard charge.currency == policy.currency else {
            throw LedgerError(
                .invalidInput,
                detail: "the charge is in \(charge.currency); this ledger pays \(policy.currency)"
            )
        }
        let (terminal, payee, session, now) = try await measuredTransaction { transaction in
            let terminal = try await transaction.terminal(keyID: charge.keyIDText)
            var payee: PayeeRow?
            if let terminal { payee = try await transaction.payee(userID: terminal.payeeID)?.payee }
            let session = try await transaction.session(id: charge.sessionID, forUpdate: false)
            return (terminal, payee, session, transaction.now)
        }
        guard let terminal, let payee else {
            throw LedgerError(.notFound, detail: "no terminal enrolled the key \(charge.keyIDText)")
        }
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: terminal.publicKey),
            charge.verify(publicKey: key)
        else {
            throw LedgerError(
                .invalidInput,
                detail: "the charge's signature does not verify against its terminal's key"
            )
        }
        return (terminal, Counterparty(user: payee), session, now)
    }

    /// What a payer is shown of `charge` before paying it. Nothing is stored.
    package func resolveCharge(_ charge: TerminalCharge) async throws -> ChargeView {
        let (terminal, payee, session, now) = try await checked(charge)
        let status: ChargeView.Status =
            if let session, session.storedStatus == .paid || session.sharesPaid > 0 {
                .paid
            } else if terminal.revokedAt != nil {
                .revoked
            } else if now >= charge.expiresAtMilliseconds {
                .expired
            } else {
                .payable
            }
        return ChargeView(sid: charge.sessionID, payee: payee, terminalName: terminal.name, status: status)
    }

    /// Pays `charge` as `payerID` under `idempotencyKey`, with `tipCents` on top: its session is opened (once per
    /// charge, under the terminal's payee, with the charge's amount and reference) and paid as shown
    /// (``pay(shown:)``), each step idempotent, so a retry under the same key replays the payment and a second payer
    /// is refused as for any paid session. The receipt names the charge's session, which the terminal knows.
    /// - Throws: as ``resolveCharge(_:)``; ``LedgerError/Kind/forbidden`` when the terminal was revoked and
    ///   ``LedgerError/Kind/sessionExpired`` when the charge expired, unless its session was opened before (then the
    ///   payment decides, replaying what was paid).
    package func payCharge(
        _ charge: TerminalCharge,
        payerID: String,
        idempotencyKey: String,
        tipCents: Cents
    ) async throws -> ShownPaymentOutcome {
        let (terminal, _, session, now) = try await checked(charge)
        if session == nil {
            guard terminal.revokedAt == nil else {
                throw LedgerError(.forbidden, detail: "the terminal that made the charge was revoked by its payee")
            }
            guard now < charge.expiresAtMilliseconds else {
                throw LedgerError(.sessionExpired, detail: "the charge expired; ask the terminal for a new one")
            }
            _ = try await createSession(
                id: charge.sessionID,
                payeeID: terminal.payeeID,
                amountCents: charge.amountCents,
                shares: 1,
                tipPrompt: .none,
                reference: charge.reference.isEmpty ? nil : charge.reference,
                idempotencyKey: Self.createKey(charge)
            )
        }
        return try await pay(
            shown: ShownPayment(
                sid: charge.sessionID,
                payerID: payerID,
                idempotencyKey: idempotencyKey,
                amountCents: charge.amountCents,
                tipCents: tipCents
            )
        )
    }
}
