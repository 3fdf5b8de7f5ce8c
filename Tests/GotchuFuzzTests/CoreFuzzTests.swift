import GotchuCore
import GotchuSimulatedRadio
import GotchuTesting
import Testing

extension Fuzzing {
    /// The sans-IO parsers of advertisements and amounts, each checked against a small independent oracle.
    @Suite("Fuzzing: EIDs, amounts, UUIDs, air payloads", .timeLimit(.minutes(10)))
    struct CoreFuzzTests {
        static let lowerHex = Set("0123456789abcdef".utf8)

        /// Text near an EID: valid ones, their mutations, and random strings.
        static func eidLikeText(_ input: inout FuzzInput) -> String {
            switch input.int(in: 0...3) {
            case 0: return EID.random(using: &input.random).rawValue
            case 1: return input.pick(FuzzSeeds.eidTexts)
            case 2: return input.string(maxLength: 12)
            default:
                let seed = Array(EID.random(using: &input.random).rawValue.utf8)
                return String(decoding: input.mutate(seed), as: UTF8.self)
            }
        }

        @Test("EID text: exactly 10 lowercase hex characters, round trips through every form")
        func eidText() {
            let report = Fuzz.run(iterations: 50_000, budget: .seconds(4)) { input in
                let text = Self.eidLikeText(&input)
                let expected = text.utf8.count == 10 && text.utf8.allSatisfy(Self.lowerHex.contains)
                let eid = EID(rawValue: text)
                #expect((eid != nil) == expected, "\(text.debugDescription) \(input.replay)")
                guard let eid else { return }
                #expect(eid.rawValue == text, "\(input.replay)")
                #expect(EID(serviceData: eid.serviceData) == eid, "\(input.replay)")
                let bytes = stride(from: 0, to: 10, by: 2).map { offset in
                    UInt8(String(text.dropFirst(offset).prefix(2)), radix: 16)!
                }
                #expect(EID(bytes: bytes) == eid, "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        @Test("EID service data: only 10 ASCII lowercase hex bytes decode, and they encode back unchanged")
        func eidServiceData() {
            let report = Fuzz.run(iterations: 50_000, budget: .seconds(4)) { input in
                let data: [UInt8] =
                    switch input.int(in: 0...2) {
                    case 0: input.bytes(count: input.length(typical: 12, boundaries: [10, 31, 255]))
                    case 1: input.mutate(EID.random(using: &input.random).serviceData)
                    default: input.mutate(input.pick(FuzzSeeds.serviceData))
                    }
                let expected = data.count == 10 && data.allSatisfy(Self.lowerHex.contains)
                let eid = EID(serviceData: data)
                #expect((eid != nil) == expected, "\(data) \(input.replay)")
                if let eid { #expect(eid.serviceData == data, "\(input.replay)") }
                // The same bytes as an `ArraySlice` (a non-zero start index) must decode the same way.
                let padded = [0x41] + data
                #expect(EID(serviceData: padded.dropFirst()) == eid, "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        /// What `Money.parse` should make of `text`: digits with at most one dot and two decimals, positive, within
        /// `Int64`. Written without the parser's arithmetic, on digit strings.
        static func expectedCents(_ text: String) -> Cents? {
            var trimmed = Substring(text)
            while trimmed.first?.isWhitespace == true { trimmed.removeFirst() }
            while trimmed.last?.isWhitespace == true { trimmed.removeLast() }
            let parts = trimmed.split(separator: ".", omittingEmptySubsequences: false)
            let isDigits = { (part: Substring) in
                !part.isEmpty && part.unicodeScalars.allSatisfy { ("0"..."9").contains($0) }
            }
            guard (1...2).contains(parts.count), parts.allSatisfy(isDigits) else { return nil }
            let fraction = parts.count == 2 ? String(parts[1]) : ""
            guard fraction.count <= 2 else { return nil }
            let digits = (String(parts[0]) + fraction + String(repeating: "0", count: 2 - fraction.count))
                .drop { $0 == "0" }
            guard !digits.isEmpty, digits.count <= 19 else { return nil }
            guard digits.count < 19 || digits <= "9223372036854775807" else { return nil }
            return Cents(digits)
        }

        @Test("Money.parse: exact decimal cents or a refusal; no signs, exponents or third decimals")
        func moneyParse() {
            let alphabet = ["0", "1", "5", "9", ".", "-", "+", "e", "E", " ", ",", "_", "\t", "٣", "１", "\u{301}", "x"]
            let report = Fuzz.run(iterations: 50_000, budget: .seconds(4)) { input in
                let text: String =
                    switch input.int(in: 0...3) {
                    case 0: input.string(maxLength: 10, alphabet: alphabet)
                    case 1: input.pick(FuzzSeeds.amounts)
                    case 2: String(decoding: input.mutate(Array(input.pick(FuzzSeeds.amounts).utf8)), as: UTF8.self)
                    default: input.string(maxLength: 8)
                    }
                let parsed = try? Money.parse(text)
                #expect(parsed == Self.expectedCents(text), "\(text.debugDescription) \(input.replay)")
                guard let parsed else { return }
                #expect(parsed > 0, "\(input.replay)")
                for refused in ["-", "+", "e", "E", "x"] {
                    #expect(!text.contains(refused), "\(text.debugDescription) accepted \(input.replay)")
                }
                // What the wallet prints parses back to the same cents.
                #expect((try? Money.parse(Money.format(parsed, currencySymbol: ""))) == parsed, "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        @Test("Money.format output parses back to the same cents for every positive amount")
        func moneyFormatRoundTrip() {
            let report = Fuzz.run(iterations: 50_000, budget: .seconds(2)) { input in
                let cents = input.boundaryInteger(Cents.self)
                guard cents > 0 else {
                    #expect(throws: Money.ParseError.self, "\(input.replay)") {
                        try Money.parse(Money.format(cents, currencySymbol: ""))
                    }
                    return
                }
                #expect((try? Money.parse(Money.format(cents, currencySymbol: ""))) == cents, "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        /// The canonical form of a UUID text, or `nil`: 4 or 8 hex digits, or 32 with dashes after 8, 12, 16 and 20.
        static func expectedUUID(_ text: String) -> String? {
            guard text.unicodeScalars.allSatisfy(\.isASCII) else { return nil }
            let lower = String(
                text.unicodeScalars.map {
                    ("A"..."Z").contains($0) ? Character(String($0).lowercased()) : Character($0)
                }
            )
            let bytes = Array(lower.utf8)
            let isHex = { (byte: UInt8) in Self.lowerHex.contains(byte) }
            switch bytes.count {
            case 4 where bytes.allSatisfy(isHex): return "0000" + lower + "-0000-1000-8000-00805f9b34fb"
            case 8 where bytes.allSatisfy(isHex): return lower + "-0000-1000-8000-00805f9b34fb"
            case 36:
                for (offset, byte) in bytes.enumerated() {
                    let wantsDash = [8, 13, 18, 23].contains(offset)
                    guard wantsDash ? byte == UInt8(ascii: "-") : isHex(byte) else { return nil }
                }
                return lower
            default: return nil
            }
        }

        @Test("BluetoothUUID: 16, 32 and 128-bit forms in either case, nothing else; canonical and stable")
        func bluetoothUUID() {
            let alphabet = ["0", "f", "e", "d", "F", "E", "D", "-", "g", "G", " ", "x", "\u{212A}", "ｆ"]
            let report = Fuzz.run(iterations: 50_000, budget: .seconds(4)) { input in
                let text: String =
                    switch input.int(in: 0...3) {
                    case 0: input.string(maxLength: 9, alphabet: alphabet)
                    case 1: input.pick(FuzzSeeds.uuids)
                    case 2: String(decoding: input.mutate(Array(input.pick(FuzzSeeds.uuids).utf8)), as: UTF8.self)
                    default: String(input.string(maxLength: 40, alphabet: alphabet).prefix(input.pick([4, 8, 36])))
                    }
                let uuid = BluetoothUUID(text)
                #expect(uuid?.uuidString == Self.expectedUUID(text), "\(text.debugDescription) \(input.replay)")
                guard let uuid else { return }
                #expect(BluetoothUUID(uuid.uuidString) == uuid, "\(input.replay)")
                if let short = uuid.shortForm {
                    #expect(BluetoothUUID(short) == uuid, "\(input.replay)")
                    #expect(short.utf8.count == 4, "\(input.replay)")
                }
            }
            #expect(report.iterations > 0)
        }

        @Test("Recorded taps: valid lines round trip, mutated ones parse to a valid line or fail naming their line")
        func traceLines() {
            let report = Fuzz.run(iterations: 20_000, budget: .seconds(3)) { input in
                let line = TraceLine(
                    trace: input.int(in: 0...1000),
                    sighting: Sighting(
                        eid: EID.random(using: &input.random),
                        rssi: input.oneIn(4) ? nil : Int16(input.int(in: -127...20)),
                        txPower: input.oneIn(2) ? nil : Int16(input.int(in: -127...127)),
                        time: .milliseconds(input.int(in: 0...100_000)),
                        source: "fuzz"
                    ),
                    terminal: input.oneIn(2) ? nil : input.int(in: 0...9)
                )
                let valid = try? TraceReplay.parse(line.json)
                #expect(valid?.first?.json == line.json, "\(line.json) \(input.replay)")
                let mutated = String(decoding: input.mutate(Array(line.json.utf8)), as: UTF8.self)
                do {
                    for parsed in try TraceReplay.parse("\n" + mutated) {
                        // Whatever was accepted is within the documented ranges and serialises back to itself.
                        #expect((-127...20).contains(parsed.sighting.rssi ?? 0), "\(input.replay)")
                        #expect(parsed.sighting.time >= .zero, "\(input.replay)")
                        let again = try? TraceReplay.parse(parsed.json)
                        #expect(again?.first?.json == parsed.json, "\(input.replay)")
                    }
                } catch {
                    // The mutation may have split the line, never moved it before the blank first line.
                    #expect(
                        (error as? TraceError).map { $0.line >= 2 } == true,
                        "\(mutated.debugDescription) \(input.replay)"
                    )
                }
            }
            #expect(report.iterations > 0)
        }

        @Test("AirPayload.decode: an EID only from exactly valid service data under our UUID")
        func airPayload() {
            let ours = BluetoothUUID.gotchu
            let others = [BluetoothUUID("fe2c")!, BluetoothUUID("0000feed-0000-1000-8000-00805f9b34fc")!]
            let report = Fuzz.run(iterations: 30_000, budget: .seconds(3)) { input in
                var payload = AirPayload(
                    serviceUUIDs: [],
                    serviceData: [:],
                    txPower: input.oneIn(2) ? input.boundaryInteger() : nil
                )
                for _ in 0..<input.int(in: 0...3) {
                    payload.serviceUUIDs.append(input.pick([ours] + others))
                }
                for _ in 0..<input.int(in: 0...3) {
                    let data =
                        input.oneIn(2)
                        ? input.mutate(EID.random(using: &input.random).serviceData)
                        : EID.random(using: &input.random).serviceData
                    payload.serviceData[input.pick([ours] + others)] = data
                }
                let decoded = payload.decode(for: ours)
                if let data = payload.serviceData[ours] {
                    // 10 lower-case hex digits, followed or not by the offline marker.
                    let digits = data.prefix(10)
                    let offline = data.count == 11 && data.last == EID.offlineMarker
                    let valid =
                        digits.count == 10 && digits.allSatisfy(Self.lowerHex.contains)
                        && (data.count == 10 || offline)
                    if valid {
                        #expect(decoded == .eid(EID(serviceData: digits)!, offline: offline), "\(input.replay)")
                    } else {
                        #expect(decoded == .malformed, "\(data) \(input.replay)")
                    }
                } else {
                    #expect(
                        decoded == (payload.serviceUUIDs.contains(ours) ? .malformed : .unrelated),
                        "\(input.replay)"
                    )
                }
                let eid = EID.random(using: &input.random)
                let wellFormed = AirPayload(Advertisement(eid: eid), txPower: input.boundaryInteger())
                #expect(wellFormed.decode(for: ours) == .eid(eid), "\(input.replay)")
                let offline = AirPayload(Advertisement(eid: eid, offline: true), txPower: input.boundaryInteger())
                #expect(offline.decode(for: ours) == .eid(eid, offline: true), "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }
    }
}
