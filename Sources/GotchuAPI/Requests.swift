public import GotchuCore

// Request bodies. The server decodes them strictly (wrong types are refused with a message naming the field);
// unknown fields are ignored.

/// `POST /auth/dev-login`.
public struct DevLoginRequest: Codable, Hashable, Sendable {
    /// The user's e-mail address; the part before `@` becomes the display name.
    public var email: String

    /// A dev-login body for `email`; nothing is checked here (the server validates what it receives).
    public init(email: String) { self.email = email }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.email = try container.decodeStrictString(forKey: .email)
    }
}

/// `POST /sessions/create` and `POST /dev/fund`: an amount in cents.
public struct AmountRequest: Codable, Hashable, Sendable {
    /// A positive whole number of cents.
    public var amountCents: Cents

    /// A body asking for `amountCents` cents; nothing is checked here (the server validates what it receives).
    public init(amountCents: Cents) { self.amountCents = amountCents }

    enum CodingKeys: String, CodingKey { case amountCents = "amount_cents" }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.amountCents = try container.decodeStrictCents(forKey: .amountCents)
    }
}

/// `POST /sessions/create`: the amount, and how many payers share it.
public struct CreateSessionRequest: Codable, Hashable, Sendable {
    /// A positive whole number of cents: the whole amount, however many share it.
    public var amountCents: Cents
    /// Into how many equal shares the amount is split (1 to 50); `nil` (absent) is 1, one payer.
    public var shares: Int?
    /// The tips the terminal suggests to payers, in whole percents of what each pays (1 to 5 different percents,
    /// each 1 to 100, as ``TipPrompt`` has them); `nil` (absent) or empty asks for none.
    public var tipPercents: [Int]?
    /// The payee's own reference for the charge (an order or table number), shown to its payers as plain text and
    /// carried in its status, wallet entries, webhook events and receipt page: 1 to 128 printable characters
    /// (``OrderReference``); `nil` (absent) for none.
    public var reference: String?

    /// A body asking for a session of `amountCents`, split into `shares` when given, suggesting the tips of
    /// `tipPercents` when given, under `reference` when given; nothing is checked here.
    public init(amountCents: Cents, shares: Int? = nil, tipPercents: [Int]? = nil, reference: String? = nil) {
        self.reference = reference
        self.amountCents = amountCents
        self.shares = shares
        self.tipPercents = tipPercents
    }

    enum CodingKeys: String, CodingKey {
        case amountCents = "amount_cents"
        case shares
        case tipPercents = "tip_percents"
        case reference
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.amountCents = try container.decodeStrictCents(forKey: .amountCents)
        self.shares = try container.decodeStrictCount(forKey: .shares)
        self.tipPercents = try container.decodeStrictIntegers(forKey: .tipPercents, example: "[10, 15, 20]")
        self.reference = try container.decodeIfPresent(String.self, forKey: .reference)
    }
}

/// `POST /sessions/resolve`.
public struct ResolveRequest: Codable, Hashable, Sendable {
    /// The EID heard on the air.
    public var eid: String

    /// A body resolving `eid`, as heard on the air.
    public init(eid: EID) { self.eid = eid.rawValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.eid = try container.decodeStrictString(forKey: .eid)
    }
}

/// `POST /sessions/lock`, `POST /sessions/unlock`, `POST /wallet/send` and `POST /sessions/cancel`: a session id.
public struct SessionRequest: Codable, Hashable, Sendable {
    /// The session id returned by create or resolve.
    public var sid: String

    /// A body naming the session `sid`.
    public init(sid: String) { self.sid = sid }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.sid = try container.decodeStrictString(forKey: .sid)
    }
}

/// `POST /sessions/lock`: a session id, and how many of a split session's shares to reserve.
public struct LockRequest: Codable, Hashable, Sendable {
    /// The session id returned by resolve.
    public var sid: String
    /// How many of the next free shares this payer takes (paying for friends); `nil` (absent) is 1.
    public var shares: Int?

    /// A body locking `shares` shares (one when `nil`) of session `sid`.
    public init(sid: String, shares: Int? = nil) {
        self.sid = sid
        self.shares = shares
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.sid = try container.decodeStrictString(forKey: .sid)
        self.shares = try container.decodeStrictCount(forKey: .shares)
    }
}

/// `POST /wallet/send`: the session whose locked share(s) to pay, and a tip for the payee on top.
public struct SendRequest: Codable, Hashable, Sendable {
    /// The session id.
    public var sid: String
    /// Cents given to the payee on top of the amount paid (0 to that amount); `nil` (absent) is none.
    public var tipCents: Cents?

    /// A body paying session `sid`, with `tipCents` on top when given.
    public init(sid: String, tipCents: Cents? = nil) {
        self.sid = sid
        self.tipCents = tipCents
    }

    enum CodingKeys: String, CodingKey {
        case sid
        case tipCents = "tip_cents"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.sid = try container.decodeStrictString(forKey: .sid)
        self.tipCents = try container.decodeStrictOptionalInteger(forKey: .tipCents, unit: "cents")
    }
}

/// `POST /sessions/{sid}/refunds`: how much to return, and of a split session, whose payment.
public struct RefundRequest: Codable, Hashable, Sendable {
    /// A positive whole number of cents.
    public var amountCents: Cents
    /// The payment of a split session to refund (its `payment_id`); required for a split, absent otherwise.
    public var paymentID: String?

    /// A body refunding `amountCents` (of payment `paymentID`, for a split); nothing is checked here.
    public init(amountCents: Cents, paymentID: String? = nil) {
        self.amountCents = amountCents
        self.paymentID = paymentID
    }

    enum CodingKeys: String, CodingKey {
        case amountCents = "amount_cents"
        case paymentID = "payment_id"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.amountCents = try container.decodeStrictCents(forKey: .amountCents)
        self.paymentID =
            container.contains(.paymentID) && (try? container.decodeNil(forKey: .paymentID)) == false
            ? try container.decodeStrictString(forKey: .paymentID) : nil
    }
}

/// `POST /auth/login` and `POST /auth/register`: an e-mail address and a password.
public struct PasswordLoginRequest: Codable, Hashable, Sendable {
    /// The account's e-mail address.
    public var email: String
    /// The account's password.
    public var password: String

    /// A login or registration body; nothing is checked here (the server validates what it receives).
    public init(email: String, password: String) {
        self.email = email
        self.password = password
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.email = try container.decodeStrictString(forKey: .email)
        self.password = try container.decodeStrictString(forKey: .password)
    }
}

/// `POST /auth/refresh` and `POST /auth/logout`: a refresh token.
public struct RefreshRequest: Codable, Hashable, Sendable {
    /// The refresh token of the last login or refresh.
    public var refreshToken: String

    /// A body carrying `refreshToken`, as the last login or refresh returned it.
    public init(refreshToken: String) { self.refreshToken = refreshToken }

    enum CodingKeys: String, CodingKey { case refreshToken = "refresh_token" }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.refreshToken = try container.decodeStrictString(forKey: .refreshToken)
    }
}

/// `POST /auth/register/confirm`: the code mailed to a registered address, with the address and the password it was
/// registered with (so a code alone, mailed for someone else's registration of the address, confirms nothing).
public struct RegistrationConfirmRequest: Codable, Hashable, Sendable {
    /// The registered e-mail address.
    public var email: String
    /// The code mailed to it.
    public var code: String
    /// The password given when registering.
    public var password: String

    /// A confirmation body: the mailed `code`, with the `email` and `password` it was registered with.
    public init(email: String, code: String, password: String) {
        self.email = email
        self.code = code
        self.password = password
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.email = try container.decodeStrictString(forKey: .email)
        self.code = try container.decodeStrictString(forKey: .code)
        self.password = try container.decodeStrictString(forKey: .password)
    }
}
