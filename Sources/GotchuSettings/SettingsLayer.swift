package import Foundation
import TOMLKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One layer of a program's settings: the built-in values, a config file, the environment or the command line.
///
/// A setting the layer does not hold is `nil`: "this layer says nothing, ask the one below". Values are kept as they
/// were written, checked for their kind (a whole number is a whole number) but not yet for their bounds;
/// ``SettingsResolution`` checks the value that wins and names the layer it came from. Each setting reads as a
/// property of the layer, by its name in the schema (`layer.sessionLifetime = 30`).
@dynamicMemberLookup
package struct SettingsLayer<Schema: SettingsSchema>: Hashable, Sendable {
    /// The values set, by key.
    package private(set) var values: [String: SettingValue] = [:]
    /// For a value read from an environment variable other than the setting's own (an alias), that variable.
    var variables: [String: String] = [:]

    /// An empty layer.
    package init() {}

    /// A layer with the values `build` sets: `KioskSettings { $0.server = "https://…"; $0.sessionLifetime = 30 }`.
    package init(_ build: (inout Self) -> Void) {
        build(&self)
    }

    /// The value of a setting, by its property in the schema.
    package subscript<Value>(dynamicMember setting: KeyPath<Schema, Setting<Value>>) -> Value? {
        get { values[Schema()[keyPath: setting].key].flatMap(Value.init) }
        set { values[Schema()[keyPath: setting].key] = newValue?.settingValue }
    }

    /// The value of a setting, by its key.
    package subscript(key: String) -> SettingValue? {
        values[key]
    }

    /// Every setting, in the order of the schema.
    package static var declarations: [SettingDeclaration] { Schema.declarations }

    /// The config file's keys, in the order of the schema.
    package static var keys: [String] { declarations.map(\.key) }

    /// The built-in layer, below all others: the built-in value of every setting that has one.
    package static var builtIn: Self {
        var layer = Self()
        for declaration in declarations {
            layer.values[declaration.key] = declaration.defaultValue
        }
        return layer
    }

    /// The name of the environment variable this layer read `declaration` from.
    func variable(for declaration: SettingDeclaration) -> String {
        variables[declaration.key] ?? declaration.environmentVariable
    }
}

// MARK: - The environment

extension SettingsLayer {
    /// Reads the settings' variables of `environment`, such as `GOTCHU_KIOSK_SERVER`.
    ///
    /// An empty variable counts as unset, as in `GOTCHU_KIOSK_ADAPTER= gotchu kiosk`. A variable with the prefix
    /// that names no setting is an error, as an unknown key in a file is, and so is a value that does not read as
    /// its setting's kind (a whole number; `true`/`false`, `yes`/`no`, `on`/`off` or `1`/`0`).
    package init(environment: [String: String]) throws(SettingsError) {
        self.init()
        let declarations = Schema.declarations
        let known = Set(declarations.map(\.environmentVariable)).union(Schema.otherEnvironmentVariables)
        for name in environment.keys.sorted() where name.hasPrefix(Schema.environmentPrefix) && !known.contains(name) {
            throw SettingsError(
                "\(name) is not a \(Schema.subject) setting; the variables are "
                    + declarations.map(\.environmentVariable).joined(separator: ", ")
            )
        }
        for declaration in declarations {
            let names = [declaration.environmentVariable] + declaration.environmentAliases
            guard let name = names.first(where: { environment[$0]?.isEmpty == false }), let text = environment[name]
            else { continue }
            try set(declaration, text: text, name: name)
            if name != declaration.environmentVariable { variables[declaration.key] = name }
        }
    }

    /// Sets `declaration` from the text of a variable or a flag called `name`.
    mutating func set(_ declaration: SettingDeclaration, text: String, name: String) throws(SettingsError) {
        guard let value = declaration.kind.parse(text) else {
            let got = declaration.isSecret ? "" : ", got \(SettingValue.text(text))"
            throw SettingsError("\(name): must be \(declaration.expected)\(got)")
        }
        values[declaration.key] = value
    }
}

// MARK: - Config files

extension SettingsLayer: Codable {
    /// Any key a file may hold, so that unknown ones can be named.
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Decodes a config file's layer, refusing unknown keys, secrets and values of the wrong kind, with the key in
    /// the coding path.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        let declarations = Schema.declarations
        let keys = declarations.map(\.key)
        if let unknown = container.allKeys.map(\.stringValue).sorted().first(where: { !keys.contains($0) }) {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription: "unknown setting \"\(unknown)\"; the settings are \(keys.joined(separator: ", "))"
                )
            )
        }
        self.init()
        for declaration in declarations {
            let key = AnyKey(stringValue: declaration.key)
            guard container.contains(key) else { continue }
            if declaration.isSecret {
                throw DecodingError.dataCorrupted(
                    DecodingError.Context(
                        codingPath: container.codingPath + [key],
                        debugDescription:
                            "is a secret and is never read from a config file: set \(declaration.environmentVariable) "
                            + "or name a file that holds it"
                    )
                )
            }
            values[declaration.key] = try Self.value(declaration, container, key)
        }
    }

    /// Encodes the settings that are set, under the config file's keys.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        for declaration in Schema.declarations {
            let key = AnyKey(stringValue: declaration.key)
            switch values[declaration.key] {
            case .text(let text)?: try container.encode(text, forKey: key)
            case .integer(let integer)?: try container.encode(integer, forKey: key)
            case .number(let number)?: try container.encode(number, forKey: key)
            case .flag(let flag)?: try container.encode(flag, forKey: key)
            case .integers(let integers)?: try container.encode(integers, forKey: key)
            case nil: break
            }
        }
    }

    /// Decoders differ in what they throw for a value of the wrong type (TOMLKit says the key is missing), so every
    /// failure of a present key becomes one `typeMismatch` that says what was expected.
    private static func value(
        _ declaration: SettingDeclaration,
        _ container: KeyedDecodingContainer<AnyKey>,
        _ key: AnyKey
    ) throws -> SettingValue? {
        do {
            switch declaration.kind {
            case .text: return try container.decodeIfPresent(String.self, forKey: key).map(SettingValue.text)
            case .integer: return try container.decodeIfPresent(Int.self, forKey: key).map(SettingValue.integer)
            case .flag: return try container.decodeIfPresent(Bool.self, forKey: key).map(SettingValue.flag)
            case .integers: return try container.decodeIfPresent([Int].self, forKey: key).map(SettingValue.integers)
            case .number:
                // A rate of 10 is written 10 as often as 10.0.
                if let integer = try? container.decodeIfPresent(Int.self, forKey: key) {
                    return .number(Double(integer))
                }
                return try container.decodeIfPresent(Double.self, forKey: key).map(SettingValue.number)
            }
        } catch {
            throw DecodingError.typeMismatch(
                SettingValue.self,
                DecodingError.Context(
                    codingPath: container.codingPath + [key],
                    debugDescription: "must be \(declaration.expected)",
                    underlyingError: error
                )
            )
        }
    }

    /// Reads a config file: TOML for `.toml`, JSON for `.json`.
    ///
    /// - Returns: The file's layer, or `nil` when the file does not exist and `isExplicit` is false.
    /// - Throws: ``SettingsError`` for a named file that does not exist, a file that cannot be read or parsed, an
    ///   unknown key, a secret or a value of the wrong kind; the message names the file and the key.
    package static func load(file: URL, isExplicit: Bool) throws(SettingsError) -> Self? {
        let path = file.path
        var status = stat()
        if stat(path, &status) != 0 {
            let code = errno
            if code == ENOENT || code == ENOTDIR {
                guard isExplicit else { return nil }
                throw SettingsError("config file \(path) does not exist")
            }
            throw SettingsError("cannot read config file \(path): \(String(cString: strerror(code)))")
        }
        guard status.st_mode & mode_t(S_IFMT) == mode_t(S_IFREG) else {
            throw SettingsError("config file \(path) is not a regular file")
        }
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw SettingsError("cannot read config file \(path): \(error.localizedDescription)")
        }
        return try decode(data, file: file)
    }

    /// Parses a config file's contents; `file` names the format (by its extension) and the file in errors.
    package static func decode(_ data: Data, file: URL) throws(SettingsError) -> Self {
        let path = file.path
        switch file.pathExtension.lowercased() {
        case "toml":
            guard let text = String(data: data, encoding: .utf8) else {
                throw SettingsError("config file \(path) is not UTF-8 text")
            }
            let table: TOMLTable
            do {
                table = try TOMLTable(string: text)
            } catch let error as TOMLParseError {
                throw SettingsError(
                    "config file \(path) is not valid TOML: line \(error.source.begin.line), column "
                        + "\(error.source.begin.column): \(error.description)"
                )
            } catch {
                throw SettingsError("config file \(path) is not valid TOML: \(error)")
            }
            do {
                return try TOMLDecoder().decode(Self.self, from: table)
            } catch {
                throw describe(error, path: path)
            }
        case "json":
            // JSONDecoder says only that a document is not JSON; JSONSerialization says where.
            do {
                _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            } catch {
                let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
                throw SettingsError("config file \(path) is not valid JSON: \(reason)")
            }
            do {
                return try JSONDecoder().decode(Self.self, from: data)
            } catch {
                throw describe(error, path: path)
            }
        default:
            throw SettingsError("config file \(path): unknown format \"\(file.pathExtension)\"; name it .toml or .json")
        }
    }

    private static func describe(_ error: any Error, path: String) -> SettingsError {
        guard let error = error as? DecodingError else { return SettingsError("config file \(path): \(error)") }
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c), .dataCorrupted(let c):
            context = c
        @unknown default:
            return SettingsError("config file \(path): \(error)")
        }
        let key = context.codingPath.map(\.stringValue).joined(separator: ".")
        // A syntax error says where it is only in the underlying error.
        let detail = context.underlyingError.map { "\(context.debugDescription) \($0)" } ?? context.debugDescription
        if key.isEmpty { return SettingsError("config file \(path): \(detail)") }
        return SettingsError("\(key) in \(path): \(context.debugDescription)")
    }
}
