import Foundation

/// A setting's value as one layer holds it: what a config file wrote, or what the environment or a flag said, read
/// as the setting's kind.
package enum SettingValue: Hashable, Sendable, CustomStringConvertible {
    /// A string.
    case text(String)
    /// A whole number.
    case integer(Int)
    /// A number that may have a fraction.
    case number(Double)
    /// Yes or no.
    case flag(Bool)
    /// A list of whole numbers.
    case integers([Int])

    /// The value as an operator would write it in an error message: strings quoted, everything else bare.
    package var description: String {
        switch self {
        case .text(let text): String(text.prefix(64)).debugDescription
        case .integer(let integer): String(integer)
        case .number(let number): String(number)
        case .flag(let flag): String(flag)
        case .integers(let integers): "[" + integers.prefix(16).map(String.init).joined(separator: ", ") + "]"
        }
    }
}

/// How a setting is written: in a config file, its type; in the environment or on the command line, how its text
/// is read.
package enum SettingKind: Hashable, Sendable {
    /// Text (a URL, a path, a name…), taken as written.
    case text
    /// A whole number (seconds, a count, a port).
    case integer
    /// A number that may have a fraction (a rate); a file may write it as a whole number.
    case number
    /// Yes or no: `true`/`false` in a file; `true`/`false`, `yes`/`no`, `on`/`off` or `1`/`0` in the environment;
    /// `--flag` or `--no-flag` on the command line.
    case flag
    /// A list of whole numbers: an array in a file (`[10, 15, 20]`); comma-separated in the environment or on the
    /// command line (`10,15,20`), where an empty text is the empty list.
    case integers

    /// Reads the text of an environment variable or a flag; `nil` when it is not of this kind.
    package func parse(_ text: String) -> SettingValue? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        switch self {
        case .text:
            return .text(text)
        case .integer:
            return Int(trimmed).map(SettingValue.integer)
        case .number:
            return Double(trimmed).map(SettingValue.number)
        case .flag:
            switch trimmed.lowercased() {
            case "true", "yes", "on", "1": return .flag(true)
            case "false", "no", "off", "0": return .flag(false)
            default: return nil
            }
        case .integers:
            guard !trimmed.isEmpty else { return .integers([]) }
            var integers: [Int] = []
            for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
                guard let integer = Int(part.trimmingCharacters(in: .whitespaces)) else { return nil }
                integers.append(integer)
            }
            return .integers(integers)
        }
    }
}

/// A Swift type a setting can hold: `String`, `Int`, `Double` or `Bool`.
package protocol SettingValueType: Hashable, Sendable {
    /// How values of this type are written.
    static var settingKind: SettingKind { get }
    /// The value `value` holds, or `nil` when it is of another kind.
    init?(_ value: SettingValue)
    /// The value as a layer holds it.
    var settingValue: SettingValue { get }
}

extension String: SettingValueType {
    /// Text.
    package static var settingKind: SettingKind { .text }
    /// The text `value` holds.
    package init?(_ value: SettingValue) {
        guard case .text(let text) = value else { return nil }
        self = text
    }
    /// `.text(self)`.
    package var settingValue: SettingValue { .text(self) }
}

extension Int: SettingValueType {
    /// A whole number.
    package static var settingKind: SettingKind { .integer }
    /// The whole number `value` holds.
    package init?(_ value: SettingValue) {
        guard case .integer(let integer) = value else { return nil }
        self = integer
    }
    /// `.integer(self)`.
    package var settingValue: SettingValue { .integer(self) }
}

extension Double: SettingValueType {
    /// A number.
    package static var settingKind: SettingKind { .number }
    /// The number `value` holds, a whole one too.
    package init?(_ value: SettingValue) {
        switch value {
        case .number(let number): self = number
        case .integer(let integer): self = Double(integer)
        default: return nil
        }
    }
    /// `.number(self)`.
    package var settingValue: SettingValue { .number(self) }
}

extension Array: SettingValueType where Element == Int {
    /// A list of whole numbers.
    package static var settingKind: SettingKind { .integers }
    /// The list `value` holds.
    package init?(_ value: SettingValue) {
        guard case .integers(let integers) = value else { return nil }
        self = integers
    }
    /// `.integers(self)`.
    package var settingValue: SettingValue { .integers(self) }
}

extension Bool: SettingValueType {
    /// Yes or no.
    package static var settingKind: SettingKind { .flag }
    /// The flag `value` holds.
    package init?(_ value: SettingValue) {
        guard case .flag(let flag) = value else { return nil }
        self = flag
    }
    /// `.flag(self)`.
    package var settingValue: SettingValue { .flag(self) }
}

/// One setting, declared once: its key in the config file, its built-in value, what its value must be, and its help.
/// Its environment variable (the schema's prefix and the key in upper case) and its flag (`--` and the key with
/// dashes) follow from the key.
///
/// A schema (``SettingsSchema``) holds its settings as stored properties, such as
/// `let sessionLifetime = Setting<Int>("session_lifetime", default: 300, in: 1...3600, unit: "seconds", summary: "…")`.
package struct Setting<Value: SettingValueType>: Sendable {
    /// The config file's key, snake_case, such as `session_lifetime`.
    package let key: String
    /// The value when no layer sets one; `nil` for none.
    package let defaultValue: Value?
    /// What a value must be, as errors say it after "must be": "a whole number of seconds from 1 to 3600".
    package let expected: String
    /// One line of help for `--help` and the example config.
    package let summary: String
    /// The bounds as `--help` says them, such as "1 to 3600"; `nil` when the summary says enough.
    package let bounds: String?
    /// The placeholder of the value in `--help`, such as `seconds`.
    package let valueName: String
    /// Whether the value is a secret: never read from a config file, never repeated in an error.
    package let isSecret: Bool
    /// Further environment variables read when the setting's own is unset, such as an older name.
    package let environmentAliases: [String]
    /// Whether a value is allowed (its bounds).
    package let isAllowed: @Sendable (Value) -> Bool

    /// Declares a setting.
    ///
    /// - Parameters:
    ///   - key: The config file's key, snake_case.
    ///   - defaultValue: The built-in value; `nil` for none.
    ///   - expected: What a value must be, for errors; by default what the kind says ("a string").
    ///   - summary: One line of help.
    ///   - bounds: The bounds as `--help` says them, such as "1 to 3600".
    ///   - valueName: The value's placeholder in `--help`; by default the key's last word.
    ///   - isSecret: Whether the value is a secret (kept out of config files and error messages).
    ///   - environmentAliases: Older environment variables, read when the setting's own is unset.
    ///   - isAllowed: The bounds of a value.
    package init(
        _ key: String,
        default defaultValue: Value? = nil,
        expected: String? = nil,
        summary: String,
        bounds: String? = nil,
        valueName: String? = nil,
        isSecret: Bool = false,
        environmentAliases: [String] = [],
        isAllowed: @escaping @Sendable (Value) -> Bool = { _ in true }
    ) {
        self.key = key
        self.defaultValue = defaultValue
        self.expected = expected ?? Value.settingKind.written
        self.summary = summary
        self.bounds = bounds
        self.valueName = valueName ?? String(key.split(separator: "_").last ?? Substring(key))
        self.isSecret = isSecret
        self.environmentAliases = environmentAliases
        self.isAllowed = isAllowed
    }
}

extension Setting where Value == Int {
    /// Declares a whole number within `range`, such as seconds (`unit: "seconds"`) or a count.
    package init(
        _ key: String,
        default defaultValue: Int?,
        in range: ClosedRange<Int>,
        unit: String? = nil,
        summary: String,
        valueName: String? = nil
    ) {
        self.init(
            key,
            default: defaultValue,
            expected: "a whole number\(unit.map { " of \($0)" } ?? "") from \(range.lowerBound) to \(range.upperBound)",
            summary: summary,
            bounds: "\(range.lowerBound) to \(range.upperBound)",
            valueName: valueName ?? unit,
            isAllowed: { range.contains($0) }
        )
    }
}

extension Setting where Value == Double {
    /// Declares a number within `range`, or 0 when `zero` says what 0 means (such as "no limit").
    package init(
        _ key: String,
        default defaultValue: Double?,
        in range: ClosedRange<Double>,
        zero: String? = nil,
        summary: String,
        valueName: String? = nil
    ) {
        let bounds = "\(range.lowerBound.settingText) to \(range.upperBound.settingText)"
        self.init(
            key,
            default: defaultValue,
            expected: zero.map { "0 (\($0)) or a number from \(bounds)" } ?? "a number from \(bounds)",
            summary: summary,
            bounds: zero.map { "0: \($0), else \(bounds)" } ?? bounds,
            valueName: valueName,
            // NaN fails every comparison, so `contains` refuses it along with infinities.
            isAllowed: { (zero != nil && $0 == 0) || range.contains($0) }
        )
    }
}

extension Setting where Value == String {
    /// Declares a choice among `choices`.
    package init(_ key: String, default defaultValue: String?, oneOf choices: [String], summary: String) {
        self.init(
            key,
            default: defaultValue,
            expected: Self.list(choices.map(\.debugDescription), or: "or"),
            summary: summary,
            valueName: choices.joined(separator: "|"),
            isAllowed: { choices.contains($0) }
        )
    }

    /// "a, b or c".
    static func list(_ items: [String], or word: String) -> String {
        guard let last = items.last else { return "" }
        let rest = items.dropLast()
        return rest.isEmpty ? last : rest.joined(separator: ", ") + " \(word) " + last
    }
}

extension Double {
    /// 1000000 rather than 1e+06, 0.001 as itself.
    fileprivate var settingText: String {
        self == rounded() && abs(self) < 1e15 ? String(Int(self)) : String(self)
    }
}

extension SettingKind {
    /// What a value of this kind is, for errors: "a string".
    var written: String {
        switch self {
        case .text: "a string"
        case .integer: "a whole number"
        case .number: "a number"
        case .flag: "true or false"
        case .integers: "a list of whole numbers"
        }
    }
}

/// One setting without its Swift type: what the environment, the command line and the config file need to know.
package struct SettingDeclaration: Sendable {
    /// The config file's key, such as `session_lifetime`.
    package let key: String
    /// How a value is written.
    package let kind: SettingKind
    /// What a value must be, as errors say it.
    package let expected: String
    /// One line of help.
    package let summary: String
    /// The value's placeholder in `--help`.
    package let valueName: String
    /// The built-in value; `nil` for none.
    package let defaultValue: SettingValue?
    /// Whether the value is a secret.
    package let isSecret: Bool
    /// The environment variable, such as `GOTCHU_KIOSK_SESSION_LIFETIME`.
    package let environmentVariable: String
    /// Older environment variables, read when ``environmentVariable`` is unset.
    package let environmentAliases: [String]
    /// The name of the schema's property, which a command-line option of the same name binds to.
    let property: String
    let isAllowed: @Sendable (SettingValue) -> Bool

    /// The command-line flag, such as `--session-lifetime`.
    package var flag: String { "--" + key.replacingOccurrences(of: "_", with: "-") }
}

/// A ``Setting`` of any type, so that a schema's properties can be listed.
protocol AnySetting {
    func declaration(property: String, environmentPrefix: String) -> SettingDeclaration
}

extension Setting: AnySetting {
    func declaration(property: String, environmentPrefix: String) -> SettingDeclaration {
        let check = isAllowed
        return SettingDeclaration(
            key: key,
            kind: Value.settingKind,
            expected: expected,
            summary: summary,
            valueName: valueName,
            defaultValue: defaultValue?.settingValue,
            isSecret: isSecret,
            environmentVariable: environmentPrefix + key.uppercased(),
            environmentAliases: environmentAliases,
            property: property,
            isAllowed: { value in Value(value).map(check) ?? false }
        )
    }
}
