public import Hummingbird
public import Logging
import ServiceLifecycle

/// The ledger server: the HTTP API over a store, plus the housekeeping that runs beside it.
public enum LedgerServer {
    /// Builds the application over a migrated store (call ``LedgerStore/migrate()`` first). Run it with `runService()` (graceful shutdown on SIGTERM/SIGINT) or inside a
    /// `ServiceGroup`.
    /// - Parameters:
    ///   - developmentMode: enables `/auth/dev-login` and `/dev/fund`.
    ///   - onListening: called with the bound port once the server accepts connections (useful with port 0).
    public static func application<Store: LedgerStore>(
        store: Store,
        tokens: TokenAuthority,
        host: String = "127.0.0.1",
        port: Int = 8080,
        developmentMode: Bool = false,
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(context: LedgerRequestContext.self)
        router.add(middleware: ProblemMiddleware())
        LedgerRoutes(store: store, tokens: tokens, developmentMode: developmentMode).register(on: router)
        var application = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "gotchu-ledger"),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? port) },
            logger: logger
        )
        application.addServices(IdempotencyKeyPruner(store: store, logger: logger))
        return application
    }
}

/// Deletes idempotency keys past their retention, at start and then every hour.
struct IdempotencyKeyPruner<Store: LedgerStore>: Service {
    let store: Store
    let logger: Logger

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let pruned = try await store.pruneIdempotencyKeys()
                if pruned > 0 { logger.info("pruned idempotency keys", metadata: ["count": "\(pruned)"]) }
            } catch {
                logger.warning("pruning idempotency keys failed", metadata: ["error": "\(error)"])
            }
            try? await gracefulShutdown(for: .seconds(3600))
        }
    }

    private func gracefulShutdown(for duration: Duration) async throws {
        try await cancelWhenGracefulShutdown { try await Task.sleep(for: duration) }
    }
}
