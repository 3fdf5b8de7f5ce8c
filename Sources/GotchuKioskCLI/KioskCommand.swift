public import ArgumentParser
import Foundation
import GotchuCore
import GotchuKiosk
import GotchuLogging
import Logging

/// `gotchu kiosk`: the payment terminal daemon.
public struct KioskCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "kiosk",
        abstract: KioskOptions.abstract,
        discussion: KioskOptions.discussion(command: "gotchu kiosk"),
        subcommands: [KioskCalibrateCommand.self]
    )

    @OptionGroup var options: KioskOptions

    /// Creates the command with every option unset.
    public init() {}

    public func run() async throws { try await options.run() }
}

/// The kiosk's options and how they become a running daemon; the same for `gotchu kiosk` and `gotchu-kiosk`.
public struct KioskOptions: ParsableArguments {
    /// What the kiosk is, in one line.
    public static let abstract =
        "Run the payment terminal: charges for a point-of-sale over D-Bus, a customer display, all day."

    /// The longer help, with examples spelled for `command`.
    public static func discussion(command: String) -> String {
        """
        The point-of-sale asks for a charge over D-Bus (io.gotchu.Kiosk1; `gotchu charge 12.50` does it from \
        a shell). The kiosk creates a ledger session, advertises its EID until a payer pays, and tells the \
        point-of-sale and the customer display (a web page at --display) every step. Charges are kept in \
        SQLite under the state directory: after a crash or a restart the kiosk goes on advertising the same \
        session, or reports how it ended. Bluetooth, the ledger and expired tokens are retried with backoff, \
        and shown while they fail. Under systemd (Type=notify) it reports readiness and feeds the watchdog.

        Settings come from the config file (TOML or JSON), then GOTCHU_KIOSK_<KEY> environment variables \
        (GOTCHU_KIOSK_SERVER…), then these flags, each overriding the one before.

        Examples:
          \(command)                  # /etc/gotchu/kiosk.toml, system bus, BlueZ
          \(command) --server http://127.0.0.1:8080 --email shop@example.com \\
            --radio sim --control-bus session --state-directory /tmp/kiosk
        """
    }

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
    @Option(
        help: ArgumentHelp(
            "File holding the payee's API key (gk_…), re-read when the ledger rejects it.",
            valueName: "path"
        )
    )
    var apiKeyFile: String?
    @Option(
        help: ArgumentHelp(
            "PEM file of the private CA that signed an https ledger's certificate (default: the system's CAs).",
            valueName: "path"
        )
    )
    var caFile: String?
    @Option(
        help: ArgumentHelp(
            "The ledger's receipt keys (JWKS) to verify payments against (default: pinned at first contact).",
            valueName: "path"
        )
    )
    var receiptKeysFile: String?
    @Option(help: ArgumentHelp("Name shown to customers on the display.", valueName: "name")) var payeeName: String?
    @Option(help: ArgumentHelp("bluez (default) or sim.", valueName: "radio")) var radio: String?
    @Option(help: ArgumentHelp("Bus bluetoothd is on: system, session or an address.", valueName: "bus"))
    var bluezBus: String?
    @Option(help: ArgumentHelp("Bluetooth adapter, such as hci0.", valueName: "name")) var adapter: String?
    @Option(
        help: ArgumentHelp(
            "broadcast (default: from a private address, new with each EID) or peripheral (from the adapter's "
                + "public address: a terminal that stays put may keep it).",
            valueName: "broadcast|peripheral"
        )
    )
    var advertiseAs: String?
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
    @Option(
        help: ArgumentHelp(
            "How long one EID stays on the air before the session gets a new one, in seconds (default 60; 0: never).",
            valueName: "seconds"
        )
    )
    var rotateEvery: Int?
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
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Advertise this calibration: the RSSI a phone measured 1 m away (`gotchu kiosk calibrate` sets it).",
            valueName: "dBm"
        )
    )
    var calibratedRSSI: String?
    @Option(
        help: ArgumentHelp(
            "Serve GET /metrics on a listener of its own, host:port (port 0 picks one), or off (default; the display serves them too).",
            valueName: "host:port"
        )
    )
    var metrics: String?

    @Option(
        help: ArgumentHelp(
            "Log level: trace, debug, info (default), notice, warning, error, critical.",
            valueName: "level"
        ),
        transform: { text in
            guard let level = Logger.Level(rawValue: text) else {
                throw ValidationError(
                    "--log-level must be one of: trace, debug, info, notice, warning, error, critical"
                )
            }
            return level
        }
    )
    var logLevel: Logger.Level = .info

    @Option(
        help: ArgumentHelp("Log format: text (default), or json (one JSON object per line).", valueName: "format"),
        transform: { text in
            guard let format = LogFormat(rawValue: text) else {
                throw ValidationError("--log-format must be text or json")
            }
            return format
        }
    )
    var logFormat: LogFormat = .text

    /// Creates the options with every value unset.
    public init() {}

    private var flags: KioskSettings {
        KioskSettings(
            server: server,
            email: email,
            tokenFile: tokenFile,
            apiKeyFile: apiKeyFile,
            caFile: caFile,
            receiptKeysFile: receiptKeysFile,
            payeeName: payeeName,
            radio: radio,
            bluezBus: bluezBus,
            adapter: adapter,
            advertiseAs: advertiseAs,
            serviceUUID: serviceUUID,
            air: air,
            sessionLifetime: sessionLifetime,
            renewExpiredSessions: renewExpiredSessions,
            rotateEvery: rotateEvery,
            stateDirectory: stateDirectory,
            display: display,
            controlBus: controlBus,
            calibratedRSSI: calibratedRSSI,
            metrics: metrics
        )
    }

    /// The configuration from the config file, the environment and these options.
    func resolve() throws -> KioskConfiguration {
        do {
            return try KioskConfiguration.resolve(
                file: config.map { URL(fileURLWithPath: $0) } ?? KioskConfiguration.defaultFile,
                fileIsExplicit: config != nil,
                environment: ProcessInfo.processInfo.environment,
                flags: flags
            )
        } catch {
            throw KioskDaemon.Failure("\(error)")
        }
    }

    /// Resolves the configuration (file, environment, these options) and runs the daemon until SIGTERM or SIGINT.
    public func run() async throws {
        logFormat.bootstrap(level: logLevel)
        let settings: KioskConfiguration
        do {
            settings = try KioskConfiguration.resolve(
                file: config.map { URL(fileURLWithPath: $0) } ?? KioskConfiguration.defaultFile,
                fileIsExplicit: config != nil,
                environment: ProcessInfo.processInfo.environment,
                flags: flags
            )
        } catch {
            throw KioskDaemon.Failure("\(error)")
        }
        try await KioskDaemon.run(settings, logger: Logger(label: "gotchu.kiosk"))
    }
}

/// `gotchu kiosk calibrate`: measures the terminal's RSSI 1 m from a phone and writes it into the config file.
public struct KioskCalibrateCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "calibrate",
        abstract: "Measure the terminal's signal 1 m from a phone and keep it as calibrated_rssi in the config file.",
        discussion: """
            Hold a phone running `gotchu advertise` 1 m from the terminal, at the height and side a payer \
            stands, and turn it slowly while this scans. The median RSSI heard is written to the config \
            file as calibrated_rssi; the kiosk advertises it beside each EID from its next start, so payers \
            rank this terminal against others of other makes fairly. The path is the same both ways, so \
            this stands for what the phone hears from the terminal as long as the phone transmits about as \
            strongly as the terminal (about 0 dBm).

            Example: gotchu kiosk calibrate --config /etc/gotchu/kiosk.toml --seconds 20
            """
    )

    @OptionGroup var options: KioskOptions

    @Option(help: ArgumentHelp("How long to scan, in seconds (5 to 300).", valueName: "seconds"))
    var seconds = 15

    @Option(help: ArgumentHelp("The phone's EID, when other advertisers are near.", valueName: "eid"))
    var eid: String?

    @Flag(help: "Print the measurement only; do not write the config file.")
    var dryRun = false

    /// Creates the command with every option unset.
    public init() {}

    public func validate() throws {
        guard (5...300).contains(seconds) else { throw ValidationError("--seconds must be from 5 to 300") }
        if let eid, EID(typed: eid) == nil {
            throw ValidationError("--eid must be 10 hex digits, such as a1b2c3d4e5")
        }
    }

    public func run() async throws {
        let settings = try options.resolve()
        guard dryRun || settings.file != nil else {
            throw KioskDaemon.Failure("no config file to write calibrated_rssi to: name one with --config")
        }
        let radio = try await KioskDaemon.makeRadio(settings)
        let measurement: KioskCalibration.Measurement
        do {
            measurement = try await KioskCalibration.scan(
                radio,
                serviceUUID: settings.serviceUUID,
                duration: .seconds(seconds),
                eid: eid.flatMap { EID(typed: $0) }
            )
        } catch {
            await radio.close()
            throw KioskDaemon.Failure("\(error)")
        }
        await radio.close()
        print(
            "median \(measurement.medianRSSI) dBm over \(measurement.samples) sightings of \(measurement.eid.grouped)"
        )
        guard !dryRun, let file = settings.file else { return }
        do {
            try KioskCalibration.write(measurement.medianRSSI, to: file)
        } catch {
            throw KioskDaemon.Failure("\(error)")
        }
        print(
            "wrote calibrated_rssi = \"\(measurement.medianRSSI)\" to \(file.path); restart the kiosk to advertise it"
        )
    }
}
