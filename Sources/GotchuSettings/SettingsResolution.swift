package import Foundation

/// A program's settings from every layer, highest precedence first: flags over the environment over the config file
/// over the built-in values. A setting's value is the highest layer's; only that value is checked, and an error
/// names the flag, variable or file key it came from.
package struct SettingsResolution<Schema: SettingsSchema>: Sendable {
    /// One layer and where it came from.
    package struct Layer: Sendable {
        /// Where the layer's values came from.
        package var origin: SettingOrigin
        /// The values.
        package var settings: SettingsLayer<Schema>

        /// Creates a layer.
        package init(origin: SettingOrigin, settings: SettingsLayer<Schema>) {
            self.origin = origin
            self.settings = settings
        }
    }

    /// The layers, highest precedence first.
    package var layers: [Layer]
    /// The config file that was read; `nil` when none was.
    package var file: URL?

    /// Lays the given layers over each other, highest precedence first.
    package init(layers: [Layer], file: URL? = nil) {
        self.layers = layers
        self.file = file
    }

    /// Reads the config file and the environment and lays `flags` over them, with the built-in values below.
    ///
    /// - Parameters:
    ///   - file: The config file, `.toml` or `.json`; `nil` for none.
    ///   - fileIsExplicit: Whether the operator named `file`. A named file must exist; a default one may be missing.
    ///   - environment: The process environment; only the schema's variables are read.
    ///   - flags: The command line's layer.
    /// - Throws: ``SettingsError`` naming the file, variable or flag of the first value that cannot be read.
    package init(
        file: URL?,
        fileIsExplicit: Bool,
        environment: [String: String],
        flags: SettingsLayer<Schema>
    ) throws(SettingsError) {
        let fileSettings = try file.flatMap { file throws(SettingsError) in
            try SettingsLayer<Schema>.load(file: file, isExplicit: fileIsExplicit)
        }
        var layers = [
            Layer(origin: .flags, settings: flags),
            Layer(origin: .environment, settings: try SettingsLayer(environment: environment)),
        ]
        if let file, let fileSettings { layers.append(Layer(origin: .file(file), settings: fileSettings)) }
        layers.append(Layer(origin: .defaults, settings: .builtIn))
        self.init(layers: layers, file: fileSettings == nil ? nil : file)
    }

    /// The declaration of the setting at `setting`.
    package static func declaration<Value>(_ setting: KeyPath<Schema, Setting<Value>>) -> SettingDeclaration {
        let key = Schema()[keyPath: setting].key
        guard let declaration = Schema.declaration(for: key) else {
            preconditionFailure("\(key) is not a stored property of \(Schema.self)")
        }
        return declaration
    }

    /// The highest layer that sets `setting`.
    package func layer<Value>(of setting: KeyPath<Schema, Setting<Value>>) -> Layer? {
        layers.first { $0.settings[dynamicMember: setting] != nil }
    }

    /// The setting as the operator wrote it in `layer`: `--session-lifetime`, `GOTCHU_KIOSK_SESSION_LIFETIME`,
    /// `session_lifetime in /etc/gotchu/kiosk.toml`.
    package func name<Value>(of setting: KeyPath<Schema, Setting<Value>>, in layer: Layer) -> String {
        let declaration = Self.declaration(setting)
        if layer.origin == .environment { return layer.settings.variable(for: declaration) }
        return layer.origin.name(of: declaration)
    }

    /// Everywhere `setting` can be set, for an error that says it is missing: "session_lifetime in FILE,
    /// GOTCHU_KIOSK_SESSION_LIFETIME or --session-lifetime".
    package func whereToSet<Value>(_ setting: KeyPath<Schema, Setting<Value>>, file: URL?) -> String {
        let declaration = Self.declaration(setting)
        let inFile = declaration.isSecret ? [] : [file.map { "\(declaration.key) in \($0.path)" } ?? declaration.key]
        return Setting<String>.list(inFile + [declaration.environmentVariable, declaration.flag], or: "or")
    }

    /// The value of `setting`: the highest layer's, within its bounds; `nil` when no layer sets it.
    package func value<Value>(_ setting: KeyPath<Schema, Setting<Value>>) throws(SettingsError) -> Value? {
        try value(setting) { value, _ throws(SettingProblem) in value }
    }

    /// The value of `setting` read by `parse`, which is told the layer it came from (to take a relative path from a
    /// config file's directory); `nil` when no layer sets it.
    package func value<Value, Parsed>(
        _ setting: KeyPath<Schema, Setting<Value>>,
        _ parse: (Value, SettingOrigin) throws(SettingProblem) -> Parsed
    ) throws(SettingsError) -> Parsed? {
        guard let layer = layer(of: setting), let value = layer.settings[dynamicMember: setting] else { return nil }
        let declaration = Self.declaration(setting)
        guard declaration.isAllowed(value.settingValue) else {
            let got = declaration.isSecret ? "" : ", got \(value.settingValue)"
            throw SettingsError("\(name(of: setting, in: layer)): must be \(declaration.expected)\(got)")
        }
        do {
            return try parse(value, layer.origin)
        } catch {
            throw SettingsError("\(name(of: setting, in: layer)): \(error.text)")
        }
    }

    /// As ``value(_:_:)``, for a parser that does not care where the value came from.
    package func value<Value, Parsed>(
        _ setting: KeyPath<Schema, Setting<Value>>,
        _ parse: (Value) throws(SettingProblem) -> Parsed
    ) throws(SettingsError) -> Parsed? {
        try value(setting) { value, _ throws(SettingProblem) in try parse(value) }
    }

    /// The value of a setting that has a built-in value, or that must be set.
    ///
    /// - Throws: ``SettingsError`` when no layer sets it, saying where to set it.
    package func required<Value>(_ setting: KeyPath<Schema, Setting<Value>>) throws(SettingsError) -> Value {
        try required(setting) { value, _ throws(SettingProblem) in value }
    }

    /// As ``required(_:)``, read by `parse`.
    package func required<Value, Parsed>(
        _ setting: KeyPath<Schema, Setting<Value>>,
        _ parse: (Value, SettingOrigin) throws(SettingProblem) -> Parsed
    ) throws(SettingsError) -> Parsed {
        guard let parsed = try value(setting, parse) else {
            throw SettingsError("\(Self.declaration(setting).key) is not set: set \(whereToSet(setting, file: file))")
        }
        return parsed
    }

    /// As ``required(_:)``, read by a parser that does not care where the value came from.
    package func required<Value, Parsed>(
        _ setting: KeyPath<Schema, Setting<Value>>,
        _ parse: (Value) throws(SettingProblem) -> Parsed
    ) throws(SettingsError) -> Parsed {
        try required(setting) { value, _ throws(SettingProblem) in try parse(value) }
    }
}

extension SettingOrigin {
    /// A path: absolute, or relative to this layer's directory (a config file's, else the working directory).
    package func path(_ text: String) throws(SettingProblem) -> URL {
        guard !text.isEmpty else { throw SettingProblem("must be a path, not empty") }
        guard !text.contains("\0") else { throw SettingProblem("must not contain a NUL character") }
        if text.hasPrefix("/") { return URL(fileURLWithPath: text).standardizedFileURL }
        return baseDirectory.appendingPathComponent(text).standardizedFileURL
    }
}
