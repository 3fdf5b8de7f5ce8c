import Foundation
public import NIOCore
import NIOHTTP1
import NIOPosix
public import NIOSSL

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Resolves a webhook's host to the addresses a delivery may connect to.
public protocol WebhookResolver: Sendable {
    /// Every address `host` resolves to for TCP on `port`, in the order to try them.
    func addresses(host: String, port: Int) async throws -> [SocketAddress]
}

/// The system's resolver (`getaddrinfo`, on NIO's blocking-work pool): `/etc/hosts`, DNS, and literal addresses.
public struct SystemWebhookResolver: WebhookResolver {
    /// The system's resolver.
    public init() {}

    /// Every address of `host`, as `getaddrinfo` lists them.
    public func addresses(host: String, port: Int) async throws -> [SocketAddress] {
        try await NIOThreadPool.singleton.runIfActive { try Self.resolve(host, port) }
    }

    private static func resolve(_ host: String, _ port: Int) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if os(Linux)
            hints.ai_socktype = CInt(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw WebhookDeliveryError("\(host) does not resolve (\(String(cString: gai_strerror(status))))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = list
        while let info = next {
            defer { next = info.pointee.ai_next }
            guard let raw = info.pointee.ai_addr else { continue }
            switch info.pointee.ai_family {
            case AF_INET:
                let address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                addresses.append(SocketAddress(address, host: host))
            case AF_INET6:
                let address = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                addresses.append(SocketAddress(address, host: host))
            default:
                continue
            }
        }
        // getaddrinfo lists an address once per protocol on some systems.
        var seen = Set<SocketAddress>()
        return addresses.filter { seen.insert($0).inserted }
    }
}

/// Why a delivery got no HTTP answer: refused by the address policy, not resolved, not connected, timed out.
public struct WebhookDeliveryError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What happened, for the delivery's record.
    public var description: String

    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

/// The HTTP client of webhook deliveries: one HTTP/1.1 POST per connection, to an address it checked itself.
///
/// The host is resolved once, every address is checked (``WebhookAddressPolicy``), and the connection goes to a
/// checked address itself, so a name that resolves elsewhere at connect time (DNS rebinding) reaches nothing new; TLS
/// still verifies the certificate against the host name (sent as SNI), or against the literal address. Redirects are
/// never followed (a 3xx is a failed attempt like any other non-2xx), and the whole exchange, resolution included,
/// ends within ``timeout``.
///
/// Not AsyncHTTPClient: left to itself it resolves the host and connects to whatever the name says at that moment.
/// Its `dnsOverride` (1.37) can pin a name to one address, with SNI and verification kept for the name, but only one
/// address per client configuration: a delivery would need an `HTTPClient` (its pool, shut down after) per checked
/// address, tried in turn when a host has several and the first refuses, and each given what is left of the one
/// deadline. That is more code around it than this client is, for one POST per connection and no pooling wanted.
public struct WebhookHTTPClient: Sendable {
    /// The address policy checked on every delivery.
    public var policy: WebhookAddressPolicy
    /// How hosts are resolved.
    public var resolver: any WebhookResolver
    /// How long a delivery may take, from resolving to the end of the answer.
    public var timeout: Duration
    /// The TLS context of `https` deliveries, or why there is none: a machine without a certificate bundle still
    /// serves, and delivers to `http` receivers, while every `https` delivery fails with the reason.
    private let tls: Result<NIOSSLContext, WebhookDeliveryError>
    private let group: any EventLoopGroup

    /// The most bytes of an answer's body kept for the delivery's record.
    public static let keptBodyBytes = 512

    /// A client under `policy`; `trustRoots` are certificate authorities trusted besides the system's. Connections
    /// run on `group` (NIO's shared group by default).
    public init(
        policy: WebhookAddressPolicy,
        resolver: any WebhookResolver = SystemWebhookResolver(),
        timeout: Duration = .seconds(10),
        trustRoots: [NIOSSLCertificate] = [],
        group: (any EventLoopGroup)? = nil
    ) {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.certificateVerification = .fullVerification
        if !trustRoots.isEmpty { configuration.additionalTrustRoots = [.certificates(trustRoots)] }
        do {
            self.tls = .success(try NIOSSLContext(configuration: configuration))
        } catch {
            self.tls = .failure(Self.noTrustStore(error))
        }
        self.policy = policy
        self.resolver = resolver
        self.timeout = timeout
        self.group = group ?? MultiThreadedEventLoopGroup.singleton
    }

    /// Why `https` deliveries cannot verify receivers: the system's certificate authorities could not be loaded.
    public var tlsUnavailable: WebhookDeliveryError? {
        if case .failure(let failure) = tls { return failure }
        return nil
    }

    /// The reason a TLS context could not be made, naming the certificate bundle it needs.
    private static func noTrustStore(_ error: any Error) -> WebhookDeliveryError {
        WebhookDeliveryError(
            "TLS is unavailable: the system's certificate authorities could not be loaded "
                + "(/etc/ssl/certs/ca-certificates.crt; install the ca-certificates package): \(error)"
        )
    }

    /// An HTTP answer: its status and the start of its body.
    public struct Answer: Sendable, Hashable {
        /// The status code.
        public var status: Int
        /// At most ``WebhookHTTPClient/keptBodyBytes`` of the body, as UTF-8 with invalid bytes replaced.
        public var body: String
    }

    /// POSTs `body` to `url` with `headers` (besides `Host`, `Content-Type: application/json`, `Content-Length`,
    /// `User-Agent` and `Connection: close`).
    /// - Returns: the answer, whatever its status (a redirect too: it is not followed).
    /// - Throws: ``WebhookDeliveryError`` when there is no answer: the URL or an address refused, no address
    ///   connected, TLS failed, the timeout passed or the connection ended early.
    public func post(
        url: String,
        headers: [(String, String)],
        body: [UInt8]
    ) async throws(WebhookDeliveryError)
        -> Answer
    {
        let start = ContinuousClock.now
        let target: WebhookTarget
        do {
            target = try policy.target(url)
        } catch {
            throw WebhookDeliveryError(error.description)
        }
        if target.isHTTPS, case .failure(let failure) = tls { throw failure }
        let addresses = try await policy.addresses(of: target, resolver: resolver, within: timeout)
        let remaining = timeout - (ContinuousClock.now - start)
        guard remaining > .zero else { throw WebhookDeliveryError("timed out resolving \(target.host)") }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: target.pathAndQuery)
        head.headers.add(name: "Host", value: target.hostHeader)
        head.headers.add(name: "User-Agent", value: "Gotchu-Webhooks/1")
        head.headers.add(name: "Content-Type", value: "application/json")
        head.headers.add(name: "Content-Length", value: String(body.count))
        head.headers.add(name: "Connection", value: "close")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        do {
            return try await exchange(target, addresses, head, body, within: remaining)
        } catch let error as WebhookDeliveryError {
            throw error
        } catch {
            throw WebhookDeliveryError(Self.describe(error))
        }
    }

    /// Connects to the first of `addresses` that accepts, sends the request and reads the answer, all within
    /// `limit`.
    private func exchange(
        _ target: WebhookTarget,
        _ addresses: [SocketAddress],
        _ head: HTTPRequestHead,
        _ body: [UInt8],
        within limit: Duration
    ) async throws -> Answer {
        let loop = group.next()
        let deadline = NIODeadline.now() + .nanoseconds(limit.nanoseconds)
        let answer = loop.makePromise(of: Answer.self)
        let timer = loop.scheduleTask(deadline: deadline) {
            answer.fail(WebhookDeliveryError("timed out after \(timeout.components.seconds) s"))
        }
        defer { timer.cancel() }
        let tls = target.isHTTPS ? try self.tls.get() : nil
        let serverName = target.isLiteralAddress ? nil : target.host
        var failures: [String] = []
        var connected: (any Channel)?
        for address in addresses {
            let remaining = deadline - NIODeadline.now()
            guard remaining > .zero else { break }
            let bootstrap = ClientBootstrap(group: loop)
                .connectTimeout(remaining)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        if let tls {
                            try pipeline.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName))
                        }
                        try pipeline.addHTTPClientHandlers()
                        try pipeline.addHandler(AnswerCollector(answer))
                    }
                }
            do {
                connected = try await bootstrap.connect(to: address).get()
                break
            } catch {
                failures.append("\(IPAddressBytes(address)?.description ?? "\(address)"): \(Self.describe(error))")
            }
        }
        guard let channel = connected else {
            let reason = failures.isEmpty ? "timed out connecting" : failures.joined(separator: "; ")
            answer.fail(WebhookDeliveryError("could not connect to \(target.host): \(reason)"))
            return try await answer.futureResult.get()
        }
        answer.futureResult.whenComplete { _ in channel.close(promise: nil) }
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil)).whenFailure { error in
            answer.fail(WebhookDeliveryError("sending failed: \(Self.describe(error))"))
        }
        return try await answer.futureResult.get()
    }

    /// An error as a delivery's record says it.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as WebhookDeliveryError: return error.description
        case let error as NIOConnectionError:
            return error.connectionErrors.map { "\($0.error)" }.first ?? "connection failed"
        case is ChannelError: return "connection failed (\(error))"
        case let error as NIOSSLError: return "TLS failed (\(error))"
        case let error as BoringSSLError: return "TLS failed (\(error))"
        default: return "\(error)"
        }
    }
}

/// Reads one HTTP answer: its status and the start of its body, completing `answer` at its end (or failing it if
/// the connection ends or breaks first).
private final class AnswerCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let answer: EventLoopPromise<WebhookHTTPClient.Answer>
    private var status: Int?
    private var body = ByteBuffer()

    init(_ answer: EventLoopPromise<WebhookHTTPClient.Answer>) { self.answer = answer }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // An informational answer (100 Continue) is followed by the real one.
            if head.status.code >= 200 { status = Int(head.status.code) }
        case .body(var part):
            let room = WebhookHTTPClient.keptBodyBytes - body.readableBytes
            if room > 0, let kept = part.readSlice(length: min(room, part.readableBytes)) {
                body.writeImmutableBuffer(kept)
            }
        case .end:
            guard let status else { return }
            answer.succeed(.init(status: status, body: String(decoding: body.readableBytesView, as: UTF8.self)))
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        answer.fail(WebhookDeliveryError(WebhookHTTPClient.describe(error)))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        answer.fail(WebhookDeliveryError("the connection closed before the answer ended"))
        context.fireChannelInactive()
    }
}

extension WebhookAddressPolicy {
    /// Checks `url` as registration does: its form (``target(_:)``) and, for a host not on the allow list, every
    /// address it resolves to now.
    /// - Throws: ``WebhookURLError`` saying why it is refused.
    public func check(
        url: String,
        resolver: any WebhookResolver = SystemWebhookResolver(),
        within limit: Duration = .seconds(10)
    ) async throws(WebhookURLError) -> WebhookTarget {
        let target = try self.target(url)
        guard !target.isAllowListed else { return target }
        do {
            _ = try await addresses(of: target, resolver: resolver, within: limit)
        } catch {
            throw WebhookURLError("url is refused: \(error.description)")
        }
        return target
    }

    /// The addresses of `target` as `resolver` answers now, every one of them allowed; the resolution bounded by
    /// `limit`.
    /// - Throws: ``WebhookDeliveryError`` when the host does not resolve in time, or resolves to a refused address.
    public func addresses(
        of target: WebhookTarget,
        resolver: any WebhookResolver,
        within limit: Duration
    ) async throws(WebhookDeliveryError) -> [SocketAddress] {
        let addresses: [SocketAddress]
        do {
            let (host, port) = (target.host, target.port)
            // A literal address is its own resolution: no lookup, no wait for the blocking-work pool.
            if target.isLiteralAddress, let address = try? SocketAddress(ipAddress: host, port: port) {
                return try checked([address], of: target)
            }
            addresses = try await Self.bounded(limit, on: MultiThreadedEventLoopGroup.singleton.next()) {
                try await resolver.addresses(host: host, port: port)
            }
        } catch let error as WebhookDeliveryError {
            throw error
        } catch {
            throw WebhookDeliveryError("\(target.host) does not resolve: \(error)")
        }
        return try checked(addresses, of: target)
    }

    /// `addresses` if there are any and every one of them is allowed for `target`.
    private func checked(
        _ addresses: [SocketAddress],
        of target: WebhookTarget
    ) throws(WebhookDeliveryError) -> [SocketAddress] {
        guard !addresses.isEmpty else { throw WebhookDeliveryError("\(target.host) resolves to no address") }
        if let refused = refusal(of: addresses, for: target) {
            throw WebhookDeliveryError(
                "\(target.host) resolves to \(refused.address), which is refused (\(refused.reason)); a receiver of the "
                    + "ledger's own may be allowed with the server's \(WebhookAddressPolicy.allowHostsSetting)"
            )
        }
        return addresses
    }

    /// The result of `operation`, or a timeout once `limit` passed (the operation is then left to finish alone: a
    /// blocking resolution cannot be interrupted).
    private static func bounded<T: Sendable>(
        _ limit: Duration,
        on loop: any EventLoop,
        _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let promise = loop.makePromise(of: T.self)
        let task = Task {
            do {
                promise.succeed(try await operation())
            } catch {
                promise.fail(error)
            }
        }
        let timer = loop.scheduleTask(in: .nanoseconds(limit.nanoseconds)) {
            promise.fail(WebhookDeliveryError("timed out after \(limit.components.seconds) s resolving the host"))
        }
        defer {
            timer.cancel()
            task.cancel()
        }
        return try await promise.futureResult.get()
    }
}

extension Duration {
    /// The whole duration in nanoseconds, saturating.
    fileprivate var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : product + attoseconds / 1_000_000_000
    }
}
