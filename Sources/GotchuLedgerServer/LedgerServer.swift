package import Foundation
import GotchuCheckout
import GotchuOIDC
import GotchuWebhooks
package import Hummingbird
import HummingbirdCore
import HummingbirdTLS
package import Logging
public import NIOSSL
package import ServiceLifecycle
import Synchronization

/// The ledger server: the HTTP API over a store, plus the housekeeping that runs beside it.
public enum LedgerServer {
    /// Builds the server `configuration` describes over a store, which it migrates before it accepts connections.
    /// Run it with `runService()` (graceful shutdown on SIGTERM/SIGINT) or inside a `ServiceGroup`.
    /// - Parameters:
    ///   - services: what the store needs running (a PostgreSQL connection pool); started before the server and
    ///     stopped after it.
    ///   - onListening: called with the bound port once the server accepts connections (useful with port 0).
    /// - Throws: ``SetupError`` when the secret, the certificate or the key cannot be used.
    package static func application<Store: LedgerStore>(
        store: Store,
        _ configuration: Configuration,
        services: [any Service] = [],
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws(SetupError) -> some ApplicationProtocol {
        application(
            store: store,
            configuration,
            try await Assembled(configuration, logger: logger),
            services: services,
            logger: logger,
            onListening: onListening
        )
    }

    private static func application<Store: LedgerStore>(
        store: Store,
        _ configuration: Configuration,
        _ parts: Assembled,
        services: [any Service],
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void
    ) -> some ApplicationProtocol {
        let limits = configuration.limits
        let registration = configuration.registration
        let metrics = parts.metrics
        let tls = parts.tls
        let publicURL = configuration.publicURL
        let webhooks = configuration.webhooks
        precondition(registration == .closed || parts.mailer != nil, "open registration needs a mailer for its codes")
        // HEAD is answered as GET without the body.
        let router = Router(context: LedgerRequestContext.self, options: .autoGenerateHeadEndpoints)
        if let metrics {
            // Outermost, so it sees the status the client gets.
            router.add(middleware: LedgerMetricsMiddleware(metrics: metrics))
            store.observe(metrics)
        }
        let outage = StoreOutage()
        router.add(middleware: ProblemMiddleware(outage: outage))
        LedgerRoutes(
            store: store,
            tokens: parts.tokens,
            identities: parts.identities,
            developmentMode: configuration.developmentMode,
            registration: registration,
            mailer: parts.mailer,
            limits: limits,
            metrics: metrics,
            webhooks: webhooks,
            outage: outage,
            publicURL: publicURL,
            checkout: {
                var checkout = configuration.checkout
                // Browsers reach it over HTTPS when it serves TLS itself, or when its public address is https (a
                // TLS proxy in front).
                checkout.secureCookies = checkout.secureCookies ?? (tls != nil || publicURL?.isHTTPS == true)
                return checkout
            }()
        ).register(on: router)
        var application = Application(
            router: router,
            server: HTTPServerBuilder { responder in
                let channel = LedgerHTTPChannel(responder: responder, limits: limits, metrics: metrics)
                guard let tls else { return channel }
                return try TLSChannel(channel, tlsConfiguration: tls)
            },
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "gotchu-ledger"
            ),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? configuration.port) },
            logger: logger
        )
        // The services start together; the migration runs once, and the server and the pruner both wait for it.
        let migration = Migration(store: store)
        application.addServices(services)
        application.beforeServerStarts { try await migration.run() }
        application.addServices(IdempotencyKeyPruner(store: store, migration: migration, logger: logger))
        application.addServices(SessionChangeRelay(store: store, migration: migration, logger: logger))
        application.addServices(SharePaymentReturner(store: store, migration: migration, logger: logger))
        if webhooks.delivers {
            var countAttempt: (@Sendable (String, Swift.Duration) -> Void)?
            if let metrics { countAttempt = { metrics.webhookAttempt(outcome: $0, duration: $1) } }
            let ready: @Sendable () async throws -> Void = { try await migration.run() }
            application.addServices(
                WebhookDeliverer(
                    store: store,
                    ready: ready,
                    options: webhooks,
                    countAttempt: countAttempt,
                    logger: logger
                )
            )
        }
        return application
    }
}

/// Relays the session changes other servers on the same database commit to this server's event streams, until
/// graceful shutdown (see ``LedgerStore/relayChanges()``).
struct SessionChangeRelay<Store: LedgerStore>: Service {
    let store: Store
    let migration: Migration
    let logger: Logger

    func run() async throws {
        try await migration.run()
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await store.relayChanges()
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning("relaying session changes failed", metadata: ["error": "\(error)"])
                    try await Task.sleep(for: .seconds(1))
                    continue
                }
                // Nothing to relay (a database this process alone uses): wait for the shutdown.
                try await Task.sleep(for: .seconds(86_400 * 365))
            }
        }
    }
}

/// Deletes idempotency keys past their retention, expired refresh tokens and ended browser sessions, at start and
/// then every hour.
struct IdempotencyKeyPruner<Store: LedgerStore>: Service {
    let store: Store
    let migration: Migration
    let logger: Logger

    func run() async throws {
        // A failed migration stops the server; rethrowing it here keeps it the error the service group reports.
        try await migration.run()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let pruned = try await store.pruneIdempotencyKeys()
                if pruned > 0 { logger.info("pruned idempotency keys", metadata: ["count": "\(pruned)"]) }
                let expired = try await store.pruneRefreshTokens()
                if expired > 0 { logger.info("pruned expired refresh tokens", metadata: ["count": "\(expired)"]) }
                let ended = try await store.pruneBrowserSessions()
                if ended > 0 { logger.info("pruned ended browser sessions", metadata: ["count": "\(ended)"]) }
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

/// Returns the paid shares of split sessions that were cancelled or expired, every second until graceful shutdown
/// (``LedgerStore/returnDueSharePayments(limit:)``): every server runs it, and each payment is returned once
/// however many do, so an expired split is refunded within about a second with no request arriving. Before that it
/// notes the sessions that expired since, each with its `session.expired` webhook event, once however many servers
/// run it (``LedgerStore/markExpiredSessions(limit:)``).
struct SharePaymentReturner<Store: LedgerStore>: Service {
    let store: Store
    let migration: Migration
    let logger: Logger
    /// How long to wait between sweeps.
    var interval: Duration = .seconds(1)

    func run() async throws {
        try await migration.run()
        // Logged when a failure begins or changes, not every second it lasts (a database outage).
        var failing: String?
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                _ = try await store.markExpiredSessions(limit: 100)
                let returned = try await store.returnDueSharePayments(limit: 100)
                if returned > 0 {
                    logger.info("returned split payments", metadata: ["count": "\(returned)"])
                }
                if failing != nil { logger.notice("returning split payments works again") }
                failing = nil
            } catch {
                let description = "\(error)"
                if description != failing {
                    logger.warning("returning split payments failed", metadata: ["error": "\(description)"])
                }
                failing = description
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }
}

/// Migrates a store once, however many callers wait for it.
final class Migration: Sendable {
    private let task: Mutex<Task<Void, any Error>?> = Mutex(nil)
    private let migrate: @Sendable () async throws -> Void

    init(store: some LedgerStore) { self.migrate = { try await store.migrate() } }

    func run() async throws {
        let migrate = self.migrate
        let task = self.task.withLock { task in
            if let task { return task }
            let started = Task { try await migrate() }
            task = started
            return started
        }
        try await task.value
    }
}

extension LedgerServer {
    /// One server of ``withRunning(_:_:logger:_:)``: a store and what it needs running.
    package struct Replica: Sendable {
        /// The server's store.
        package var store: any LedgerStore
        /// Services the store needs (a PostgreSQL connection pool).
        package var services: [any Service]

        /// Creates a replica.
        package init(store: any LedgerStore, services: [any Service] = []) {
            self.store = store
            self.services = services
        }
    }

    /// Runs one server per replica, each as `configuration` describes on a free loopback port, while `body` runs,
    /// then shuts them down gracefully: how the demo, the simulator, the benchmarks and the tests get real HTTP
    /// ledgers in their own process. The parts the configuration names are made once and shared by the servers.
    /// - Parameter body: receives the servers' base URLs, such as `http://127.0.0.1:40123`, in the order they
    ///   started listening.
    package static func withRunning<Result: Sendable>(
        _ replicas: [Replica],
        _ configuration: Configuration = .inProcess(),
        logger: Logger = Logger(label: "gotchu.ledger") { _ in SwiftLogNoOpLogHandler() },
        _ body: @Sendable ([URL]) async throws -> Result
    ) async throws -> Result {
        var configuration = configuration
        configuration.host = "127.0.0.1"
        configuration.port = 0
        let parts = try await Assembled(configuration, logger: logger)
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let applications: [any Service] = replicas.map { replica in
            application(
                store: replica.store,
                configuration,
                parts,
                services: replica.services,
                logger: logger
            ) { portContinuation.yield($0) }
        }
        let scheme = parts.tls == nil ? "http" : "https"
        let group = ServiceGroup(services: applications, gracefulShutdownSignals: [], logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var urls: [URL] = []
            for await port in ports {
                urls.append(URL(string: "\(scheme)://127.0.0.1:\(port)")!)
                if urls.count == replicas.count { break }
            }
            let result: Result
            do {
                guard urls.count == replicas.count else { throw CancellationError() }
                result = try await body(urls)
            } catch {
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return result
        }
    }

    /// Runs one server over `store` on a free loopback port while `body` runs; see ``withRunning(_:_:logger:_:)``.
    package static func withRunning<Result: Sendable>(
        store: some LedgerStore,
        services: [any Service] = [],
        _ configuration: Configuration = .inProcess(),
        logger: Logger = Logger(label: "gotchu.ledger") { _ in SwiftLogNoOpLogHandler() },
        _ body: @Sendable (URL) async throws -> Result
    ) async throws -> Result {
        try await withRunning([Replica(store: store, services: services)], configuration, logger: logger) { urls in
            try await body(urls[0])
        }
    }
}

extension LedgerServer {
    /// Why the server's certificate or key cannot be used.
    public struct TLSSetupError: Error, CustomStringConvertible, Sendable {
        /// The whole message, naming the file.
        public var description: String
    }

    /// A server TLS configuration from a PEM certificate chain (the server's certificate first, then any
    /// intermediates) and its PEM private key, checked now so a bad file stops the server before it listens.
    /// - Throws: ``TLSSetupError`` naming the file that cannot be read or parsed, or saying that the key does not
    ///   belong to the certificate.
    public static func tlsConfiguration(
        certificateFile: String,
        keyFile: String
    ) throws(TLSSetupError)
        -> TLSConfiguration
    {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificateFile)
        } catch {
            throw TLSSetupError(description: "cannot read the certificate file \(certificateFile): \(error)")
        }
        guard !chain.isEmpty else {
            throw TLSSetupError(description: "the certificate file \(certificateFile) holds no PEM certificate")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyFile, format: .pem)
        } catch {
            throw TLSSetupError(description: "cannot read the private key file \(keyFile): \(error)")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(key)
        )
        do {
            // Building a context checks that the key matches the certificate.
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSSetupError(
                description: "the key in \(keyFile) does not fit the certificate in \(certificateFile): \(error)"
            )
        }
        return configuration
    }
}
