/// Text from elsewhere (a payee's name, a server's message) made safe to show on a terminal or a screen.
///
/// A string that reaches a person can do more than say something: a backspace or an escape sequence rewrites what
/// is already on the terminal, a bidi override (U+202E) reorders the rest of the line, a zero-width or look-alike
/// blank (U+200B, U+2800, U+00A0) hides or imitates a separator. Every such character is shown as a visible escape
/// (`\u{202E}`) instead, and the text is bounded, so a name can say only what its visible characters say.
public enum DisplayText {
    /// How many characters of a name are shown before it is cut with `…`, escapes counted as shown: room for the
    /// longest name the ledger accepts (64 characters) and for a few escapes in one stored before that.
    public static let defaultNameLength = 100

    /// How many characters of a message (a reason, a problem's detail) are shown before it is cut with `…`.
    public static let defaultMessageLength = 500

    /// `text` with every unsafe character escaped, cut to `maximumLength` characters (escapes count as shown),
    /// not quoted; for a message or a field shown on its own.
    /// - Parameter keepingNewlines: keeps line feeds, for a multi-line message that is not mixed into another line.
    public static func escaped(
        _ text: String,
        maximumLength: Int = defaultMessageLength,
        keepingNewlines: Bool = false
    ) -> String {
        render(text, maximumLength: maximumLength, quoting: false, keepingNewlines: keepingNewlines)
    }

    /// `text` in double quotes, with every unsafe character, `"` and `\` escaped, cut to `maximumLength`
    /// characters; for a name inside a sentence, where the quotes show exactly where the name ends.
    public static func quoted(_ text: String, maximumLength: Int = defaultNameLength) -> String {
        "\"" + render(text, maximumLength: maximumLength, quoting: true, keepingNewlines: false) + "\""
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` written as HTML character references, for an element's text or a
    /// quoted attribute value: it can neither end them nor start markup. Only markup is escaped here; make the text
    /// safe to show first (``escaped(_:maximumLength:keepingNewlines:)``, ``quoted(_:maximumLength:)``) where it
    /// comes from elsewhere.
    public static func html(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// Whether `scalar` must not be shown as itself: it controls the terminal, formats or reorders text, is
    /// invisible, imitates a blank, or has no agreed glyph.
    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        if scalar == " " { return false }
        if lookAlikeBlanks.contains(scalar.value) { return true }
        let properties = scalar.properties
        if properties.isDefaultIgnorableCodePoint || properties.isBidiControl || properties.isWhitespace {
            return true
        }
        switch properties.generalCategory {
        case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator, .paragraphSeparator,
            .spaceSeparator:
            return true
        default:
            return false
        }
    }

    /// Blanks that Unicode counts as symbols or letters, not as white space, yet show nothing.
    static let lookAlikeBlanks: Set<UInt32> = [
        0x2800,  // BRAILLE PATTERN BLANK
        0x3164,  // HANGUL FILLER
        0xFFA0,  // HALFWIDTH HANGUL FILLER
        0x115F, 0x1160,  // HANGUL CHOSEONG / JUNGSEONG FILLER
        0x1D159,  // MUSICAL SYMBOL NULL NOTEHEAD
    ]

    private static func render(_ text: String, maximumLength: Int, quoting: Bool, keepingNewlines: Bool) -> String {
        let limit = max(1, maximumLength)
        var result = ""
        var shown = 0
        var previousWasBase = false
        var marks = 0
        for scalar in text.unicodeScalars {
            let piece: String
            var width = 1
            if keepingNewlines && scalar == "\n" {
                piece = "\n"
                previousWasBase = false
            } else if isUnsafe(scalar) {
                piece = "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                width = piece.count
                previousWasBase = false
            } else if quoting && (scalar == "\"" || scalar == "\\") {
                piece = "\\" + String(scalar)
                width = 2
                previousWasBase = true
            } else if joinsNext(scalar) {
                // A prepended character (U+0D4E) joins the character after it: the closing quote, or whatever
                // follows the name in the sentence.
                piece = "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                width = piece.count
                previousWasBase = false
            } else if joinsPrevious(scalar) {
                // A mark (or an emoji modifier) joins the character before it; at the start (or after an escape)
                // it would join the quote or the escape's brace and change how they look. A long run of them
                // stacks over the lines around it and escapes the length bound: beyond a few, they are escaped.
                marks += 1
                if previousWasBase && marks <= maximumMarks {
                    piece = String(scalar)
                    width = 0
                } else {
                    piece = "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                    width = piece.count
                    previousWasBase = false
                }
            } else {
                piece = String(scalar)
                previousWasBase = true
            }
            if width > 0 { marks = 0 }
            if shown + width > limit {
                result += "…"
                return result
            }
            result += piece
            shown += width
        }
        return result
    }

    /// How many combining marks in a row are shown as marks; scripts that stack several (Vietnamese, Devanagari,
    /// Tibetan) stay within it.
    static let maximumMarks = 8

    /// Whether `scalar` extends the character before it into one (a combining mark, an emoji modifier).
    private static func joinsPrevious(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII { return false }
        var pair = String.UnicodeScalarView()
        pair.append("a")
        pair.append(scalar)
        return String(pair).count == 1
    }

    /// Whether `scalar` joins the character after it into one (a prepended concatenation mark).
    private static func joinsNext(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII { return false }
        var pair = String.UnicodeScalarView()
        pair.append(scalar)
        pair.append("a")
        return String(pair).count == 1
    }
}
