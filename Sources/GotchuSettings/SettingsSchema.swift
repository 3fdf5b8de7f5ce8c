// Why a small table of our own rather than apple/swift-configuration (1.4.0, evaluated for this):
//
// - It reads keys where they are used (`config.int(forKey: "port", default: 8080)`): there is no place where a
//   setting is declared once with its bounds, default and help, so the flag's help, the example config and the
//   reader would each spell them again. Here a `Setting` is that place, and flags, variables and file keys follow.
// - Nothing enumerates the settings, so it cannot refuse an unknown key or GOTCHU_KIOSK_* variable; the kiosk has
//   always refused both (a misspelt setting must not be silently ignored).
// - A value that does not convert is `nil` or the default (`int(forKey:default:)` returns the default), or with the
//   `required` readers "Config value for key 'x' failed to convert to type int": neither names the file, the variable
//   or the flag it came from, which every error here must.
// - It has no TOML provider (JSON, YAML and property lists only), and the kiosk's file is TOML; we would write one.
// - Its command-line provider is a parser of its own beside swift-argument-parser, so `--help` would not know the
//   settings; here the options stay ArgumentParser's and take their help from the declarations.
// What it offers that we do not need: reloading, access reporting, namespaced scoped readers. Its dependencies
// (swift-system, swift-collections) are light, but the table below is ~500 lines with TOMLKit and ArgumentParser,
// which both programs already build.

/// A program's settings: a struct whose stored properties are its ``Setting``s, in the order `--help` and the
/// example config list them.
///
/// ```swift
/// struct KioskSettingsSchema: SettingsSchema {
///     static let environmentPrefix = "GOTCHU_KIOSK_"
///     static let subject = "kiosk"
///     let sessionLifetime = Setting<Int>("session_lifetime", default: 300, in: 1...3600, unit: "seconds", summary: "…")
/// }
/// ```
///
/// A command-line option with the same name as a property (`@Option var sessionLifetime: String?`) is that setting's
/// flag; ``SettingsLayer/init(flags:)`` reads it.
package protocol SettingsSchema: Sendable {
    /// The schema with every setting declared.
    init()
    /// The prefix of the environment variables, such as `GOTCHU_KIOSK_`: the variable of `session_lifetime` is
    /// `GOTCHU_KIOSK_ROTATE_EVERY`.
    static var environmentPrefix: String { get }
    /// What the settings are of, for errors: "GOTCHU_KIOSK_X is not a kiosk setting".
    static var subject: String { get }
    /// Variables with ``environmentPrefix`` that are not settings, such as the config file's own variable; every
    /// other variable with the prefix must name a setting.
    static var otherEnvironmentVariables: Set<String> { get }
}

extension SettingsSchema {
    /// None.
    package static var otherEnvironmentVariables: Set<String> { [] }

    /// Every setting, in the order of the schema's properties.
    package static var declarations: [SettingDeclaration] {
        Mirror(reflecting: Self()).children.compactMap { child in
            guard let label = child.label, let setting = child.value as? any AnySetting else { return nil }
            return setting.declaration(property: label, environmentPrefix: environmentPrefix)
        }
    }

    /// The declaration of the setting `key`.
    static func declaration(for key: String) -> SettingDeclaration? {
        declarations.first { $0.key == key }
    }
}
