import AsyncHTTPClient
public import Foundation
public import GotchuAPI
public import GotchuCore
public import GotchuReceipts
import NIOCore
import NIOHTTP1

/// A client of the ledger API over HTTP or HTTPS.
///
/// Every call either returns the decoded body or throws a ``LedgerClientError``: a ``Problem`` from the server
/// (switch on ``Problem/kind``), or a transport failure. Paying is explicit about its idempotency key, so a caller
/// can persist the key before sending and retry with the same key after a crash or a lost response.
public struct LedgerClient: Sendable {
    /// The server's base URL, such as `http://127.0.0.1:8080`.
    public let baseURL: URL
    /// The bearer token, if logged in.
    public var token: String?
    /// The private CA trusted for the server's certificate instead of the system's; `nil` for the system's.
    public let trust: LedgerTrust?
    /// The login's tokens, refreshed when the server refuses the access token; when set, its access token is sent
    /// instead of ``token``.
    public var credentials: LedgerLogin?
    /// Connections opened to the server at most at once; further requests wait for one.
    public let maximumConnections: Int
    private let timeout: TimeInterval

    /// Creates a client.
    /// - Parameter timeout: how long the server may stay silent in a request (connecting, or between bytes of its
    ///   answer), in seconds.
    /// - Parameter trust: a private CA for an `https` server whose certificate it signed.
    /// - Parameter maximumConnections: connections opened to the server at most at once (clients with the same
    ///   settings share them).
    public init(
        baseURL: URL,
        token: String? = nil,
        timeout: TimeInterval = 10,
        trust: LedgerTrust? = nil,
        maximumConnections: Int = 8
    ) {
        self.baseURL = baseURL
        self.token = token
        self.timeout = timeout
        self.trust = trust
        self.maximumConnections = max(1, maximumConnections)
    }

    /// `POST /auth/dev-login`: a token for `email` (development servers only).
    public func devLogin(email: String) async throws(LedgerClientError) -> LoginResponse {
        try await request("POST", "/auth/dev-login", body: DevLoginRequest(email: email), authenticated: false)
    }

    /// `POST /auth/login`: an access token and a refresh token for an account with a password.
    public func login(email: String, password: String) async throws(LedgerClientError) -> LoginResponse {
        try await request(
            "POST",
            "/auth/login",
            body: PasswordLoginRequest(email: email, password: password),
            authenticated: false
        )
    }

    /// `POST /auth/register` (servers with open registration): asks for an account; the server mails the address a
    /// code, which ``confirmRegistration(email:code:password:)`` takes. The answer is the same whether or not the
    /// address has an account already.
    public func register(email: String, password: String) async throws(LedgerClientError) -> RegistrationResponse {
        try await request(
            "POST",
            "/auth/register",
            body: PasswordLoginRequest(email: email, password: password),
            authenticated: false
        )
    }

    /// `POST /auth/register/confirm`: confirms a registered address with the code mailed to it and the password
    /// registered with it, and logs the account in.
    public func confirmRegistration(
        email: String,
        code: String,
        password: String
    ) async throws(LedgerClientError) -> LoginResponse {
        try await request(
            "POST",
            "/auth/register/confirm",
            body: RegistrationConfirmRequest(email: email, code: code, password: password),
            authenticated: false
        )
    }

    /// `POST /auth/refresh`: the next access token and refresh token; the one given is used up.
    public func refresh(refreshToken: String) async throws(LedgerClientError) -> LoginResponse {
        try await request(
            "POST",
            "/auth/refresh",
            body: RefreshRequest(refreshToken: refreshToken),
            authenticated: false
        )
    }

    /// `POST /auth/logout`: revokes the refresh token and every other of its login.
    public func logout(refreshToken: String) async throws(LedgerClientError) {
        let _: OKResponse = try await request(
            "POST",
            "/auth/logout",
            body: RefreshRequest(refreshToken: refreshToken),
            authenticated: false
        )
    }

    /// `GET /wallet/me`.
    public func wallet() async throws(LedgerClientError) -> WalletResponse {
        try await request("GET", "/wallet/me", body: Optional<AmountRequest>.none)
    }

    /// `GET /wallet/entries`: one page of the caller's entries, newest first, from `cursor` (an earlier page's
    /// `next_cursor`) or from the newest.
    public func walletEntries(
        limit: Int? = nil,
        cursor: String? = nil
    ) async throws(LedgerClientError) -> WalletEntriesResponse {
        var components = URLComponents()
        components.path = "/wallet/entries"
        var items: [URLQueryItem] = []
        if let limit { items.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let cursor { items.append(URLQueryItem(name: "cursor", value: cursor)) }
        components.queryItems = items.isEmpty ? nil : items
        return try await request("GET", components.string ?? "/wallet/entries", body: Optional<AmountRequest>.none)
    }

    /// `POST /dev/fund`: credits the caller (development servers only); returns the new balance.
    public func fund(amountCents: Cents) async throws(LedgerClientError) -> BalanceResponse {
        try await request("POST", "/dev/fund", body: AmountRequest(amountCents: amountCents))
    }

    /// `POST /sessions/create`: a session asking `amountCents`, split into `shares` equal shares (1 to 50, each
    /// paid by a payer of its own) when given; `nil` sends none, one payer (servers that predate splits know no
    /// other). With an `idempotencyKey` (persist it before sending) a retry after a crash or a lost response gets
    /// the session the first request made, not a second one; the key with another request is refused.
    /// `tipPercents` (1 to 5 different whole percents, each 1 to 100) are the tips the session suggests to payers;
    /// `nil` sends none, a session that asks for no tip.
    public func createSession(
        amountCents: Cents,
        shares: Int? = nil,
        tipPercents: [Int]? = nil,
        reference: String? = nil,
        idempotencyKey: String? = nil
    ) async throws(LedgerClientError) -> CreateSessionResponse {
        let (data, response) = try await perform(
            "POST",
            "/sessions/create",
            body: CreateSessionRequest(
                amountCents: amountCents,
                shares: shares,
                tipPercents: tipPercents,
                reference: reference
            ),
            headers: idempotencyKey.map { [APIHeader.idempotencyKey: $0] } ?? [:],
            authenticated: true
        )
        return try decodeBody(data, response)
    }

    /// `POST /sessions/resolve`, with the token when the client has one: servers resolve for logged-in users only
    /// unless they run with `--resolve public`.
    public func resolve(eid: EID) async throws(LedgerClientError) -> ResolveResponse {
        try await request("POST", "/sessions/resolve", body: ResolveRequest(eid: eid), authenticated: token != nil)
    }

    /// `POST /sessions/{sid}/eids`: gives the caller's live session a new EID to advertise; the one it replaces
    /// keeps resolving for the server's grace.
    public func rotateEID(sid: String) async throws(LedgerClientError) -> EIDRotationResponse {
        let escaped = sid.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? sid
        return try await request("POST", "/sessions/\(escaped)/eids", body: Optional<SessionRequest>.none)
    }

    /// `POST /sessions/lock`: reserves the session (of a split, its next free share) for the caller.
    public func lock(sid: String) async throws(LedgerClientError) {
        let _: LockResponse = try await lock(sid: sid, shares: nil)
    }

    /// `POST /sessions/lock`: reserves the session for the caller; of a split session, the next `shares` free
    /// shares (`nil` sends none: one). The answer says what the caller will pay for them (before any tip) and
    /// which shares they are; from a server that predates splits its amount is 0 (the resolved amount holds). A
    /// split with fewer shares free than asked, or a session that is not split asked for more than one, is
    /// refused 409 `no-free-share`.
    @discardableResult
    public func lock(sid: String, shares: Int?) async throws(LedgerClientError) -> LockResponse {
        try await request("POST", "/sessions/lock", body: LockRequest(sid: sid, shares: shares))
    }

    /// `POST /sessions/unlock`: releases the caller's lock on the session, so another payer may lock it at once.
    /// Answers normally when the caller was the session's last holder and no lock is left (it lapsed, or was
    /// released before); throws 409 `session-locked` if another payer holds it, 403 `forbidden` if the caller never
    /// locked it.
    public func unlock(sid: String) async throws(LedgerClientError) {
        let _: OKResponse = try await request("POST", "/sessions/unlock", body: SessionRequest(sid: sid))
    }

    /// `POST /sessions/cancel`.
    public func cancel(sid: String) async throws(LedgerClientError) {
        let _: OKResponse = try await request("POST", "/sessions/cancel", body: SessionRequest(sid: sid))
    }

    /// `GET /sessions/{sid}`.
    public func session(sid: String) async throws(LedgerClientError) -> SessionStatusResponse {
        let escaped = sid.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? sid
        return try await request("GET", "/sessions/\(escaped)", body: Optional<SessionRequest>.none)
    }

    /// `POST /wallet/send` with the caller's idempotency key: pays what the caller locked (of a split, its shares),
    /// with `tipCents` on top for the payee when given (0 up to the amount paid; `nil` sends none). Retrying with
    /// the same key and tip after any failure is safe: the server runs the payment at most once and replays its
    /// outcome. The answer's ``SendResult/paymentID`` names the payment of a split session.
    public func send(
        sid: String,
        idempotencyKey: String,
        tipCents: Cents? = nil
    ) async throws(LedgerClientError) -> SendResult {
        try await payment(
            "/wallet/send",
            body: SendRequest(sid: sid, tipCents: tipCents),
            idempotencyKey: idempotencyKey
        )
    }

    /// A payment's `POST` under `idempotencyKey`: the payer's balance, and whether the answer replays an earlier one
    /// (`Idempotent-Replayed`).
    func payment(
        _ path: String,
        body: some Encodable & Sendable,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> SendResult {
        let (data, response) = try await perform(
            "POST",
            path,
            body: body,
            headers: [APIHeader.idempotencyKey: idempotencyKey],
            authenticated: true
        )
        let balance: BalanceResponse = try decodeBody(data, response)
        let replayed = response.value(forHTTPHeaderField: APIHeader.idempotentReplayed)?.lowercased() == "true"
        return SendResult(balance: balance, replayed: replayed)
    }

    /// `POST /wallet/payouts` with the caller's idempotency key: moves the amount out of the wallet at once, pending
    /// until the ledger's operator pays it out (or fails it, which returns the money). Retrying with the same key
    /// after any failure is safe: the server takes the payout at most once and replays its answer.
    /// - Returns: the answer and whether it replays an earlier one.
    public func requestPayout(
        amountCents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> (payout: PayoutResponse, replayed: Bool) {
        let (data, response) = try await perform(
            "POST",
            "/wallet/payouts",
            body: AmountRequest(amountCents: amountCents),
            headers: [APIHeader.idempotencyKey: idempotencyKey],
            authenticated: true
        )
        let payout: PayoutResponse = try decodeBody(data, response)
        let replayed = response.value(forHTTPHeaderField: APIHeader.idempotentReplayed)?.lowercased() == "true"
        return (payout, replayed)
    }

    /// `POST /sessions/{sid}/refunds` with the caller's idempotency key: returns `amountCents` of the caller's paid
    /// session to its payer. Of a split session, `paymentID` names the payment (one payer's send) to refund, and
    /// is required: at most its amount and tip less what was refunded of it. Retrying with the same key and
    /// request is safe: the server refunds at most once and replays the refund (``RefundResult/replayed``).
    public func refund(
        sid: String,
        amountCents: Cents,
        paymentID: String? = nil,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResult {
        let escaped = sid.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? sid
        let (data, response) = try await perform(
            "POST",
            "/sessions/\(escaped)/refunds",
            body: RefundRequest(amountCents: amountCents, paymentID: paymentID),
            headers: [APIHeader.idempotencyKey: idempotencyKey],
            authenticated: true
        )
        let refund: RefundResponse = try decodeBody(data, response)
        let replayed = response.value(forHTTPHeaderField: APIHeader.idempotentReplayed)?.lowercased() == "true"
        return RefundResult(refund: refund, replayed: replayed)
    }

    /// `GET /.well-known/gotchu-receipt-keys` (no token needed): the keys the server signs receipts with.
    public func receiptKeys() async throws(LedgerClientError) -> ReceiptKeySet {
        let (data, response) = try await perform(
            "GET",
            "/.well-known/gotchu-receipt-keys",
            body: Optional<AmountRequest>.none,
            headers: [:],
            authenticated: false
        )
        guard (200..<300).contains(response.statusCode) else {
            let _: OKResponse = try decodeBody(data, response)
            throw .unexpectedResponse(status: response.statusCode, body: "")
        }
        do {
            return try ReceiptKeySet.decode(data)
        } catch {
            throw .unexpectedResponse(status: response.statusCode, body: error.description)
        }
    }

    /// `GET /healthz`.
    public func health() async throws(LedgerClientError) -> HealthResponse {
        try await request("GET", "/healthz", body: Optional<AmountRequest>.none, authenticated: false)
    }

    /// `GET /healthz`, with the server's clock as its `Date` header tells it (`nil` without a readable one).
    public func healthAndDate() async throws(LedgerClientError) -> (health: HealthResponse, serverDate: Date?) {
        let (data, response) = try await perform(
            "GET",
            "/healthz",
            body: Optional<AmountRequest>.none,
            headers: [:],
            authenticated: false
        )
        let health: HealthResponse = try decodeBody(data, response)
        return (health, response.value(forHTTPHeaderField: "Date").flatMap(Self.httpDate))
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 5.6.7).
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text)
    }

    // MARK: Transport

    func request<Body: Encodable, Output: Decodable>(
        _ method: String,
        _ path: String,
        body: Body?,
        authenticated: Bool = true
    ) async throws(LedgerClientError) -> Output {
        let (data, response) = try await perform(method, path, body: body, headers: [:], authenticated: authenticated)
        return try decodeBody(data, response)
    }

    private func perform<Body: Encodable>(
        _ method: String,
        _ path: String,
        body: Body?,
        headers: [String: String],
        authenticated: Bool
    ) async throws(LedgerClientError) -> (Data, LedgerResponse) {
        guard authenticated else {
            return try await transmit(method, path, body: body, headers: headers, bearer: nil)
        }
        guard let credentials else {
            guard let token else { throw .notLoggedIn }
            return try await transmit(method, path, body: body, headers: headers, bearer: token)
        }
        let sent = await credentials.accessToken
        let first = try await transmit(method, path, body: body, headers: headers, bearer: sent)
        // A refused access token (expired, typically) is refreshed once and the request sent again; a request
        // refused 401 never ran, so sending it again is safe.
        guard first.1.statusCode == 401, let fresh = await credentials.refreshed(after: sent, with: self) else {
            return first
        }
        return try await transmit(method, path, body: body, headers: headers, bearer: fresh)
    }

    private func transmit<Body: Encodable>(
        _ method: String,
        _ path: String,
        body: Body?,
        headers: [String: String],
        bearer: String?
    ) async throws(LedgerClientError) -> (Data, LedgerResponse) {
        guard let url = URL(string: path, relativeTo: baseURL) else { throw .invalidURL(baseURL.absoluteString + path) }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = HTTPMethod(rawValue: method)
        request.headers.add(name: "Accept", value: "application/json")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            do {
                request.body = .bytes(ByteBuffer(bytes: try APIJSON.encoder().encode(body)))
            } catch {
                throw .transport("could not encode the request: \(error)")
            }
        }
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        do {
            // A request once sent runs to its answer or its timeout: a caller's cancellation does not reach it, so a
            // payment being settled is not cut off half-way.
            let (request, trust, timeout, connections) = (request, self.trust, self.timeout, maximumConnections)
            return try await Task {
                try await LedgerTransport.perform(request, trust: trust, timeout: timeout, connections: connections)
            }.value
        } catch {
            throw .transport(await LedgerTransport.describe(error, url: url, trust: trust))
        }
    }

    private func decodeBody<Output: Decodable>(
        _ data: Data,
        _ response: LedgerResponse
    ) throws(LedgerClientError)
        -> Output
    {
        guard (200..<300).contains(response.statusCode) else {
            if let problem = try? APIJSON.decoder().decode(Problem.self, from: data) { throw .problem(problem) }
            throw .unexpectedResponse(
                status: response.statusCode,
                body: String(decoding: data.prefix(512), as: UTF8.self)
            )
        }
        do {
            // Strictly where a receipt may ride: which receipt an answer carries must not depend on who reads it.
            try Receipt.checkAnswer(data)
        } catch {
            throw .unexpectedResponse(status: response.statusCode, body: error.description)
        }
        do {
            return try APIJSON.decoder().decode(Output.self, from: data)
        } catch {
            throw .unexpectedResponse(
                status: response.statusCode,
                body: String(decoding: data.prefix(512), as: UTF8.self)
            )
        }
    }
}

/// A login's access and refresh tokens, shared by copies of a ``LedgerClient``: when the server refuses the access
/// token, the refresh token gets a new pair, once for every request that was refused meanwhile.
public actor LedgerLogin {
    /// The access token sent as `Authorization: Bearer`.
    public private(set) var accessToken: String
    /// The refresh token for the next pair (each is used once).
    public private(set) var refreshToken: String
    private let onRefresh: @Sendable (LoginResponse) -> Void
    private var refreshing: Task<String?, Never>?

    /// A login's tokens; `onRefresh` is told every new pair (to keep it on disk).
    public init(accessToken: String, refreshToken: String, onRefresh: @escaping @Sendable (LoginResponse) -> Void) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.onRefresh = onRefresh
    }

    /// A fresh access token after the server refused `refused`, or `nil` if the refresh token was refused too (log
    /// in again). Requests refused at once share one refresh: a second use of the refresh token would revoke it.
    func refreshed(after refused: String, with client: LedgerClient) async -> String? {
        if accessToken != refused { return accessToken }
        if let refreshing { return await refreshing.value }
        var plain = client
        plain.credentials = nil
        let token = refreshToken
        let task = Task<String?, Never> {
            guard let pair = try? await plain.refresh(refreshToken: token), let next = pair.refreshToken else {
                return nil
            }
            self.store(pair, next)
            return pair.token
        }
        refreshing = task
        let result = await task.value
        refreshing = nil
        return result
    }

    private func store(_ pair: LoginResponse, _ next: String) {
        accessToken = pair.token
        refreshToken = next
        onRefresh(pair)
    }
}

/// The answer to a payment.
public struct SendResult: Sendable, Hashable {
    /// The payer's balance after the payment.
    public var newBalanceCents: Cents
    /// Whether the server replayed the stored outcome of an earlier request with the same key.
    public var replayed: Bool
    /// The ledger's signed receipt of the payment (not yet checked: see ``ReceiptTrust``).
    public var receipt: Receipt?
    /// The payment's id, which a refund of it names: set for a payment of a split session.
    public var paymentID: String?

    /// A payment's result: the payer's balance after it in cents, whether the server replayed an earlier answer
    /// to the same idempotency key, the receipt when the server sent one, and the payment's id when it has one.
    public init(newBalanceCents: Cents, replayed: Bool, receipt: Receipt? = nil, paymentID: String? = nil) {
        self.newBalanceCents = newBalanceCents
        self.replayed = replayed
        self.receipt = receipt
        self.paymentID = paymentID
    }

    /// The result of the server's answer `balance`, replayed or not.
    public init(balance: BalanceResponse, replayed: Bool) {
        self.init(
            newBalanceCents: balance.newBalanceCents,
            replayed: replayed,
            receipt: balance.receipt,
            paymentID: balance.paymentID
        )
    }

    /// The answer as the server sent it (`ok` is always true).
    public var balance: BalanceResponse {
        BalanceResponse(newBalanceCents: newBalanceCents, receipt: receipt, paymentID: paymentID)
    }
}

/// The answer to `POST /sessions/{sid}/refunds`.
public struct RefundResult: Sendable, Hashable {
    /// The refund (its receipt not yet checked: see ``ReceiptTrust``).
    public var refund: RefundResponse
    /// Whether the server replayed the refund an earlier request with the same key made.
    public var replayed: Bool

    /// A refund's result: the server's answer, and whether it was a replay of an earlier answer to the same
    /// idempotency key.
    public init(refund: RefundResponse, replayed: Bool) {
        self.refund = refund
        self.replayed = replayed
    }
}

/// Why a ledger call failed.
public enum LedgerClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server refused the request; ``Problem/kind`` says why.
    case problem(Problem)
    /// The server could not be reached, or did not answer in time. The request may or may not have run.
    case transport(String)
    /// The server answered something that is not the API's (wrong status, unreadable body).
    case unexpectedResponse(status: Int, body: String)
    /// A call needing a token was made without one.
    case notLoggedIn
    /// The base URL and path do not make a URL.
    case invalidURL(String)

    /// The problem kind, when the server sent one of ours.
    public var problemKind: ProblemKind? {
        if case .problem(let problem) = self { return problem.kind }
        return nil
    }

    public var description: String {
        switch self {
        case .problem(let problem): return problem.description
        case .transport(let reason): return reason
        case .unexpectedResponse(let status, let body): return "unexpected response \(status): \(body)"
        case .notLoggedIn: return "not logged in: run `gotchu login --email you@example.com` first"
        case .invalidURL(let url): return "invalid server URL \(url)"
        }
    }
}
