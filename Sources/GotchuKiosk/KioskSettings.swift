import Foundation

/// One layer of the kiosk's settings: the built-in defaults, the config file, the environment or the command line.
///
/// Every field is optional: `nil` means "this layer says nothing, ask the one below". Values are kept as they were
/// written (strings, whole seconds, booleans); ``KioskConfiguration/resolve(file:fileIsExplicit:environment:flags:)``
/// checks them and says which layer a bad one came from. Each setting is declared once, in ``declarations``: its
/// key in the config file (snake_case), its environment variable and flag, what its value must be and its built-in
/// value. Decoding refuses a key it does not know, so a misspelt setting is reported, never silently ignored.
public struct KioskSettings: Codable, Hashable, Sendable {
    /// `server`: the ledger's base URL, such as `https://ledger.example.com`.
    public var server: String?
    /// `email`: the account to log in as with `POST /auth/dev-login` whenever a token is needed.
    public var email: String?
    /// `token_file`: a file holding a bearer token, read again whenever the ledger refuses the token.
    public var tokenFile: String?
    /// `api_key_file`: a file holding the payee's API key (`gk_…`), read again whenever the ledger refuses it.
    public var apiKeyFile: String?
    /// `ca_file`: a PEM file of the private CA that signed an `https` ledger's certificate.
    public var caFile: String?
    /// `receipt_keys_file`: the ledger's receipt keys (JWKS) that a payment's receipt must verify against; without
    /// it, the keys the ledger publishes at first contact are pinned in the state directory.
    public var receiptKeysFile: String?
    /// `payee_name`: the name shown on the customer display.
    public var payeeName: String?
    /// `radio`: `bluez` or `sim`.
    public var radio: String?
    /// `bluez_bus`: `system`, `session` or a D-Bus address, where bluetoothd is reached.
    public var bluezBus: String?
    /// `adapter`: the Bluetooth adapter, such as `hci0`.
    public var adapter: String?
    /// `advertise_as`: `broadcast` (from a private address that changes with each EID) or `peripheral` (from the
    /// adapter's public address, for a terminal that stays where it is).
    public var advertiseAs: String?
    /// `service_uuid`: the 16- or 128-bit service UUID advertised under.
    public var serviceUUID: String?
    /// `air`: the simulated air's directory, for `radio = "sim"`.
    public var air: String?
    /// `session_lifetime`: how long one charge waits for a payer, in whole seconds.
    public var sessionLifetime: Int?
    /// `renew_expired_sessions`: whether to advertise a new ledger session when the ledger's expires first.
    public var renewExpiredSessions: Bool?
    /// `rotate_every`: how long one EID stays on the air before the session gets a new one, in whole seconds; 0 for
    /// never.
    public var rotateEvery: Int?
    /// `state_directory`: where the kiosk keeps its state.
    public var stateDirectory: String?
    /// `display`: `host:port` for the customer display's web server, or `off`.
    public var display: String?
    /// `control_bus`: `system`, `session` or a D-Bus address, where the kiosk owns `io.gotchu.Kiosk1`.
    public var controlBus: String?
    /// `calibrated_rssi`: the RSSI in dBm a phone measured 1 m from this terminal (`gotchu kiosk calibrate`),
    /// advertised so payers rank terminals of different makes fairly; written as a string, such as `"-59"`.
    public var calibratedRSSI: String?
    /// `metrics`: `host:port` for a listener of its own serving only `GET /metrics`, or `off`.
    public var metrics: String?

    /// Creates a layer; every setting left out is unset.
    public init(
        server: String? = nil,
        email: String? = nil,
        tokenFile: String? = nil,
        apiKeyFile: String? = nil,
        caFile: String? = nil,
        receiptKeysFile: String? = nil,
        payeeName: String? = nil,
        radio: String? = nil,
        bluezBus: String? = nil,
        adapter: String? = nil,
        advertiseAs: String? = nil,
        serviceUUID: String? = nil,
        air: String? = nil,
        sessionLifetime: Int? = nil,
        renewExpiredSessions: Bool? = nil,
        rotateEvery: Int? = nil,
        stateDirectory: String? = nil,
        display: String? = nil,
        controlBus: String? = nil,
        calibratedRSSI: String? = nil,
        metrics: String? = nil
    ) {
        self.server = server
        self.email = email
        self.tokenFile = tokenFile
        self.apiKeyFile = apiKeyFile
        self.caFile = caFile
        self.receiptKeysFile = receiptKeysFile
        self.payeeName = payeeName
        self.radio = radio
        self.bluezBus = bluezBus
        self.adapter = adapter
        self.advertiseAs = advertiseAs
        self.serviceUUID = serviceUUID
        self.air = air
        self.sessionLifetime = sessionLifetime
        self.renewExpiredSessions = renewExpiredSessions
        self.rotateEvery = rotateEvery
        self.stateDirectory = stateDirectory
        self.display = display
        self.controlBus = controlBus
        self.calibratedRSSI = calibratedRSSI
        self.metrics = metrics
    }

    /// One setting as the config file, the environment and the command line name it: its key, what its value must
    /// be, and its built-in value. Everything else about a setting (``environmentVariable``, ``flag``, how the file
    /// and the environment are read, the ``builtIn`` layer) is derived from ``declarations``.
    public struct Declaration: Sendable {
        /// The config file's key, such as `session_lifetime`.
        public let key: String
        /// What a value must be, as errors say it: "a whole number of seconds".
        public let expected: String
        let field: Field

        /// The environment variable, such as `GOTCHU_KIOSK_SESSION_LIFETIME`.
        public var environmentVariable: String { KioskSettings.environmentVariable(for: key) }
        /// The command-line flag, such as `--session-lifetime`.
        public var flag: String { KioskSettings.flag(for: key) }
        /// How a value is written.
        public var kind: Kind {
            switch field {
            case .text: .text
            case .seconds: .seconds
            case .flag: .flag
            }
        }

        /// How a setting's value is written.
        public enum Kind: Hashable, Sendable {
            /// Text (a URL, a path, a name…), parsed when the configuration is resolved.
            case text
            /// A whole number of seconds.
            case seconds
            /// Yes or no; on the command line `--flag` or `--no-flag`.
            case flag
        }

        init(_ key: String, _ field: Field, _ expected: String) {
            self.key = key
            self.field = field
            self.expected = expected
        }
    }

    /// Where a setting lives in a layer, how it is written, and its built-in value (`nil` for none).
    enum Field: Sendable {
        /// Text, taken as written.
        case text(any WritableKeyPath<KioskSettings, String?> & Sendable, builtIn: String?)
        /// A whole number of seconds.
        case seconds(any WritableKeyPath<KioskSettings, Int?> & Sendable, builtIn: Int?)
        /// A yes or no.
        case flag(any WritableKeyPath<KioskSettings, Bool?> & Sendable, builtIn: Bool?)

        var keyPath: PartialKeyPath<KioskSettings> {
            switch self {
            case .text(let path, _): path
            case .seconds(let path, _): path
            case .flag(let path, _): path
            }
        }
    }

    /// Every setting, in the order the example config lists them.
    public static let declarations: [Declaration] = [
        Declaration("server", .text(\.server, builtIn: nil), "a string (a URL)"),
        Declaration("email", .text(\.email, builtIn: nil), "a string"),
        Declaration("token_file", .text(\.tokenFile, builtIn: nil), "a string (a path)"),
        Declaration("api_key_file", .text(\.apiKeyFile, builtIn: nil), "a string (a path)"),
        Declaration("ca_file", .text(\.caFile, builtIn: nil), "a string (a path)"),
        Declaration("receipt_keys_file", .text(\.receiptKeysFile, builtIn: nil), "a string (a path)"),
        Declaration("payee_name", .text(\.payeeName, builtIn: "Gotchu"), "a string"),
        Declaration("radio", .text(\.radio, builtIn: "bluez"), "a string (\"bluez\" or \"sim\")"),
        Declaration(
            "bluez_bus",
            .text(\.bluezBus, builtIn: "system"),
            "a string (\"system\", \"session\" or an address)"
        ),
        Declaration("adapter", .text(\.adapter, builtIn: nil), "a string"),
        Declaration(
            "advertise_as",
            .text(\.advertiseAs, builtIn: "broadcast"),
            "a string (\"broadcast\" or \"peripheral\")"
        ),
        Declaration("service_uuid", .text(\.serviceUUID, builtIn: "feed"), "a string"),
        Declaration("air", .text(\.air, builtIn: nil), "a string (a path)"),
        Declaration("session_lifetime", .seconds(\.sessionLifetime, builtIn: 300), "a whole number of seconds"),
        Declaration("renew_expired_sessions", .flag(\.renewExpiredSessions, builtIn: true), "true or false"),
        Declaration("rotate_every", .seconds(\.rotateEvery, builtIn: 60), "a whole number of seconds (0: never)"),
        Declaration("state_directory", .text(\.stateDirectory, builtIn: "/var/lib/gotchu-kiosk"), "a string (a path)"),
        Declaration("display", .text(\.display, builtIn: "127.0.0.1:8080"), "a string (\"host:port\" or \"off\")"),
        Declaration(
            "control_bus",
            .text(\.controlBus, builtIn: "system"),
            "a string (\"system\", \"session\" or an address)"
        ),
        Declaration("calibrated_rssi", .text(\.calibratedRSSI, builtIn: nil), "a string (dBm at 1 m, such as \"-59\")"),
        Declaration("metrics", .text(\.metrics, builtIn: "off"), "a string (\"host:port\" or \"off\")"),
    ]

    /// The config file's keys, in the order the example config lists them.
    public static var keys: [String] { declarations.map(\.key) }

    /// The key of the setting kept at `field`, such as `session_lifetime` for `\.sessionLifetime`.
    public static func key(for field: PartialKeyPath<KioskSettings>) -> String {
        guard let declaration = declarations.first(where: { $0.field.keyPath == field }) else {
            preconditionFailure("\(field) is not a declared kiosk setting")
        }
        return declaration.key
    }

    /// The built-in layer, below all others: the built-in value of every setting that has one.
    public static var builtIn: KioskSettings {
        var settings = KioskSettings()
        for declaration in declarations {
            switch declaration.field {
            case .text(let path, let value): settings[keyPath: path] = value
            case .seconds(let path, let value): settings[keyPath: path] = value
            case .flag(let path, let value): settings[keyPath: path] = value
            }
        }
        return settings
    }

    /// The prefix of the environment variables: `GOTCHU_KIOSK_` and the key in upper case.
    public static let environmentPrefix = "GOTCHU_KIOSK_"

    /// The environment variable for `key`, such as `GOTCHU_KIOSK_SESSION_LIFETIME` for `session_lifetime`.
    public static func environmentVariable(for key: String) -> String {
        environmentPrefix + key.uppercased()
    }

    /// The command-line flag for `key`, such as `--session-lifetime` for `session_lifetime`.
    public static func flag(for key: String) -> String {
        "--" + key.replacingOccurrences(of: "_", with: "-")
    }

    /// Any key a file may hold, so that unknown ones can be named.
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Decodes one layer, refusing unknown keys and values of the wrong type with the key in the coding path.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        let known = Set(Self.keys)
        if let unknown = container.allKeys.map(\.stringValue).sorted().first(where: { !known.contains($0) }) {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription:
                        "unknown setting \"\(unknown)\"; the settings are \(Self.keys.joined(separator: ", "))"
                )
            )
        }
        self.init()
        for declaration in Self.declarations {
            let key = AnyKey(stringValue: declaration.key)
            switch declaration.field {
            case .text(let path, _):
                self[keyPath: path] = try Self.value(String.self, declaration.expected, container, key)
            case .seconds(let path, _):
                self[keyPath: path] = try Self.value(Int.self, declaration.expected, container, key)
            case .flag(let path, _):
                self[keyPath: path] = try Self.value(Bool.self, declaration.expected, container, key)
            }
        }
    }

    /// Encodes the settings that are set, under the config file's keys.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        for declaration in Self.declarations {
            let key = AnyKey(stringValue: declaration.key)
            switch declaration.field {
            case .text(let path, _): try container.encodeIfPresent(self[keyPath: path], forKey: key)
            case .seconds(let path, _): try container.encodeIfPresent(self[keyPath: path], forKey: key)
            case .flag(let path, _): try container.encodeIfPresent(self[keyPath: path], forKey: key)
            }
        }
    }

    /// Decoders differ in what they throw for a value of the wrong type (TOMLKit says the key is missing), so every
    /// failure of a present key becomes one `typeMismatch` that says what was expected.
    private static func value<T: Decodable>(
        _ type: T.Type,
        _ expected: String,
        _ container: KeyedDecodingContainer<AnyKey>,
        _ key: AnyKey
    ) throws -> T? {
        guard container.contains(key) else { return nil }
        do {
            return try container.decodeIfPresent(type, forKey: key)
        } catch {
            throw DecodingError.typeMismatch(
                type,
                DecodingError.Context(
                    codingPath: container.codingPath + [key],
                    debugDescription: "must be \(expected)",
                    underlyingError: error
                )
            )
        }
    }
}

extension KioskSettings {
    /// Reads the `GOTCHU_KIOSK_<KEY>` variables of `environment`, such as `GOTCHU_KIOSK_SERVER`.
    ///
    /// An empty variable counts as unset, as in `GOTCHU_KIOSK_ADAPTER= gotchu kiosk`. A variable with the prefix
    /// that names no setting is an error, as an unknown key in the file is, and so is a value that does not parse
    /// as its setting's type (whole seconds; `true`/`false`, `yes`/`no`, `on`/`off` or `1`/`0`).
    public init(environment: [String: String]) throws(KioskConfigurationError) {
        self.init()
        let known = Set(Self.declarations.map(\.environmentVariable))
        for name in environment.keys.sorted() where name.hasPrefix(Self.environmentPrefix) && !known.contains(name) {
            throw KioskConfigurationError(
                "\(name) is not a kiosk setting; the variables are "
                    + Self.declarations.map(\.environmentVariable).joined(separator: ", ")
            )
        }
        for declaration in Self.declarations {
            let name = declaration.environmentVariable
            guard let value = environment[name], !value.isEmpty else { continue }
            switch declaration.field {
            case .text(let path, _):
                self[keyPath: path] = value
            case .seconds(let path, _):
                guard let seconds = Int(value.trimmingCharacters(in: .whitespaces)) else {
                    throw KioskConfigurationError(
                        "\(name) must be a whole number of seconds, such as 300, not \"\(value)\""
                    )
                }
                self[keyPath: path] = seconds
            case .flag(let path, _):
                switch value.trimmingCharacters(in: .whitespaces).lowercased() {
                case "true", "yes", "on", "1": self[keyPath: path] = true
                case "false", "no", "off", "0": self[keyPath: path] = false
                default: throw KioskConfigurationError("\(name) must be true or false, not \"\(value)\"")
                }
            }
        }
    }
}
