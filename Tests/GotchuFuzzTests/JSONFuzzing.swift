import GotchuTesting

/// Random JSON texts for the API decoders: well-formed documents with hostile values, and byte-level mutations.
enum JSONFuzzing {
    /// Number literals around the edges of `Int64` and of what "a whole number of cents" means.
    static let numbers = [
        "0", "-0", "1", "-1", "1250", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
        "-9223372036854775809", "18446744073709551616", "99999999999999999999999999", "1.5", "0.01", "-0.0",
        "1.0", "1e2", "1E2", "1e-2", "1e999", "-1e999", "1e18", "9.223372036854775807e18", "4.9e-324", "0.1e1",
        "123456789012345678901234567890.5", "1.0000000000000000001", "9007199254740993.0", "9007199254740993e0",
        "9223372036854775807.0", "92233720368547758.07e2", "1e-400",
    ]

    /// Fragments to splice into JSON texts.
    static let tokens: [[UInt8]] =
        (numbers + [
            "null", "true", "false", "\"\"", "\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\\uZZZZ\"", "{",
            "}",
            "[", "]", ",", ":", "\"amount_cents\"", "\"eid\"", "\"sid\"", "\"email\"", "NaN", "Infinity", "//", "/*",
            "\u{FEFF}",
        ]).map { Array($0.utf8) }

    /// A JSON string literal holding random text (escaped where JSON requires).
    static func stringLiteral(_ input: inout FuzzInput) -> String {
        let text = input.string(maxLength: 16)
        var literal = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": literal += "\\\""
            case "\\": literal += "\\\\"
            case _ where scalar.value < 0x20:
                literal +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: literal.unicodeScalars.append(scalar)
            }
        }
        return literal + "\""
    }

    /// A random JSON value, at most `depth` containers deep.
    static func value(_ input: inout FuzzInput, depth: Int = 3, keys: [String] = []) -> String {
        switch input.int(in: 0...(depth > 0 ? 7 : 4)) {
        case 0: return input.pick(["null", "true", "false"])
        case 1, 2: return input.pick(numbers)
        case 3: return stringLiteral(&input)
        case 4: return "\"" + input.pick(numbers) + "\""
        case 5:
            return "[" + (0..<input.int(in: 0...3)).map { _ in value(&input, depth: depth - 1) }.joined(separator: ",")
                + "]"
        default: return object(&input, depth: depth - 1, keys: keys)
        }
    }

    /// A random object whose keys are mostly `keys` (the fields a decoder looks for), sometimes repeated.
    static func object(_ input: inout FuzzInput, depth: Int, keys: [String]) -> String {
        let members = (0..<input.int(in: 0...4)).map { _ in
            let key = keys.isEmpty || input.oneIn(4) ? stringLiteral(&input) : "\"" + input.pick(keys) + "\""
            return key + ":" + value(&input, depth: depth, keys: keys)
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// Nesting far beyond any sane document.
    static func deeplyNested(_ input: inout FuzzInput) -> String {
        let depth = input.pick([100, 511, 512, 513, 10_000])
        let (open, close) = input.oneIn(2) ? ("[", "]") : ("{\"a\":", "}")
        return String(repeating: open, count: depth) + "1" + String(repeating: close, count: depth)
    }

    /// A body for a decoder looking for `keys`: structured, mutated from `valid`, deeply nested, or random bytes.
    static func body(_ input: inout FuzzInput, keys: [String], valid: [String]) -> [UInt8] {
        switch input.int(in: 0...9) {
        case 0...3: return Array(object(&input, depth: 2, keys: keys).utf8)
        case 4...6: return input.mutate(Array(input.pick(valid).utf8), tokens: tokens)
        case 7: return Array(deeplyNested(&input).utf8)
        case 8: return Array(value(&input, keys: keys).utf8)
        default: return input.bytes(count: input.length(typical: 32))
        }
    }
}
