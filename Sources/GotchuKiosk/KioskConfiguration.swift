public import Foundation
public import GotchuBlueZ
public import GotchuCore
public import GotchuDBus
import TOMLKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The kiosk's settings, checked and complete: built-in defaults, overridden by the config file, overridden by the
/// environment (`GOTCHU_KIOSK_<KEY>`), overridden by the command line.
public struct KioskConfiguration: Hashable, Sendable {
    /// How the kiosk gets a bearer token for the ledger.
    public typealias Credentials = KioskLedger.Credentials

    /// Which radio advertises the charges.
    public enum RadioKind: String, Hashable, Sendable, CaseIterable {
        /// The machine's Bluetooth adapter through BlueZ.
        case bluez
        /// The simulated air shared by processes on this machine.
        case sim
    }

    /// Where the customer display's web server listens.
    public struct DisplayAddress: Hashable, Sendable, CustomStringConvertible {
        /// A host name or an IP address; an IPv6 address without brackets (`::1`).
        public var host: String
        /// The port, 0–65535; 0 picks a free one.
        public var port: Int

        /// Creates an address.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, with an IPv6 address in brackets (`[::1]:8080`).
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// The ledger's base URL.
    public var server: URL
    /// How to get a token for the ledger.
    public var credentials: Credentials
    /// The private CA trusted for an `https` ledger's certificate instead of the system's; `nil` for the system's.
    public var caFile: URL?
    /// The ledger's receipt keys to verify payments against; `nil` pins those it publishes at first contact.
    public var receiptKeysFile: URL?
    /// The name shown on the customer display.
    public var payeeName: String
    /// Which radio advertises the charges.
    public var radio: RadioKind
    /// The bus bluetoothd is reached on, for ``RadioKind/bluez``.
    public var bluezBus: DBusConnection.Bus
    /// The Bluetooth adapter, such as `hci0`; `nil` for the first powered one.
    public var adapter: String?
    /// How charges are advertised through BlueZ: ``BlueZAdvertisingType/broadcast`` (the default) from a private
    /// address that changes with each EID, or ``BlueZAdvertisingType/peripheral`` from the adapter's public address,
    /// which a fixed terminal may keep.
    public var advertisingType: BlueZAdvertisingType
    /// The service UUID the EIDs are advertised under.
    public var serviceUUID: BluetoothUUID
    /// The simulated air's directory, for ``RadioKind/sim``; `nil` for the default one.
    public var air: URL?
    /// How long one charge waits for a payer before it is reported expired.
    public var sessionLifetime: Duration
    /// Whether a charge whose ledger session expires before ``sessionLifetime`` is over gets a new session.
    public var renewExpiredSessions: Bool
    /// How long one EID stays on the air before the session gets a new one; `nil` never rotates.
    public var rotateEvery: Duration?
    /// Where the kiosk keeps its state.
    public var stateDirectory: URL
    /// Where the customer display is served; `nil` when it is off.
    public var display: DisplayAddress?
    /// The bus on which the kiosk owns `io.gotchu.Kiosk1`.
    public var controlBus: DBusConnection.Bus
    /// Where a listener of its own serves `GET /metrics` (the display serves them too); `nil` when it is off.
    public var metrics: DisplayAddress?
    /// The config file that was read; `nil` when the default one does not exist.
    public var file: URL?
    /// The terminal's calibration, advertised beside each EID (``Advertisement/calibratedRSSI``); `nil` for none.
    public var calibratedRSSI: Int16?

    /// Creates a configuration directly, without layers (for tests and embedding).
    public init(
        server: URL,
        credentials: Credentials,
        caFile: URL? = nil,
        receiptKeysFile: URL? = nil,
        payeeName: String = "Gotchu",
        radio: RadioKind = .bluez,
        bluezBus: DBusConnection.Bus = .system,
        adapter: String? = nil,
        advertisingType: BlueZAdvertisingType = .broadcast,
        serviceUUID: BluetoothUUID = .gotchu,
        air: URL? = nil,
        sessionLifetime: Duration = .seconds(300),
        renewExpiredSessions: Bool = true,
        rotateEvery: Duration? = .seconds(60),
        stateDirectory: URL = URL(fileURLWithPath: "/var/lib/gotchu-kiosk"),
        display: DisplayAddress? = DisplayAddress(host: "127.0.0.1", port: 8080),
        controlBus: DBusConnection.Bus = .system,
        metrics: DisplayAddress? = nil,
        file: URL? = nil,
        calibratedRSSI: Int16? = nil
    ) {
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
    public static let defaultFile = URL(fileURLWithPath: "/etc/gotchu/kiosk.toml")

    /// The longest ``sessionLifetime`` allowed, in seconds.
    public static let maximumSessionLifetimeSeconds = 3600

    /// The built-in layer, below all others.
    public static let defaults = KioskSettings.builtIn

    /// Reads the config file and the environment, lays `flags` over them, and checks the result.
    ///
    /// A relative path in the file (`token_file`, `api_key_file`, `ca_file`, `air`, `state_directory`) is taken from
    /// the file's directory; one from the environment or a flag, from the working directory. A credential is one
    /// setting: the highest layer that sets `email`, `token_file` or `api_key_file` decides, and a layer that sets
    /// more than one is an error.
    ///
    /// - Parameters:
    ///   - file: The config file; `.toml` or `.json`.
    ///   - fileIsExplicit: Whether the operator named `file` (`--config`). A named file must exist; the default one
    ///     may be missing, and then the other layers must give what is required.
    ///   - environment: The process environment; only `GOTCHU_KIOSK_*` variables are read.
    ///   - flags: The command line's layer.
    /// - Throws: ``KioskConfigurationError`` naming the file, variable or flag of the first bad setting.
    public static func resolve(
        file: URL,
        fileIsExplicit: Bool,
        environment: [String: String],
        flags: KioskSettings
    ) throws(KioskConfigurationError) -> KioskConfiguration {
        let fileSettings = try KioskSettings.load(file: file, isExplicit: fileIsExplicit)
        var layers: [Layer] = [Layer(origin: .flags, settings: flags)]
        layers.append(Layer(origin: .environment, settings: try KioskSettings(environment: environment)))
        if let fileSettings { layers.append(Layer(origin: .file(file), settings: fileSettings)) }
        layers.append(Layer(origin: .defaults, settings: defaults))
        return try Resolver(layers: layers, file: file).resolve(fileRead: fileSettings == nil ? nil : file)
    }
}

/// A setting the kiosk cannot run with, said for the operator: which file, variable or flag, and what is wrong.
public struct KioskConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The whole message.
    public var description: String

    /// Creates an error with its message.
    public init(_ description: String) {
        self.description = description
    }
}

// MARK: - Reading the file

extension KioskSettings {
    /// Reads a config file: TOML for `.toml`, JSON for `.json`.
    ///
    /// - Returns: The file's layer, or `nil` when the file does not exist and `isExplicit` is false.
    /// - Throws: ``KioskConfigurationError`` for a named file that does not exist, a file that cannot be read or
    ///   parsed, an unknown key or a value of the wrong type; the message names the file and the key.
    public static func load(file: URL, isExplicit: Bool) throws(KioskConfigurationError) -> KioskSettings? {
        let path = file.path
        var status = stat()
        if stat(path, &status) != 0 {
            let code = errno
            if code == ENOENT || code == ENOTDIR {
                guard isExplicit else { return nil }
                throw KioskConfigurationError("config file \(path) does not exist")
            }
            throw KioskConfigurationError("cannot read config file \(path): \(String(cString: strerror(code)))")
        }
        guard status.st_mode & mode_t(S_IFMT) == mode_t(S_IFREG) else {
            throw KioskConfigurationError("config file \(path) is not a regular file")
        }
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw KioskConfigurationError("cannot read config file \(path): \(error.localizedDescription)")
        }
        return try decode(data, file: file)
    }

    /// Parses a config file's contents; `file` names the format (by its extension) and the file in errors.
    public static func decode(_ data: Data, file: URL) throws(KioskConfigurationError) -> KioskSettings {
        let path = file.path
        switch file.pathExtension.lowercased() {
        case "toml":
            guard let text = String(data: data, encoding: .utf8) else {
                throw KioskConfigurationError("config file \(path) is not UTF-8 text")
            }
            let table: TOMLTable
            do {
                table = try TOMLTable(string: text)
            } catch let error as TOMLParseError {
                throw KioskConfigurationError(
                    "config file \(path) is not valid TOML: line \(error.source.begin.line), column "
                        + "\(error.source.begin.column): \(error.description)"
                )
            } catch {
                throw KioskConfigurationError("config file \(path) is not valid TOML: \(error)")
            }
            do {
                return try TOMLDecoder().decode(KioskSettings.self, from: table)
            } catch {
                throw describe(error, path: path)
            }
        case "json":
            // JSONDecoder says only that a document is not JSON; JSONSerialization says where.
            do {
                _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            } catch {
                let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
                throw KioskConfigurationError("config file \(path) is not valid JSON: \(reason)")
            }
            do {
                return try JSONDecoder().decode(KioskSettings.self, from: data)
            } catch {
                throw describe(error, path: path)
            }
        default:
            throw KioskConfigurationError(
                "config file \(path): unknown format \"\(file.pathExtension)\"; name it .toml or .json"
            )
        }
    }

    private static func describe(_ error: any Error, path: String) -> KioskConfigurationError {
        guard let error = error as? DecodingError else {
            return KioskConfigurationError("config file \(path): \(error)")
        }
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c), .dataCorrupted(let c):
            context = c
        @unknown default:
            return KioskConfigurationError("config file \(path): \(error)")
        }
        let key = context.codingPath.map(\.stringValue).joined(separator: ".")
        // A syntax error says where it is only in the underlying error.
        let detail = context.underlyingError.map { "\(context.debugDescription) \($0)" } ?? context.debugDescription
        if key.isEmpty { return KioskConfigurationError("config file \(path): \(detail)") }
        return KioskConfigurationError("\(key) in \(path) \(context.debugDescription)")
    }
}

// MARK: - Layers

/// Where a setting came from, to name it in an error the way the operator wrote it.
private enum Origin: Hashable {
    case flags
    case environment
    case file(URL)
    case defaults

    func name(_ field: PartialKeyPath<KioskSettings>) -> String {
        let key = KioskSettings.key(for: field)
        return switch self {
        case .flags: KioskSettings.flag(for: key)
        case .environment: KioskSettings.environmentVariable(for: key)
        case .file(let url): "\(key) in \(url.path)"
        case .defaults: "the default \(key)"
        }
    }
}

private struct Layer {
    var origin: Origin
    var settings: KioskSettings
}

/// What is wrong with one value, before it is known which layer it came from.
private struct Problem: Error {
    var text: String
    init(_ text: String) { self.text = text }
}

private struct Resolver {
    /// Highest precedence first.
    var layers: [Layer]
    var file: URL

    func resolve(fileRead: URL?) throws(KioskConfigurationError) -> KioskConfiguration {
        guard let server = try value(\.server, Self.server) else {
            throw KioskConfigurationError(
                "no ledger server: set server = \"https://…\" in \(file.path), "
                    + "\(KioskSettings.environmentVariable(for: "server")) or \(KioskSettings.flag(for: "server"))"
            )
        }
        return KioskConfiguration(
            server: server,
            credentials: try credentials(),
            caFile: try value(\.caFile, Self.path),
            receiptKeysFile: try value(\.receiptKeysFile, Self.path),
            payeeName: try required(\.payeeName, Self.payeeName),
            radio: try required(\.radio, Self.radio),
            bluezBus: try required(\.bluezBus, Self.bus),
            adapter: try value(\.adapter, Self.adapter),
            advertisingType: try required(\.advertiseAs, Self.advertisingType),
            serviceUUID: try required(\.serviceUUID, Self.uuid),
            air: try value(\.air, Self.path),
            sessionLifetime: try required(\.sessionLifetime, Self.lifetime),
            renewExpiredSessions: try required(\.renewExpiredSessions, { flag in flag }),
            rotateEvery: try required(\.rotateEvery, Self.rotation),
            stateDirectory: try required(\.stateDirectory, Self.path),
            display: try required(\.display, Self.display),
            controlBus: try required(\.controlBus, Self.bus),
            metrics: try required(\.metrics, Self.display),
            file: fileRead,
            calibratedRSSI: try value(\.calibratedRSSI, Self.calibration)
        )
    }

    /// The highest layer's value of a setting, parsed; `nil` when no layer sets it.
    private func value<Raw, Value>(
        _ field: KeyPath<KioskSettings, Raw?>,
        _ parse: (Raw, Origin) throws(Problem) -> Value
    ) throws(KioskConfigurationError) -> Value? {
        guard let layer = layers.first(where: { $0.settings[keyPath: field] != nil }),
            let raw = layer.settings[keyPath: field]
        else { return nil }
        do {
            return try parse(raw, layer.origin)
        } catch {
            throw KioskConfigurationError("\(layer.origin.name(field)): \(error.text)")
        }
    }

    /// As above, for a parser that does not care where the value came from.
    private func value<Raw, Value>(
        _ field: KeyPath<KioskSettings, Raw?>,
        _ parse: (Raw) throws(Problem) -> Value
    ) throws(KioskConfigurationError) -> Value? {
        try value(field) { raw, _ throws(Problem) in try parse(raw) }
    }

    /// A setting the defaults always give.
    private func required<Raw, Value>(
        _ field: KeyPath<KioskSettings, Raw?>,
        _ parse: (Raw, Origin) throws(Problem) -> Value
    ) throws(KioskConfigurationError) -> Value {
        guard let value = try value(field, parse) else {
            throw KioskConfigurationError("\(KioskSettings.key(for: field)) is not set")
        }
        return value
    }

    private func required<Raw, Value>(
        _ field: KeyPath<KioskSettings, Raw?>,
        _ parse: (Raw) throws(Problem) -> Value
    ) throws(KioskConfigurationError) -> Value {
        try required(field) { raw, _ throws(Problem) in try parse(raw) }
    }

    /// The highest layer that names a credential decides, so `--token-file` replaces the file's `email`; one layer
    /// naming two is ambiguous.
    private func credentials() throws(KioskConfigurationError) -> KioskConfiguration.Credentials {
        let fields: [KeyPath<KioskSettings, String?>] = [\.email, \.tokenFile, \.apiKeyFile]
        let names = ["email", "token_file", "api_key_file"]
        guard let layer = layers.first(where: { layer in fields.contains { layer.settings[keyPath: $0] != nil } })
        else {
            throw KioskConfigurationError(
                "no credentials for the ledger: set api_key_file = \"…\" (a file holding the payee's API key), "
                    + "token_file = \"…\" (a file holding a bearer token) or email = \"…\" (the account to log in "
                    + "as) in \(file.path), "
                    + names.map { KioskSettings.environmentVariable(for: $0) }.joined(separator: ", ") + ", or "
                    + names.map { KioskSettings.flag(for: $0) }.joined(separator: ", ")
            )
        }
        switch (layer.settings.email, layer.settings.tokenFile, layer.settings.apiKeyFile) {
        case (let email?, nil, nil):
            do {
                return .email(try Self.email(email))
            } catch {
                throw KioskConfigurationError("\(layer.origin.name(\KioskSettings.email)): \(error.text)")
            }
        case (nil, let tokenFile?, nil):
            do {
                return .tokenFile(try Self.path(tokenFile, layer.origin))
            } catch {
                throw KioskConfigurationError("\(layer.origin.name(\KioskSettings.tokenFile)): \(error.text)")
            }
        case (nil, nil, let apiKeyFile?):
            do {
                return .apiKeyFile(try Self.path(apiKeyFile, layer.origin))
            } catch {
                throw KioskConfigurationError("\(layer.origin.name(\KioskSettings.apiKeyFile)): \(error.text)")
            }
        default:
            let set = fields.filter { layer.settings[keyPath: $0] != nil }.map { layer.origin.name($0) }
            throw KioskConfigurationError(
                (set.count == 2 ? "both " : "") + set.dropLast().joined(separator: ", ") + " and " + (set.last ?? "")
                    + " are set; set only one: api_key_file for a key an operator "
                    + "created, token_file for a token an operator provides, or email to log in"
            )
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
            throw Problem("must be \"bluez\" or \"sim\", not \"\(text)\"")
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

    private static func lifetime(_ seconds: Int) throws(Problem) -> Duration {
        guard (1...KioskConfiguration.maximumSessionLifetimeSeconds).contains(seconds) else {
            throw Problem(
                "must be 1 to \(KioskConfiguration.maximumSessionLifetimeSeconds) seconds, not \(seconds)"
            )
        }
        return .seconds(seconds)
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

    /// An EID's time on the air: 0 for never, else at least 5 seconds (each rotation is a ledger write) and at most
    /// the longest session lifetime.
    private static func rotation(_ seconds: Int) throws(Problem) -> Duration? {
        if seconds == 0 { return nil }
        guard (5...KioskConfiguration.maximumSessionLifetimeSeconds).contains(seconds) else {
            throw Problem(
                "must be 0 (never) or 5 to \(KioskConfiguration.maximumSessionLifetimeSeconds) seconds, not \(seconds)"
            )
        }
        return .seconds(seconds)
    }

    /// A relative path in the config file is relative to the file's directory, elsewhere to the working directory.
    private static func path(_ text: String, _ origin: Origin) throws(Problem) -> URL {
        guard !text.isEmpty else { throw Problem("must be a path, not empty") }
        guard !text.contains("\0") else { throw Problem("must not contain a NUL character") }
        if text.hasPrefix("/") { return URL(fileURLWithPath: text).standardizedFileURL }
        let base: URL
        if case .file(let file) = origin {
            base = file.deletingLastPathComponent()
        } else {
            base = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        }
        return base.appendingPathComponent(text).standardizedFileURL
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
