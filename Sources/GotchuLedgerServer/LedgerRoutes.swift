import Foundation
import GotchuAPI
import GotchuCheckout
import GotchuCore
import GotchuLedgerAPI
import GotchuOIDC
import GotchuWebhooks
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// The HTTP routes of the ledger API over a ``LedgerStore``.
struct LedgerRoutes<Store: LedgerStore>: Sendable {
    let store: Store
    let tokens: TokenAuthority
    let developmentMode: Bool
    let limiters: AbuseLimiters
    let metrics: LedgerMetrics?
    let limits: LedgerLimits
    /// The event streams open on this server, per user.
    let eventStreams: EventStreamSlots
    /// The OpenAPI document, rendered from the route table when the routes are registered.
    private let servedDocument = ServedDocument()

    let registration: Registration
    /// Sends the mails of open registration.
    let mailer: (any RegistrationMailer)?
    /// Verifies the access tokens of an external issuer, when one is trusted.
    let identities: OIDCVerifier?
    /// The store outage in progress, which a passing readiness check ends.
    let outage: StoreOutage
    /// How webhook endpoints are checked when registered.
    let webhooks: WebhookOptions
    /// The address payers' phones reach this server at, the base of every absolute link it hands out (the web
    /// checkout's, its QR codes'); `nil` when the operator set none.
    let publicURL: PublicURL?
    /// The web checkout's settings, limit and running payments.
    let checkout: Checkout
    /// Each session's checkout link, which its `checkout_url` and QR codes carry for the session's whole life.
    let checkoutLinks: CheckoutLinks

    /// How long `GET /readyz` waits for the store before it answers not ready: under a second, so a load balancer's
    /// check (typically with a timeout of one or two seconds) gets an answer, not a time-out.
    static var readinessDeadline: Duration { .milliseconds(900) }

    init(
        store: Store,
        tokens: TokenAuthority,
        identities: OIDCVerifier? = nil,
        developmentMode: Bool,
        registration: Registration = .closed,
        mailer: (any RegistrationMailer)? = nil,
        limits: LedgerLimits,
        metrics: LedgerMetrics?,
        webhooks: WebhookOptions = WebhookOptions(),
        outage: StoreOutage = StoreOutage(),
        publicURL: PublicURL? = nil,
        checkout: CheckoutSettings = CheckoutSettings()
    ) {
        self.checkout = Checkout(checkout, limits: limits)
        self.checkoutLinks = CheckoutLinks(key: tokens.derivedKey(for: CheckoutLinks.keyPurpose))
        self.store = store
        self.webhooks = webhooks
        self.outage = outage
        self.publicURL = publicURL
        self.metrics = metrics
        self.tokens = tokens
        self.identities = identities
        self.developmentMode = developmentMode
        self.registration = registration
        self.mailer = mailer
        self.limiters = AbuseLimiters(limits)
        self.limits = limits
        self.eventStreams = EventStreamSlots(maximumPerUser: limits.eventStreamsPerUser)
    }

    /// The web checkout of session `sid` for its whole life (`PUBLIC_URL/p/LINK`); `nil` without a public URL.
    func checkoutURL(sid: String) -> String? {
        guard let publicURL, let link = checkoutLinks.link(for: sid) else { return nil }
        return publicURL.checkoutURL(for: link)
    }

    /// How many entries `GET /wallet/me` lists.
    static var recentEntryCount: Int { 20 }

    /// Registers the route table, and the 405 answers for its paths.
    func register(on router: Router<LedgerRequestContext>) {
        let table = self.table
        // The checkout's routes are rows of the one table like the API's, not a route group under /p: a group's
        // middleware runs only for the routes it matched, and the checkout's must also answer unknown paths and
        // methods under /p/ with its HTML page; the table keeps the router, the 405s and OpenAPI one list.
        router.add(
            middleware: CheckoutPageMiddleware(
                outage: outage,
                strictTransport: publicURL?.isHTTPS == true,
                lockLifetime: store.policy.lockLifetime
            )
        )
        router.add(middleware: MethodNotAllowedMiddleware(paths: table.map { ($0.path, $0.method) }))
        // Lazy: the routes ask for the identity (`context.user(for:)`, `context.principal()`) at the point their
        // order of answers says; see ``LedgerAuthenticator``.
        router.add(middleware: LedgerAuthenticator(store: store, tokens: tokens, identities: identities))
        // The resource and the table are both part of this module, and a test renders every combination of
        // routes: a mismatch is a build that must not ship.
        let document: String
        do {
            document = try OpenAPIDocument.render(routes: table.map(\.documented), settings: documentSettings)
        } catch {
            preconditionFailure("the OpenAPI document does not match the routes: \(error)")
        }
        servedDocument.text.withLock { $0 = document }
        for route in table {
            router.on(RouterPath(route.path), method: route.method, use: route.handler)
        }
    }

    /// The settings the OpenAPI document states.
    var documentSettings: OpenAPIDocument.Settings {
        .init(
            policy: store.policy,
            maximumBodyBytes: LedgerRequestContext.maximumBodySize,
            recentEntryCount: Self.recentEntryCount,
            eventStreamsPerUser: limits.eventStreamsPerUser
        )
    }

    /// Every operation this server serves: the one list the router, the 405 answers and the OpenAPI paths are
    /// made from.
    var table: [LedgerRoute] {
        var routes = [
            LedgerRoute(.get, "/healthz", "health") { _, _ in
                try await store.ping()
                return try json(HealthResponse(status: "ok"))
            },
            LedgerRoute(.get, "/livez", "liveness") { _, _ in
                // The process serves requests; the store is not asked, so an outage of the database does not get a
                // healthy server restarted.
                try json(HealthResponse(status: "ok"))
            },
            LedgerRoute(.get, "/readyz", "readiness") { _, context in
                // One small committed write: reachable, writable, with room on its disk.
                let store = self.store
                guard try await withDeadline(Self.readinessDeadline, { try await store.checkWritable() }) != nil else {
                    throw LedgerError(
                        .databaseUnavailable,
                        detail: "the store did not take a write within \(Self.readinessDeadline.seconds) s"
                    )
                }
                outage.recovered(logger: context.logger)
                return try json(HealthResponse(status: "ok"))
            },
            LedgerRoute(.get, "/openapi.yaml", "openapi") { _, _ in
                var headers = HTTPFields()
                headers[.contentType] = "application/yaml"
                let document = servedDocument.text.withLock { $0 }
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: document)))
            },
            LedgerRoute(.get, "/.well-known/gotchu-receipt-keys", "receiptKeys") { _, _ in
                // Public by design: whoever holds a receipt checks it against these, without an account.
                try json(try await store.receiptKeys())
            },
            LedgerRoute(.get, "/wallet/me", "wallet") { _, context in
                let user = try await context.user(for: .readWallet)
                return try json(
                    WalletResponse(try await store.wallet(userID: user, recentLimit: Self.recentEntryCount))
                )
            },
            LedgerRoute(.get, "/wallet/entries", "walletEntries") { request, context in
                let user = try await context.user(for: .readWallet)
                let (limit, cursor) = try entryPageQuery(request)
                return try json(
                    WalletEntriesResponse(try await store.entries(userID: user, cursor: cursor, limit: limit))
                )
            },
            LedgerRoute(.post, "/sessions/create", "createSession") { request, context in
                let user = try await context.user(for: .createSession)
                let key = try idempotencyKey(request)
                let body = try await request.decode(as: CreateSessionRequest.self, context: context)
                try store.policy.validate(amount: body.amountCents)
                let tipPrompt: TipPrompt
                do {
                    tipPrompt = try TipPrompt(percents: body.tipPercents ?? [])
                } catch {
                    throw Problem(.badRequest, detail: "tip_percents: \(error)")
                }
                let (session, replayed) = try await store.createSession(
                    payeeID: user,
                    amountCents: body.amountCents,
                    shares: body.shares ?? 1,
                    tipPrompt: tipPrompt,
                    reference: body.reference,
                    idempotencyKey: key
                )
                var created = CreateSessionResponse(session)
                created.checkoutURL = checkoutURL(sid: created.sid)
                return try json(created, headers: replayHeaders(replayed))
            },
            LedgerRoute(.post, "/sessions/resolve", "resolveSession") { request, context in
                try limiters.resolvePerAddress?.take(clientAddress(request, context))
                let body = try await request.decode(as: ResolveRequest.self, context: context)
                guard let eid = EID(rawValue: body.eid) else {
                    throw Problem(.badRequest, detail: "eid must be 10 lowercase hex characters")
                }
                // After the shape checks, which tell anyone what is wrong with a request, and before the store is
                // asked: without a login no EID says anything. Resolving is a payer's act: a terminal's key may not.
                if limiters.resolveAccess == .requiresLogin { _ = try await context.user(for: .resolve) }
                var resolved = ResolveResponse(try await store.resolve(eid: eid))
                // Names stored before they were checked at login still reach payers only cleaned.
                resolved.payeeDisplay = EmailAddress.cleaned(resolved.payeeDisplay)
                return try json(resolved)
            },
            LedgerRoute(.post, "/sessions/lock", "lockSession") { request, context in
                try limiters.lockPerAddress?.take(clientAddress(request, context))
                let user = try await context.user(for: .lock)
                try limiters.lockPerUser?.take(user)
                let body = try await request.decode(as: LockRequest.self, context: context)
                let sid = try SessionID.validate(body.sid)
                return try json(LockResponse(try await store.lock(sid: sid, payerID: user, shares: body.shares ?? 1)))
            },
            LedgerRoute(.post, "/sessions/unlock", "unlockSession") { request, context in
                let user = try await context.user(for: .unlock)
                let sid = try await sessionID(request, context)
                try await store.unlock(sid: sid, payerID: user)
                return try json(OKResponse())
            },
            LedgerRoute(.post, "/sessions/cancel", "cancelSession") { request, context in
                let user = try await context.user(for: .cancelSession)
                let sid = try await sessionID(request, context)
                try await store.cancel(sid: sid, payeeID: user)
                return try json(OKResponse())
            },
            LedgerRoute(.post, "/sessions/{sid}/eids", "rotateEID") { request, context in
                let user = try await context.user(for: .rotateEID)
                let sid = try SessionID.validate(try context.parameters.require("sid"))
                var rotation = EIDRotationResponse(try await store.rotateEID(sid: sid, payeeID: user))
                // The session's own link, as create gave it: a QR code shown since then stays good.
                rotation.checkoutURL = checkoutURL(sid: rotation.sid)
                return try json(rotation)
            },
            LedgerRoute(.get, "/sessions/{sid}", "sessionStatus") { request, context in
                let principal = try await context.principal()
                let sid = try SessionID.validate(try context.parameters.require("sid"))
                return try json(SessionStatusResponse(try await store.session(sid: sid, principal: principal)))
            },
            LedgerRoute(.get, "/sessions/{sid}/events", "sessionEvents") { request, context in
                try await sessionEvents(user: try await context.user(for: .readSession), request, context)
            },
            LedgerRoute(.post, "/wallet/send", "send") { request, context in
                let user = try await context.user(for: .send)
                // Before anything is read or stored: a flood of sends costs the store nothing once it is refused here.
                try limiters.sendPerUser?.take(user)
                let key = try requiredIdempotencyKey(request, for: "POST /wallet/send")
                let body = try await request.decode(as: SendRequest.self, context: context)
                let sid = try SessionID.validate(body.sid)
                let (outcome, replayed) = try await store.send(
                    sid: sid,
                    payerID: user,
                    idempotencyKey: key,
                    tipCents: body.tipCents ?? 0
                )
                let headers = replayHeaders(replayed)
                switch outcome {
                case .paid where replayed: metrics?.payment(outcome: "replayed")
                case .paid: metrics?.payment(outcome: "paid")
                case .refused(let refusal): metrics?.payment(outcome: refusal.kind.rawValue)
                }
                switch outcome {
                case .paid(let balance):
                    // Read back, so a replay carries the same receipt (and payment) the first answer did.
                    let (receipt, paymentID) = try await store.sentPayment(sid: sid, payerID: user, idempotencyKey: key)
                    let answer = BalanceResponse(newBalanceCents: balance, receipt: receipt, paymentID: paymentID)
                    return try json(answer, headers: headers)
                case .refused(let refusal):
                    var response = Problem(refusal).httpResponse
                    response.headers.append(contentsOf: headers)
                    return response
                }
            },
        ]
        routes.append(
            LedgerRoute(.post, "/sessions/{sid}/refunds", "refundSession") { request, context in
                let user = try await context.user(for: .refund)
                let key = try requiredIdempotencyKey(request, for: "POST /sessions/{sid}/refunds")
                let sid = try SessionID.validate(try context.parameters.require("sid"))
                let body = try await request.decode(as: RefundRequest.self, context: context)
                try store.policy.validate(amount: body.amountCents)
                do {
                    let (refund, replayed) = try await store.refund(
                        sid: sid,
                        payeeID: user,
                        amountCents: body.amountCents,
                        paymentID: try body.paymentID.map {
                            try SessionID.validate(
                                $0,
                                described: "payment_id must be the id of a payment of this session"
                            )
                        },
                        idempotencyKey: key
                    )
                    metrics?.refund(outcome: replayed ? "replayed" : "refunded")
                    return try json(RefundResponse(refund), headers: replayHeaders(replayed))
                } catch let refusal as LedgerError {
                    metrics?.refund(outcome: refusal.kind.rawValue)
                    throw refusal
                }
            }
        )
        routes += [
            LedgerRoute(.post, "/auth/login", "login") { request, context in
                let body = try await request.decode(as: PasswordLoginRequest.self, context: context)
                let user = try await passwordLogin(
                    email: body.email,
                    password: body.password,
                    address: clientAddress(request, context)
                )
                return try json(try await session(for: user.id))
            },
            LedgerRoute(.post, "/auth/refresh", "refresh") { request, context in
                let body = try await request.decode(as: RefreshRequest.self, context: context)
                let (user, refreshToken) = try await store.refresh(token: body.refreshToken)
                return try json(
                    LoginResponse(
                        token: try await tokens.issue(userID: user.id),
                        userID: user.id,
                        refreshToken: refreshToken,
                        expiresIn: Int(tokens.lifetime.components.seconds)
                    )
                )
            },
            LedgerRoute(.post, "/auth/logout", "logout") { request, context in
                let body = try await request.decode(as: RefreshRequest.self, context: context)
                try await store.logout(refreshToken: body.refreshToken)
                return try json(OKResponse())
            },
        ]
        routes.append(
            LedgerRoute(.post, "/wallet/payouts", "requestPayout") { request, context in
                // A user's own act, like sending: an API key is refused.
                let user = try await context.user(for: .payout)
                // As for sends: refused before the body is read or anything is stored.
                try limiters.payoutPerUser?.take(user)
                let key = try requiredIdempotencyKey(request, for: "POST /wallet/payouts")
                let body = try await request.decode(as: AmountRequest.self, context: context)
                try store.policy.validate(amount: body.amountCents)
                let (payout, replayed) = try await store.requestPayout(
                    userID: user,
                    amountCents: body.amountCents,
                    idempotencyKey: key
                )
                return try json(PayoutResponse(payout), headers: replayHeaders(replayed))
            }
        )
        if registration == .open {
            routes += [
                LedgerRoute(.post, "/auth/register", "register") { request, context in
                    let body = try await request.decode(as: PasswordLoginRequest.self, context: context)
                    // Checked here, where the address enters: payers are shown its name part and its domain.
                    let email = try EmailAddress.normalize(body.email)
                    try Passwords.validate(body.password, minimumLength: store.policy.minimumPasswordLength)
                    // Counted once the request is well-formed, before the password is hashed (what the limits spare).
                    try limiters.registerPerAddress?.take(clientAddress(request, context))
                    try limiters.registerPerRecipient?.take(email)
                    // Whatever the address turned out to be, one mail goes to it and the answer is the same.
                    let outcome = try await store.register(email: email, password: body.password)
                    try await sendRegistrationMail(outcome, to: email, context)
                    return try registrationAccepted()
                },
                LedgerRoute(.post, "/auth/register/confirm", "confirmRegistration") { request, context in
                    let body = try await request.decode(as: RegistrationConfirmRequest.self, context: context)
                    // Each costs a password check, as a registration costs a hash.
                    try limiters.registerPerAddress?.take(clientAddress(request, context))
                    let user = try await store.confirmRegistration(
                        email: body.email,
                        code: body.code,
                        password: body.password
                    )
                    return try json(try await session(for: user.id))
                },
            ]
        }
        if let metrics {
            routes.append(
                LedgerRoute(.get, "/metrics", "metrics") { _, _ in
                    if let usage = await store.poolUsage() { metrics.pool(usage) }
                    var headers = HTTPFields()
                    headers[.contentType] = LedgerMetrics.contentType
                    return Response(
                        status: .ok,
                        headers: headers,
                        body: .init(byteBuffer: ByteBuffer(bytes: metrics.exposition()))
                    )
                }
            )
        }
        if developmentMode {
            routes += [
                LedgerRoute(.post, "/auth/dev-login", "devLogin") { request, context in
                    let body = try await request.decode(as: DevLoginRequest.self, context: context)
                    // Checked here, where the address enters: payers are shown its name part and its domain.
                    let user = try await store.login(email: try EmailAddress.normalize(body.email))
                    return try json(try await session(for: user.id))
                },
                LedgerRoute(.post, "/dev/fund", "devFund") { request, context in
                    let user = try await context.user(for: .fund)
                    let body = try await request.decode(as: AmountRequest.self, context: context)
                    try store.policy.validate(amount: body.amountCents)
                    return try json(
                        BalanceResponse(
                            newBalanceCents: try await store.fund(userID: user, amountCents: body.amountCents)
                        )
                    )
                },
            ]
        }
        routes += qrRoutes
        routes += checkoutRoutes
        routes += oidcSignInRoutes
        routes += webhookRoutes
        routes += terminalRoutes
        routes += chargeRoutes
        return routes
    }

    /// A new access token and the first refresh token of a new family for `userID`.
    private func session(for userID: String) async throws -> LoginResponse {
        LoginResponse(
            token: try await tokens.issue(userID: userID),
            userID: userID,
            refreshToken: try await store.issueRefreshToken(userID: userID),
            expiresIn: Int(tokens.lifetime.components.seconds)
        )
    }

    /// Checks a password as every password sign-in does (`POST /auth/login`, the checkout's form), under the login
    /// back-off per client address and per account. The account is counted as typed, normalized or not, so a
    /// malformed address is throttled like any other. Wrong credentials and a disabled account stay counted;
    /// anything else does not (an unconfirmed address, whose password was right; a store failure, after which a
    /// correct password must not find the account, or everyone behind one address, locked out).
    func passwordLogin(email: String, password: String, address: String) async throws -> LedgerUser {
        let account = email.trimmingCharacters(in: .whitespaces).lowercased()
        try limiters.login?.begin(account: account, address: address)
        let user: LedgerUser
        do {
            user = try await store.login(email: email, password: password)
        } catch let refusal as LedgerError where refusal.kind == .unknownUser || refusal.kind == .forbidden {
            throw refusal
        } catch {
            limiters.login?.withdrawn(account: account, address: address)
            throw error
        }
        limiters.login?.succeeded(account: account, address: address)
        return user
    }

    /// The address the rate limits count a request against: the peer, or with `trustForwardedFor` the last
    /// `X-Forwarded-For` entry, which the proxy in front appended (earlier entries are the client's to invent).
    func clientAddress(_ request: Request, _ context: LedgerRequestContext) -> String {
        if limiters.trustForwardedFor,
            let forwarded = request.headers[values: HTTPField.Name("X-Forwarded-For")!].last?
                .split(separator: ",").last?.trimmingCharacters(in: .whitespaces),
            !forwarded.isEmpty
        {
            return forwarded
        }
        return context.remoteAddress?.ipAddress ?? "unknown"
    }

    /// The `Idempotency-Key` header if sent: 1 to 255 visible ASCII characters, optionally quoted as an sf-string.
    private func idempotencyKey(_ request: Request) throws -> String? {
        guard var key = request.headers[HTTPField.Name(APIHeader.idempotencyKey)!] else { return nil }
        if key.count >= 2, key.hasPrefix("\""), key.hasSuffix("\"") { key = String(key.dropFirst().dropLast()) }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw Problem(.badRequest, detail: "Idempotency-Key must be 1 to 255 visible ASCII characters")
        }
        return key
    }

    /// The `limit` and `cursor` of `GET /wallet/entries`, each at most once; a limit is 1 to
    /// ``EntryPageSize/maximum`` in decimal digits.
    private func entryPageQuery(_ request: Request) throws -> (limit: Int, cursor: String?) {
        let query = request.uri.queryParameters
        for name in ["limit", "cursor"] where query.getAll(name).count > 1 {
            throw Problem(.badRequest, detail: "give \(name) at most once")
        }
        var limit = EntryPageSize.default
        if let text = query.get("limit") {
            guard (1...3).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let value = Int(text), (1...EntryPageSize.maximum).contains(value)
            else {
                throw Problem(
                    .badRequest,
                    detail: "limit must be a whole number from 1 to \(EntryPageSize.maximum)"
                )
            }
            limit = value
        }
        return (limit, query.get("cursor"))
    }

    /// The `Idempotency-Key` header of an `endpoint` that cannot run without one.
    func requiredIdempotencyKey(_ request: Request, for endpoint: String) throws -> String {
        guard let key = try idempotencyKey(request) else {
            throw Problem(.idempotencyKeyMissing, detail: "\(endpoint) needs an Idempotency-Key header (a UUID)")
        }
        return key
    }

    /// The session id of a `{sid}` body, checked for shape (400) before any store sees it.
    private func sessionID(_ request: Request, _ context: LedgerRequestContext) async throws -> String {
        try SessionID.validate(try await request.decode(as: SessionRequest.self, context: context).sid)
    }

    /// `Idempotent-Replayed: true` on an answer that replays the one stored for the request's key.
    func replayHeaders(_ replayed: Bool) -> HTTPFields {
        var headers = HTTPFields()
        if replayed { headers[HTTPField.Name(APIHeader.idempotentReplayed)!] = "true" }
        return headers
    }

    func json(
        _ value: some Encodable,
        status: HTTPResponse.Status = .ok,
        headers: HTTPFields = [:]
    ) throws -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(
            status: status,
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: try APIJSON.encoder().encode(value)))
        )
    }
}

/// One operation of the API: its method, path template (`{name}` matches one segment), OpenAPI `operationId` and
/// handler.
struct LedgerRoute: Sendable {
    var method: HTTPRequest.Method
    var path: String
    var operationID: String
    var handler: @Sendable (Request, LedgerRequestContext) async throws -> Response

    init(
        _ method: HTTPRequest.Method,
        _ path: String,
        _ operationID: String,
        handler: @escaping @Sendable (Request, LedgerRequestContext) async throws -> Response
    ) {
        self.method = method
        self.path = path
        self.operationID = operationID
        self.handler = handler
    }

    /// What the OpenAPI document must say of this route.
    var documented: OpenAPIDocument.Operation { .init(method: method.rawValue, path: path, operationID: operationID) }
}

/// The text `GET /openapi.yaml` answers with.
private final class ServedDocument: Sendable {
    let text = Mutex("")
}

/// Whether anyone may create an account (`POST /auth/register`), or only an operator (`gotchu admin user add`).
public enum Registration: String, CaseIterable, Sendable {
    /// Accounts are made by an operator.
    case closed
    /// Anyone may register with an e-mail address and a password, and confirm the address with the code mailed to
    /// it (the server needs a ``RegistrationMailer``).
    case open
}
