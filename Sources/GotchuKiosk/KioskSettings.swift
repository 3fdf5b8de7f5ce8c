import Foundation

/// One layer of the kiosk's settings: the built-in defaults, the config file, the environment or the command line.
///
/// Every field is optional: `nil` means "this layer says nothing, ask the one below". Values are kept as they were
/// written (strings, whole seconds, booleans); ``KioskConfiguration/resolve(file:fileIsExplicit:environment:flags:)``
/// checks them and says which layer a bad one came from. The coding keys are the config file's snake_case keys, and
/// decoding refuses a key it does not know, so a misspelt setting is reported, never silently ignored.
public struct KioskSettings: Codable, Hashable, Sendable {
    /// `server`: the ledger's base URL, such as `https://ledger.example.com`.
    public var server: String?
    /// `email`: the account to log in as with `POST /auth/dev-login` whenever a token is needed.
    public var email: String?
    /// `token_file`: a file holding a bearer token, read again whenever the ledger refuses the token.
    public var tokenFile: String?
    /// `ca_file`: a PEM file of the private CA that signed an `https` ledger's certificate.
    public var caFile: String?
    /// `payee_name`: the name shown on the customer display.
    public var payeeName: String?
    /// `radio`: `bluez` or `sim`.
    public var radio: String?
    /// `bluez_bus`: `system`, `session` or a D-Bus address, where bluetoothd is reached.
    public var bluezBus: String?
    /// `adapter`: the Bluetooth adapter, such as `hci0`.
    public var adapter: String?
    /// `service_uuid`: the 16- or 128-bit service UUID advertised under.
    public var serviceUUID: String?
    /// `air`: the simulated air's directory, for `radio = "sim"`.
    public var air: String?
    /// `session_lifetime`: how long one charge waits for a payer, in whole seconds.
    public var sessionLifetime: Int?
    /// `renew_expired_sessions`: whether to advertise a new ledger session when the ledger's expires first.
    public var renewExpiredSessions: Bool?
    /// `state_directory`: where the kiosk keeps its state.
    public var stateDirectory: String?
    /// `display`: `host:port` for the customer display's web server, or `off`.
    public var display: String?
    /// `control_bus`: `system`, `session` or a D-Bus address, where the kiosk owns `io.gotchu.Kiosk1`.
    public var controlBus: String?

    /// Creates a layer; every setting left out is unset.
    public init(
        server: String? = nil,
        email: String? = nil,
        tokenFile: String? = nil,
        caFile: String? = nil,
        payeeName: String? = nil,
        radio: String? = nil,
        bluezBus: String? = nil,
        adapter: String? = nil,
        serviceUUID: String? = nil,
        air: String? = nil,
        sessionLifetime: Int? = nil,
        renewExpiredSessions: Bool? = nil,
        stateDirectory: String? = nil,
        display: String? = nil,
        controlBus: String? = nil
    ) {
        self.server = server
        self.email = email
        self.tokenFile = tokenFile
        self.caFile = caFile
        self.payeeName = payeeName
        self.radio = radio
        self.bluezBus = bluezBus
        self.adapter = adapter
        self.serviceUUID = serviceUUID
        self.air = air
        self.sessionLifetime = sessionLifetime
        self.renewExpiredSessions = renewExpiredSessions
        self.stateDirectory = stateDirectory
        self.display = display
        self.controlBus = controlBus
    }

    /// The config file's keys, in the order the example config lists them.
    public static var keys: [String] { CodingKeys.allCases.map(\.rawValue) }

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

    enum CodingKeys: String, CodingKey, CaseIterable {
        case server
        case email
        case tokenFile = "token_file"
        case caFile = "ca_file"
        case payeeName = "payee_name"
        case radio
        case bluezBus = "bluez_bus"
        case adapter
        case serviceUUID = "service_uuid"
        case air
        case sessionLifetime = "session_lifetime"
        case renewExpiredSessions = "renew_expired_sessions"
        case stateDirectory = "state_directory"
        case display
        case controlBus = "control_bus"
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
        let all = try decoder.container(keyedBy: AnyKey.self)
        let known = Set(Self.keys)
        if let unknown = all.allKeys.map(\.stringValue).sorted().first(where: { !known.contains($0) }) {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription:
                        "unknown setting \"\(unknown)\"; the settings are \(Self.keys.joined(separator: ", "))"
                )
            )
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        server = try Self.value(String.self, "a string (a URL)", container, .server)
        email = try Self.value(String.self, "a string", container, .email)
        tokenFile = try Self.value(String.self, "a string (a path)", container, .tokenFile)
        caFile = try Self.value(String.self, "a string (a path)", container, .caFile)
        payeeName = try Self.value(String.self, "a string", container, .payeeName)
        radio = try Self.value(String.self, "a string (\"bluez\" or \"sim\")", container, .radio)
        bluezBus = try Self.value(String.self, "a string (\"system\", \"session\" or an address)", container, .bluezBus)
        adapter = try Self.value(String.self, "a string", container, .adapter)
        serviceUUID = try Self.value(String.self, "a string", container, .serviceUUID)
        air = try Self.value(String.self, "a string (a path)", container, .air)
        sessionLifetime = try Self.value(Int.self, "a whole number of seconds", container, .sessionLifetime)
        renewExpiredSessions = try Self.value(Bool.self, "true or false", container, .renewExpiredSessions)
        stateDirectory = try Self.value(String.self, "a string (a path)", container, .stateDirectory)
        display = try Self.value(String.self, "a string (\"host:port\" or \"off\")", container, .display)
        controlBus = try Self.value(
            String.self,
            "a string (\"system\", \"session\" or an address)",
            container,
            .controlBus
        )
    }

    /// Decoders differ in what they throw for a value of the wrong type (TOMLKit says the key is missing), so every
    /// failure of a present key becomes one `typeMismatch` that says what was expected.
    private static func value<T: Decodable>(
        _ type: T.Type,
        _ expected: String,
        _ container: KeyedDecodingContainer<CodingKeys>,
        _ key: CodingKeys
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
        let known = Set(Self.keys.map(Self.environmentVariable(for:)))
        for name in environment.keys.sorted() where name.hasPrefix(Self.environmentPrefix) && !known.contains(name) {
            throw KioskConfigurationError(
                "\(name) is not a kiosk setting; the variables are "
                    + Self.keys.map(Self.environmentVariable(for:)).joined(separator: ", ")
            )
        }
        func text(_ key: CodingKeys) -> String? {
            guard let value = environment[Self.environmentVariable(for: key.rawValue)], !value.isEmpty else {
                return nil
            }
            return value
        }
        server = text(.server)
        email = text(.email)
        tokenFile = text(.tokenFile)
        caFile = text(.caFile)
        payeeName = text(.payeeName)
        radio = text(.radio)
        bluezBus = text(.bluezBus)
        adapter = text(.adapter)
        serviceUUID = text(.serviceUUID)
        air = text(.air)
        stateDirectory = text(.stateDirectory)
        display = text(.display)
        controlBus = text(.controlBus)
        if let value = text(.sessionLifetime) {
            guard let seconds = Int(value.trimmingCharacters(in: .whitespaces)) else {
                throw KioskConfigurationError(
                    "\(Self.environmentVariable(for: CodingKeys.sessionLifetime.rawValue)) must be a whole number of "
                        + "seconds, such as 300, not \"\(value)\""
                )
            }
            sessionLifetime = seconds
        }
        if let value = text(.renewExpiredSessions) {
            switch value.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "yes", "on", "1": renewExpiredSessions = true
            case "false", "no", "off", "0": renewExpiredSessions = false
            default:
                throw KioskConfigurationError(
                    "\(Self.environmentVariable(for: CodingKeys.renewExpiredSessions.rawValue)) must be true or false, "
                        + "not \"\(value)\""
                )
            }
        }
    }
}
