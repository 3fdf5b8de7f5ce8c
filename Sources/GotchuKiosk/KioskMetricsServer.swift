import HTTPTypes
import Hummingbird
package import Logging
import NIOCore
import ServiceLifecycle

/// A listener of its own for the kiosk's metrics, `GET /metrics` and nothing else, so they can be scraped with the
/// customer display off (the `metrics` setting).
package struct KioskMetricsServer: Service {
    private let metrics: KioskMetrics
    private let source: (any KioskStatusSource)?
    private let host: String
    private let port: Int
    private let logger: Logger
    private let onListening: @Sendable (Int) async -> Void

    /// Creates the listener.
    /// - Parameters:
    ///   - metrics: what it serves.
    ///   - source: the kiosk whose status the metrics follow while this runs; `nil` where another part (the
    ///     display) already feeds them.
    ///   - host: the address to listen on.
    ///   - port: the port to listen on; 0 picks a free one (see `onListening`).
    ///   - logger: where the server logs.
    ///   - onListening: called with the bound port once the server accepts connections.
    package init(
        metrics: KioskMetrics,
        source: (any KioskStatusSource)?,
        host: String,
        port: Int,
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.metrics = metrics
        self.source = source
        self.host = host
        self.port = port
        self.logger = logger
        self.onListening = onListening
    }

    /// Serves until cancelled or shut down gracefully.
    package func run() async throws {
        let metrics = self.metrics
        let router = Router()
        router.add(middleware: GetOnlyMiddleware(paths: ["/metrics"]))
        router.get("/metrics") { _, _ in
            var headers = HTTPFields()
            headers[.contentType] = KioskMetrics.contentType
            headers[.cacheControl] = "no-store"
            return Response(
                status: .ok,
                headers: headers,
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition()))
            )
        }
        let port = self.port
        let onListening = self.onListening
        let application = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "gotchu-kiosk-metrics"),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? port) },
            logger: logger
        )
        guard let source else { return try await application.run() }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await metrics.observe(source) }
            try await application.run()
            // The server has stopped: so do the metrics.
            tasks.cancelAll()
        }
    }
}
