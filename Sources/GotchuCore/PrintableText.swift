/// Text a person typed that is stored and shown to someone else (an order reference, an operator's reason): checked
/// where it enters, so nothing stored can rewrite a terminal, reorder a line or hide what it says.
public enum PrintableText {
    /// Why `text` cannot be kept, or `nil` when it is 1 to `maximumLength` Unicode scalars of printable text with no
    /// white space at either end: no control, format, bidi, invisible or look-alike blank characters
    /// (``DisplayText/isUnsafe(_:)``), spaces only inside. The reason reads after the field's name
    /// ("must not be empty").
    public static func problem(in text: String, maximumLength: Int) -> String? {
        let scalars = text.unicodeScalars
        guard !scalars.isEmpty else { return "must not be empty" }
        guard scalars.count <= maximumLength else {
            return "must be at most \(maximumLength) characters, got \(scalars.count)"
        }
        guard scalars.first != " ", scalars.last != " " else { return "must not start or end with a space" }
        if let bad = scalars.first(where: DisplayText.isUnsafe) {
            return "must be printable text; it holds U+\(String(bad.value, radix: 16, uppercase: true))"
        }
        return nil
    }
}

/// A merchant's own reference for a charge (an order or table number): kept with the payment session, shown to its
/// payers as plain text, and carried in its status, its payee's wallet entries, its webhook events and receipts.
public enum OrderReference {
    /// The longest reference, in Unicode scalars.
    public static let maximumLength = 128

    /// Why `text` cannot be a reference (``PrintableText/problem(in:maximumLength:)``), or `nil`.
    public static func problem(in text: String) -> String? {
        PrintableText.problem(in: text, maximumLength: maximumLength)
    }
}
