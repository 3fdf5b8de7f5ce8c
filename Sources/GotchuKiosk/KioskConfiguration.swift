package import Foundation
package import GotchuBlueZ
package import GotchuCore
package import GotchuDBus
package import GotchuSettings

/// The kiosk's settings, checked and complete: built-in defaults, overridden by the config file, overridden by the
/// environment (`GOTCHU_KIOSK_<KEY>`), overridden by the command line.
package struct KioskConfiguration: Hashable, Sendable {
    /// How the kiosk gets a bearer token for the ledger.
    package typealias Credentials = KioskLedger.Credentials

    /// Which radio advertises the charges.
    package enum RadioKind: String, Hashable, Sendable, CaseIterable {
        /// The machine's Bluetooth adapter through BlueZ.
        case bluez
        /// The simulated air shared by processes on this machine.
        case sim
        /// Nothing on the air: charges are paid on the web checkout only, through the display's QR code.
        case none
    }

    /// Where the customer display's web server listens.
    package struct DisplayAddress: Hashable, Sendable, CustomStringConvertible {
        /// A host name or an IP address; an IPv6 address without brackets (`::1`).
        package var host: String
        /// The port, 0–65535; 0 picks a free one.
        package var port: Int

        /// Creates an address.
        package init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, with an IPv6 address in brackets (`[::1]:8080`).
        package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// The ledger's base URL.
    package var server: URL
    /// How to get a token for the ledger.
    package var credentials: Credentials
    /// The private CA trusted for an `https` ledger's certificate instead of the system's; `nil` for the system's.
    package var caFile: URL?
    /// The ledger's receipt keys to verify payments against; `nil` pins those it publishes at first contact.
    package var receiptKeysFile: URL?
    /// The name shown on the customer display.
    package var payeeName: String
    /// Which radio advertises the charges.
    package var radio: RadioKind
    /// The bus bluetoothd is reached on, for ``RadioKind/bluez``.
    package var bluezBus: DBusConnection.Bus
    /// The Bluetooth adapter, such as `hci0`; `nil` for the first powered one.
    package var adapter: String?
    /// How charges are advertised through BlueZ: ``BlueZAdvertisingType/broadcast`` (the default) from a private
    /// address that changes with each EID, or ``BlueZAdvertisingType/peripheral`` from the adapter's public address,
    /// which a fixed terminal may keep.
    package var advertisingType: BlueZAdvertisingType
    /// The service UUID the EIDs are advertised under.
    package var serviceUUID: BluetoothUUID
    /// The simulated air's directory, for ``RadioKind/sim``; `nil` for the default one.
    package var air: URL?
    /// How long one charge waits for a payer before it is reported expired.
    package var sessionLifetime: Duration
    /// Whether a charge whose ledger session expires before ``sessionLifetime`` is over gets a new session.
    package var renewExpiredSessions: Bool
    /// How long one EID stays on the air before the session gets a new one; `nil` never rotates.
    package var rotateEvery: Duration?
    /// Where the kiosk keeps its state.
    package var stateDirectory: URL
    /// Where the customer display is served; `nil` when it is off.
    package var display: DisplayAddress?
    /// The bus on which the kiosk owns `io.gotchu.Kiosk1`.
    package var controlBus: DBusConnection.Bus
    /// Where a listener of its own serves `GET /metrics` (the display serves them too); `nil` when it is off.
    package var metrics: DisplayAddress?
    /// The config file that was read; `nil` when the default one does not exist.
    package var file: URL?
    /// The terminal's calibration, advertised beside each EID (``Advertisement/calibratedRSSI``); `nil` for none.
    package var calibratedRSSI: Int16?
    /// The tips each charge's session suggests to payers; ``TipPrompt/none`` by default.
    package var tipPrompt: TipPrompt

    /// Creates a configuration directly, without layers (for tests and embedding); every setting left out has its
    /// built-in value (``builtIn``).
    package init(
        server: URL,
        credentials: Credentials,
        caFile: URL? = builtIn.caFile,
        receiptKeysFile: URL? = builtIn.receiptKeysFile,
        payeeName: String = builtIn.payeeName,
        radio: RadioKind = builtIn.radio,
        bluezBus: DBusConnection.Bus = builtIn.bluezBus,
        adapter: String? = builtIn.adapter,
        advertisingType: BlueZAdvertisingType = builtIn.advertisingType,
        serviceUUID: BluetoothUUID = builtIn.serviceUUID,
        air: URL? = builtIn.air,
        sessionLifetime: Duration = builtIn.sessionLifetime,
        renewExpiredSessions: Bool = builtIn.renewExpiredSessions,
        rotateEvery: Duration? = builtIn.rotateEvery,
        stateDirectory: URL = builtIn.stateDirectory,
        display: DisplayAddress? = builtIn.display,
        controlBus: DBusConnection.Bus = builtIn.controlBus,
        metrics: DisplayAddress? = builtIn.metrics,
        file: URL? = nil,
        calibratedRSSI: Int16? = builtIn.calibratedRSSI,
        tipPrompt: TipPrompt = builtIn.tipPrompt
    ) {
        self.tipPrompt = tipPrompt
        self.server = server
        self.credentials = credentials
        self.caFile = caFile
        self.receiptKeysFile = receiptKeysFile
        self.payeeName = payeeName
        self.radio = radio
        self.bluezBus = bluezBus
        self.adapter = adapter
        self.advertisingType = advertisingType
        self.serviceUUID = serviceUUID
        self.air = air
        self.sessionLifetime = sessionLifetime
        self.renewExpiredSessions = renewExpiredSessions
        self.rotateEvery = rotateEvery
        self.stateDirectory = stateDirectory
        self.display = display
        self.controlBus = controlBus
        self.metrics = metrics
        self.file = file
        self.calibratedRSSI = calibratedRSSI
    }

    /// The config file read when none is named: `/etc/gotchu/kiosk.toml`.
    package static let defaultFile = URL(fileURLWithPath: "/etc/gotchu/kiosk.toml")

    /// The longest ``sessionLifetime`` allowed, in seconds.
    package static let maximumSessionLifetimeSeconds = 3600

    /// The built-in layer, below all others: each setting's built-in value, as ``KioskSettingsSchema`` declares it.
    package static var defaults: KioskSettings { .builtIn }

    /// Every setting at its built-in value, read as a configured one is. The server and the credentials have none:
    /// they are placeholders here, and must be set.
    package static let builtIn: KioskConfiguration = {
        let defaults = SettingsResolution<KioskSettingsSchema>(layers: [.init(origin: .defaults, settings: .builtIn)])
        do {
            return try Resolver(settings: defaults, file: defaultFile).resolve(
                server: URL(string: "http://localhost")!,
                credentials: .email("kiosk@localhost")
            )
        } catch {
            preconditionFailure("a built-in kiosk setting is invalid: \(error)")
        }
    }()

    /// Reads the config file and the environment, lays `flags` over them, and checks the result.
    ///
    /// Flags override the environment (`GOTCHU_KIOSK_<KEY>`), which overrides the file, which overrides the built-in
    /// values. A relative path in the file (`token_file`, `api_key_file`, `ca_file`, `air`, `state_directory`) is
    /// taken from the file's directory; one from the environment or a flag, from the working directory. A credential
    /// is one setting: the highest layer that sets `email`, `token_file` or `api_key_file` decides, and a layer that
    /// sets more than one is an error.
    ///
    /// - Parameters:
    ///   - file: The config file; `.toml` or `.json`.
    ///   - fileIsExplicit: Whether the operator named `file` (`--config`). A named file must exist; the default one
    ///     may be missing, and then the other layers must give what is required.
    ///   - environment: The process environment; only `GOTCHU_KIOSK_*` variables are read.
    ///   - flags: The command line's layer.
    /// - Throws: ``KioskConfigurationError`` naming the file, variable or flag of the first bad setting.
    package static func resolve(
        file: URL,
        fileIsExplicit: Bool,
        environment: [String: String],
        flags: KioskSettings
    ) throws(KioskConfigurationError) -> KioskConfiguration {
        let settings = try SettingsResolution(
            file: file,
            fileIsExplicit: fileIsExplicit,
            environment: environment,
            flags: flags
        )
        return try Resolver(settings: settings, file: file).resolve()
    }
}

/// A setting the kiosk cannot run with, said for the operator: which file, variable or flag, and what is wrong.
package typealias KioskConfigurationError = SettingsError

// MARK: - Reading the layers

private typealias Problem = SettingProblem

private struct Resolver {
    var settings: SettingsResolution<KioskSettingsSchema>
    /// The config file named or defaulted, for "set it in FILE".
    var file: URL

    func resolve() throws(KioskConfigurationError) -> KioskConfiguration {
        guard let server = try settings.value(\.server, Self.server) else {
            let declaration = SettingsResolution<KioskSettingsSchema>.declaration(\.server)
            throw KioskConfigurationError(
                "no ledger server: set server = \"https://…\" in \(file.path), "
                    + "\(declaration.environmentVariable) or \(declaration.flag)"
            )
        }
        return try resolve(server: server, credentials: try credentials())
    }

    func resolve(
        server: URL,
        credentials: KioskConfiguration.Credentials
    ) throws(KioskConfigurationError)
        -> KioskConfiguration
    {
        KioskConfiguration(
            server: server,
            credentials: credentials,
            caFile: try settings.value(\.caFile) { text, origin throws(Problem) in try origin.path(text) },
            receiptKeysFile: try settings.value(\.receiptKeysFile) { text, origin throws(Problem) in
                try origin.path(text)
            },
            payeeName: try settings.required(\.payeeName, Self.payeeName),
            radio: try settings.required(\.radio, Self.radio),
            bluezBus: try settings.required(\.bluezBus, Self.bus),
            adapter: try settings.value(\.adapter, Self.adapter),
            advertisingType: try settings.required(\.advertiseAs, Self.advertisingType),
            serviceUUID: try settings.required(\.serviceUUID, Self.uuid),
            air: try settings.value(\.air) { text, origin throws(Problem) in try origin.path(text) },
            sessionLifetime: try settings.required(\.sessionLifetime) { seconds throws(Problem) in .seconds(seconds) },
            renewExpiredSessions: try settings.required(\.renewExpiredSessions),
            rotateEvery: try settings.required(\.rotateEvery) { seconds throws(Problem) in
                seconds == 0 ? nil : .seconds(seconds)
            },
            stateDirectory: try settings.required(\.stateDirectory) { text, origin throws(Problem) in
                try origin.path(text)
            },
            display: try settings.required(\.display, Self.display),
            controlBus: try settings.required(\.controlBus, Self.bus),
            metrics: try settings.required(\.metrics, Self.display),
            file: settings.file,
            calibratedRSSI: try settings.value(\.calibratedRSSI, Self.calibration),
            tipPrompt: try settings.required(\.tipPercents) { percents throws(Problem) in
                do throws(TipPrompt.Invalid) {
                    return try TipPrompt(percents: percents)
                } catch {
                    throw Problem(error.description)
                }
            }
        )
    }

    /// The highest layer that names a credential decides, so `--token-file` replaces the file's `email`; one layer
    /// naming two is ambiguous.
    private func credentials() throws(KioskConfigurationError) -> KioskConfiguration.Credentials {
        let fields: [KeyPath<KioskSettingsSchema, Setting<String>>] = [\.email, \.tokenFile, \.apiKeyFile]
        guard
            let layer = settings.layers.first(where: { layer in
                fields.contains { layer.settings[dynamicMember: $0] != nil }
            })
        else {
            let names = fields.map { SettingsResolution<KioskSettingsSchema>.declaration($0) }
            throw KioskConfigurationError(
                "no credentials for the ledger: set api_key_file = \"…\" (a file holding the payee's API key), "
                    + "token_file = \"…\" (a file holding a bearer token) or email = \"…\" (the account to log in "
                    + "as) in \(file.path), "
                    + names.map(\.environmentVariable).joined(separator: ", ") + ", or "
                    + names.map(\.flag).joined(separator: ", ")
            )
        }
        let set = fields.filter { layer.settings[dynamicMember: $0] != nil }
        guard set.count == 1, let field = set.first, let text = layer.settings[dynamicMember: field] else {
            let named = set.map { settings.name(of: $0, in: layer) }
            throw KioskConfigurationError(
                (named.count == 2 ? "both " : "") + named.dropLast().joined(separator: ", ") + " and "
                    + (named.last ?? "") + " are set; set only one: api_key_file for a key an operator "
                    + "created, token_file for a token an operator provides, or email to log in"
            )
        }
        do {
            switch field {
            case \.email: return .email(try Self.email(text))
            case \.tokenFile: return .tokenFile(try layer.origin.path(text))
            default: return .apiKeyFile(try layer.origin.path(text))
            }
        } catch {
            throw KioskConfigurationError("\(settings.name(of: field, in: layer)): \(error.text)")
        }
    }

    // MARK: Parsers

    private static func server(_ text: String) throws(Problem) -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else {
            throw Problem("must be an http:// or https:// URL, such as https://ledger.example.com, not \"\(text)\"")
        }
        return url
    }

    private static func email(_ text: String) throws(Problem) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.contains("@"), !trimmed.contains(where: \.isWhitespace) else {
            throw Problem("must be an email address, not \"\(text)\"")
        }
        return trimmed
    }

    private static func payeeName(_ text: String) throws(Problem) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw Problem("must not be empty") }
        guard !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw Problem("must not contain control characters")
        }
        return trimmed
    }

    private static func radio(_ text: String) throws(Problem) -> KioskConfiguration.RadioKind {
        guard let radio = KioskConfiguration.RadioKind(rawValue: text) else {
            throw Problem("must be \"bluez\", \"sim\" or \"none\", not \"\(text)\"")
        }
        return radio
    }

    private static func bus(_ text: String) throws(Problem) -> DBusConnection.Bus {
        guard let bus = DBusConnection.Bus(named: text) else {
            throw Problem("must be \(DBusConnection.Bus.namingHint), not \"\(text)\"")
        }
        return bus
    }

    private static func adapter(_ text: String) throws(Problem) -> String {
        // The name becomes an element of a D-Bus object path (/org/bluez/hci0).
        guard !text.isEmpty,
            text.unicodeScalars.allSatisfy({
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_")
            })
        else {
            throw Problem("must be an adapter name such as hci0, not \"\(text)\"")
        }
        return text
    }

    private static func advertisingType(_ text: String) throws(Problem) -> BlueZAdvertisingType {
        guard let type = BlueZAdvertisingType(rawValue: text) else {
            throw Problem(
                "must be \"broadcast\" (a private address, new with each EID) or \"peripheral\" (the adapter's "
                    + "public address, for a fixed terminal), not \(DisplayText.quoted(String(text.prefix(32))))"
            )
        }
        return type
    }

    private static func uuid(_ text: String) throws(Problem) -> BluetoothUUID {
        guard let uuid = BluetoothUUID(text) else {
            throw Problem("must be a 16-bit (feed) or 128-bit Bluetooth UUID, not \"\(text)\"")
        }
        return uuid
    }

    /// A calibration: whole dBm that a real radio 1 m away could read.
    private static func calibration(_ text: String) throws(Problem) -> Int16 {
        let range = Calibration.plausibleCalibratedRSSI
        guard let value = Int16(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw Problem(
                "must be whole dBm from \(range.lowerBound) to \(range.upperBound), such as \"-59\", not "
                    + DisplayText.quoted(String(text.prefix(32)))
            )
        }
        return value
    }

    private static func display(_ text: String) throws(Problem) -> KioskConfiguration.DisplayAddress? {
        if text == "off" { return nil }
        let example = "such as 127.0.0.1:8080 or [::1]:8080, or off"
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw Problem("must be [IPv6 address]:port, \(example); not \"\(text)\"")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw Problem("must be host:port, \(example); not \"\(text)\"")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard !host.contains(":") else {
                throw Problem("an IPv6 address goes in brackets, \(example); not \"\(text)\"")
            }
        }
        guard !host.isEmpty, !host.contains(where: { $0.isWhitespace || $0 == "/" || $0 == "[" || $0 == "]" }) else {
            throw Problem("has no valid host, \(example); not \"\(text)\"")
        }
        guard !portText.isEmpty, portText.allSatisfy(\.isASCIIDigit), let port = Int(portText), port <= 65535 else {
            throw Problem("port must be 0 to 65535, not \"\(portText)\"")
        }
        return KioskConfiguration.DisplayAddress(host: String(host), port: port)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
