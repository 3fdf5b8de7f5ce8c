import Foundation
package import GotchuSimulatedRadio

/// A source of hostile inputs for one fuzz case: random bytes and text, boundary values, and mutations of valid seeds.
/// Everything is drawn from ``seed``, so the case replays exactly from it.
package struct FuzzInput {
    /// The seed this case was drawn from.
    package let seed: UInt64
    /// The generator; draw from it directly for anything the helpers do not cover.
    package var random: SplitMix64

    /// Starts a case from `seed`.
    package init(seed: UInt64) {
        self.seed = seed
        self.random = SplitMix64(seed: seed)
    }

    /// How to replay this one case, for failure messages.
    package var replay: String {
        "replay: GOTCHU_FUZZ_SEED=\(seed) GOTCHU_FUZZ_ITERATIONS=1"
    }

    /// `true` with probability `1/n`.
    package mutating func oneIn(_ n: Int) -> Bool { Int.random(in: 0..<n, using: &random) == 0 }

    /// A uniform integer in `range`.
    package mutating func int(in range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }

    /// One element of a non-empty collection.
    package mutating func pick<C: Collection>(_ choices: C) -> C.Element {
        choices[choices.index(choices.startIndex, offsetBy: Int.random(in: 0..<choices.count, using: &random))]
    }

    /// A length that is usually small but sometimes at or beyond a boundary, so both the common path and the limits
    /// are exercised.
    package mutating func length(typical: Int, boundaries: [Int] = []) -> Int {
        if !boundaries.isEmpty, oneIn(8) { return max(0, pick(boundaries) + int(in: -1...1)) }
        return int(in: 0...typical)
    }

    /// An integer drawn mostly from the edges of `T`'s range, where parsers and arithmetic break.
    package mutating func boundaryInteger<T: FixedWidthInteger>(_ type: T.Type = T.self) -> T {
        switch int(in: 0...5) {
        case 0: return .min
        case 1: return .max
        case 2: return 0
        case 3: return T(truncatingIfNeeded: int(in: -2...2))
        case 4: return T.max / 2 &+ T(truncatingIfNeeded: int(in: -1...1))
        default: return T.random(in: .min ... .max, using: &random)
        }
    }

    /// `count` uniformly random bytes.
    package mutating func bytes(count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &random) }
    }

    /// Bytes that are not valid UTF-8: overlong forms, surrogates, code points past U+10FFFF, stray continuation
    /// bytes, truncated sequences.
    package static let invalidUTF8: [[UInt8]] = [
        [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],
        [0xF4, 0x90, 0x80, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80], [0x80], [0xBF], [0xFE], [0xFF], [0xE2, 0x82],
        [0xF0, 0x9F, 0x98],
    ]

    /// Text that is valid Unicode but trips naive code: NUL, controls, combining marks, non-ASCII digits and
    /// letters that lowercase or compare oddly, noncharacters, right-to-left marks, long runs.
    package static let trickyText: [String] = [
        "\u{0}", "\u{1}", "\u{7F}", "\u{85}", "\u{A0}", "\u{2028}", "\u{FEFF}", "\u{FFFE}", "\u{FFFF}", "\u{10FFFF}",
        "\u{301}", "\u{200D}", "\u{202E}", "٣", "１", "Ａ", "ａ", "\u{212A}", "İ", "ß", "\u{1F600}", "\r\n", "\t",
        "-", "+", ".", "..", "e", "E", "0x", ",", "_", "/", "//", "\\", "\"", "'", "{", "}", "[", "]", ":",
    ]

    /// Random text: ASCII, tricky scalars, or decoded random bytes (which become U+FFFD where invalid).
    package mutating func string(maxLength: Int = 24, alphabet: [String]? = nil) -> String {
        let count = length(typical: maxLength, boundaries: [maxLength * 4])
        var text = ""
        for _ in 0..<count {
            if let alphabet {
                text += pick(alphabet)
            } else {
                switch int(in: 0...3) {
                case 0: text += pick(Self.trickyText)
                case 1: text += String(decoding: bytes(count: int(in: 1...4)), as: UTF8.self)
                default: text.unicodeScalars.append(Unicode.Scalar(UInt8(int(in: 0x20...0x7E))))
                }
            }
        }
        return text
    }

    /// One random edit of `seed`: bit flips, boundary bytes, truncation, duplication, insertion of invalid UTF-8 or
    /// of `tokens` (format-specific fragments such as JSON keywords), deletion, or a long repetition.
    package mutating func mutate(_ seed: [UInt8], tokens: [[UInt8]] = []) -> [UInt8] {
        var data = seed
        let edits = int(in: 1...4)
        for _ in 0..<edits {
            let position = data.isEmpty ? 0 : int(in: 0...data.count)
            switch int(in: 0...9) {
            case 0 where !data.isEmpty:
                let index = min(position, data.count - 1)
                data[index] ^= UInt8(1) << UInt8(int(in: 0...7))
            case 1 where !data.isEmpty:
                data[min(position, data.count - 1)] = pick([0x00, 0x01, 0x7F, 0x80, 0xFF, 0x22, 0x5C, 0x2D, 0x2E, 0x30])
            case 2:
                data = Array(data.prefix(position))
            case 3 where !data.isEmpty:
                let start = int(in: 0...(data.count - 1))
                let end = int(in: start...data.count)
                data.insert(contentsOf: data[start..<end], at: position)
            case 4:
                data.insert(contentsOf: pick(Self.invalidUTF8), at: position)
            case 5 where !tokens.isEmpty:
                data.insert(contentsOf: pick(tokens), at: position)
            case 6 where !data.isEmpty:
                let start = int(in: 0...(data.count - 1))
                data.removeSubrange(start..<min(data.count, start + int(in: 1...8)))
            case 7:
                let unit = tokens.isEmpty || oneIn(2) ? bytes(count: int(in: 1...3)) : pick(tokens)
                let repeated = Array([[UInt8]](repeating: unit, count: int(in: 2...(oneIn(4) ? 4_096 : 64))).joined())
                data.insert(contentsOf: repeated, at: position)
            default:
                data.insert(contentsOf: bytes(count: int(in: 1...8)), at: position)
            }
        }
        return data
    }
}

/// Runs fuzz cases until an iteration count or a wall-clock budget is reached, whichever comes first.
///
/// The run's seed comes from `GOTCHU_FUZZ_SEED` (decimal or `0x` hex) or is random; case `i` uses
/// `seed &+ i &* 0x9E3779B97F4A7C15`, so case 0 is the seed itself and any failing case replays alone from the seed
/// its ``FuzzInput/replay`` prints. `GOTCHU_FUZZ_ITERATIONS` and `GOTCHU_FUZZ_SECONDS` override the bounds, for
/// longer runs than CI affords.
package enum Fuzz {
    /// What a run did.
    package struct Report: Sendable, CustomStringConvertible {
        /// The run's seed.
        package var seed: UInt64
        /// How many cases ran.
        package var iterations: Int
        /// How long they took.
        package var elapsed: Duration

        package var description: String { "\(iterations) cases in \(elapsed), seed \(seed)" }
    }

    /// The bounds of one run: a case count and a wall-clock budget, each overridable from the environment.
    private struct Plan {
        let limit: Int
        let start = ContinuousClock.now
        let deadline: ContinuousClock.Instant
        let seed = Fuzz.runSeed()

        init(iterations: Int, budget: Duration) {
            let environment = ProcessInfo.processInfo.environment
            limit = environment["GOTCHU_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? iterations
            let seconds = environment["GOTCHU_FUZZ_SECONDS"].flatMap { Double($0) }
            deadline = start + (seconds.map { Duration.seconds($0) } ?? budget)
        }

        /// Whether to run another case after `count`: always at least one.
        func goesOn(after count: Int) -> Bool { count < limit && (count == 0 || ContinuousClock.now < deadline) }

        /// Case `index` of the run.
        func input(_ index: Int) -> FuzzInput { FuzzInput(seed: seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15) }

        func report(_ count: Int) -> Report {
            Report(seed: seed, iterations: count, elapsed: ContinuousClock.now - start)
        }
    }

    /// The seed of a run: `GOTCHU_FUZZ_SEED` when set, otherwise fresh.
    package static func runSeed() -> UInt64 {
        guard let text = ProcessInfo.processInfo.environment["GOTCHU_FUZZ_SEED"] else {
            return UInt64.random(in: .min ... .max)
        }
        let parsed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
        guard let parsed else { fatalError("GOTCHU_FUZZ_SEED=\(text) is not a 64-bit unsigned number") }
        return parsed
    }

    /// Runs `body` on fresh cases for at most `iterations` cases and `budget` of wall-clock time.
    @discardableResult
    package static func run(
        iterations: Int,
        budget: Duration = .seconds(5),
        _ body: (inout FuzzInput) throws -> Void
    ) rethrows -> Report {
        let plan = Plan(iterations: iterations, budget: budget)
        var count = 0
        while plan.goesOn(after: count) {
            var input = plan.input(count)
            try body(&input)
            count += 1
        }
        return plan.report(count)
    }

    /// The async form of ``run(iterations:budget:_:)``, for cases that talk to a bus or a server.
    @discardableResult
    package static func run(
        iterations: Int,
        budget: Duration = .seconds(5),
        _ body: (inout FuzzInput) async throws -> Void
    ) async rethrows -> Report {
        let plan = Plan(iterations: iterations, budget: budget)
        var count = 0
        while plan.goesOn(after: count) {
            var input = plan.input(count)
            try await body(&input)
            count += 1
        }
        return plan.report(count)
    }
}
