public import Foundation
public import GotchuCore
public import GotchuReceipts

// Response bodies. Clients decode amounts leniently: integers or strings of digits.

/// `POST /auth/dev-login` → a bearer token.
public struct LoginResponse: Codable, Hashable, Sendable {
    /// The bearer token for `Authorization: Bearer …` (a short-lived access token).
    public var token: String
    /// The user's id.
    public var userID: String
    /// The refresh token that gets the next access token (`POST /auth/refresh`), once; absent from servers that
    /// predate refresh tokens.
    public var refreshToken: String?
    /// How many seconds `token` is valid for.
    public var expiresIn: Int?

    /// A login answer; `refreshToken` and `expiresIn` (seconds) are `nil` from servers that predate them.
    public init(token: String, userID: String, refreshToken: String? = nil, expiresIn: Int? = nil) {
        self.token = token
        self.userID = userID
        self.refreshToken = refreshToken
        self.expiresIn = expiresIn
    }

    enum CodingKeys: String, CodingKey {
        case token
        case userID = "user_id"
        case refreshToken = "refresh_token"
        case expiresIn = "expires_in"
    }
}

/// One ledger entry of a wallet.
public struct LedgerEntry: Codable, Hashable, Sendable {
    /// The entry's id.
    public var id: String
    /// DEBIT (out) or CREDIT (in).
    public var direction: EntryDirection
    /// Always positive; the direction gives the sign.
    public var amountCents: Cents
    /// What moved the money: `SEND_P2P`, `RECEIVE_P2P`, `DEV_FUND`, or a refund's `REFUND_OUT` (payee) and
    /// `REFUND_IN` (payer).
    public var type: String
    /// What the entry refers to: `session` or `funding`.
    public var refType: String
    /// The referenced object's id (a session id for payments).
    public var refID: String
    /// When it was written.
    public var createdAt: Date

    /// An entry as the server sends it; nothing is checked here.
    public init(
        id: String,
        direction: EntryDirection,
        amountCents: Cents,
        type: String,
        refType: String,
        refID: String,
        createdAt: Date
    ) {
        self.id = id
        self.direction = direction
        self.amountCents = amountCents
        self.type = type
        self.refType = refType
        self.refID = refID
        self.createdAt = createdAt
    }

    enum CodingKeys: String, CodingKey {
        case id, direction, type
        case amountCents = "amount_cents"
        case refType = "ref_type"
        case refID = "ref_id"
        case createdAt = "created_at"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.id = try container.decode(String.self, forKey: .id)
        self.direction = try container.decode(EntryDirection.self, forKey: .direction)
        self.amountCents = try container.decodeLenientCents(forKey: .amountCents)
        self.type = try container.decode(String.self, forKey: .type)
        self.refType = try container.decode(String.self, forKey: .refType)
        self.refID = try container.decode(String.self, forKey: .refID)
        self.createdAt = try container.decode(Date.self, forKey: .createdAt)
    }
}

/// `GET /wallet/me`.
public struct WalletResponse: Codable, Hashable, Sendable {
    /// The wallet's id.
    public var walletID: String
    /// The balance in cents.
    public var availableCents: Cents
    /// The latest entries, newest first (at most 20).
    public var recent: [LedgerEntry]

    /// A wallet as the server sends it: `availableCents` and the `recent` entries, newest first.
    public init(walletID: String, availableCents: Cents, recent: [LedgerEntry]) {
        self.walletID = walletID
        self.availableCents = availableCents
        self.recent = recent
    }

    enum CodingKeys: String, CodingKey {
        case recent
        case walletID = "wallet_id"
        case availableCents = "available_cents"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.walletID = try container.decode(String.self, forKey: .walletID)
        self.availableCents = try container.decodeLenientCents(forKey: .availableCents)
        self.recent = try container.decode([LedgerEntry].self, forKey: .recent)
    }
}

/// `POST /sessions/create` → the new session.
public struct CreateSessionResponse: Codable, Hashable, Sendable {
    /// The session id.
    public var sid: String
    /// The EID to advertise.
    public var eid: EID
    /// When the session expires.
    public var expiresAt: Date
    /// Into how many shares the amount is split (1: one payer; 1 from servers that predate splits).
    public var shares: Int
    /// Each share's amount, the first share's first (the cents that do not divide evenly go to the first shares).
    public var shareCents: [Cents]
    /// The web checkout of the EID, `PUBLIC_URL/p/EID`, for a QR code a phone's camera opens; absent when the server
    /// has no public URL (and from servers that predate it). Check it with ``CheckoutURL/validated(_:eid:)``.
    public var checkoutURL: String?
    /// The tips the terminal suggests to payers, in whole percents of what each pays; absent when it asks for none
    /// (and from servers that predate tip prompts).
    public var tipPercents: [Int]?
    /// The session's order reference; absent when it has none.
    public var reference: String?
    /// The payee as the ledger shows it to payers (the name phones show, whether an operator verified it, the
    /// domain), for a terminal to show the same; absent from servers that predate it.
    public var payeeDisplay: PayeeDisplay?

    /// A created session as the server sends it, split into the shares of `shareCents` (one share, the whole
    /// amount, when it is not split), with the EID's checkout address when the server has one, the tips it
    /// suggests when it asks for any, and its reference when it has one.
    public init(
        sid: String,
        eid: EID,
        expiresAt: Date,
        shareCents: [Cents] = [],
        checkoutURL: String? = nil,
        tipPercents: [Int]? = nil,
        reference: String? = nil
    ) {
        self.reference = reference
        self.tipPercents = tipPercents
        self.sid = sid
        self.eid = eid
        self.expiresAt = expiresAt
        self.shares = max(shareCents.count, 1)
        self.shareCents = shareCents
        self.checkoutURL = checkoutURL
    }

    enum CodingKeys: String, CodingKey {
        case sid, eid, shares
        case expiresAt = "exp_at"
        case shareCents = "share_cents"
        case checkoutURL = "checkout_url"
        case tipPercents = "tip_percents"
        case reference
        case payeeDisplay = "payee_display"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.reference = try container.decodeIfPresent(String.self, forKey: .reference)
        self.payeeDisplay = try container.decodeIfPresent(PayeeDisplay.self, forKey: .payeeDisplay)
        self.sid = try container.decode(String.self, forKey: .sid)
        self.eid = try container.decode(EID.self, forKey: .eid)
        self.expiresAt = try container.decode(Date.self, forKey: .expiresAt)
        self.shares = try container.decodeIfPresent(Int.self, forKey: .shares) ?? 1
        self.shareCents = try container.decodeIfPresent([Cents].self, forKey: .shareCents) ?? []
        self.checkoutURL = try container.decodeIfPresent(String.self, forKey: .checkoutURL)
        self.tipPercents = try container.decodeIfPresent([Int].self, forKey: .tipPercents)
    }
}

/// `POST /sessions/{sid}/eids` → the session's new EID.
public struct EIDRotationResponse: Codable, Hashable, Sendable {
    /// The session id.
    public var sid: String
    /// The EID to advertise from now on.
    public var eid: EID
    /// When the EIDs it replaces stop resolving.
    public var previousValidUntil: Date
    /// When the session expires.
    public var expiresAt: Date
    /// The web checkout of the new EID, as ``CreateSessionResponse/checkoutURL``; absent when the server has no
    /// public URL.
    public var checkoutURL: String?

    /// A rotation as the server sends it: the new `eid`, and until when the ones it replaces still resolve.
    public init(sid: String, eid: EID, previousValidUntil: Date, expiresAt: Date, checkoutURL: String? = nil) {
        self.sid = sid
        self.eid = eid
        self.previousValidUntil = previousValidUntil
        self.expiresAt = expiresAt
        self.checkoutURL = checkoutURL
    }

    enum CodingKeys: String, CodingKey {
        case sid, eid
        case previousValidUntil = "previous_valid_until"
        case expiresAt = "exp_at"
        case checkoutURL = "checkout_url"
    }
}

/// How a payee is shown to a payer: a name, and the domain that tells payees of one name apart.
///
/// Both come from the server but are shown to a person: render them with `DisplayText`, never raw.
public struct PayeeDisplay: Codable, Hashable, Sendable {
    /// The payee's display name: the one an operator verified, else the one it chose (by default the part of its
    /// e-mail address before the `@`). Chosen names are not unique.
    public var name: String
    /// The domain of the payee's e-mail address (`example.com`), so that `bob` of `example.com` and `bob` of
    /// `attacker.test` differ on the payer's screen; absent from servers that predate it.
    public var domain: String?
    /// Whether `name` is the payee's name as an operator verified it (`true`), or the name the payee chose for itself
    /// (`false`); absent from servers that predate verification.
    public var verified: Bool?

    /// A payee as shown to a payer; `domain` and `verified` are `nil` when the server does not send them.
    public init(name: String, domain: String? = nil, verified: Bool? = nil) {
        self.name = name
        self.domain = domain
        self.verified = verified
    }
}

/// `POST /sessions/resolve` → what the payer confirms.
public struct ResolveResponse: Codable, Hashable, Sendable {
    /// The session id.
    public var sid: String
    /// The amount asked.
    public var amountCents: Cents
    /// Who asks.
    public var payeeDisplay: PayeeDisplay
    /// Into how many shares the amount is split (1: one payer pays it whole).
    public var shares: Int
    /// How many shares are paid.
    public var sharesPaid: Int
    /// What the next payer pays for one share: the amount of the first share free to lock (the whole amount when
    /// not split).
    public var shareCents: Cents
    /// What is left to pay: the amount less the shares paid.
    public var remainingCents: Cents
    /// The tips the terminal suggests to payers, in whole percents of what this payer pays (``shareCents`` of a
    /// split); absent when it asks for none (and from servers that predate tip prompts).
    public var tipPercents: [Int]?
    /// The payee's order reference; absent when it has none. Show it with `DisplayText`, never raw.
    public var reference: String?

    /// A resolved session as the server sends it; one payer (one share, none paid) and no tip suggested unless told
    /// otherwise.
    public init(
        sid: String,
        amountCents: Cents,
        payeeDisplay: PayeeDisplay,
        shares: Int = 1,
        sharesPaid: Int = 0,
        shareCents: Cents? = nil,
        remainingCents: Cents? = nil,
        tipPercents: [Int]? = nil,
        reference: String? = nil
    ) {
        self.reference = reference
        self.tipPercents = tipPercents
        self.sid = sid
        self.amountCents = amountCents
        self.payeeDisplay = payeeDisplay
        self.shares = shares
        self.sharesPaid = sharesPaid
        self.shareCents = shareCents ?? amountCents
        self.remainingCents = remainingCents ?? amountCents
    }

    enum CodingKeys: String, CodingKey {
        case sid, shares
        case amountCents = "amount_cents"
        case payeeDisplay = "payee_display"
        case sharesPaid = "shares_paid"
        case shareCents = "share_cents"
        case remainingCents = "remaining_cents"
        case tipPercents = "tip_percents"
        case reference
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.sid = try container.decode(String.self, forKey: .sid)
        self.amountCents = try container.decodeLenientCents(forKey: .amountCents)
        self.payeeDisplay = try container.decode(PayeeDisplay.self, forKey: .payeeDisplay)
        // Servers that predate splits send none of these: one payer, nothing paid.
        self.shares = try container.decodeIfPresent(Int.self, forKey: .shares) ?? 1
        self.sharesPaid = try container.decodeIfPresent(Int.self, forKey: .sharesPaid) ?? 0
        self.shareCents =
            container.contains(.shareCents) ? try container.decodeLenientCents(forKey: .shareCents) : amountCents
        self.remainingCents =
            container.contains(.remainingCents)
            ? try container.decodeLenientCents(forKey: .remainingCents) : amountCents
        self.tipPercents = try container.decodeIfPresent([Int].self, forKey: .tipPercents)
        self.reference = try container.decodeIfPresent(String.self, forKey: .reference)
    }
}

/// `POST /sessions/lock` → what this payer will pay.
public struct LockResponse: Codable, Hashable, Sendable {
    /// Always true.
    public var ok: Bool
    /// What this payer pays for the shares it locked (the whole amount of a session that is not split), before
    /// any tip.
    public var amountCents: Cents
    /// The numbers of the shares it holds (1 is the first); `[1]` for a session that is not split.
    public var shareNumbers: [Int]

    /// A lock of `shareNumbers`, for `amountCents` (`ok` is always true).
    public init(amountCents: Cents, shareNumbers: [Int]) {
        self.ok = true
        self.amountCents = amountCents
        self.shareNumbers = shareNumbers
    }

    enum CodingKeys: String, CodingKey {
        case ok
        case amountCents = "amount_cents"
        case shareNumbers = "share_numbers"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.ok = try container.decode(Bool.self, forKey: .ok)
        // Servers that predate splits answer `{ok: true}` alone: the amount is then the resolved one.
        self.amountCents =
            container.contains(.amountCents) ? try container.decodeLenientCents(forKey: .amountCents) : 0
        self.shareNumbers = try container.decodeIfPresent([Int].self, forKey: .shareNumbers) ?? [1]
    }
}

/// `{ "ok": true }`, the answer to lock and cancel.
public struct OKResponse: Codable, Hashable, Sendable {
    /// Always true.
    public var ok: Bool

    /// The only value there is, `{ "ok": true }`.
    public init() { self.ok = true }
}

/// `POST /wallet/send` and `POST /dev/fund` → the caller's new balance.
public struct BalanceResponse: Codable, Hashable, Sendable {
    /// Always true.
    public var ok: Bool
    /// The caller's balance after the transfer.
    public var newBalanceCents: Cents
    /// The payment's signed receipt (`POST /wallet/send`, replays included).
    public var receipt: Receipt?
    /// The payment's id, which names it in a refund of a split session (`POST /wallet/send` of a split).
    public var paymentID: String?

    /// A successful transfer (`ok` is always true) leaving the caller `newBalanceCents`, with the payment's
    /// receipt when there is one and its id when it paid shares of a split.
    public init(newBalanceCents: Cents, receipt: Receipt? = nil, paymentID: String? = nil) {
        self.ok = true
        self.newBalanceCents = newBalanceCents
        self.receipt = receipt
        self.paymentID = paymentID
    }

    enum CodingKeys: String, CodingKey {
        case ok, receipt
        case newBalanceCents = "new_balance_cents"
        case paymentID = "payment_id"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.ok = try container.decode(Bool.self, forKey: .ok)
        self.newBalanceCents = try container.decodeLenientCents(forKey: .newBalanceCents)
        self.receipt = try container.decodeIfPresent(Receipt.self, forKey: .receipt)
        self.paymentID = try container.decodeIfPresent(String.self, forKey: .paymentID)
    }
}

/// One payment of a split session: the shares one payer paid with one send, and its tip.
public struct SharePayment: Codable, Hashable, Sendable {
    /// The payment's id: what a refund of this payer's share names.
    public var paymentID: String
    /// The numbers of the shares it paid (1 is the first).
    public var shareNumbers: [Int]
    /// What it paid for those shares, without the tip.
    public var amountCents: Cents
    /// The tip paid with it.
    public var tipCents: Cents
    /// When it was paid.
    public var paidAt: Date
    /// How much of it (shares and tip) was refunded.
    public var refundedCents: Cents
    /// Its signed receipt, when the ledger signs receipts.
    public var receipt: Receipt?

    /// A payment as the server sends it; nothing is checked here.
    public init(
        paymentID: String,
        shareNumbers: [Int],
        amountCents: Cents,
        tipCents: Cents,
        paidAt: Date,
        refundedCents: Cents,
        receipt: Receipt?
    ) {
        self.paymentID = paymentID
        self.shareNumbers = shareNumbers
        self.amountCents = amountCents
        self.tipCents = tipCents
        self.paidAt = paidAt
        self.refundedCents = refundedCents
        self.receipt = receipt
    }

    enum CodingKeys: String, CodingKey {
        case receipt
        case paymentID = "payment_id"
        case shareNumbers = "share_numbers"
        case amountCents = "amount_cents"
        case tipCents = "tip_cents"
        case paidAt = "paid_at"
        case refundedCents = "refunded_cents"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.paymentID = try container.decode(String.self, forKey: .paymentID)
        self.shareNumbers = try container.decode([Int].self, forKey: .shareNumbers)
        self.amountCents = try container.decodeLenientCents(forKey: .amountCents)
        self.tipCents = try container.decodeLenientCents(forKey: .tipCents)
        self.paidAt = try container.decode(Date.self, forKey: .paidAt)
        self.refundedCents = try container.decodeLenientCents(forKey: .refundedCents)
        self.receipt = try container.decodeIfPresent(Receipt.self, forKey: .receipt)
    }
}

/// `GET /sessions/{sid}`: the session as its payee or lock holder sees it.
public struct SessionStatusResponse: Codable, Hashable, Sendable {
    /// The session id.
    public var sid: String
    /// Current status, with expiry judged at the time of the request.
    public var status: SessionStatus
    /// The amount asked.
    public var amountCents: Cents
    /// When it expires (or expired).
    public var expiresAt: Date
    /// When it was paid, if it was.
    public var paidAt: Date?
    /// The ledger's signed receipt of the payment, once paid (absent from servers that predate receipts).
    public var receipt: Receipt?
    /// The total refunded to the payer so far (0 from servers that predate refunds); of a split, to every payer,
    /// tips included.
    public var refundedCents: Cents
    /// Into how many shares the amount is split (1: one payer).
    public var shares: Int
    /// How many shares are paid.
    public var sharesPaid: Int
    /// What the shares paid add up to, without tips.
    public var paidCents: Cents
    /// The tips paid on top.
    public var tipCents: Cents
    /// The payments of a split session, oldest first, as its payee sees them (a payer sees its own); empty for a
    /// session that is not split (its receipt is ``receipt``).
    public var payments: [SharePayment]
    /// The tips the terminal suggests to payers, in whole percents of what each pays; absent when it asks for none
    /// (and from servers that predate tip prompts).
    public var tipPercents: [Int]?
    /// The payee's order reference; absent when it has none.
    public var reference: String?

    /// A session status as the server sends it; nothing is checked here. Not split unless told otherwise: one
    /// share, paid once `paidAt` is set; no tip suggested.
    public init(
        sid: String,
        status: SessionStatus,
        amountCents: Cents,
        expiresAt: Date,
        paidAt: Date?,
        receipt: Receipt? = nil,
        refundedCents: Cents = 0,
        shares: Int = 1,
        sharesPaid: Int? = nil,
        paidCents: Cents? = nil,
        tipCents: Cents = 0,
        payments: [SharePayment] = [],
        tipPercents: [Int]? = nil,
        reference: String? = nil
    ) {
        self.reference = reference
        self.tipPercents = tipPercents
        self.sid = sid
        self.status = status
        self.amountCents = amountCents
        self.expiresAt = expiresAt
        self.paidAt = paidAt
        self.receipt = receipt
        self.refundedCents = refundedCents
        self.shares = shares
        self.sharesPaid = sharesPaid ?? (paidAt == nil ? 0 : 1)
        self.paidCents = paidCents ?? (paidAt == nil ? 0 : amountCents)
        self.tipCents = tipCents
        self.payments = payments
    }

    enum CodingKeys: String, CodingKey {
        case sid, status, receipt, shares, payments
        case amountCents = "amount_cents"
        case expiresAt = "exp_at"
        case paidAt = "paid_at"
        case refundedCents = "refunded_cents"
        case sharesPaid = "shares_paid"
        case paidCents = "paid_cents"
        case tipCents = "tip_cents"
        case tipPercents = "tip_percents"
        case reference
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.sid = try container.decode(String.self, forKey: .sid)
        self.status = try container.decode(SessionStatus.self, forKey: .status)
        self.amountCents = try container.decodeLenientCents(forKey: .amountCents)
        self.expiresAt = try container.decode(Date.self, forKey: .expiresAt)
        self.paidAt = try container.decodeIfPresent(Date.self, forKey: .paidAt)
        self.receipt = try container.decodeIfPresent(Receipt.self, forKey: .receipt)
        self.refundedCents =
            container.contains(.refundedCents) ? try container.decodeLenientCents(forKey: .refundedCents) : 0
        // Servers that predate splits send none of these: one share, paid once paid_at is there.
        self.shares = try container.decodeIfPresent(Int.self, forKey: .shares) ?? 1
        self.sharesPaid = try container.decodeIfPresent(Int.self, forKey: .sharesPaid) ?? (paidAt == nil ? 0 : 1)
        self.paidCents =
            container.contains(.paidCents)
            ? try container.decodeLenientCents(forKey: .paidCents) : (paidAt == nil ? 0 : amountCents)
        self.tipCents = container.contains(.tipCents) ? try container.decodeLenientCents(forKey: .tipCents) : 0
        self.payments = try container.decodeIfPresent([SharePayment].self, forKey: .payments) ?? []
        self.tipPercents = try container.decodeIfPresent([Int].self, forKey: .tipPercents)
        self.reference = try container.decodeIfPresent(String.self, forKey: .reference)
    }
}

/// `POST /sessions/{sid}/refunds` → the refund, replays included.
public struct RefundResponse: Codable, Hashable, Sendable {
    /// The refund's id.
    public var refundID: String
    /// The refunded session.
    public var sid: String
    /// What this refund returned to the payer.
    public var amountCents: Cents
    /// The session's refunded total once this refund was made.
    public var refundedCents: Cents
    /// The refund's signed receipt (kind `refund`), when the ledger signs receipts.
    public var receipt: Receipt?
    /// The refunded session's order reference; absent when it has none.
    public var reference: String?

    /// A refund as the server sends it: this refund's `amountCents` and the session's `refundedCents` in all.
    public init(
        refundID: String,
        sid: String,
        amountCents: Cents,
        refundedCents: Cents,
        receipt: Receipt?,
        reference: String? = nil
    ) {
        self.reference = reference
        self.refundID = refundID
        self.sid = sid
        self.amountCents = amountCents
        self.refundedCents = refundedCents
        self.receipt = receipt
    }

    enum CodingKeys: String, CodingKey {
        case sid, receipt, reference
        case refundID = "refund_id"
        case amountCents = "amount_cents"
        case refundedCents = "refunded_cents"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.refundID = try container.decode(String.self, forKey: .refundID)
        self.sid = try container.decode(String.self, forKey: .sid)
        self.amountCents = try container.decodeLenientCents(forKey: .amountCents)
        self.refundedCents = try container.decodeLenientCents(forKey: .refundedCents)
        self.receipt = try container.decodeIfPresent(Receipt.self, forKey: .receipt)
        self.reference = try container.decodeIfPresent(String.self, forKey: .reference)
    }
}

/// `GET /healthz`.
public struct HealthResponse: Codable, Hashable, Sendable {
    /// `ok` when the store answers.
    public var status: String

    /// A health answer; the server sends `ok`.
    public init(status: String) { self.status = status }
}

/// The headers of the ledger API that are not plain HTTP.
public enum APIHeader {
    /// The request header carrying the client's idempotency key: required on `POST /wallet/send`, optional on
    /// `POST /sessions/create`.
    public static let idempotencyKey = "Idempotency-Key"
    /// A response header set to `true` when the response replays the outcome stored for an idempotency key.
    public static let idempotentReplayed = "Idempotent-Replayed"
}

/// `POST /wallet/payouts`: a payout request, taken. The amount left the caller's wallet at once and waits, pending,
/// in the ledger's payouts clearing account until the operator settles it (paid out) or fails it (the money comes
/// back). A replay under the same `Idempotency-Key` answers exactly this again.
public struct PayoutResponse: Codable, Hashable, Sendable {
    /// The payout's id, which the operator settles or fails.
    public var payoutID: String
    /// The amount, in cents.
    public var amountCents: Cents
    /// `PENDING` when the request was taken.
    public var status: String
    /// The caller's balance right after the request.
    public var newBalanceCents: Cents
    /// The operator's reference of a settled payout (its bank transfer); only in `payout.settled` webhook events.
    public var reference: String?
    /// Why the operator failed the payout; only in `payout.failed` webhook events.
    public var failureReason: String?
    /// When the payout was settled or failed; only in webhook events.
    public var resolvedAt: Date?

    /// A payout as the server sends it; `status` is `PENDING` when it was taken.
    public init(payoutID: String, amountCents: Cents, status: String, newBalanceCents: Cents) {
        self.payoutID = payoutID
        self.amountCents = amountCents
        self.status = status
        self.newBalanceCents = newBalanceCents
    }

    enum CodingKeys: String, CodingKey {
        case status, reference
        case payoutID = "payout_id"
        case amountCents = "amount_cents"
        case newBalanceCents = "new_balance_cents"
        case failureReason = "failure_reason"
        case resolvedAt = "resolved_at"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.payoutID = try container.decode(String.self, forKey: .payoutID)
        self.amountCents = try container.decodeLenientCents(forKey: .amountCents)
        self.status = try container.decode(String.self, forKey: .status)
        self.newBalanceCents = try container.decodeLenientCents(forKey: .newBalanceCents)
        self.reference = try container.decodeIfPresent(String.self, forKey: .reference)
        self.failureReason = try container.decodeIfPresent(String.self, forKey: .failureReason)
        self.resolvedAt = try container.decodeIfPresent(Date.self, forKey: .resolvedAt)
    }
}

/// One entry of `GET /wallet/entries`: a movement of the caller's wallet and who was on the other side.
public struct WalletHistoryEntry: Codable, Hashable, Sendable {
    /// The entry's id.
    public var id: String
    /// When it was written.
    public var createdAt: Date
    /// DEBIT (out) or CREDIT (in).
    public var direction: EntryDirection
    /// Always positive; the direction gives the sign.
    public var amountCents: Cents
    /// Who was on the other side, shown by the rules a payee is shown by (a system account by its id, verified);
    /// `nil` if the other side is missing (a ledger `gotchu ledger verify` would refuse).
    public var counterparty: PayeeDisplay?
    /// The payment session the entry belongs to, if any.
    public var sessionID: String?
    /// What moved the money: `SEND_P2P`, `RECEIVE_P2P`, `DEV_FUND`, …
    public var kind: String
    /// The order reference of the session it belongs to; `nil` for other movements and sessions without one.
    public var reference: String?

    /// A history entry as the server sends it; nothing is checked here.
    public init(
        id: String,
        createdAt: Date,
        direction: EntryDirection,
        amountCents: Cents,
        counterparty: PayeeDisplay?,
        sessionID: String?,
        kind: String,
        reference: String? = nil
    ) {
        self.reference = reference
        self.id = id
        self.createdAt = createdAt
        self.direction = direction
        self.amountCents = amountCents
        self.counterparty = counterparty
        self.sessionID = sessionID
        self.kind = kind
    }

    enum CodingKeys: String, CodingKey {
        case id, direction, counterparty, kind, reference
        case createdAt = "created_at"
        case amountCents = "amount_cents"
        case sessionID = "session_id"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.id = try container.decode(String.self, forKey: .id)
        self.createdAt = try container.decode(Date.self, forKey: .createdAt)
        self.direction = try container.decode(EntryDirection.self, forKey: .direction)
        self.amountCents = try container.decodeLenientCents(forKey: .amountCents)
        self.counterparty = try container.decodeIfPresent(PayeeDisplay.self, forKey: .counterparty)
        self.sessionID = try container.decodeIfPresent(String.self, forKey: .sessionID)
        self.kind = try container.decode(String.self, forKey: .kind)
        self.reference = try container.decodeIfPresent(String.self, forKey: .reference)
    }

    public func encode(to encoder: any Encoder) throws {
        // `null` spelled out for the absent ones, so every entry has the same keys.
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(direction, forKey: .direction)
        try container.encode(amountCents, forKey: .amountCents)
        try container.encode(counterparty, forKey: .counterparty)
        try container.encode(sessionID, forKey: .sessionID)
        try container.encode(kind, forKey: .kind)
        try container.encode(reference, forKey: .reference)
    }
}

/// `GET /wallet/entries` → one page of the caller's entries, newest first.
public struct WalletEntriesResponse: Codable, Hashable, Sendable {
    /// The page's entries, newest first.
    public var entries: [WalletHistoryEntry]
    /// The `cursor` that asks for the next (older) page; `nil` on the last page.
    public var nextCursor: String?

    /// A page of `entries`, newest first; `nextCursor` fetches the next (older) page, `nil` on the last.
    public init(entries: [WalletHistoryEntry], nextCursor: String?) {
        self.entries = entries
        self.nextCursor = nextCursor
    }

    enum CodingKeys: String, CodingKey {
        case entries
        case nextCursor = "next_cursor"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.entries = try container.decode([WalletHistoryEntry].self, forKey: .entries)
        self.nextCursor = try container.decodeIfPresent(String.self, forKey: .nextCursor)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(entries, forKey: .entries)
        // `null` on the last page rather than a missing key: "no more" is said, not implied.
        try container.encode(nextCursor, forKey: .nextCursor)
    }
}

/// `POST /auth/register` → 202, the same whatever the address: a mail went to it, with a code to confirm it (or,
/// for an address that has an account, word that someone tried to register it).
public struct RegistrationResponse: Codable, Hashable, Sendable {
    /// What happens next, for a person to read.
    public var detail: String
    /// How many seconds a code mailed by this server stays valid.
    public var codeExpiresIn: Int

    /// A registration answer: `detail` for the person, and how long the mailed code stays valid, in seconds.
    public init(detail: String, codeExpiresIn: Int) {
        self.detail = detail
        self.codeExpiresIn = codeExpiresIn
    }

    enum CodingKeys: String, CodingKey {
        case detail
        case codeExpiresIn = "code_expires_in"
    }
}
