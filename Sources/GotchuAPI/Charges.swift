public import Foundation
public import GotchuCore

/// `POST /charges/resolve` and `POST /charges/pay`: a charge a terminal signed, as it came over Bluetooth.
public struct ChargeRequest: Codable, Hashable, Sendable {
    /// The charge's bytes (``GotchuReceipts/TerminalCharge``), base64url without padding.
    public var charge: String
    /// `POST /charges/pay` only: a tip on top, for the payee (0 when absent).
    public var tipCents: Cents?

    /// A request about `charge` (base64url), with `tipCents` when paying.
    public init(charge: String, tipCents: Cents? = nil) {
        self.charge = charge
        self.tipCents = tipCents
    }

    enum CodingKeys: String, CodingKey {
        case charge
        case tipCents = "tip_cents"
    }
}

/// `POST /charges/resolve`: what the payer is asked to pay, and to whom, checked by the ledger.
public struct ChargeResponse: Codable, Hashable, Sendable {
    /// The session the ledger opens for the charge: what its receipt names.
    public var sid: String
    /// The amount.
    public var amountCents: Cents
    /// The currency.
    public var currency: String
    /// The payee's order reference; absent when it has none. Show it with `DisplayText`, never raw.
    public var reference: String?
    /// The code the terminal shows beside the amount.
    public var confirmationCode: String
    /// Until when it may be paid.
    public var expiresAt: Date
    /// The terminal's name, as its payee gave it.
    public var terminalName: String
    /// Who is paid: the payee the terminal is enrolled under.
    public var payeeDisplay: PayeeDisplay
    /// `payable`, `paid`, `expired` or `revoked` (its terminal).
    public var status: String

    /// A charge as the ledger shows it.
    public init(
        sid: String,
        amountCents: Cents,
        currency: String,
        reference: String?,
        confirmationCode: String,
        expiresAt: Date,
        terminalName: String,
        payeeDisplay: PayeeDisplay,
        status: String
    ) {
        self.sid = sid
        self.amountCents = amountCents
        self.currency = currency
        self.reference = reference
        self.confirmationCode = confirmationCode
        self.expiresAt = expiresAt
        self.terminalName = terminalName
        self.payeeDisplay = payeeDisplay
        self.status = status
    }

    enum CodingKeys: String, CodingKey {
        case sid, currency, reference, status
        case amountCents = "amount_cents"
        case confirmationCode = "confirmation_code"
        case expiresAt = "expires_at"
        case terminalName = "terminal_name"
        case payeeDisplay = "payee_display"
    }
}
