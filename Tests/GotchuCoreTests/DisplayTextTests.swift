import Foundation
import GotchuCore
import Testing

@Suite("DisplayText: remote text shown safely", .timeLimit(.minutes(10)))
struct DisplayTextTests {
    /// The payee name that made `Pay $5.00⠀to⠀coffee? [y/N]` appear for a $500.00 session: eleven backspaces erase
    /// "Pay $500.00" on a terminal, braille blanks (U+2800) pose as spaces.
    static let forgedName = String(repeating: "\u{8}", count: 11) + "$5.00\u{2800}to\u{2800}coffee"

    @Test("Backspaces and braille blanks are escaped; the quoted name cannot erase or imitate the amount")
    func backspacesAndBrailleBlanks() {
        let shown = DisplayText.quoted(Self.forgedName)
        #expect(shown == "\"" + String(repeating: "\\u{8}", count: 11) + "$5.00\\u{2800}to\\u{2800}coffee\"")
        #expect(!shown.unicodeScalars.contains { $0.value < 0x20 || $0 == "\u{2800}" })
    }

    @Test(
        "Control, format, bidi, zero-width and look-alike blank characters become visible escapes",
        arguments: [
            ("bob\u{202E}00.005$", "bob\\u{202E}00.005$"),  // RIGHT-TO-LEFT OVERRIDE
            ("b\u{200B}ob", "b\\u{200B}ob"),  // ZERO WIDTH SPACE
            ("b\u{200D}ob\u{FEFF}", "b\\u{200D}ob\\u{FEFF}"),  // ZERO WIDTH JOINER, BYTE ORDER MARK
            ("\u{2066}bob\u{2069}", "\\u{2066}bob\\u{2069}"),  // LEFT-TO-RIGHT ISOLATE … POP
            ("\u{1B}[2J\u{1B}[Hbob", "\\u{1B}[2J\\u{1B}[Hbob"),  // ESC sequences: clear screen, cursor home
            ("\u{9B}31mbob", "\\u{9B}31mbob"),  // C1 CSI
            ("bob\rPay $1.00", "bob\\u{D}Pay $1.00"),
            ("bob\nPay $1.00", "bob\\u{A}Pay $1.00"),
            ("a\u{00A0}b\u{2003}c\u{3000}d\u{202F}e", "a\\u{A0}b\\u{2003}c\\u{3000}d\\u{202F}e"),  // look-alike spaces
            ("a\u{2028}b\u{2029}c", "a\\u{2028}b\\u{2029}c"),  // line and paragraph separators
            ("a\u{3164}b\u{AD}c", "a\\u{3164}b\\u{AD}c"),  // HANGUL FILLER, SOFT HYPHEN
            ("a\u{E0041}b", "a\\u{E0041}b"),  // TAG LATIN CAPITAL LETTER A (invisible)
            ("a\u{E000}b", "a\\u{E000}b"),  // private use
        ]
    )
    func escapes(input: String, expected: String) {
        #expect(DisplayText.escaped(input) == expected)
        #expect(DisplayText.quoted(input) == "\"" + expected + "\"")
    }

    @Test("For HTML, the five markup characters become references; everything else, as it is")
    func html() {
        #expect(
            DisplayText.html(#"<img src=x onerror="a('1')">&amp;"#)
                == "&lt;img src=x onerror=&quot;a(&#39;1&#39;)&quot;&gt;&amp;amp;"
        )
        #expect(DisplayText.html("Zoë's café 👋") == "Zoë&#39;s café 👋")
        #expect(DisplayText.html("") == "")
    }

    @Test("Ordinary names, accents, other scripts and emoji are shown as they are")
    func ordinaryText() {
        for name in ["bob", "Corner Café", "Zoë's", "José", "山田", "Ελένη", "bob 🍩", "e\u{301}"] {
            #expect(DisplayText.quoted(name) == "\"\(name)\"")
        }
    }

    @Test("Quotes and backslashes inside a quoted name are escaped, so the name cannot close its quotes")
    func quotes() {
        #expect(DisplayText.quoted(#"x" (bank.example) to "y"#) == #""x\" (bank.example) to \"y""#)
        #expect(DisplayText.quoted(#"a\u{202E}"#) == #""a\\u{202E}""#)
        #expect(DisplayText.escaped(#"say "hi""#) == #"say "hi""#)
    }

    @Test("A combining mark at the start would join the opening quote: escaped; after a letter it stays")
    func leadingMarks() {
        #expect(DisplayText.quoted("\u{301}bob") == #""\u{301}bob""#)
        #expect(DisplayText.quoted("\u{1F3FB}bob") == #""\u{1F3FB}bob""#)  // an emoji modifier
        #expect(DisplayText.quoted("b\u{301}ob") == "\"b\u{301}ob\"")
        #expect(DisplayText.quoted("\u{1F44D}\u{1F3FB}") == "\"\u{1F44D}\u{1F3FB}\"")
        // A prepended mark would join the closing quote.
        #expect(DisplayText.quoted("bob\u{D4E}") == #""bob\u{D4E}""#)
    }

    @Test("Very long text is cut with an ellipsis, escapes included in the count")
    func bounded() {
        let long = String(repeating: "a", count: 10_000)
        #expect(DisplayText.quoted(long) == "\"" + String(repeating: "a", count: 100) + "…\"")
        #expect(DisplayText.escaped(long, maximumLength: 10) == "aaaaaaaaaa…")
        #expect(DisplayText.escaped(String(repeating: "a", count: 10), maximumLength: 10) == "aaaaaaaaaa")
        let hostile = String(repeating: "\u{8}", count: 10_000)
        let shown = DisplayText.quoted(hostile)
        #expect(shown.count <= 100 + 3)
        #expect(shown.hasSuffix("…\""))
        // Marks add no width, but a flood of them is bounded too.
        let zalgo = "a" + String(repeating: "\u{301}", count: 10_000)
        #expect(DisplayText.quoted(zalgo).unicodeScalars.count < 200)
    }

    @Test("Kept line feeds for multi-line messages, still nothing else")
    func newlines() {
        #expect(DisplayText.escaped("one\ntwo\u{1B}[A", keepingNewlines: true) == "one\ntwo\\u{1B}[A")
    }

    @Test("The payer's offer shows the payee quoted, then its domain, both escaped")
    func offer() throws {
        let eid = try #require(EID(rawValue: "a1b2c3d4e5"))
        let offer = PaymentOffer(
            eid: eid,
            sessionID: "s",
            amountCents: 50_000,
            payeeName: Self.forgedName,
            payeeDomain: "attacker.test\u{202E}"
        )
        #expect(
            offer.payeeDescription
                == "\"" + String(repeating: "\\u{8}", count: 11)
                + "$5.00\\u{2800}to\\u{2800}coffee\" (attacker.test\\u{202E})"
        )
        let plain = PaymentOffer(eid: eid, sessionID: "s", amountCents: 1, payeeName: "bob")
        #expect(plain.payeeDescription == "\"bob\"")
    }

    @Test("Whatever the text, what is shown holds no unsafe character, stays bounded and keeps its quotes closed")
    func anyText() {
        var generator = SplitMix64(seed: 0x5AFE)
        // Ordinary letters mixed with every kind of character the renderer must catch.
        let pool: [ClosedRange<UInt32>] = [
            0x20...0x7E, 0x00...0x1F, 0x7F...0x9F, 0xA0...0xFF, 0x300...0x36F, 0x590...0x6FF, 0x2000...0x206F,
            0x2800...0x28FF, 0x3000...0x3164, 0xFE00...0xFFFF, 0xE0000...0xE007F, 0x1F300...0x1F64F,
        ]
        for _ in 0..<800 {
            var text = String.UnicodeScalarView()
            for _ in 0..<Int(generator.next() % 150) {
                let range = pool[Int(generator.next() % UInt64(pool.count))]
                let value = range.lowerBound + UInt32(generator.next() % UInt64(range.count))
                if let scalar = Unicode.Scalar(value) { text.append(scalar) }
            }
            let shown = DisplayText.quoted(String(text))
            #expect(!shown.unicodeScalars.contains { DisplayText.isUnsafe($0) }, "\(shown.debugDescription)")
            #expect(shown.hasPrefix("\"") && shown.hasSuffix("\""))
            // Inside the quotes, every quote is escaped: the name cannot end early.
            let inside = shown.dropFirst().dropLast().replacingOccurrences(of: "\\\\", with: "")
            #expect(!inside.replacingOccurrences(of: "\\\"", with: "").contains("\""), "\(shown.debugDescription)")
            #expect(shown.unicodeScalars.count <= 100 * 2 + 8 * 100 + 10)
        }
    }
}

/// A small seeded generator, so a failure can be replayed.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
