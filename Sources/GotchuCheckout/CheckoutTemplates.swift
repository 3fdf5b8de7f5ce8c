import Mustache

/// The checkout's templates (`Templates/`), compiled into the binary and parsed once. Every `{{value}}` in them is
/// escaped for HTML; none uses the unescaped form, so nothing from elsewhere reaches a page as markup.
enum CheckoutTemplates {
    /// Every template by its file's name, the partials and the layout among them.
    static let library: MustacheLibrary = {
        let sources: [String: [UInt8]] = [
            "layout": PackageResources.layout_mustache,
            "session": PackageResources.session_mustache,
            "sign-in": PackageResources.sign_in_mustache,
            "sign-in-form": PackageResources.sign_in_form_mustache,
            "outcome": PackageResources.outcome_mustache,
            "paid": PackageResources.paid_mustache,
            "summary": PackageResources.summary_mustache,
            "verification": PackageResources.verification_mustache,
            "reference": PackageResources.reference_mustache,
            "status": PackageResources.status_mustache,
        ]
        var library = MustacheLibrary()
        for (name, bytes) in sources {
            // The templates are part of this build: one that does not parse is a programming error, which the
            // tests of every page find.
            try! library.register(String(decoding: bytes, as: UTF8.self), named: name)
        }
        return library
    }()

    /// `name` rendered with `layers`: a name is read from the last layer that has it (not `nil`), then the one
    /// before, so a page's own values and its layout's share one context.
    static func render(_ name: String, _ layers: [Any]) -> String {
        guard let template = library.getTemplate(named: name) else {
            preconditionFailure("no checkout template \(name)")
        }
        return template.render(Layers(layers: layers), library: library)
    }

    /// Values read by name from the last of several that has one.
    private struct Layers: MustacheParent {
        let layers: [Any]

        func child(named name: String) -> Any? {
            for layer in layers.reversed() {
                guard let value = Mirror(reflecting: layer).children.first(where: { $0.label == name })?.value else {
                    continue
                }
                // A nil optional is no value: the layer before may have one.
                let optional = Mirror(reflecting: value)
                if optional.displayStyle == .optional {
                    guard let wrapped = optional.children.first?.value else { continue }
                    return wrapped
                }
                return value
            }
            return nil
        }
    }
}
