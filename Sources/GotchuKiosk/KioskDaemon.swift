import Foundation
import GotchuBlueZ
package import GotchuCore
import GotchuDBus
import GotchuLedgerClient
import GotchuSimulatedRadio
import GotchuSystemd
package import Logging
import ServiceLifecycle
import UnixSignals

/// The kiosk as a daemon: the charges, the control interface on D-Bus, the customer display, systemd's readiness,
/// status and watchdog, composed in one service group that stops gracefully on SIGTERM or SIGINT.
///
/// `gotchu kiosk` and `gotchu-kiosk` are this, after reading their configuration.
package enum KioskDaemon {
    /// Why the daemon could not start or stopped with an error; its description is one line for the operator.
    package struct Failure: Error, CustomStringConvertible {
        /// What went wrong and, where it helps, what to do.
        package let description: String

        /// Creates a failure with its one-line explanation.
        package init(_ description: String) { self.description = description }
    }

    /// Runs the kiosk described by `settings` until SIGTERM or SIGINT.
    ///
    /// - Parameters:
    ///   - settings: The checked configuration.
    ///   - logger: Where the daemon logs.
    ///   - output: Receives the lines that tell a person or a supervising process where things are ("kiosk ready",
    ///     the display's address); standard output by default.
    package static func run(
        _ settings: KioskConfiguration,
        logger: Logger,
        output: @escaping @Sendable (String) -> Void = { FileHandle.standardOutput.write(Data("\($0)\n".utf8)) }
    ) async throws {
        let store: KioskStore
        do {
            store = try KioskStore(directory: settings.stateDirectory)
        } catch {
            throw Failure("cannot open the state directory \(settings.stateDirectory.path): \(error)")
        }
        let metrics = KioskMetrics()
        let radio = try await makeRadio(settings, metrics: metrics)
        if settings.radio == .bluez, settings.advertisingType == .peripheral {
            logger.notice(
                """
                advertise_as = "peripheral": every EID goes out from the adapter's public address, which a listener \
                can recognise; right for a terminal that stays put, not for one that moves with a person
                """
            )
        }
        let control: DBusConnection
        do {
            control = try await DBusConnection.connect(to: settings.controlBus)
        } catch {
            await radio.close()
            throw Failure("cannot connect to the \(settings.controlBus) for io.gotchu.Kiosk1: \(error)")
        }
        do {
            try await run(
                settings,
                store: store,
                radio: radio,
                control: control,
                metrics: metrics,
                logger: logger,
                output: output
            )
        } catch {
            await control.close()
            await radio.close()
            throw error
        }
        await control.close()
        await radio.close()
    }

    private static func run(
        _ settings: KioskConfiguration,
        store: KioskStore,
        radio: any Radio,
        control: DBusConnection,
        metrics: KioskMetrics,
        logger: Logger,
        output: @escaping @Sendable (String) -> Void
    ) async throws {
        var trust: LedgerTrust?
        if let caFile = settings.caFile {
            do {
                trust = try LedgerTrust(caFile: caFile)
            } catch {
                throw Failure("ca_file: \(error)")
            }
        }
        let receiptTrust: ReceiptTrust
        if let file = settings.receiptKeysFile {
            do {
                receiptTrust = try ReceiptTrust.keyFile(file)
            } catch {
                throw Failure("receipt_keys_file: \(error)")
            }
        } else {
            receiptTrust = ReceiptTrust(
                .pinned(file: settings.stateDirectory.appendingPathComponent("receipt-keys.json"))
            )
        }
        let kiosk = try Kiosk(
            store: store,
            ledger: MeteredKioskLedger(
                KioskLedger(
                    baseURL: settings.server,
                    credentials: settings.credentials,
                    trust: trust,
                    receiptTrust: receiptTrust
                ),
                metrics: metrics
            ),
            radio: radio,
            options: Kiosk.Options(
                payeeName: settings.payeeName,
                serviceUUID: settings.serviceUUID,
                charges: KioskChargeMachine.Configuration(
                    sessionLifetime: settings.sessionLifetime,
                    renewExpiredSessions: settings.renewExpiredSessions,
                    rotateEvery: settings.rotateEvery
                ),
                calibratedRSSI: settings.calibratedRSSI,
                tipPrompt: settings.tipPrompt
            ),
            logger: logger
        )

        let notifier = SystemdNotifier(logger: logger)
        let ready = ReadinessGate(parts: 1 + (settings.display == nil ? 0 : 1) + (settings.metrics == nil ? 0 : 1)) {
            output("kiosk ready")
            notifier.ready(status: "ready, \(await kiosk.status().state.rawValue)")
        }
        var services: [any Service] = [
            DaemonTask { await kiosk.run() },
            DaemonTask {
                try await KioskControl.serve(kiosk, on: control, metrics: metrics) {
                    output("control: \(KioskControl.busName) on the \(settings.controlBus)")
                    await ready.partReady()
                }
            },
            DaemonTask {
                for await status in await kiosk.statusUpdates() {
                    notifier.status(describe(status))
                }
            },
            // A ping proves the kiosk's actor answers and the control connection is up.
            WatchdogService(notifier: notifier, logger: logger) {
                _ = await kiosk.status()
                return await control.isConnected
            },
        ]
        if let address = settings.display {
            services.append(
                KioskDisplay(
                    source: kiosk,
                    host: address.host,
                    port: address.port,
                    metrics: metrics,
                    logger: logger
                ) { port in
                    output("display: http://\(KioskConfiguration.DisplayAddress(host: address.host, port: port))/")
                    await ready.partReady()
                }
            )
        }
        if let address = settings.metrics {
            services.append(
                KioskMetricsServer(
                    metrics: metrics,
                    // The display feeds the metrics the status when it runs.
                    source: settings.display == nil ? kiosk : nil,
                    host: address.host,
                    port: address.port,
                    logger: logger
                ) { port in
                    output(
                        "metrics: http://\(KioskConfiguration.DisplayAddress(host: address.host, port: port))/metrics"
                    )
                    await ready.partReady()
                }
            )
        }
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        do {
            try await group.run()
        } catch {
            notifier.stopping(status: "failed: \(error)")
            throw Failure("\(error)")
        }
        notifier.stopping()
    }

    /// The radio the settings name: the shared simulated air or BlueZ (its calls told to `metrics`, if any).
    package static func makeRadio(
        _ settings: KioskConfiguration,
        metrics: KioskMetrics? = nil
    ) async throws -> any Radio {
        switch settings.radio {
        case .none:
            return NoRadio()
        case .sim:
            do {
                if let air = settings.air { try SharedAirRadio.prepare(directory: air) }
                return try await SharedAirRadio(
                    directory: settings.air ?? SharedAirRadio.defaultDirectory,
                    peer: SimulatedPeer(
                        name: "terminal \(ProcessInfo.processInfo.processIdentifier)",
                        at: Position(x: 0, y: 0)
                    ),
                    seed: UInt64.random(in: .min ... .max)
                )
            } catch {
                throw Failure("cannot join the simulated air: \(error)")
            }
        case .bluez:
            // bluetoothd may start after the kiosk, or stop: its absence is a problem shown and retried while a charge
            // waits, not a reason to exit.
            do {
                let connection = try await DBusConnection.connect(to: settings.bluezBus)
                return BlueZRadio(
                    connection: connection,
                    configuration: .init(adapter: settings.adapter, advertisingType: settings.advertisingType),
                    observer: metrics
                )
            } catch {
                throw Failure("cannot connect to the \(settings.bluezBus) to reach bluetoothd: \(error)")
            }
        }
    }

    /// One line for `systemctl status`.
    package static func describe(_ status: KioskStatus) -> String {
        guard let charge = status.charge else { return status.state.rawValue }
        var text = "\(status.state.rawValue): charge \(charge.id) \(Money.format(charge.amountCents))"
        if charge.isSplit { text += ", \(charge.sharesPaid) of \(charge.shares) shares paid" }
        if let problem = status.problem { text += " — \(problem)" }
        return text
    }
}

/// A part of the kiosk run as a service: cancelled when the daemon shuts down.
private struct DaemonTask: Service {
    let body: @Sendable () async throws -> Void

    init(_ body: @escaping @Sendable () async throws -> Void) { self.body = body }

    func run() async throws {
        try await cancelWhenGracefulShutdown { try await body() }
    }
}

/// Announces readiness once every part (the control name, the display) is up.
private actor ReadinessGate {
    private var remaining: Int
    private let onReady: @Sendable () async -> Void

    init(parts: Int, onReady: @escaping @Sendable () async -> Void) {
        remaining = parts
        self.onReady = onReady
    }

    func partReady() async {
        remaining -= 1
        if remaining == 0 { await onReady() }
    }
}
