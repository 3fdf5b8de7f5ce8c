import CGotchuDBus
import GotchuTesting
import Testing

@testable import GotchuDBus

extension Fuzzing {
    /// The D-Bus value layer against libdbus's own wire format, without a bus: what we write, libdbus reads back; what
    /// libdbus accepts from the wire (however mangled), we turn into values or a ``GotchuDBus/DBusError``, and the values
    /// we read we can write again.
    @Suite("Fuzzing: D-Bus wire format", .timeLimit(.minutes(10)))
    struct DBusWireFuzzTests {
        /// `body` as a signal message, or the error that refused it.
        static func message(_ body: [DBusValue]) throws(GotchuDBus.DBusError) -> OpaquePointer {
            let message = try DBusMessage(
                kind: .signal,
                path: DBusObjectPath(rawValue: "/io/gotchu/fuzz")!,
                interface: "io.gotchu.Fuzz",
                member: "Values",
                body: body
            ).makeCMessage()
            dbus_message_set_serial(message, 1)
            return message
        }

        /// The marshalled bytes of `message`.
        static func wire(_ message: OpaquePointer) -> [UInt8]? {
            var data: UnsafeMutablePointer<CChar>? = nil
            var length: Int32 = 0
            guard dbus_message_marshal(message, &data, &length) != 0, let data else { return nil }
            defer { dbus_free(data) }
            return UnsafeRawBufferPointer(start: data, count: Int(length)).map { $0 }
        }

        /// libdbus's reading of `bytes`: `nil` when it refuses them as invalid.
        static func demarshal(_ bytes: [UInt8]) -> OpaquePointer? {
            bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { chars in
                    dbus_message_demarshal(chars.baseAddress, Int32(chars.count), nil)
                }
            }
        }

        /// Random arguments: up to three values of random types.
        static func arguments(_ input: inout FuzzInput) -> [DBusValue] {
            (0..<input.int(in: 0...3)).map { _ in DBusFuzzing.anyValue(&input, depth: 4) }
        }

        @Test("random values survive marshalling to bytes and back, exactly")
        func roundTrip() throws {
            var marshalled = 0
            let report = try Fuzz.run(iterations: 5_000, budget: .seconds(5)) { input in
                let body = Self.arguments(&input)
                guard let message = try? Self.message(body) else {
                    // Only values D-Bus cannot carry may be refused, and those are limits the generator rarely reaches.
                    #expect(
                        body.map(\.type.signature).joined().utf8.count > DBusSignature.maximumLength,
                        "\(input.replay)"
                    )
                    return
                }
                defer { dbus_message_unref(message) }
                let bytes = try #require(Self.wire(message), "\(input.replay)")
                let parsed = try #require(Self.demarshal(bytes), "libdbus refused its own bytes \(input.replay)")
                defer { dbus_message_unref(parsed) }
                let read = try? DBusMessage(cMessage: parsed).body
                #expect(read == body, "\(input.replay)")
                marshalled += 1
            }
            #expect(report.iterations > 0)
            // A replay of one case may be a refused one; a whole run must marshal something.
            if report.iterations >= 100 { #expect(marshalled > 0, "\(report)") }
        }

        @Test("mutated wire bytes are refused by libdbus or read into values that write back unchanged")
        func mutatedBytes() throws {
            var read = 0
            let report = try Fuzz.run(iterations: 20_000, budget: .seconds(5)) { input in
                guard let message = try? Self.message(Self.arguments(&input)) else { return }
                let bytes = Self.wire(message)
                dbus_message_unref(message)
                guard let bytes else { return }
                let mutated = input.mutate(bytes)
                guard let parsed = Self.demarshal(mutated) else { return }
                defer { dbus_message_unref(parsed) }
                let values: [DBusValue]
                do {
                    values = try DBusMessage(cMessage: parsed).body
                } catch {
                    return
                }
                read += 1
                // What libdbus accepted and we read, we must be able to send on: write it and read it again.
                let again = try #require(
                    try? Self.message(values),
                    "read \(values) but cannot write it \(input.replay)"
                )
                defer { dbus_message_unref(again) }
                let rebytes = try #require(Self.wire(again), "\(input.replay)")
                let reparsed = try #require(Self.demarshal(rebytes), "\(input.replay)")
                defer { dbus_message_unref(reparsed) }
                // Compared as text: a NaN read from the wire is not equal to itself, but prints the same.
                let reread = try? DBusMessage(cMessage: reparsed).body
                #expect(reread.map { "\($0)" } == "\(values)", "\(input.replay)")
            }
            #expect(report.iterations > 0)
            // Most mutations break the message; in a whole run some must get through, or this test checks nothing.
            if report.iterations >= 1_000 { #expect(read > 0, "no mutated message was readable in \(report)") }
        }

        @Test("signature parsing agrees with libdbus on random and mutated signatures")
        func signatures() {
            let alphabet = [
                "y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "v", "a", "a", "{", "}", "(", ")", "h", "z",
            ]
            let report = Fuzz.run(iterations: 50_000, budget: .seconds(4)) { input in
                let text: String
                switch input.int(in: 0...2) {
                case 0: text = input.string(maxLength: 12, alphabet: alphabet)
                case 1: text = DBusFuzzing.type(&input, depth: 6).signature
                default:
                    let seed = Array(input.pick(DBusFuzzing.signatures + ["a{sv}a{sa{sv}}", "(yyay)"]).utf8)
                    text = String(decoding: input.mutate(seed, tokens: alphabet.map { Array($0.utf8) }), as: UTF8.self)
                }
                guard !text.utf8.contains(0) else { return }
                // Unix file descriptors (`h`) are valid D-Bus but deliberately not modelled.
                if text.contains("h") {
                    #expect(DBusSignature(rawValue: text) == nil, "\(text.debugDescription) \(input.replay)")
                    return
                }
                let ours = DBusSignature(rawValue: text) != nil
                let theirs = dbus_signature_validate(text, nil) != 0
                // libdbus's signature check counts only unbroken runs of `a` against the 32-array limit ("a…a{sa{sv}}"
                // with 32 `a`s passes), while the bus checks a message body's real nesting and drops a client that
                // exceeds it: ours counts the real nesting, so it may refuse what that check lets through, never more.
                if !ours, theirs, let depth = Self.nesting(of: text), depth.arrays > 32 || depth.structs > 32 { return }
                #expect(ours == theirs, "\(text.debugDescription): ours \(ours), libdbus \(theirs) \(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        /// The deepest nesting of arrays and of structs in a signature of complete types, or `nil` if it does not parse.
        static func nesting(of text: String) -> (arrays: Int, structs: Int)? {
            var rest = Substring(text)
            var deepest = (arrays: 0, structs: 0)
            while !rest.isEmpty {
                guard let depth = completeType(&rest) else { return nil }
                deepest = (max(deepest.arrays, depth.arrays), max(deepest.structs, depth.structs))
            }
            return deepest
        }

        private static func completeType(_ rest: inout Substring) -> (arrays: Int, structs: Int)? {
            guard let first = rest.popFirst() else { return nil }
            switch first {
            case "a":
                if rest.first == "{" {
                    rest.removeFirst()
                    guard let key = completeType(&rest), let value = completeType(&rest), rest.popFirst() == "}" else {
                        return nil
                    }
                    return (1 + max(key.arrays, value.arrays), max(key.structs, value.structs))
                }
                guard let element = completeType(&rest) else { return nil }
                return (1 + element.arrays, element.structs)
            case "(":
                var inner = (arrays: 0, structs: 0)
                while rest.first != ")" {
                    guard let member = completeType(&rest) else { return nil }
                    inner = (max(inner.arrays, member.arrays), max(inner.structs, member.structs))
                }
                rest.removeFirst()
                return (inner.arrays, 1 + inner.structs)
            case ")", "{", "}": return nil
            default: return (0, 0)
            }
        }
    }
}
