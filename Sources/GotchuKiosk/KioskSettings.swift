import GotchuCore
package import GotchuSettings

/// One layer of the kiosk's settings: the built-in values, the config file, the environment or the command line.
///
/// Each setting reads as a property, `nil` when the layer says nothing (`layer.sessionLifetime = 30`);
/// ``KioskConfiguration/resolve(file:fileIsExplicit:environment:flags:)`` lays the layers over each other and says
/// which one a bad value came from. Decoding a file refuses a key it does not know, so a misspelt setting is reported,
/// never silently ignored.
package typealias KioskSettings = SettingsLayer<KioskSettingsSchema>

/// Every setting of the kiosk, declared once: its key in the config file (snake_case), what its value must be, its
/// built-in value and its help. Its environment variable is `GOTCHU_KIOSK_` and the key in upper case, its flag `--`
/// and the key with dashes (`session_lifetime`: `GOTCHU_KIOSK_SESSION_LIFETIME`, `--session-lifetime`); the order is the
/// example config's (deploy/kiosk.toml).
package struct KioskSettingsSchema: SettingsSchema {
    /// `GOTCHU_KIOSK_`.
    package static let environmentPrefix = "GOTCHU_KIOSK_"
    /// "kiosk".
    package static let subject = "kiosk"

    /// `server`: the ledger's base URL.
    package let server = Setting<String>(
        "server",
        expected: "a string (a URL)",
        summary: "Ledger server URL.",
        valueName: "url"
    )
    /// `email`: the account to log in as with `POST /auth/dev-login` whenever a token is needed.
    package let email = Setting<String>(
        "email",
        summary: "Log in to the ledger as this e-mail, again when the token expires."
    )
    /// `token_file`: a file holding a bearer token, read again whenever the ledger refuses the token.
    package let tokenFile = Setting<String>(
        "token_file",
        expected: "a string (a path)",
        summary: "File holding the ledger token, re-read when the ledger rejects it.",
        valueName: "path"
    )
    /// `api_key_file`: a file holding the payee's API key (`gk_…`), read again whenever the ledger refuses it.
    package let apiKeyFile = Setting<String>(
        "api_key_file",
        expected: "a string (a path)",
        summary: "File holding the payee's API key (gk_…), re-read when the ledger rejects it.",
        valueName: "path"
    )
    /// `ca_file`: a PEM file of the private CA that signed an `https` ledger's certificate.
    package let caFile = Setting<String>(
        "ca_file",
        expected: "a string (a path)",
        summary: "PEM file of the private CA that signed an https ledger's certificate (default: the system's CAs).",
        valueName: "path"
    )
    /// `receipt_keys_file`: the ledger's receipt keys (JWKS) that a payment's receipt must verify against; without
    /// it, the keys the ledger publishes at first contact are pinned in the state directory.
    package let receiptKeysFile = Setting<String>(
        "receipt_keys_file",
        expected: "a string (a path)",
        summary: "The ledger's receipt keys (JWKS) to verify payments against (default: pinned at first contact).",
        valueName: "path"
    )
    /// `payee_name`: the name shown on the customer display.
    package let payeeName = Setting<String>(
        "payee_name",
        default: "Gotchu",
        summary: "Name shown to customers on the display."
    )
    /// `radio`: `bluez`, `sim` or `none`.
    package let radio = Setting<String>(
        "radio",
        default: "bluez",
        expected: "a string (\"bluez\", \"sim\" or \"none\")",
        summary: "bluez, sim, or none: nothing on the air, charges paid on the display's QR code only.",
        valueName: "radio"
    )
    /// `bluez_bus`: `system`, `session` or a D-Bus address, where bluetoothd is reached.
    package let bluezBus = Setting<String>(
        "bluez_bus",
        default: "system",
        expected: "a string (\"system\", \"session\" or an address)",
        summary: "Bus bluetoothd is on: system, session or an address."
    )
    /// `adapter`: the Bluetooth adapter, such as `hci0`.
    package let adapter = Setting<String>("adapter", summary: "Bluetooth adapter, such as hci0.", valueName: "name")
    /// `advertise_as`: `broadcast` (from a private address that changes with each EID) or `peripheral` (from the
    /// adapter's public address, for a terminal that stays where it is).
    package let advertiseAs = Setting<String>(
        "advertise_as",
        default: "broadcast",
        expected: "a string (\"broadcast\" or \"peripheral\")",
        summary: "broadcast (from a private address, new with each EID) or peripheral (from the adapter's public "
            + "address: a terminal that stays put may keep it).",
        valueName: "broadcast|peripheral"
    )
    /// `service_uuid`: the 16- or 128-bit service UUID advertised under.
    package let serviceUUID = Setting<String>(
        "service_uuid",
        default: "feed",
        summary: "Service UUID advertised: 16-bit (feed) or 128-bit.",
        valueName: "uuid"
    )
    /// `air`: the simulated air's directory, for `radio = "sim"`.
    package let air = Setting<String>(
        "air",
        expected: "a string (a path)",
        summary: "sim: the shared air directory.",
        valueName: "path"
    )
    /// `session_lifetime`: how long one charge waits for a payer, in whole seconds.
    package let sessionLifetime = Setting<Int>(
        "session_lifetime",
        default: 300,
        in: 1...KioskConfiguration.maximumSessionLifetimeSeconds,
        unit: "seconds",
        summary: "How long a charge waits for a payer, in seconds."
    )
    /// `renew_expired_sessions`: whether to advertise a new ledger session when the ledger's expires first.
    package let renewExpiredSessions = Setting<Bool>(
        "renew_expired_sessions",
        default: true,
        summary: "When the ledger's session expires before the charge's lifetime, advertise a new one."
    )
    /// `rotate_every`: how long one EID stays on the air before the session gets a new one, in whole seconds; 0 for
    /// never, else at least 5 (each rotation is a ledger write) and at most the longest session lifetime.
    package let rotateEvery = Setting<Int>(
        "rotate_every",
        default: 60,
        expected: "a whole number of seconds, 0 (never) or 5 to \(KioskConfiguration.maximumSessionLifetimeSeconds)",
        summary: "How long one EID stays on the air before the session gets a new one, in seconds.",
        bounds: "0: never, else 5 to \(KioskConfiguration.maximumSessionLifetimeSeconds)",
        valueName: "seconds",
        isAllowed: { $0 == 0 || (5...KioskConfiguration.maximumSessionLifetimeSeconds).contains($0) }
    )
    /// `tip_percents`: the tips each charge suggests to payers, in whole percent of what each pays (1 to 5 different
    /// percents from 1 to 100, such as `[10, 15, 20]`; `10,15,20` in the environment or on the command line); none by
    /// default.
    package let tipPercents = Setting<[Int]>(
        "tip_percents",
        default: [],
        expected: "a list of up to \(TipPrompt.maximumChoices) different whole percents from 1 to 100, such as "
            + "[10, 15, 20]",
        summary: "Tips each charge suggests to payers, in whole percent of what each pays, such as 10,15,20.",
        valueName: "percents",
        isAllowed: { (try? TipPrompt(percents: $0)) != nil }
    )
    /// `state_directory`: where the kiosk keeps its state.
    package let stateDirectory = Setting<String>(
        "state_directory",
        default: "/var/lib/gotchu-kiosk",
        expected: "a string (a path)",
        summary: "Where charges are kept.",
        valueName: "path"
    )
    /// `display`: `host:port` for the customer display's web server, or `off`.
    package let display = Setting<String>(
        "display",
        default: "127.0.0.1:8090",
        expected: "a string (\"host:port\" or \"off\")",
        summary: "Customer display address, host:port (port 0 picks one), or off.",
        valueName: "host:port"
    )
    /// `control_bus`: `system`, `session` or a D-Bus address, where the kiosk owns `io.gotchu.Kiosk1`.
    package let controlBus = Setting<String>(
        "control_bus",
        default: "system",
        expected: "a string (\"system\", \"session\" or an address)",
        summary: "Bus to own io.gotchu.Kiosk1 on: system, session or an address."
    )
    /// `calibrated_rssi`: the RSSI in dBm a phone measured 1 m from this terminal (`gotchu kiosk calibrate`),
    /// advertised so payers rank terminals of different makes fairly; written as a string, such as `"-59"`.
    package let calibratedRSSI = Setting<String>(
        "calibrated_rssi",
        expected: "a string (dBm at 1 m, such as \"-59\")",
        summary: "Advertise this calibration: the RSSI a phone measured 1 m away (`gotchu kiosk calibrate` sets it).",
        valueName: "dBm"
    )
    /// `metrics`: `host:port` for a listener of its own serving only `GET /metrics`, or `off`.
    package let metrics = Setting<String>(
        "metrics",
        default: "off",
        expected: "a string (\"host:port\" or \"off\")",
        summary: "Serve GET /metrics on a listener of its own, host:port (port 0 picks one), or off (the display "
            + "serves them too).",
        valueName: "host:port"
    )

    /// The schema.
    package init() {}
}
