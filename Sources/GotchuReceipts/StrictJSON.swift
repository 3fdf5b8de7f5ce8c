import GotchuCore

/// A strict check of JSON text (RFC 8259) that Foundation's decoder does not make: that no object names a key twice.
///
/// `{"amount_cents":700,"amount_cents":999999}` is one receipt to Foundation (which keeps the first) and another to
/// Python or JavaScript (which keep the last), so text that anyone else may read must not be ambiguous that way.
/// The check reads the whole grammar as it goes, so it also refuses what is not JSON at all.
public enum StrictJSON {
    /// Why a text is refused, for a person.
    public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// What is wrong, and where.
        public var description: String

        init(_ description: String, at offset: Int) {
            self.description = "\(description) at byte \(offset)"
        }
    }

    /// Checks that `bytes` hold exactly one JSON value (with whitespace around it) in which no object names a key
    /// twice (keys compared once their escapes are read, so `"a"` and `"\u0061"` are one key), nested at most
    /// `maximumDepth` deep. Returns, when the value is an object, the byte range in `bytes` of each of its members'
    /// values (offsets from the start of `bytes`), so a caller can look at the exact text of one member.
    public static func check(
        _ bytes: some Collection<UInt8>,
        maximumDepth: Int = 64
    ) throws(Failure) -> [String: Range<Int>] {
        var parser = Parser(bytes: Array(bytes), maximumDepth: maximumDepth)
        parser.skipWhitespace()
        let members = try parser.value(depth: 0, collecting: true)
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw Failure("text after the JSON value", at: parser.index) }
        return members
    }

    /// Whether `byte` is JSON whitespace.
    public static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    private struct Parser {
        let bytes: [UInt8]
        let maximumDepth: Int
        var index = 0

        init(bytes: [UInt8], maximumDepth: Int) {
            self.bytes = bytes
            self.maximumDepth = maximumDepth
        }

        mutating func skipWhitespace() {
            while index < bytes.count, StrictJSON.isWhitespace(bytes[index]) { index += 1 }
        }

        func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func expect(_ byte: UInt8) throws(Failure) {
            guard peek() == byte else { throw fail("expected '\(Character(Unicode.Scalar(byte)))'") }
            index += 1
        }

        func fail(_ what: String) -> Failure {
            guard let byte = peek() else { return Failure("\(what), not the end of the text", at: index) }
            let shown = (0x21...0x7E).contains(byte) ? what : "\(what) (byte 0x\(String(byte, radix: 16)))"
            return Failure(shown, at: index)
        }

        /// Reads one value; for an object read with `collecting`, returns its members' value ranges.
        mutating func value(depth: Int, collecting: Bool = false) throws(Failure) -> [String: Range<Int>] {
            guard let byte = peek() else { throw fail("expected a JSON value") }
            switch byte {
            case UInt8(ascii: "{"):
                return try object(depth: depth + 1, collecting: collecting)
            case UInt8(ascii: "["):
                try array(depth: depth + 1)
            case UInt8(ascii: "\""):
                _ = try string()
            case UInt8(ascii: "t"):
                try literal("true")
            case UInt8(ascii: "f"):
                try literal("false")
            case UInt8(ascii: "n"):
                try literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                try number()
            default:
                throw fail("expected a JSON value")
            }
            return [:]
        }

        mutating func object(depth: Int, collecting: Bool) throws(Failure) -> [String: Range<Int>] {
            guard depth <= maximumDepth else { throw fail("nested deeper than \(maximumDepth)") }
            index += 1
            var members: [String: Range<Int>] = [:]
            var keys = Set<String>()
            skipWhitespace()
            if peek() == UInt8(ascii: "}") {
                index += 1
                return members
            }
            while true {
                skipWhitespace()
                let keyStart = index
                guard peek() == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let key = try string()
                guard keys.insert(key).inserted else {
                    throw Failure("the key \"\(DisplayText.escaped(key))\" appears twice in one object", at: keyStart)
                }
                skipWhitespace()
                try expect(UInt8(ascii: ":"))
                skipWhitespace()
                let start = index
                _ = try value(depth: depth)
                if collecting { members[key] = start..<index }
                skipWhitespace()
                if peek() == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "}"))
                return members
            }
        }

        mutating func array(depth: Int) throws(Failure) {
            guard depth <= maximumDepth else { throw fail("nested deeper than \(maximumDepth)") }
            index += 1
            skipWhitespace()
            if peek() == UInt8(ascii: "]") {
                index += 1
                return
            }
            while true {
                skipWhitespace()
                _ = try value(depth: depth)
                skipWhitespace()
                if peek() == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "]"))
                return
            }
        }

        mutating func literal(_ word: String) throws(Failure) {
            let text = Array(word.utf8)
            guard bytes.count - index >= text.count, bytes[index..<index + text.count].elementsEqual(text) else {
                throw fail("expected \(word)")
            }
            index += text.count
        }

        mutating func digits() throws(Failure) {
            guard let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else {
                throw fail("expected a digit")
            }
            while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
        }

        mutating func number() throws(Failure) {
            if peek() == UInt8(ascii: "-") { index += 1 }
            if peek() == UInt8(ascii: "0") {
                index += 1
            } else {
                try digits()
            }
            if peek() == UInt8(ascii: ".") {
                index += 1
                try digits()
            }
            if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
                index += 1
                if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
                try digits()
            }
        }

        /// Reads a string and returns its value.
        mutating func string() throws(Failure) -> String {
            let start = index
            index += 1
            var scalars = String.UnicodeScalarView()
            var run = index
            while true {
                guard let byte = peek() else { throw Failure("a string that does not end", at: start) }
                switch byte {
                case UInt8(ascii: "\""):
                    try append(run..<index, to: &scalars)
                    index += 1
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    try append(run..<index, to: &scalars)
                    index += 1
                    scalars.append(try escape())
                    run = index
                case 0..<0x20:
                    throw fail("a control character in a string")
                default:
                    index += 1
                }
            }
        }

        /// Appends the raw bytes in `range`, which must be UTF-8.
        func append(_ range: Range<Int>, to scalars: inout String.UnicodeScalarView) throws(Failure) {
            guard !range.isEmpty else { return }
            guard let text = String(validating: bytes[range], as: UTF8.self) else {
                throw Failure("a string that is not UTF-8", at: range.lowerBound)
            }
            scalars.append(contentsOf: text.unicodeScalars)
        }

        /// Reads the escape after a backslash.
        mutating func escape() throws(Failure) -> Unicode.Scalar {
            guard let byte = peek() else { throw fail("an escape that does not end") }
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return "\""
            case UInt8(ascii: "\\"): return "\\"
            case UInt8(ascii: "/"): return "/"
            case UInt8(ascii: "b"): return "\u{08}"
            case UInt8(ascii: "f"): return "\u{0C}"
            case UInt8(ascii: "n"): return "\n"
            case UInt8(ascii: "r"): return "\r"
            case UInt8(ascii: "t"): return "\t"
            case UInt8(ascii: "u"):
                let unit = try hex4()
                switch unit {
                case 0xD800..<0xDC00:
                    guard peek() == UInt8(ascii: "\\") else { throw fail("a lone surrogate escape") }
                    index += 1
                    guard peek() == UInt8(ascii: "u") else { throw fail("a lone surrogate escape") }
                    index += 1
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("a lone surrogate escape") }
                    let value = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    guard let scalar = Unicode.Scalar(value) else { throw fail("a lone surrogate escape") }
                    return scalar
                case 0xDC00..<0xE000:
                    throw fail("a lone surrogate escape")
                default:
                    guard let scalar = Unicode.Scalar(unit) else { throw fail("an invalid escape") }
                    return scalar
                }
            default:
                index -= 1
                throw fail("an invalid escape")
            }
        }

        mutating func hex4() throws(Failure) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = peek() else { throw fail("an escape that does not end") }
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw fail("an invalid \\u escape")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }
    }
}
