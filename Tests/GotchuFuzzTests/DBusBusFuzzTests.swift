import GotchuDBus
import GotchuTesting
import Testing

extension Fuzzing {
    /// Random and hostile values sent through a real private bus to an echo object: each call is answered with exactly
    /// the values sent, or refused with a ``DBusError``; the connection survives either way.
    @Suite(
        "Fuzzing: D-Bus values through a bus",
        .enabled(if: PrivateBus.isAvailable, "dbus-daemon is not installed"),
        .timeLimit(.minutes(10))
    )
    struct DBusBusFuzzTests {
        static let path = DBusObjectPath(rawValue: "/io/gotchu/fuzz/echo")!
        static let interface = "io.gotchu.Fuzz.Echo"

        /// An object whose `Echo` takes `signature` and answers with what it received.
        static func echo(_ signature: DBusSignature) -> DBusObject {
            DBusObject(interfaces: [
                DBusInterface(
                    interface,
                    methods: [DBusMethod("Echo", inputs: signature, outputs: signature) { call in call.body }]
                )
            ])
        }

        static let hostileKinds = 0...7

        /// Values D-Bus cannot carry or our model forbids, mixed into otherwise valid arguments. Regressions: an
        /// unvalidated signature value (kind 1) made libdbus abort the process, and dictionaries nested past the wire
        /// limit (kind 4) got the connection dropped by the bus.
        static func hostile(_ input: inout FuzzInput, kind: Int? = nil) -> DBusValue {
            switch kind ?? input.int(in: hostileKinds) {
            case 0:
                // An array holding an element of another type.
                return .array(DBusArray(elementType: .string, elements: [.string("a"), .int32(1)]))
            case 1:
                // A signature value built from types, never validated: too deep for D-Bus.
                return .signature(DBusSignature([DBusType](repeating: .array(.byte), count: input.int(in: 1...200))))
            case 2:
                return .string("nul\u{0}inside")
            case 3:
                // Variants nested around the D-Bus limit.
                var value = DBusValue.int32(1)
                for _ in 0..<input.int(in: 30...70) { value = .variant(DBusVariant(value)) }
                return value
            case 4:
                // Dictionaries of dictionaries: each level is two containers on the wire.
                var value = DBusValue.int32(1)
                for _ in 0..<input.int(in: 20...40) {
                    value = .dictionary(
                        DBusDictionary(
                            keyType: .string,
                            valueType: .variant,
                            entries: [DBusDictionary.Entry(key: .string("k"), value: .variant(DBusVariant(value)))]
                        )
                    )
                }
                return value
            case 5:
                return .dictionary(DBusDictionary(keyType: .variant, valueType: .string))
            case 6:
                return .structure([])
            default:
                // A string D-Bus must accept: noncharacters and the last code point are valid UTF-8.
                let scalar = input.pick([0xFFFE, 0xFFFF, 0xFDD0, 0x10FFFF, 0x1FFFE] as [UInt32])
                return .string("x" + String(Unicode.Scalar(scalar)!))
            }
        }

        @Test("each kind of hostile value is refused or echoed, and the connection survives", arguments: hostileKinds)
        func hostileValue(kind: Int) async throws {
            try await PrivateBus.with { bus in
                let server = try await DBusConnection.connect(to: .address(bus.address))
                let client = try await DBusConnection.connect(to: .address(bus.address))
                try await Fuzz.run(iterations: 20, budget: .seconds(2)) { input in
                    let values = [Self.hostile(&input, kind: kind)]
                    await server.unexport(Self.path)
                    try await server.export(Self.echo(DBusSignature(values.map(\.type))), at: Self.path)
                    do {
                        let reply = try await client.call(
                            destination: await server.uniqueName,
                            path: Self.path,
                            interface: Self.interface,
                            method: "Echo",
                            values,
                            timeout: .seconds(60)  // only bounds a hang: a busy machine may be slow to answer
                        )
                        #expect(reply == values, "\(input.replay)")
                    } catch let error as DBusError {
                        #expect(
                            error.name == .invalidArgs || error.name == .invalidSignature,
                            "\(error) \(input.replay)"
                        )
                    }
                    let connected = await client.isConnected
                    #expect(connected, "\(input.replay)")
                }
                await client.close()
                await server.close()
            }
        }

        @Test("calls echo random values exactly or are refused cleanly, and the connection survives")
        func echoRandomValues() async throws {
            try await PrivateBus.with { bus in
                let server = try await DBusConnection.connect(to: .address(bus.address))
                let client = try await DBusConnection.connect(to: .address(bus.address))
                let destination = await server.uniqueName
                var echoed = 0
                var refused = 0
                let report = try await Fuzz.run(iterations: 2_000, budget: .seconds(8)) { input in
                    var values = (0..<input.int(in: 0...3)).map { _ in DBusFuzzing.anyValue(&input, depth: 4) }
                    if input.oneIn(3) { values.insert(Self.hostile(&input), at: input.int(in: 0...values.count)) }
                    await server.unexport(Self.path)
                    try await server.export(Self.echo(DBusSignature(values.map(\.type))), at: Self.path)
                    do {
                        let reply = try await client.call(
                            destination: destination,
                            path: Self.path,
                            interface: Self.interface,
                            method: "Echo",
                            values,
                            timeout: .seconds(60)  // only bounds a hang: a busy machine may be slow to answer
                        )
                        #expect(reply == values, "\(input.replay)")
                        echoed += 1
                    } catch let error as DBusError {
                        #expect(
                            error.name != .noReply && error.name != .disconnected,
                            "\(error) sending \(DBusSignature(values.map(\.type))) \(input.replay)"
                        )
                        refused += 1
                    }
                    let clientConnected = await client.isConnected
                    let serverConnected = await server.isConnected
                    let connected = clientConnected && serverConnected
                    #expect(connected, "\(input.replay)")
                    // Every later call would fail the same way.
                    if !connected { throw TestingError("connection lost") }
                }
                #expect(report.iterations > 0)
                // A replay of one case may be a refused one; a whole run must echo something.
                if report.iterations >= 50 { #expect(echoed > 0, "\(report): \(echoed) echoed, \(refused) refused") }
                await client.close()
                await server.close()
            }
        }
    }
}
