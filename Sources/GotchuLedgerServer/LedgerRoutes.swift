import Foundation
import GotchuAPI
import GotchuCore
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
    /// Users already found in the store. Users are never deleted, so a token's user need be looked up only once.
    private let knownUsers = KnownUsers()

    init(store: Store, tokens: TokenAuthority, developmentMode: Bool, limits: LedgerLimits, metrics: LedgerMetrics?) {
        self.store = store
        self.metrics = metrics
        self.tokens = tokens
        self.developmentMode = developmentMode
        self.limiters = AbuseLimiters(limits)
        self.limits = limits
        self.eventStreams = EventStreamSlots(maximumPerUser: limits.eventStreamsPerUser)
    }

    /// How many entries `GET /wallet/me` lists.
    static var recentEntryCount: Int { 20 }

    func register(on router: Router<LedgerRequestContext>) {
        router.add(middleware: MethodNotAllowedMiddleware(paths: servedPaths))
        router.get("/healthz") { _, _ in
            try await store.ping()
            return try json(HealthResponse(status: "ok"))
        }
        if let metrics {
            router.get("/metrics") { _, _ in
                var headers = HTTPFields()
                headers[.contentType] = LedgerMetrics.contentType
                return Response(
                    status: .ok,
                    headers: headers,
                    body: .init(byteBuffer: ByteBuffer(bytes: metrics.exposition()))
                )
            }
        }
        router.get("/openapi.yaml") { _, _ in
            var headers = HTTPFields()
            headers[.contentType] = "application/yaml"
            return Response(
                status: .ok,
                headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.yaml))
            )
        }
        router.get("/wallet/me") { request, _ in
            let user = try await authenticate(request)
            return try json(try await store.wallet(userID: user, recentLimit: Self.recentEntryCount))
        }
        router.post("/sessions/create") { request, context in
            let user = try await authenticate(request)
            let key = try idempotencyKey(request)
            let body = try await decode(AmountRequest.self, request, context)
            try store.policy.validate(amount: body.amountCents)
            let (session, replayed) = try await store.createSession(
                payeeID: user,
                amountCents: body.amountCents,
                idempotencyKey: key
            )
            return try json(session, headers: replayHeaders(replayed))
        }
        router.post("/sessions/resolve") { request, context in
            try limiters.resolvePerAddress?.take(clientAddress(request, context))
            let body = try await decode(ResolveRequest.self, request, context)
            guard let eid = EID(rawValue: body.eid) else {
                throw Problem(.badRequest, detail: "eid must be 10 lowercase hex characters")
            }
            var resolved = try await store.resolve(eid: eid)
            // Names stored before they were checked at login still reach payers only cleaned.
            resolved.payeeDisplay = EmailAddress.cleaned(resolved.payeeDisplay)
            return try json(resolved)
        }
        router.post("/sessions/lock") { request, context in
            try limiters.lockPerAddress?.take(clientAddress(request, context))
            let user = try await authenticate(request)
            try limiters.lockPerUser?.take(user)
            let sid = try await sessionID(request, context)
            try await store.lock(sid: sid, payerID: user)
            return try json(OKResponse())
        }
        router.post("/sessions/unlock") { request, context in
            let user = try await authenticate(request)
            let sid = try await sessionID(request, context)
            try await store.unlock(sid: sid, payerID: user)
            return try json(OKResponse())
        }
        router.post("/sessions/cancel") { request, context in
            let user = try await authenticate(request)
            let sid = try await sessionID(request, context)
            try await store.cancel(sid: sid, payeeID: user)
            return try json(OKResponse())
        }
        router.get("/sessions/{sid}") { request, context in
            let user = try await authenticate(request)
            let sid = try SessionID.validate(try context.parameters.require("sid"))
            return try json(try await store.session(sid: sid, viewerID: user))
        }
        router.get("/sessions/{sid}/events") { request, context in
            try await sessionEvents(user: try await authenticate(request), request, context)
        }
        router.post("/wallet/send") { request, context in
            let user = try await authenticate(request)
            // Before anything is read or stored: a flood of sends costs the store nothing once it is refused here.
            try limiters.sendPerUser?.take(user)
            let key = try requiredIdempotencyKey(request, for: "POST /wallet/send")
            let sid = try await sessionID(request, context)
            let (outcome, replayed) = try await store.send(sid: sid, payerID: user, idempotencyKey: key)
            let headers = replayHeaders(replayed)
            switch outcome {
            case .paid where replayed: metrics?.payment(outcome: "replayed")
            case .paid: metrics?.payment(outcome: "paid")
            case .refused(let refusal): metrics?.payment(outcome: refusal.kind.rawValue)
            }
            switch outcome {
            case .paid(let balance):
                return try json(BalanceResponse(newBalanceCents: balance), headers: headers)
            case .refused(let refusal):
                var response = ProblemMiddleware<LedgerRequestContext>.problemResponse(for: Problem(refusal))
                response.headers.append(contentsOf: headers)
                return response
            }
        }
        if developmentMode {
            router.post("/auth/dev-login") { request, context in
                let body = try await decode(DevLoginRequest.self, request, context)
                // Checked here, where the address enters: payers are shown its name part and its domain.
                let user = try await store.login(email: try EmailAddress.normalize(body.email))
                return try json(LoginResponse(token: try await tokens.issue(userID: user.id), userID: user.id))
            }
            router.post("/dev/fund") { request, context in
                let user = try await authenticate(request)
                let body = try await decode(AmountRequest.self, request, context)
                try store.policy.validate(amount: body.amountCents)
                return try json(
                    BalanceResponse(newBalanceCents: try await store.fund(userID: user, amountCents: body.amountCents))
                )
            }
        }
    }

    /// The path (template) and method of every route, for 405 answers to the other methods.
    var servedPaths: [(String, HTTPRequest.Method)] {
        var paths: [(String, HTTPRequest.Method)] = [
            ("/healthz", .get), ("/openapi.yaml", .get), ("/wallet/me", .get), ("/sessions/create", .post),
            ("/sessions/resolve", .post), ("/sessions/lock", .post), ("/sessions/unlock", .post),
            ("/sessions/cancel", .post),
            ("/sessions/{sid}", .get), ("/sessions/{sid}/events", .get), ("/wallet/send", .post),
        ]
        if developmentMode { paths += [("/auth/dev-login", .post), ("/dev/fund", .post)] }
        return paths
    }

    /// The user id of a valid bearer token, whose user still exists.
    private func authenticate(_ request: Request) async throws -> String {
        guard let header = request.headers[.authorization] else {
            throw Problem(.unauthorized, detail: "send Authorization: Bearer <token>")
        }
        guard header.count > 7, header.prefix(7).lowercased() == "bearer " else {
            throw Problem(.unauthorized, detail: "the Authorization header must be a Bearer token")
        }
        guard let userID = await tokens.userID(from: String(header.dropFirst(7))) else {
            throw Problem(.unauthorized, detail: "the token is invalid or expired; log in again")
        }
        if knownUsers.contains(userID) { return userID }
        guard try await store.user(id: userID) != nil else {
            throw Problem(.unauthorized, detail: "the token's user does not exist; log in again")
        }
        knownUsers.insert(userID)
        return userID
    }

    /// The address the rate limits count a request against: the peer, or with `trustForwardedFor` the last
    /// `X-Forwarded-For` entry, which the proxy in front appended (earlier entries are the client's to invent).
    private func clientAddress(_ request: Request, _ context: LedgerRequestContext) -> String {
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

    /// The `Idempotency-Key` header of an `endpoint` that cannot run without one.
    private func requiredIdempotencyKey(_ request: Request, for endpoint: String) throws -> String {
        guard let key = try idempotencyKey(request) else {
            throw Problem(.idempotencyKeyMissing, detail: "\(endpoint) needs an Idempotency-Key header (a UUID)")
        }
        return key
    }

    /// The session id of a `{sid}` body, checked for shape (400) before any store sees it.
    private func sessionID(_ request: Request, _ context: LedgerRequestContext) async throws -> String {
        try SessionID.validate(try await decode(SessionRequest.self, request, context).sid)
    }

    /// `Idempotent-Replayed: true` on an answer that replays the one stored for the request's key.
    private func replayHeaders(_ replayed: Bool) -> HTTPFields {
        var headers = HTTPFields()
        if replayed { headers[HTTPField.Name(APIHeader.idempotentReplayed)!] = "true" }
        return headers
    }

    private func decode<T: Decodable>(
        _ type: T.Type,
        _ request: Request,
        _ context: LedgerRequestContext
    )
        async throws -> T
    {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: context.maxUploadSize)
        } catch is NIOTooManyBytesError {
            throw Problem(.bodyTooLarge, detail: "request bodies are limited to \(context.maxUploadSize) bytes")
        }
        do {
            return try APIJSON.decoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch let invalid as InvalidField {
            throw invalid
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context)
        {
            throw Problem(.badRequest, detail: "the body must be a JSON object: \(context.debugDescription)")
        } catch {
            throw Problem(.badRequest, detail: "the body is not valid JSON")
        }
    }

    private func json(_ value: some Encodable, headers: HTTPFields = [:]) throws -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: try APIJSON.encoder().encode(value)))
        )
    }
}

/// A bounded set of user ids known to exist.
private final class KnownUsers: Sendable {
    private let ids = Mutex(Set<String>())

    func contains(_ id: String) -> Bool { ids.withLock { $0.contains(id) } }

    func insert(_ id: String) {
        ids.withLock { ids in
            // Bounded so a flood of valid tokens for many users cannot grow memory without end.
            if ids.count >= 100_000 { ids.removeAll(keepingCapacity: true) }
            ids.insert(id)
        }
    }
}
