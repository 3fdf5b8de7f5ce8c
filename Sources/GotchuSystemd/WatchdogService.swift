package import Logging
import ServiceLifecycle

/// Sends systemd's `WATCHDOG=1` every half ``SystemdNotifier/watchdogInterval`` until graceful shutdown or
/// cancellation, as long as the health check passes.
///
/// A ping proves only what the health check checks: a check that hangs or fails stops the pings, and systemd then
/// restarts the service (`WatchdogSec=`). Without a watchdog (no `WATCHDOG_USEC`, or one meant for another process)
/// the service just waits for shutdown, so that a ``ServiceGroup`` does not take its return for the end of the service.
package struct WatchdogService: Service {
    private let notifier: SystemdNotifier
    private let logger: Logger
    private let isHealthy: @Sendable () async -> Bool

    /// Creates the service.
    ///
    /// - Parameters:
    ///   - notifier: Where the pings go; its ``SystemdNotifier/watchdogInterval`` sets their pace.
    ///   - logger: Where a failing health check is logged.
    ///   - isHealthy: Asked before every ping; `false` skips the ping.
    package init(
        notifier: SystemdNotifier,
        logger: Logger = Logger(label: "gotchu.watchdog"),
        isHealthy: @escaping @Sendable () async -> Bool = { true }
    ) {
        self.notifier = notifier
        self.logger = logger
        self.isHealthy = isHealthy
    }

    /// Pings until graceful shutdown or cancellation; returns then.
    package func run() async throws {
        guard let interval = notifier.watchdogInterval else {
            try? await gracefulShutdown()
            return
        }
        let pause = interval / 2
        logger.debug("systemd watchdog on", metadata: ["interval": "\(interval)"])
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            if await isHealthy() {
                notifier.watchdog()
            } else {
                logger.warning("health check failed; not pinging the systemd watchdog")
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
        }
    }
}
