import ArgumentParser
import Foundation
import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuKiosk
import GotchuSimulatedRadio
import Logging
import ServiceLifecycle
import UnixSignals

struct KioskCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kiosk",
        abstract: "Run the payment terminal: charges for a point-of-sale over D-Bus, a customer display, all day.",
        discussion: """
            The point-of-sale asks for a charge over D-Bus (io.gotchu.Kiosk1; `gotchu charge 12.50` does it from \
            a shell). The kiosk creates a ledger session, advertises its EID until a payer pays, and tells the \
            point-of-sale and the customer display (a web page at --display) every step. Charges are kept in \
            SQLite under the state directory: after a crash or a restart the kiosk goes on advertising the same \
            session, or reports how it ended. Bluetooth, the ledger and expired tokens are retried with backoff, \
            and shown while they fail. Under systemd (Type=notify) it reports readiness and feeds the watchdog.

            Settings come from the config file (TOML or JSON), then GOTCHU_KIOSK_<KEY> environment variables \
            (GOTCHU_KIOSK_SERVER…), then these flags, each overriding the one before.

            Examples:
              gotchu kiosk                  # /etc/gotchu/kiosk.toml, system bus, BlueZ
              gotchu kiosk --server http://127.0.0.1:8080 --email shop@example.com \\
                --radio sim --control-bus session --state-directory /tmp/kiosk
            """
    )

    @Option(
        help: ArgumentHelp(
            "Config file, .toml or .json (default: /etc/gotchu/kiosk.toml, which may be absent).",
            valueName: "path"
        )
    )
    var config: String?

    @Option(help: ArgumentHelp("Ledger server URL.", valueName: "url")) var server: String?
    @Option(
        help: ArgumentHelp("Log in to the ledger as this e-mail, again when the token expires.", valueName: "email")
    )
    var email: String?
    @Option(help: ArgumentHelp("File holding the ledger token, re-read when the ledger rejects it.", valueName: "path"))
    var tokenFile: String?
    @Option(help: ArgumentHelp("Name shown to customers on the display.", valueName: "name")) var payeeName: String?
    @Option(help: ArgumentHelp("bluez (default) or sim.", valueName: "radio")) var radio: String?
    @Option(help: ArgumentHelp("Bus bluetoothd is on: system, session or an address.", valueName: "bus"))
    var bluezBus: String?
    @Option(help: ArgumentHelp("Bluetooth adapter, such as hci0.", valueName: "name")) var adapter: String?
    @Option(help: ArgumentHelp("Service UUID advertised: 16-bit (feed) or 128-bit.", valueName: "uuid"))
    var serviceUUID: String?
    @Option(help: ArgumentHelp("sim: the shared air directory.", valueName: "path")) var air: String?
    @Option(help: ArgumentHelp("How long a charge waits for a payer, in seconds (default 300).", valueName: "seconds"))
    var sessionLifetime: Int?
    @Flag(
        inversion: .prefixedNo,
        help: "When the ledger's session expires before the charge's lifetime, advertise a new one (default: yes)."
    )
    var renewExpiredSessions: Bool?
    @Option(help: ArgumentHelp("Where charges are kept (default /var/lib/gotchu-kiosk).", valueName: "path"))
    var stateDirectory: String?
    @Option(
        help: ArgumentHelp(
            "Customer display address, host:port (default 127.0.0.1:8080; port 0 picks one), or off.",
            valueName: "host:port"
        )
    )
    var display: String?
    @Option(
        help: ArgumentHelp("Bus to own io.gotchu.Kiosk1 on: system (default), session or an address.", valueName: "bus")
    )
    var controlBus: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    private var flags: KioskSettings {
        KioskSettings(
            server: server,
            email: email,
            tokenFile: tokenFile,
            payeeName: payeeName,
            radio: radio,
            bluezBus: bluezBus,
            adapter: adapter,
            serviceUUID: serviceUUID,
            air: air,
            sessionLifetime: sessionLifetime,
            renewExpiredSessions: renewExpiredSessions,
            stateDirectory: stateDirectory,
            display: display,
            controlBus: controlBus
        )
    }

    func run() async throws {
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "gotchu.kiosk")
        let settings: KioskConfiguration
        do {
            settings = try KioskConfiguration.resolve(
                file: config.map { URL(fileURLWithPath: $0) } ?? KioskConfiguration.defaultFile,
                fileIsExplicit: config != nil,
                environment: ProcessInfo.processInfo.environment,
                flags: flags
            )
        } catch {
            throw CLIError("\(error)")
        }

        let store: KioskStore
        do {
            store = try KioskStore(directory: settings.stateDirectory)
        } catch {
            throw CLIError("cannot open the state directory \(settings.stateDirectory.path): \(error)")
        }
        let radio: any Radio
        switch settings.radio {
        case .sim:
            radio = try await RadioOptions.simulatedRadio(air: settings.air, role: .receiver, at: Position(x: 0, y: 0))
        case .bluez:
            // bluetoothd may start after the kiosk, or stop: its absence is a problem shown and retried while a charge
            // waits, not a reason to exit.
            do {
                let connection = try await DBusConnection.connect(to: settings.bluezBus)
                radio = BlueZRadio(connection: connection, configuration: .init(adapter: settings.adapter))
            } catch {
                throw CLIError("cannot connect to the \(settings.bluezBus) to reach bluetoothd: \(error)")
            }
        }
        let control: DBusConnection
        do {
            control = try await DBusConnection.connect(to: settings.controlBus)
        } catch {
            throw CLIError("cannot connect to the \(settings.controlBus) for io.gotchu.Kiosk1: \(error)")
        }
        let kiosk = try Kiosk(
            store: store,
            ledger: KioskLedger(baseURL: settings.server, credentials: settings.credentials),
            radio: radio,
            options: Kiosk.Options(
                payeeName: settings.payeeName,
                serviceUUID: settings.serviceUUID,
                sessionLifetime: settings.sessionLifetime,
                renewExpiredSessions: settings.renewExpiredSessions
            ),
            logger: logger
        )

        let notifier = SystemdNotifier(logger: logger)
        let ready = ReadinessGate(parts: settings.display == nil ? 1 : 2) {
            FileHandle.standardOutput.write(Data("kiosk ready\n".utf8))
            notifier.ready(status: "ready, \(await kiosk.status().state.rawValue)")
        }
        var services: [any Service] = [
            KioskTask(name: "charges") { await kiosk.run() },
            KioskTask(name: "control") {
                try await KioskControl.serve(kiosk, on: control) {
                    FileHandle.standardOutput.write(
                        Data("control: \(KioskControl.busName) on the \(settings.controlBus)\n".utf8)
                    )
                    await ready.partReady()
                }
            },
            KioskTask(name: "status") {
                for await status in await kiosk.statusUpdates() {
                    notifier.status(Self.describe(status))
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
                KioskDisplay(source: kiosk, host: address.host, port: address.port, logger: logger) { port in
                    let shown = KioskConfiguration.DisplayAddress(host: address.host, port: port)
                    FileHandle.standardOutput.write(Data("display: http://\(shown)/\n".utf8))
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
            await control.close()
            await (radio as? BlueZRadio)?.close()
            throw CLIError("\(error)")
        }
        notifier.stopping()
        await control.close()
        await (radio as? BlueZRadio)?.close()
    }

    /// One line for `systemctl status`.
    static func describe(_ status: KioskStatus) -> String {
        guard let charge = status.charge else { return status.state.rawValue }
        var text = "\(status.state.rawValue): charge \(charge.id) \(Money.format(charge.amountCents))"
        if let problem = status.problem { text += " — \(problem)" }
        return text
    }
}

/// A part of the kiosk run as a service: cancelled when the daemon shuts down.
private struct KioskTask: Service {
    let name: String
    let body: @Sendable () async throws -> Void

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
