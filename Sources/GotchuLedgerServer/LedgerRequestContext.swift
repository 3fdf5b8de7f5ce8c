import Foundation
import GotchuAPI
public import GotchuLedger
public import Hummingbird
public import HummingbirdAuth
public import NIOCore
import Synchronization

/// The request context of the ledger API: bodies are capped at 16 KiB and decoded into problems
/// (``LedgerRequestDecoder``), the peer address is kept for the rate limits, and the bearer credentials are the
/// identity (``LedgerAuthenticator``).
public struct LedgerRequestContext: AuthRequestContext, RequestContext {
    /// The largest request body accepted; larger ones get 413.
    public static let maximumBodySize = 16 * 1024

    /// Hummingbird's per-request state (logger, route parameters, endpoint path).
    public var coreContext: CoreRequestContextStorage
    /// The address of the connection's peer (the client, or the proxy in front of it).
    public let remoteAddress: SocketAddress?
    /// Completes when the request's connection closes: a long response (an event stream) ends with it.
    let connectionClosed: EventLoopFuture<Void>
    /// The request's credentials, resolved the first time a handler asks (``principal()``); installed by
    /// ``LedgerAuthenticator``.
    var credentials: Credentials?

    /// The context of a request arriving on `source`'s connection.
    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.connectionClosed = source.channel.closeFuture
    }

    /// The body limit Hummingbird enforces: ``maximumBodySize``.
    public var maxUploadSize: Int { Self.maximumBodySize }

    /// Decodes bodies as the ledger's JSON, within ``maxUploadSize``, failing with the ledger's problems.
    public var requestDecoder: LedgerRequestDecoder { LedgerRequestDecoder() }

    /// Who the request's bearer credentials act as, once resolved: `nil` without credentials, and until a handler
    /// first asks (``LedgerAuthenticator`` resolves them then, not before). Setting it replaces the credentials.
    public var identity: LedgerPrincipal? {
        get { credentials?.resolved }
        set { credentials = Credentials(resolved: newValue) }
    }

    /// Who the request's credentials act as, resolved now if no handler asked before.
    /// - Throws: 401 without credentials or with invalid ones.
    func principal() async throws -> LedgerPrincipal {
        guard let principal = try await credentials?.principal() else {
            throw Problem(.unauthorized, detail: "send Authorization: Bearer <token>")
        }
        return principal
    }

    /// The user `action` is done as: the principal of the request's credentials, if it may do `action` (401 for
    /// missing or invalid credentials, 403 for a key without the scope).
    func user(for action: LedgerAction) async throws -> String {
        try Self.user(of: try await principal(), for: action).get()
    }

    /// The typed-throws call outside the async function: Swift 6.3's optimizer crashes (signal 11) on
    /// `try await principal().user(for:)` in a release build.
    @inline(never)
    private static func user(of principal: LedgerPrincipal, for action: LedgerAction) -> Result<String, LedgerError> {
        Result { () throws(LedgerError) -> String in try principal.user(for: action) }
    }
}

extension LedgerRequestContext {
    /// One request's credentials and, once resolved, who they act as. Shared by every copy of the context, so the
    /// store is asked once per request whichever copy asks.
    final class Credentials: Sendable {
        private let resolve: @Sendable () async throws -> LedgerPrincipal?
        private let outcome: Mutex<Result<LedgerPrincipal?, any Error>?>

        /// Credentials resolved by `resolve` on first use.
        init(resolve: @escaping @Sendable () async throws -> LedgerPrincipal?) {
            self.resolve = resolve
            self.outcome = Mutex(nil)
        }

        /// Credentials already resolved to `principal`.
        init(resolved principal: LedgerPrincipal?) {
            self.resolve = { principal }
            self.outcome = Mutex(.success(principal))
        }

        /// The principal if resolved, `nil` otherwise.
        var resolved: LedgerPrincipal? { outcome.withLock { try? $0?.get() } ?? nil }

        /// The principal (`nil` without credentials), resolved on the first call; later calls answer the same,
        /// failure included.
        func principal() async throws -> LedgerPrincipal? {
            if let known = outcome.withLock({ $0 }) { return try known.get() }
            let result: Result<LedgerPrincipal?, any Error>
            do {
                result = .success(try await resolve())
            } catch {
                result = .failure(error)
            }
            return try outcome.withLock { outcome in
                if outcome == nil { outcome = result }
                return outcome!
            }.get()
        }
    }
}

/// Decodes request bodies as the ledger's JSON, at most ``LedgerRequestContext/maximumBodySize`` bytes: a larger body
/// is refused with `body-too-large` (413), a body that is not the expected JSON object with `bad-request` (400), and a
/// field that breaks its own rules with its problem (``InvalidField``).
public struct LedgerRequestDecoder: RequestDecoder {
    /// Creates the decoder.
    public init() {}

    /// Decodes `type` from the request's body, collected up to the context's `maxUploadSize`.
    public func decode<T: Decodable>(
        _ type: T.Type,
        from request: Request,
        context: some RequestContext
    )
        async throws -> T
    {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: context.maxUploadSize)
        } catch is NIOTooManyBytesError {
            throw Problem(.bodyTooLarge, detail: "request bodies are limited to \(context.maxUploadSize) bytes")
        }
        // Every decoding error is answered here, so Hummingbird's own wording for them never reaches a client.
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
}
