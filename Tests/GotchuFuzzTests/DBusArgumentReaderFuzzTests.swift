import CGotchuDBus
import GotchuTesting
import Testing

@testable import GotchuDBus

extension Fuzzing {
    /// The in-place argument reader against libdbus: what libdbus writes (in its byte order, or big-endian from a writer
    /// of our own that libdbus accepts), the reader walks to the same values; from any bytes at all it walks to an end
    /// without reading outside them.
    @Suite("Fuzzing: D-Bus argument reader", .timeLimit(.minutes(10)))
    struct DBusArgumentReaderFuzzTests {
        /// What a reader shows of the values from its position on: each one's type code, with the text of strings,
        /// the number of an `n`, the bytes of an `ay`, and what containers hold.
        static func seen(_ reader: inout DBusArgumentReader, limit: Int = 1_000_000) -> [String] {
            var values: [String] = []
            while reader.typeCode != 0, values.count < limit {
                values.append(seen(reader))
                reader.next()
            }
            return values
        }

        static func seen(_ reader: DBusArgumentReader) -> String {
            if let bytes = reader.bytes { return "ay\(Array(bytes))" }
            let code = String(UnicodeScalar(reader.typeCode))
            if let text = reader.string { return code + text.debugDescription }
            if let number = reader.int16 { return "n\(number)" }
            if var contents = reader.contents { return code + "\(seen(&contents))" }
            return code
        }

        /// What a reader should show of `values`.
        static func expected(_ values: [DBusValue]) -> [String] { values.map(expected) }

        static func expected(_ value: DBusValue) -> String {
            switch value {
            case .string(let text): "s" + text.debugDescription
            case .objectPath(let path): "o" + path.rawValue.debugDescription
            case .signature(let signature): "g" + signature.rawValue.debugDescription
            case .int16(let number): "n\(number)"
            case .array(let array) where array.elementType == .byte:
                "ay\(array.elements.compactMap { UInt8(dbusValue: $0) })"
            case .array(let array): "a\(expected(array.elements))"
            case .dictionary(let dictionary): "a\(dictionary.entries.map { "e\(expected([$0.key, $0.value]))" })"
            case .structure(let fields): "r\(expected(fields))"
            case .variant(let variant): "v\(expected([variant.value]))"
            default: value.type.signature
            }
        }

        /// What the reader shows of a C message's arguments.
        static func seen(_ message: OpaquePointer) -> [String] {
            DBusMessageView.reading(message) { view in
                var arguments = view.arguments
                return seen(&arguments)
            } ?? ["not viewable"]
        }

        /// The body of a marshalled message, where ``DBusMessageView`` finds it.
        static func body(of message: [UInt8]) -> [UInt8]? {
            message.withUnsafeBytes { wire in DBusMessageView(wire: wire).map { Array($0.body) } }
        }

        @Test("random values written by libdbus are read in place as they were written")
        func libdbusValues() {
            let report = Fuzz.run(iterations: 5_000, budget: .seconds(4)) { input in
                let body = DBusWireFuzzTests.arguments(&input)
                guard let message = try? DBusWireFuzzTests.message(body) else { return }
                defer { dbus_message_unref(message) }
                #expect(Self.seen(message) == Self.expected(body), "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        @Test("big-endian messages, written by our own writer and accepted by libdbus, are read as they were written")
        func bigEndianValues() throws {
            var checked = 0
            let report = try Fuzz.run(iterations: 3_000, budget: .seconds(4)) { input in
                let body = DBusWireFuzzTests.arguments(&input)
                guard let message = try? DBusWireFuzzTests.message(body) else { return }
                defer { dbus_message_unref(message) }
                // The writer is checked against libdbus first: in libdbus's byte order it must write the same body.
                let libdbusBytes = try #require(DBusWireFuzzTests.wire(message), "\(input.replay)")
                #expect(
                    Self.body(of: WireWriter.message(body, bigEndian: false)) == Self.body(of: libdbusBytes),
                    "our writer disagrees with libdbus \(input.replay)"
                )
                let bigEndian = WireWriter.message(body, bigEndian: true)
                let parsed = try #require(
                    DBusWireFuzzTests.demarshal(bigEndian),
                    "libdbus refused our big-endian message \(input.replay)"
                )
                defer { dbus_message_unref(parsed) }
                #expect(Self.seen(parsed) == Self.expected(body), "\(input.replay)")
                checked += 1
            }
            #expect(report.iterations > 0)
            if report.iterations >= 100 { #expect(checked > 0, "\(report)") }
        }

        @Test("mutated messages libdbus accepts are read as libdbus reads them")
        func mutatedMessages() {
            let report = Fuzz.run(iterations: 20_000, budget: .seconds(4)) { input in
                guard let message = try? DBusWireFuzzTests.message(DBusWireFuzzTests.arguments(&input)) else { return }
                let bytes = DBusWireFuzzTests.wire(message)
                dbus_message_unref(message)
                guard let bytes, let parsed = DBusWireFuzzTests.demarshal(input.mutate(bytes)) else { return }
                defer { dbus_message_unref(parsed) }
                let seen = Self.seen(parsed)
                if let values = try? DBusMessage(cMessage: parsed).body {
                    // Compared as text: a NaN read from the wire is not equal to itself, but prints the same.
                    #expect(seen == Self.expected(values), "\(input.replay)")
                }
            }
            #expect(report.iterations > 0)
        }

        @Test("any bytes under any signature are walked to an end without reading outside them")
        func garbage() {
            let alphabet = [
                "y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "v", "a", "{", "}", "(", ")", "z",
            ]
            let report = Fuzz.run(iterations: 50_000, budget: .seconds(4)) { input in
                let bytes = input.bytes(count: input.length(typical: 24, boundaries: [0, 1, 4, 8, 300]))
                let signature = Array(
                    (input.oneIn(2)
                        ? DBusFuzzing.type(&input, depth: 4).signature
                        : input.string(maxLength: 10, alphabet: alphabet)).utf8
                )
                bytes.withUnsafeBytes { body in
                    signature.withUnsafeBufferPointer { types in
                        for bigEndian in [false, true] {
                            var reader = DBusArgumentReader(body: body, bigEndian: bigEndian, signature: types)
                            // Every value's description reads inside it; the walk must end within the body's bytes.
                            let values = Self.seen(&reader, limit: bytes.count + signature.count + 1)
                            #expect(values.count <= max(signature.count, bytes.count), "\(input.replay)")
                        }
                    }
                }
            }
            #expect(report.iterations > 0)
        }

        @Test("a big-endian PropertiesChanged with RSSI and TX power reads its numbers in its own byte order")
        func bigEndianSignal() throws {
            let body: [DBusValue] = [
                .string("org.bluez.Device1"),
                .dictionary(
                    DBusDictionary(
                        keyType: .string,
                        valueType: .variant,
                        entries: [
                            .init(key: .string("RSSI"), value: .variant(DBusVariant(.int16(-61)))),
                            .init(key: .string("TxPower"), value: .variant(DBusVariant(.int16(0x0102)))),
                        ]
                    )
                ),
                .strings(["ServiceData"]),
            ]
            let parsed = try #require(DBusWireFuzzTests.demarshal(WireWriter.message(body, bigEndian: true)))
            defer { dbus_message_unref(parsed) }
            let seen = Self.seen(parsed)
            #expect(seen == Self.expected(body))
            // 0x0102 read in the wrong byte order would be 0x0201.
            #expect(seen[1].contains("n258") && seen[1].contains("n-61"), "\(seen)")
        }
    }
}

/// A writer of the D-Bus wire format in either byte order, independent of libdbus: the tests hold libdbus's own
/// bytes against it, then use it for big-endian messages, which libdbus never writes on this machine.
struct WireWriter {
    var bytes: [UInt8] = []
    let bigEndian: Bool

    /// A whole signal message with `body`, as `DBusWireFuzzTests.message` makes it (serial 1).
    static func message(_ body: [DBusValue], bigEndian: Bool) -> [UInt8] {
        var bodyWriter = WireWriter(bigEndian: bigEndian)
        for value in body { bodyWriter.write(value) }
        let signature = body.map(\.type.signature).joined()
        var fields: [DBusValue] = [
            .structure([.byte(1), .variant(DBusVariant(.objectPath(DBusObjectPath(rawValue: "/io/gotchu/fuzz")!)))]),
            .structure([.byte(2), .variant(DBusVariant(.string("io.gotchu.Fuzz")))]),
            .structure([.byte(3), .variant(DBusVariant(.string("Values")))]),
        ]
        if !body.isEmpty {
            fields.append(
                .structure([.byte(8), .variant(DBusVariant(.signature(DBusSignature(rawValue: signature)!)))])
            )
        }
        var writer = WireWriter(bigEndian: bigEndian)
        writer.write(.byte(bigEndian ? UInt8(ascii: "B") : UInt8(ascii: "l")))
        writer.write(.byte(4))  // a signal
        writer.write(.byte(0))
        writer.write(.byte(1))
        writer.write(.uint32(UInt32(bodyWriter.bytes.count)))
        writer.write(.uint32(1))
        writer.write(.array(DBusArray(elementType: .structure([.byte, .variant]), elements: fields)))
        writer.pad(8)
        return writer.bytes + bodyWriter.bytes
    }

    mutating func pad(_ alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    mutating func integer<T: FixedWidthInteger>(_ value: T) {
        pad(MemoryLayout<T>.size)
        withUnsafeBytes(of: bigEndian ? value.bigEndian : value.littleEndian) { bytes += $0 }
    }

    mutating func text(_ text: String, lengthAsByte: Bool = false) {
        if lengthAsByte { bytes.append(UInt8(text.utf8.count)) } else { integer(UInt32(text.utf8.count)) }
        bytes += text.utf8
        bytes.append(0)
    }

    mutating func array(elementAlignment: Int, _ elements: (inout WireWriter) -> Void) {
        pad(4)
        let lengthAt = bytes.count
        integer(UInt32(0))
        pad(elementAlignment)
        let start = bytes.count
        elements(&self)
        var length = WireWriter(bigEndian: bigEndian)
        length.integer(UInt32(bytes.count - start))
        bytes.replaceSubrange(lengthAt..<(lengthAt + 4), with: length.bytes)
    }

    static func alignment(_ type: DBusType) -> Int {
        switch type.signature.first {
        case "n", "q": 2
        case "b", "i", "u", "s", "o", "a": 4
        case "x", "t", "d", "(", "{": 8
        default: 1
        }
    }

    mutating func write(_ value: DBusValue) {
        switch value {
        case .byte(let byte): bytes.append(byte)
        case .boolean(let flag): integer(UInt32(flag ? 1 : 0))
        case .int16(let number): integer(number)
        case .uint16(let number): integer(number)
        case .int32(let number): integer(number)
        case .uint32(let number): integer(number)
        case .int64(let number): integer(number)
        case .uint64(let number): integer(number)
        case .double(let number): integer(number.bitPattern)
        case .string(let string): text(string)
        case .objectPath(let path): text(path.rawValue)
        case .signature(let signature): text(signature.rawValue, lengthAsByte: true)
        case .variant(let variant):
            text(variant.value.type.signature, lengthAsByte: true)
            write(variant.value)
        case .array(let array):
            self.array(elementAlignment: Self.alignment(array.elementType)) { writer in
                for element in array.elements { writer.write(element) }
            }
        case .dictionary(let dictionary):
            self.array(elementAlignment: 8) { writer in
                for entry in dictionary.entries {
                    writer.pad(8)
                    writer.write(entry.key)
                    writer.write(entry.value)
                }
            }
        case .structure(let fields):
            pad(8)
            for field in fields { write(field) }
        }
    }
}
