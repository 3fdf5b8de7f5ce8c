package import ArgumentParser

extension Setting {
    /// The setting's help for its command-line option: its summary, its built-in value and its value's name.
    package var help: ArgumentHelp {
        var notes: [String] = bounds.map { [$0] } ?? []
        switch defaultValue?.settingValue {
        case .text(let text)?: notes.append("default: \(text)")
        case .some(let value): notes.append("default: \(value)")
        case nil: break
        }
        guard !notes.isEmpty else { return ArgumentHelp(summary, valueName: valueName) }
        let sentence = summary.hasSuffix(".") ? String(summary.dropLast()) : summary
        return ArgumentHelp(sentence + " (" + notes.joined(separator: "; ") + ").", valueName: valueName)
    }
}

extension SettingsLayer {
    /// The command line's layer: every option of `options` (and of its option groups) that has the name of a setting
    /// of the schema, read as the environment is read and named by its flag in errors.
    ///
    /// A setting's option is `@Option(help: Schema().sessionLifetime.help) var sessionLifetime: String?`, or for a yes or no
    /// `@Flag(inversion: .prefixedNo, help: …) var renewExpiredSessions: Bool?`: optional, so that an option left out
    /// leaves the layers below to speak, and text, so that a bad value is reported as a bad file value or variable is.
    package init(flags options: some ParsableArguments) throws(SettingsError) {
        self.init()
        let declarations = Dictionary(uniqueKeysWithValues: Schema.declarations.map { ($0.property, $0) })
        try read(options, declarations)
    }

    private mutating func read(
        _ options: any ParsableArguments,
        _ declarations: [String: SettingDeclaration]
    ) throws(SettingsError) {
        for child in Mirror(reflecting: options).children {
            if let group = child.value as? any SettingsOptionGroup {
                try read(group.options, declarations)
                continue
            }
            guard let label = child.label, label.hasPrefix("_"),
                let declaration = declarations[String(label.dropFirst())]
            else { continue }
            switch child.value {
            case let option as Option<String?>:
                if let text = option.wrappedValue { try set(declaration, text: text, name: declaration.flag) }
            case let flag as Flag<Bool?>:
                if let value = flag.wrappedValue { try set(declaration, text: String(value), name: declaration.flag) }
            default:
                preconditionFailure("the option \(label.dropFirst()) of \(type(of: options)) must be String? or Bool?")
            }
        }
    }
}

/// An `@OptionGroup`, whose options may be settings too.
private protocol SettingsOptionGroup {
    var options: any ParsableArguments { get }
}

extension OptionGroup: SettingsOptionGroup {
    fileprivate var options: any ParsableArguments { wrappedValue }
}
