public import Hummingbird
public import NIOCore

/// The request context of the ledger API: bodies are capped at 16 KiB, and the peer address is kept for the rate
/// limits.
public struct LedgerRequestContext: RequestContext {
    /// The largest request body accepted; larger ones get 413.
    public static let maximumBodySize = 16 * 1024

    public var coreContext: CoreRequestContextStorage
    /// The address of the connection's peer (the client, or the proxy in front of it).
    public let remoteAddress: SocketAddress?
    /// Completes when the request's connection closes: a long response (an event stream) ends with it.
    let connectionClosed: EventLoopFuture<Void>

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.connectionClosed = source.channel.closeFuture
    }

    public var maxUploadSize: Int { Self.maximumBodySize }
}
