public import Foundation
public import GotchuAPI
public import GotchuCore
public import GotchuLedgerClient
import GotchuReceipts

/// The ledger calls a kiosk makes, on behalf of its payee. ``KioskLedger`` makes them over HTTP; tests may
/// answer them in memory.
public protocol KioskLedgerService: Sendable {
    /// Creates a payment session, or finds again the one created earlier under the same key.
    func createSession(
        amountCents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError)
        -> CreateSessionResponse
    /// The session's status, with expiry judged by the ledger.
    func sessionStatus(sid: String) async throws(LedgerClientError) -> SessionStatus
    /// Cancels the session; refused with a problem when it is already paid, expired or cancelled.
    func cancelSession(sid: String) async throws(LedgerClientError)
    /// Gives the session a new EID; the one it replaces resolves for the ledger's grace.
    func rotateEID(sid: String) async throws(LedgerClientError) -> EID
    /// The session's next status other than `after`, from its event stream (see
    /// ``LedgerClient/nextSessionStatus(sid:after:quietLimit:)``).
    func nextStatus(sid: String, after: SessionStatus) async throws(LedgerClientError) -> SessionStatus
    /// Refunds `amountCents` of the paid session (`nil`: whatever of the amount paid is not refunded yet) under
    /// `idempotencyKey`; the answer counts only once its receipt verifies (when receipts are checked).
    func refund(
        sid: String,
        amountCents: Cents?,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse
}

extension KioskLedgerService {
    /// A service without event streams: the kiosk polls ``sessionStatus(sid:)`` instead.
    public func nextStatus(sid: String, after: SessionStatus) async throws(LedgerClientError) -> SessionStatus {
        throw .problem(Problem(.notFound, detail: "this ledger service has no event streams"))
    }

    /// A ledger that cannot refund.
    public func refund(
        sid: String,
        amountCents: Cents?,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse {
        throw .problem(Problem(.notFound, detail: "this ledger does not refund"))
    }

    /// A ledger that cannot rotate: the kiosk keeps advertising the EID it has.
    public func rotateEID(sid: String) async throws(LedgerClientError) -> EID {
        throw .problem(Problem(.notFound, detail: "this ledger does not rotate EIDs"))
    }
}

/// The kiosk's way to the ledger: a client logged in as the payee that logs in again when its token is rejected.
public actor KioskLedger: KioskLedgerService {
    /// How the kiosk proves who it is.
    public enum Credentials: Hashable, Sendable {
        /// Log in as this e-mail (the ledger's development login), again whenever the token expires.
        case email(String)
        /// Read the bearer token from this file, again whenever the ledger rejects it (so an operator can rotate it).
        case tokenFile(URL)
        /// Read the payee's API key (`gk_…`) from this file, again whenever the ledger rejects it (so an operator
        /// can revoke a key and install a new one without restarting the kiosk).
        case apiKeyFile(URL)
    }

    /// The server's base URL.
    public nonisolated let baseURL: URL
    private let credentials: Credentials
    private var client: LedgerClient
    private let receiptTrust: ReceiptTrust?

    /// Creates a ledger connection; nothing is sent until the first call.
    /// - Parameter trust: a private CA for an `https` ledger whose certificate it signed.
    /// - Parameter receiptTrust: the keys a paid session's receipt must verify against before the session counts
    ///   as paid; `nil` believes the ledger's status as it is.
    public init(
        baseURL: URL,
        credentials: Credentials,
        timeout: TimeInterval = 10,
        trust: LedgerTrust? = nil,
        receiptTrust: ReceiptTrust? = nil
    ) {
        self.baseURL = baseURL
        self.credentials = credentials
        self.client = LedgerClient(baseURL: baseURL, timeout: timeout, trust: trust)
        self.receiptTrust = receiptTrust
    }

    /// Runs `call` with a logged-in client. If the ledger rejects the token, logs in (or re-reads the token file)
    /// once and runs `call` again; a token that does not change is not retried.
    public func perform<Output: Sendable>(
        _ call: @Sendable (LedgerClient) async throws(LedgerClientError) -> Output
    ) async throws(LedgerClientError) -> Output {
        if client.token == nil { try await renewToken() }
        do {
            return try await call(client)
        } catch let error where error.problemKind == .unauthorized || error == .notLoggedIn {
            let rejected = client.token
            try await renewToken()
            guard client.token != rejected else { throw error }
            return try await call(client)
        }
    }

    private func renewToken() async throws(LedgerClientError) {
        switch credentials {
        case .email(let email):
            client.token = try await client.devLogin(email: email).token
        case .tokenFile(let url):
            client.token = try Self.read(url, what: "token file")
        case .apiKeyFile(let url):
            let key = try Self.read(url, what: "API key file")
            guard key.hasPrefix(Self.apiKeyPrefix) else {
                throw .problem(
                    Problem(
                        .unauthorized,
                        detail: "the API key file \(url.path) does not hold an API key (\(Self.apiKeyPrefix)…)"
                    )
                )
            }
            client.token = key
        }
    }

    /// The prefix of every API key the ledger makes.
    static let apiKeyPrefix = "gk_"

    /// The credential in `url`: its text without surrounding white space, which must not be empty.
    private static func read(_ url: URL, what: String) throws(LedgerClientError) -> String {
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw .problem(Problem(.unauthorized, detail: "cannot read the \(what) \(url.path): \(error)"))
        }
        let credential = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !credential.isEmpty else {
            throw .problem(Problem(.unauthorized, detail: "the \(what) \(url.path) is empty"))
        }
        return credential
    }

    public func createSession(
        amountCents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError)
        -> CreateSessionResponse
    {
        try await perform { client throws(LedgerClientError) in
            try await client.createSession(amountCents: amountCents, idempotencyKey: idempotencyKey)
        }
    }

    /// The session's status; `paid` only once its receipt verifies (when receipts are checked). A receipt that does
    /// not is reported as a failed status read, so the charge keeps waiting and says why instead of reporting a
    /// payment the ledger's signature does not back.
    public func sessionStatus(sid: String) async throws(LedgerClientError) -> SessionStatus {
        let session = try await perform { client throws(LedgerClientError) in try await client.session(sid: sid) }
        if session.status == .paid, let receiptTrust {
            do {
                try await receiptTrust.verify(
                    session.receipt,
                    sessionID: sid,
                    amountCents: session.amountCents,
                    ledger: client
                )
            } catch {
                throw .unexpectedResponse(
                    status: 200,
                    body: "the session is paid but its receipt does not verify: \(error)"
                )
            }
        }
        return session.status
    }

    public func cancelSession(sid: String) async throws(LedgerClientError) {
        try await perform { client throws(LedgerClientError) in try await client.cancel(sid: sid) }
    }

    public func rotateEID(sid: String) async throws(LedgerClientError) -> EID {
        try await perform { client throws(LedgerClientError) in try await client.rotateEID(sid: sid) }.eid
    }

    public func nextStatus(sid: String, after: SessionStatus) async throws(LedgerClientError) -> SessionStatus {
        try await perform { client throws(LedgerClientError) in
            try await client.nextSessionStatus(sid: sid, after: after)
        }.status
    }
}

extension KioskLedger {
    /// Refunds `amountCents` of the paid session (`nil`: all of the amount paid not refunded yet, read from the
    /// ledger) through ``perform(_:)``; where receipts are checked, the answer counts only once its refund receipt
    /// verifies.
    public func refund(
        sid: String,
        amountCents: Cents?,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse {
        let cents: Cents
        if let amountCents {
            cents = amountCents
        } else {
            let session = try await perform { client throws(LedgerClientError) in try await client.session(sid: sid) }
            cents = session.amountCents - session.refundedCents
            guard session.status == .paid, cents > 0 else {
                throw .problem(
                    Problem(
                        session.status == .paid ? .refundExceedsPayment : .sessionNotPaid,
                        detail: session.status == .paid
                            ? "session \(sid) is refunded in full already"
                            : "session \(sid) is \(session.status.rawValue); only a paid session can be refunded"
                    )
                )
            }
        }
        let refund = try await perform { client throws(LedgerClientError) in
            try await client.refund(sid: sid, amountCents: cents, idempotencyKey: idempotencyKey).refund
        }
        if let receiptTrust {
            do {
                try await receiptTrust.verify(
                    refund.receipt,
                    sessionID: sid,
                    amountCents: cents,
                    kind: .refund,
                    ledger: client
                )
            } catch {
                throw .unexpectedResponse(
                    status: 200,
                    body: "the ledger answered refund \(refund.refundID), but its receipt does not verify: \(error)"
                )
            }
        }
        return refund
    }
}
