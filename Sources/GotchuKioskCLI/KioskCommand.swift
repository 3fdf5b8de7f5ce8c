package import ArgumentParser
import Foundation
import GotchuCore
import GotchuKiosk
import GotchuLogging
import GotchuSettings
import Logging

/// `gotchu kiosk`: the payment terminal daemon.
package struct KioskCommand: AsyncParsableCommand {
    /// The command's name, summary and help text, and its `calibrate` subcommand.
    package static let configuration = CommandConfiguration(
        commandName: "kiosk",
        abstract: KioskOptions.abstract,
        discussion: KioskOptions.discussion(command: "gotchu kiosk"),
        subcommands: [KioskCalibrateCommand.self]
    )

    @OptionGroup var options: KioskOptions

    /// Creates the command with every option unset.
    package init() {}

    /// Resolves the settings (flags, environment, file) and runs the daemon until SIGTERM or SIGINT.
    package func run() async throws { try await options.run() }
}

/// The kiosk's options and how they become a running daemon; the same for `gotchu kiosk` and `gotchu-kiosk`.
package struct KioskOptions: ParsableArguments {
    /// What the kiosk is, in one line.
    package static let abstract =
        "Run the payment terminal: charges for a point-of-sale over D-Bus, a customer display, all day."

    /// The longer help, with examples spelled for `command`.
    package static func discussion(command: String) -> String {
        """
        The point-of-sale asks for a charge over D-Bus (io.gotchu.Kiosk1; `gotchu charge 12.50` does it from \
        a shell). The kiosk creates a ledger session, advertises its EID until a payer pays, and tells the \
        point-of-sale and the customer display (a web page at --display) every step. Charges are kept in \
        SQLite under the state directory: after a crash or a restart the kiosk goes on advertising the same \
        session, or reports how it ended. Bluetooth, the ledger and expired tokens are retried with backoff, \
        and shown while they fail. Under systemd (Type=notify) it reports readiness and feeds the watchdog.

        Every option below but --config and --log-* is also a key of the config file (TOML or JSON; \
        --session-lifetime is session_lifetime) and an environment variable (GOTCHU_KIOSK_SESSION_LIFETIME). Flags \
        override the environment, which overrides the file, which overrides the built-in values.

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

    // Each setting's option has the name of its property in KioskSettingsSchema, which gives its flag, help and
    // value's name; `KioskSettings(flags:)` reads them, as text, so that a bad value is reported as a bad file value
    // or variable is.
    @Option(help: settings.server.help) var server: String?
    @Option(help: settings.email.help) var email: String?
    @Option(help: settings.tokenFile.help) var tokenFile: String?
    @Option(help: settings.apiKeyFile.help) var apiKeyFile: String?
    @Option(help: settings.caFile.help) var caFile: String?
    @Option(help: settings.receiptKeysFile.help) var receiptKeysFile: String?
    @Option(help: settings.payeeName.help) var payeeName: String?
    @Option(help: settings.radio.help) var radio: String?
    @Option(help: settings.bluezBus.help) var bluezBus: String?
    @Option(help: settings.adapter.help) var adapter: String?
    @Option(help: settings.advertiseAs.help) var advertiseAs: String?
    @Option(help: settings.serviceUUID.help) var serviceUUID: String?
    @Option(help: settings.air.help) var air: String?
    @Option(help: settings.sessionLifetime.help) var sessionLifetime: String?
    @Flag(inversion: .prefixedNo, help: settings.renewExpiredSessions.help) var renewExpiredSessions: Bool?
    @Option(help: settings.rotateEvery.help) var rotateEvery: String?
    @Option(help: settings.tipPercents.help) var tipPercents: String?
    @Option(help: settings.stateDirectory.help) var stateDirectory: String?
    @Option(help: settings.display.help) var display: String?
    @Option(help: settings.controlBus.help) var controlBus: String?
    // A calibration is negative: "-59" is its value, not a flag.
    @Option(parsing: .unconditional, help: settings.calibratedRSSI.help) var calibratedRSSI: String?
    @Option(help: settings.metrics.help) var metrics: String?

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
    package init() {}

    private static let settings = KioskSettingsSchema()

    /// The configuration from the config file, the environment and these options.
    func resolve() throws -> KioskConfiguration {
        do {
            return try KioskConfiguration.resolve(
                file: config.map { URL(fileURLWithPath: $0) } ?? KioskConfiguration.defaultFile,
                fileIsExplicit: config != nil,
                environment: ProcessInfo.processInfo.environment,
                flags: try KioskSettings(flags: self)
            )
        } catch {
            throw KioskDaemon.Failure("\(error)")
        }
    }

    /// Resolves the configuration (file, environment, these options) and runs the daemon until SIGTERM or SIGINT.
    package func run() async throws {
        logFormat.bootstrap(level: logLevel)
        let settings = try resolve()
        try await KioskDaemon.run(settings, logger: Logger(label: "gotchu.kiosk"))
    }
}

/// `gotchu kiosk calibrate`: measures the terminal's RSSI 1 m from a phone and writes it into the config file.
package struct KioskCalibrateCommand: AsyncParsableCommand {
    /// The subcommand's name, summary and how to hold the phone.
    package static let configuration = CommandConfiguration(
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
    package init() {}

    /// Refuses a scan time outside 5 to 300 seconds and an EID that is not 10 hex digits.
    package func validate() throws {
        guard (5...300).contains(seconds) else { throw ValidationError("--seconds must be from 5 to 300") }
        if let eid, EID(typed: eid) == nil {
            throw ValidationError("--eid must be 10 hex digits, such as a1b2c3d4e5")
        }
    }

    /// Scans, prints the median RSSI heard and, unless `--dry-run`, writes it to the config file.
    package func run() async throws {
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
