import Foundation

/// Look-alike text, after Unicode Technical Standard #39 (Unicode Security Mechanisms): the *skeleton* that two
/// strings share when they look the same, and whether a string mixes scripts (Latin letters with Cyrillic or Greek
/// ones), which is how most look-alikes are made.
///
/// No Unicode-security library is at hand, so both are approximations, kept small on purpose:
///
/// - The skeleton is UTS #39's (NFD, default-ignorable code points removed, each code point mapped to its prototype,
///   NFD again), with NFKC and lowercasing first, so full-width (`ｚ`), mathematical (`𝐳`) and other compatibility
///   forms fold to their plain letters before the table is consulted. The table (``prototypes``) is a hand-picked
///   subset of Unicode's `confusables.txt` (https://www.unicode.org/Public/security/latest/confusables.txt, UTS #39
///   version 15.1): the Cyrillic, Greek, Armenian and Latin-extended letters that look like a lowercase Latin letter,
///   the digits `0` and `1`, and the three Latin letters confusables.txt maps to two (`m` → `rn`, `w` → `vv`,
///   `d` → `cl`). It does not cover other scripts (Cherokee, Coptic, …), symbols, or look-alikes that depend on one
///   font; it is meant for e-mail addresses, which the ledger keeps lowercase.
/// - Scripts come from code-point ranges (``script(of:)``), not from Unicode's Scripts.txt: the common alphabets and
///   the East Asian scripts are told apart, every other letter counts as ``Script/other``, so two unlisted scripts
///   mixed together go unnoticed. The allowed combinations follow UTS #39's "highly restrictive" level: one script,
///   or Latin with Han and Japanese kana, with Han and Bopomofo, or with Han and Hangul.
public enum ConfusableText {
    /// The scripts ``script(of:)`` tells apart.
    enum Script: String, Sendable, Hashable, CaseIterable {
        case latin, greek, cyrillic, armenian, hebrew, arabic, georgian, cherokee
        case han, hiragana, katakana, hangul, bopomofo
        /// Any other letter.
        case other
    }

    /// The skeleton of `text`: equal for two strings that a reader cannot tell apart, as far as the table knows.
    public static func skeleton(_ text: String) -> String {
        let folded = text.precomposedStringWithCompatibilityMapping.lowercased()
        var result = String.UnicodeScalarView()
        for scalar in folded.decomposedStringWithCanonicalMapping.unicodeScalars
        where !scalar.properties.isDefaultIgnorableCodePoint {
            if let prototype = prototypes[scalar] {
                result.append(contentsOf: prototype.unicodeScalars)
            } else {
                result.append(scalar)
            }
        }
        return String(result).decomposedStringWithCanonicalMapping
    }

    /// The scripts of the letters of `text` (digits, punctuation and combining marks belong to none).
    static func scripts(of text: String) -> Set<Script> {
        Set(text.unicodeScalars.compactMap(script(of:)))
    }

    /// Whether `text` holds letters of scripts that are not normally written together, such as Latin with Cyrillic.
    public static func mixesScripts(_ text: String) -> Bool {
        let found = scripts(of: text)
        guard found.count > 1 else { return false }
        return !allowedCombinations.contains { found.isSubset(of: $0) }
    }

    /// The scripts UTS #39's "highly restrictive" level lets one string combine.
    private static let allowedCombinations: [Set<Script>] = [
        [.latin, .han, .hiragana, .katakana], [.latin, .han, .bopomofo], [.latin, .han, .hangul],
    ]

    /// The script of a letter, by code-point range; `nil` for what is not a letter (digits, punctuation, marks).
    static func script(of scalar: Unicode.Scalar) -> Script? {
        guard scalar.properties.isAlphabetic else { return nil }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: return nil
        default: break
        }
        let value = scalar.value
        for (range, script) in scriptRanges where range.contains(value) { return script }
        return .other
    }

    private static let scriptRanges: [(ClosedRange<UInt32>, Script)] = [
        (0x0041...0x024F, .latin), (0x0250...0x02AF, .latin), (0x1D00...0x1D7F, .latin), (0x1E00...0x1EFF, .latin),
        (0x2C60...0x2C7F, .latin), (0xA720...0xA7FF, .latin), (0xAB30...0xAB6F, .latin), (0xFB00...0xFB06, .latin),
        (0xFF21...0xFF3A, .latin), (0xFF41...0xFF5A, .latin),
        (0x0370...0x03FF, .greek), (0x1F00...0x1FFF, .greek),
        (0x0400...0x052F, .cyrillic), (0x1C80...0x1C8F, .cyrillic), (0x2DE0...0x2DFF, .cyrillic),
        (0xA640...0xA69F, .cyrillic),
        (0x0530...0x058F, .armenian), (0xFB13...0xFB17, .armenian),
        (0x0590...0x05FF, .hebrew), (0xFB1D...0xFB4F, .hebrew),
        (0x0600...0x06FF, .arabic), (0x0750...0x077F, .arabic), (0x08A0...0x08FF, .arabic), (0xFB50...0xFDFF, .arabic),
        (0xFE70...0xFEFF, .arabic),
        (0x10A0...0x10FF, .georgian), (0x1C90...0x1CBF, .georgian), (0x2D00...0x2D2F, .georgian),
        (0x13A0...0x13FF, .cherokee), (0xAB70...0xABBF, .cherokee),
        (0x2E80...0x2FDF, .han), (0x3005...0x3007, .han), (0x3021...0x3029, .han), (0x3038...0x303B, .han),
        (0x3400...0x4DBF, .han), (0x4E00...0x9FFF, .han), (0xF900...0xFAFF, .han), (0x20000...0x3FFFF, .han),
        (0x3040...0x309F, .hiragana),
        (0x30A0...0x30FF, .katakana), (0x31F0...0x31FF, .katakana), (0xFF66...0xFF9F, .katakana),
        (0x1100...0x11FF, .hangul), (0x3130...0x318F, .hangul), (0xAC00...0xD7AF, .hangul), (0xFFA0...0xFFDC, .hangul),
        (0x3100...0x312F, .bopomofo), (0x31A0...0x31BF, .bopomofo),
    ]

    /// Each look-alike and the lowercase Latin text it is read as (see the type's documentation for the source).
    /// Keys are lowercase and in NFD, as ``skeleton(_:)`` looks them up; values are prototypes, which map to nothing
    /// further (so `m`, `w` and `d` never appear in one: a look-alike of `w` maps to `vv`).
    static let prototypes: [Unicode.Scalar: String] = [
        // Cyrillic.
        "\u{0430}": "a", "\u{0441}": "c", "\u{0501}": "cl", "\u{0435}": "e", "\u{04BD}": "e", "\u{0433}": "r",
        "\u{0491}": "r", "\u{04BB}": "h", "\u{0456}": "i", "\u{0458}": "j", "\u{043A}": "k", "\u{04CF}": "l",
        "\u{043E}": "o", "\u{0440}": "p", "\u{051B}": "q", "\u{0455}": "s", "\u{0442}": "t", "\u{0438}": "u",
        "\u{0475}": "v", "\u{051D}": "vv", "\u{0445}": "x", "\u{0443}": "y", "\u{04AF}": "y", "\u{0437}": "3",
        "\u{0431}": "6", "\u{044C}": "b", "\u{043F}": "n", "\u{043C}": "rn", "\u{04E9}": "o",
        // Greek.
        "\u{03B1}": "a", "\u{03B2}": "b", "\u{03B3}": "y", "\u{03B5}": "e", "\u{03B7}": "n", "\u{03B9}": "i",
        "\u{03BA}": "k", "\u{03BD}": "v", "\u{03BF}": "o", "\u{03C1}": "p", "\u{03C3}": "o", "\u{03C4}": "t",
        "\u{03C5}": "u", "\u{03C7}": "x", "\u{03C9}": "vv", "\u{03F2}": "c", "\u{03F3}": "j", "\u{03BC}": "u",
        // Armenian.
        "\u{0561}": "vv", "\u{0563}": "q", "\u{0566}": "q", "\u{0570}": "h", "\u{0578}": "n", "\u{057D}": "u",
        "\u{0581}": "g", "\u{0585}": "o",
        // Latin letters outside ASCII that read as ASCII ones.
        "\u{0131}": "i", "\u{0237}": "j", "\u{0251}": "a", "\u{0261}": "g", "\u{0269}": "i", "\u{026A}": "i",
        "\u{028F}": "y", "\u{1D0F}": "o", "\u{1D1C}": "u", "\u{1D20}": "v", "\u{1D21}": "vv", "\u{1D22}": "z",
        "\u{0138}": "k",
        // ASCII look-alikes within Latin: digits and letters, and the letters read as two.
        "0": "o", "1": "l", "|": "l", "m": "rn", "w": "vv", "d": "cl",
    ]
}
