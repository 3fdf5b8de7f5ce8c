import CGotchuDBus
import GotchuTesting
import Testing

@testable import GotchuDBus

extension Fuzzing {
    /// Messages viewed in place from their wire bytes, against libdbus: the header's fields a view finds are the ones
    /// libdbus finds, a message's length is known from its first 16 bytes, and any bytes at all are viewed (or
    /// refused) without reading outside them.
    @Suite("Fuzzing: D-Bus message view", .timeLimit(.minutes(10)))
    struct DBusMessageViewFuzzTests {
        /// What libdbus says of a message's header, in the view's terms.
        struct Header: Equatable, CustomStringConvertible {
            var type: UInt8
            var path, interface, member, errorName, sender, signature: String?
            var replySerial: UInt32?

            init(libdbus message: OpaquePointer) {
                func text(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.map { String(cString: $0) } }
                type = UInt8(dbus_message_get_type(message))
                path = text(dbus_message_get_path(message))
                interface = text(dbus_message_get_interface(message))
                member = text(dbus_message_get_member(message))
                errorName = text(dbus_message_get_error_name(message))
                sender = text(dbus_message_get_sender(message))
                let signature = text(dbus_message_get_signature(message))
                self.signature = signature?.isEmpty == true ? nil : signature
                let serial = dbus_message_get_reply_serial(message)
                replySerial = serial == 0 ? nil : serial
            }

            init(_ view: DBusMessageView) {
                type = view.type.rawValue
                path = view.pathBytes?.string
                interface = view.interfaceBytes?.string
                member = view.memberBytes?.string
                errorName = view.errorNameBytes?.string
                sender = view.senderBytes?.string
                signature = view.signature.isEmpty ? nil : String(decoding: view.signature, as: UTF8.self)
                replySerial = view.replySerial
            }

            var description: String {
                "type \(type) path \(path ?? "-") interface \(interface ?? "-") member \(member ?? "-") error "
                    + "\(errorName ?? "-") sender \(sender ?? "-") signature \(signature ?? "-") reply \(replySerial ?? 0)"
            }
        }

        /// A random message of any of the four kinds, with random arguments, marshalled by libdbus.
        static func anyMessage(_ input: inout FuzzInput) -> [UInt8]? {
            let kind = input.pick([DBusMessage.Kind.methodCall, .methodReturn, .error, .signal])
            let path = DBusObjectPath(rawValue: input.pick(["/", "/org/bluez/hci0", "/org/bluez/hci0/dev_00_11"]))
            let message = DBusMessage(
                kind: kind,
                destination: input.int(in: 0...1) == 0 ? nil : ":1.\(input.int(in: 0...999))",
                path: kind == .methodCall || kind == .signal ? path : nil,
                interface: kind == .signal || input.int(in: 0...1) == 0 ? "org.freedesktop.DBus.Properties" : nil,
                member: kind == .methodCall || kind == .signal ? input.pick(["Get", "PropertiesChanged", "X"]) : nil,
                errorName: kind == .error ? "org.bluez.Error.Failed" : nil,
                replySerial: kind == .methodReturn || kind == .error ? UInt32(input.int(in: 1...100_000)) : 0,
                body: DBusWireFuzzTests.arguments(&input)
            )
            guard let raw = try? message.makeCMessage() else { return nil }
            defer { dbus_message_unref(raw) }
            if input.int(in: 0...1) == 0 { dbus_message_set_sender(raw, ":1.\(input.int(in: 0...99))") }
            dbus_message_set_serial(raw, UInt32(input.int(in: 1...1_000_000)))
            return DBusWireFuzzTests.wire(raw)
        }

        @Test("the header fields found in place are the ones libdbus finds, for every kind of message")
        func headersAgree() throws {
            let report = try Fuzz.run(iterations: 5_000, budget: .seconds(4)) { input in
                guard let bytes = Self.anyMessage(&input) else { return }
                let parsed = try #require(DBusWireFuzzTests.demarshal(bytes), "\(input.replay)")
                defer { dbus_message_unref(parsed) }
                let header = bytes.withUnsafeBytes { wire in DBusMessageView(wire: wire).map(Header.init) }
                #expect(header == Header(libdbus: parsed), "\(input.replay)")
                bytes.withUnsafeBytes { wire in
                    #expect(DBusMessageView.frame(wire) == .length(bytes.count), "\(input.replay)")
                    // Any shorter prefix is not a whole message.
                    let cut = input.int(in: 0...(bytes.count - 1))
                    #expect(DBusMessageView(wire: UnsafeRawBufferPointer(rebasing: wire[..<cut])) == nil)
                }
            }
            #expect(report.iterations > 0)
        }

        @Test("big-endian headers, from our own writer, are found as libdbus finds them")
        func bigEndianHeaders() throws {
            let report = try Fuzz.run(iterations: 2_000, budget: .seconds(3)) { input in
                let body = DBusWireFuzzTests.arguments(&input)
                guard let written = try? DBusWireFuzzTests.message(body) else { return }
                dbus_message_unref(written)
                let bytes = WireWriter.message(body, bigEndian: true)
                let parsed = try #require(DBusWireFuzzTests.demarshal(bytes), "\(input.replay)")
                defer { dbus_message_unref(parsed) }
                let header = bytes.withUnsafeBytes { wire in DBusMessageView(wire: wire).map(Header.init) }
                #expect(header == Header(libdbus: parsed), "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        @Test(
            "mutated messages: what libdbus accepts is viewed as libdbus reads it; the rest is viewed safely or refused"
        )
        func mutatedMessages() {
            let report = Fuzz.run(iterations: 20_000, budget: .seconds(4)) { input in
                guard let bytes = Self.anyMessage(&input) else { return }
                let mutated = input.mutate(bytes)
                let header = mutated.withUnsafeBytes { bytes in
                    // libdbus reads the first message and leaves what follows: so does a stream.
                    guard case .length(let length) = DBusMessageView.frame(bytes), length <= bytes.count else {
                        return nil as Header?
                    }
                    return DBusMessageView(wire: UnsafeRawBufferPointer(rebasing: bytes[..<length])).map { view in
                        // Walking whatever the view offers must stay inside the bytes (debug bounds checks are on).
                        var arguments = view.arguments
                        _ = DBusArgumentReaderFuzzTests.seen(&arguments, limit: 1_000)
                        return Header(view)
                    }
                }
                guard let parsed = DBusWireFuzzTests.demarshal(mutated) else { return }
                defer { dbus_message_unref(parsed) }
                // Types past the four are for later versions of D-Bus: libdbus keeps them, a view refuses them.
                guard (1...4).contains(dbus_message_get_type(parsed)) else { return }
                #expect(header == Header(libdbus: parsed), "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        @Test("a stream's framing follows concatenated messages, whatever the cut points")
        func framing() {
            let report = Fuzz.run(iterations: 500, budget: .seconds(3)) { input in
                let messages = (0..<input.int(in: 1...6)).compactMap { _ in Self.anyMessage(&input) }
                let stream = messages.flatMap { $0 }
                var found: [Int] = []
                stream.withUnsafeBytes { wire in
                    var start = 0
                    while start < wire.count {
                        guard
                            case .length(let length) = DBusMessageView.frame(
                                UnsafeRawBufferPointer(rebasing: wire[start...])
                            ),
                            length <= wire.count - start
                        else { break }
                        let view = DBusMessageView(
                            wire: UnsafeRawBufferPointer(rebasing: wire[start..<(start + length)])
                        )
                        #expect(view != nil, "\(input.replay)")
                        found.append(length)
                        start += length
                    }
                }
                #expect(found == messages.map(\.count), "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }

        @Test("bytes that are no message are refused by the framing, not followed")
        func badFrames() {
            [UInt8](repeating: 0, count: 16).withUnsafeBytes {
                #expect(DBusMessageView.frame($0) == .invalid("byte order 0 is neither l nor B"))
            }
            var header: [UInt8] = [UInt8(ascii: "l"), 4, 0, 2] + [UInt8](repeating: 0, count: 12)
            header.withUnsafeBytes { #expect(DBusMessageView.frame($0) == .invalid("protocol version 2, not 1")) }
            header[3] = 1
            header[7] = 0x10  // a body of 256 MiB
            header.withUnsafeBytes {
                guard case .invalid = DBusMessageView.frame($0) else {
                    Issue.record("a message over 128 MiB was framed")
                    return
                }
            }
            header[7] = 0
            header.withUnsafeBytes { #expect(DBusMessageView.frame($0) == .length(16)) }
            header.withUnsafeBytes {
                #expect(DBusMessageView(wire: UnsafeRawBufferPointer(rebasing: $0[..<15])) == nil)
            }
            // A signal with no path, interface or member is framed but not viewed.
            header.withUnsafeBytes { #expect(DBusMessageView(wire: $0) == nil) }
        }
    }
}
