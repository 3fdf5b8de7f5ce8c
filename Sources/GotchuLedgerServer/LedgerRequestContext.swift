public import Hummingbird

/// The request context of the ledger API: bodies are capped at 16 KiB.
public struct LedgerRequestContext: RequestContext {
    /// The largest request body accepted; larger ones get 413.
    public static let maximumBodySize = 16 * 1024

    public var coreContext: CoreRequestContextStorage

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
    }

    public var maxUploadSize: Int { Self.maximumBodySize }
}
