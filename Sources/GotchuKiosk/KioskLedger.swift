package import Foundation
package import GotchuAPI
package import GotchuCore
package import GotchuLedgerClient
import GotchuReceipts

/// The ledger calls a kiosk makes, on behalf of its payee. ``KioskLedger`` makes them over HTTP; tests may
/// answer them in memory.
package protocol KioskLedgerService: Sendable {
    /// Creates a payment session of `amountCents` split into `shares` (1: one payer) that suggests the tips of
    /// `tipPercents` to payers (whole percents; empty for none) under the order `reference` (`nil` for none), or
    /// finds again the one created earlier under the same key. A ledger that predates splits answers one share
    /// whatever was asked, and one that predates tip suggestions or references ignores them.
    func createSession(
        amountCents: Cents,
        shares: Int,
        tipPercents: [Int],
        reference: String?,
        idempotencyKey: String
    ) async throws(LedgerClientError)
        -> CreateSessionResponse
    /// The session's status, with expiry judged by the ledger, and what was paid and refunded of it. A paid share
    /// counts only once its receipt verifies (when receipts are checked).
    func sessionState(sid: String) async throws(LedgerClientError) -> KioskChargeMachine.SessionState
    /// Cancels the session; refused with a problem when it is already paid, expired or cancelled.
    func cancelSession(sid: String) async throws(LedgerClientError)
    /// Gives the session a new EID; the one it replaces resolves for the ledger's grace. The answer carries the new
    /// EID's web checkout when the ledger has a public URL.
    func rotateEID(sid: String) async throws(LedgerClientError) -> EIDRotationResponse
    /// The session's next state other than `after` (another status, more shares paid, a refund), from its event
    /// stream (see ``LedgerClient/sessionEvents(sid:lastEventID:quietLimit:)``).
    func nextState(
        sid: String,
        after: KioskChargeMachine.SessionState
    ) async throws(LedgerClientError) -> KioskChargeMachine.SessionState
    /// Refunds `amountCents` of the paid session (`nil`: whatever of the amount paid is not refunded yet) under
    /// `idempotencyKey`; the answer counts only once its receipt verifies (when receipts are checked).
    func refund(
        sid: String,
        amountCents: Cents?,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse
    /// Refunds `amountCents` of payment `paymentID` of the paid split session (`nil`: the session, not split) under
    /// `idempotencyKey`; the answer counts only once its receipt verifies (when receipts are checked).
    func refund(
        sid: String,
        paymentID: String?,
        amountCents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse
}

extension KioskLedgerService {
    /// Creates a session that suggests no tip (see ``createSession(amountCents:shares:tipPercents:reference:idempotencyKey:)``).
    package func createSession(
        amountCents: Cents,
        shares: Int,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> CreateSessionResponse {
        try await createSession(
            amountCents: amountCents,
            shares: shares,
            tipPercents: [],
            reference: nil,
            idempotencyKey: idempotencyKey
        )
    }

    /// Creates a session for one payer that suggests no tip.
    package func createSession(
        amountCents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> CreateSessionResponse {
        try await createSession(
            amountCents: amountCents,
            shares: 1,
            tipPercents: [],
            reference: nil,
            idempotencyKey: idempotencyKey
        )
    }

    /// The session's status alone (see ``sessionState(sid:)``).
    package func sessionStatus(sid: String) async throws(LedgerClientError) -> SessionStatus {
        try await sessionState(sid: sid).status
    }

    /// A service without event streams: the kiosk polls ``sessionState(sid:)`` instead.
    package func nextState(
        sid: String,
        after: KioskChargeMachine.SessionState
    ) async throws(LedgerClientError) -> KioskChargeMachine.SessionState {
        throw .problem(Problem(.notFound, detail: "this ledger service has no event streams"))
    }

    /// A ledger that cannot refund.
    package func refund(
        sid: String,
        amountCents: Cents?,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse {
        throw .problem(Problem(.notFound, detail: "this ledger does not refund"))
    }

    /// A ledger that refunds sessions that are not split, through ``refund(sid:amountCents:idempotencyKey:)``.
    package func refund(
        sid: String,
        paymentID: String?,
        amountCents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse {
        guard paymentID == nil else {
            throw .problem(Problem(.notFound, detail: "this ledger does not refund payments of a split"))
        }
        return try await refund(sid: sid, amountCents: amountCents, idempotencyKey: idempotencyKey)
    }

    /// A ledger that cannot rotate: the kiosk keeps advertising the EID it has.
    package func rotateEID(sid: String) async throws(LedgerClientError) -> EIDRotationResponse {
        throw .problem(Problem(.notFound, detail: "this ledger does not rotate EIDs"))
    }
}

/// The kiosk's way to the ledger: a client logged in as the payee that logs in again when its token is rejected.
package actor KioskLedger: KioskLedgerService {
    /// How the kiosk proves who it is.
    package enum Credentials: Hashable, Sendable {
        /// Log in as this e-mail (the ledger's development login), again whenever the token expires.
        case email(String)
        /// Read the bearer token from this file, again whenever the ledger rejects it (so an operator can rotate it).
        case tokenFile(URL)
        /// Read the payee's API key (`gk_…`) from this file, again whenever the ledger rejects it (so an operator
        /// can revoke a key and install a new one without restarting the kiosk).
        case apiKeyFile(URL)
    }

    /// The server's base URL.
    package nonisolated let baseURL: URL
    private let credentials: Credentials
    private var client: LedgerClient
    private let receiptTrust: ReceiptTrust?

    /// Creates a ledger connection; nothing is sent until the first call.
    /// - Parameter trust: a private CA for an `https` ledger whose certificate it signed.
    /// - Parameter receiptTrust: the keys a paid session's receipt must verify against before the session counts
    ///   as paid; `nil` believes the ledger's status as it is.
    package init(
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
    package func perform<Output: Sendable>(
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

    package func createSession(
        amountCents: Cents,
        shares: Int,
        tipPercents: [Int],
        reference: String?,
        idempotencyKey: String
    ) async throws(LedgerClientError)
        -> CreateSessionResponse
    {
        try await perform { client throws(LedgerClientError) in
            // One share is asked as always, so that a ledger that predates splits takes it; no tips or reference
            // likewise.
            try await client.createSession(
                amountCents: amountCents,
                shares: shares == 1 ? nil : shares,
                tipPercents: tipPercents.isEmpty ? nil : tipPercents,
                reference: reference,
                idempotencyKey: idempotencyKey
            )
        }
    }

    /// The session's state; `paid`, and shares paid, only once their receipts verify (when receipts are checked):
    /// a split session's every payment has its own. A receipt that does not verify is reported as a failed status
    /// read, so the charge keeps waiting and says why instead of reporting a payment the ledger's signature does
    /// not back.
    package func sessionState(sid: String) async throws(LedgerClientError) -> KioskChargeMachine.SessionState {
        let session = try await perform { client throws(LedgerClientError) in try await client.session(sid: sid) }
        try await verify(session, sid: sid)
        return Self.state(session)
    }

    package func cancelSession(sid: String) async throws(LedgerClientError) {
        try await perform { client throws(LedgerClientError) in try await client.cancel(sid: sid) }
    }

    package func rotateEID(sid: String) async throws(LedgerClientError) -> EIDRotationResponse {
        try await perform { client throws(LedgerClientError) in try await client.rotateEID(sid: sid) }
    }

    /// The session's next state other than `after` from its event stream, opened for the call: the first event is
    /// the current state, so a change made before the call is seen at once. Verified as ``sessionState(sid:)`` is.
    package func nextState(
        sid: String,
        after: KioskChargeMachine.SessionState
    ) async throws(LedgerClientError) -> KioskChargeMachine.SessionState {
        let session = try await perform { client throws(LedgerClientError) in
            do {
                for try await event in client.sessionEvents(sid: sid) where Self.state(event.session) != after {
                    return event.session
                }
            } catch let error as LedgerClientError {
                throw error
            } catch {
                throw .transport("\(error)")
            }
            throw .transport("the event stream ended without news of the session")
        }
        try await verify(session, sid: sid)
        return Self.state(session)
    }

    /// The state the kiosk follows of a session's status.
    static func state(_ session: SessionStatusResponse) -> KioskChargeMachine.SessionState {
        KioskChargeMachine.SessionState(
            session.status,
            sharesPaid: session.sharesPaid,
            paidCents: session.paidCents,
            tipCents: session.tipCents,
            refundedCents: session.refundedCents,
            payments: session.payments.map { payment in
                KioskPayment(
                    paymentID: payment.paymentID,
                    shareNumbers: payment.shareNumbers,
                    amountCents: payment.amountCents,
                    tipCents: payment.tipCents,
                    refundedCents: payment.refundedCents,
                    paidAt: payment.paidAt
                )
            }
        )
    }

    /// Checks the receipts behind what `session` (session `sid`, as asked) says was paid: the session's own once it
    /// is paid, or of a split, every payment's, which must account for every share it says is paid. Nothing is
    /// checked of a session that ended unpaid (its payments are refunded), nor without trusted keys.
    private func verify(_ session: SessionStatusResponse, sid: String) async throws(LedgerClientError) {
        guard let receiptTrust else { return }
        do throws(ReceiptError) {
            if session.shares <= 1 {
                guard session.status == .paid else { return }
                try await receiptTrust.verify(
                    session.receipt,
                    sessionID: sid,
                    amountCents: session.amountCents,
                    ledger: client
                )
            } else {
                guard session.status == .paid || session.status.isLive, session.sharesPaid > 0 else { return }
                var shares = 0
                var cents: Cents = 0
                for payment in session.payments {
                    try await receiptTrust.verify(
                        payment.receipt,
                        sessionID: sid,
                        amountCents: payment.amountCents,
                        tipCents: payment.tipCents,
                        shareNumbers: payment.shareNumbers,
                        ledger: client
                    )
                    shares += payment.shareNumbers.count
                    cents += payment.amountCents
                }
                guard shares >= session.sharesPaid, cents >= session.paidCents else {
                    throw ReceiptError(
                        "receipts account for \(shares) of the \(session.sharesPaid) shares the ledger says are paid"
                    )
                }
            }
        } catch {
            let what = session.status == .paid ? "the session is paid" : "shares of the session are paid"
            throw .unexpectedResponse(status: 200, body: "\(what) but a receipt does not verify: \(error)")
        }
    }
}

extension KioskLedger {
    /// Refunds `amountCents` of the paid session (`nil`: all of the amount paid not refunded yet, read from the
    /// ledger) through ``perform(_:)``; where receipts are checked, the answer counts only once its refund receipt
    /// verifies.
    package func refund(
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
        return try await refund(sid: sid, paymentID: nil, amountCents: cents, idempotencyKey: idempotencyKey)
    }

    /// Refunds `amountCents` of payment `paymentID` of the paid split session (`nil`: of the session, not split)
    /// through ``perform(_:)``; where receipts are checked, the answer counts only once its refund receipt verifies.
    package func refund(
        sid: String,
        paymentID: String?,
        amountCents cents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse {
        let refund = try await perform { client throws(LedgerClientError) in
            try await client.refund(
                sid: sid,
                amountCents: cents,
                paymentID: paymentID,
                idempotencyKey: idempotencyKey
            ).refund
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
