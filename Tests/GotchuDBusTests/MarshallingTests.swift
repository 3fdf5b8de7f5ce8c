import GotchuDBus
import GotchuTesting
import Testing

@Suite("Marshalling round trips through a real bus", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct MarshallingTests {
    static let bus = PrivateBus.Shared()

    static let samples: [(String, DBusValue)] = [
        ("byte", .byte(0xFE)),
        ("true", .boolean(true)),
        ("false", .boolean(false)),
        ("int16", .int16(-127)),
        ("uint16", .uint16(0xFEED)),
        ("int32", .int32(Int32.min)),
        ("uint32", .uint32(UInt32.max)),
        ("int64", .int64(Int64.min)),
        ("uint64", .uint64(UInt64.max)),
        ("double", .double(-1.5e300)),
        ("string", .string("héllo ✓")),
        ("empty string", .string("")),
        ("object path", .objectPath(DBusObjectPath(rawValue: "/org/bluez/hci0/dev_00_11")!)),
        ("signature", .signature(DBusSignature(rawValue: "a{sv}(ii)")!)),
        ("variant of int16", .variant(DBusVariant(.int16(-60)))),
        ("variant of variant", .variant(DBusVariant(.variant(DBusVariant(.string("deep")))))),
        ("bytes", .bytes(Array("a1b2c3d4e5".utf8))),
        ("empty bytes", .bytes([])),
        ("strings", .strings(["feed", "tx-power"])),
        ("empty strings", .strings([])),
        ("empty a{sv}", [String: DBusVariant]().dbusValue),
        (
            "a{sv} with ay",
            ["0000feed-0000-1000-8000-00805f9b34fb": DBusVariant(.bytes(Array("a1b2c3d4e5".utf8)))].dbusValue
        ),
        ("a{qv}", [UInt16(0x004C): DBusVariant(.bytes([1, 2, 3]))].dbusValue),
        ("empty a{qv}", [UInt16: DBusVariant]().dbusValue),
        ("empty ao", .array(DBusArray(elementType: .objectPath))),
        ("struct", .structure([.int32(1), .string("two"), .variant(DBusVariant(.boolean(true)))])),
        (
            "array of structs",
            .array(
                DBusArray(
                    elementType: .structure([.byte, .byte, .array(.byte)]),
                    elements: [.structure([.byte(0), .byte(0x16), .bytes([0xED, 0xFE])])]
                )
            )
        ),
        ("empty array of structs", .array(DBusArray(elementType: .structure([.int32, .string])))),
        (
            "a{oa{sa{sv}}}",
            [
                DBusObjectPath(rawValue: "/org/bluez/hci0")!: [
                    "org.bluez.Adapter1": ["Powered": DBusVariant(true), "Address": DBusVariant("00:11:22:33:44:55")]
                ]
            ].dbusValue
        ),
        (
            "array of arrays",
            .array(
                DBusArray(
                    elementType: .array(.int32),
                    elements: [.array(DBusArray(elementType: .int32)), [Int32(1), 2].dbusValue]
                )
            )
        ),
        ("double NaN-free extremes", .double(Double.leastNonzeroMagnitude)),
    ]

    @Test("every type survives a call and its reply", arguments: samples.map(\.0))
    func roundTrip(name: String) async throws {
        let value = try #require(Self.samples.first { $0.0 == name }?.1)
        try await withTwoConnections(on: Self.bus) { _, server, client in
            try await server.export(echoMethodObject(signature: [value.type]), at: echoPath)
            let reply = try await client.call(
                destination: await server.uniqueName,
                path: echoPath,
                interface: echoInterface,
                method: "Echo",
                [value]
            )
            #expect(reply == [value])
            #expect(reply.first?.type.signature == value.type.signature)
        }
    }

    @Test("several arguments keep their order and types")
    func manyArguments() async throws {
        let values: [DBusValue] = [.objectPath(.root), [String: DBusVariant]().dbusValue, .uint32(7), .strings(["x"])]
        try await withTwoConnections(on: Self.bus) { _, server, client in
            try await server.export(echoMethodObject(signature: DBusSignature(values.map(\.type))), at: echoPath)
            let reply = try await client.call(
                destination: await server.uniqueName,
                path: echoPath,
                interface: echoInterface,
                method: "Echo",
                values
            )
            #expect(reply == values)
        }
    }

    @Test("values that cannot be marshalled are refused before sending")
    func invalidValuesAreRefused() async throws {
        try await withTwoConnections(on: Self.bus) { _, server, client in
            let mixed = DBusValue.array(DBusArray(elementType: .string, elements: [.string("a"), .int32(1)]))
            await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: await server.uniqueName,
                    path: echoPath,
                    interface: echoInterface,
                    method: "Echo",
                    [mixed]
                )
            }
            await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: await server.uniqueName,
                    path: echoPath,
                    interface: echoInterface,
                    method: "Echo",
                    [.string("nul\u{0}inside")]
                )
            }
        }
    }

    @Test("signatures parse and reject garbage")
    func signatures() {
        #expect(DBusSignature(rawValue: "a{sv}")?.types == [.dictionary(key: .string, value: .variant)])
        #expect(DBusSignature(rawValue: "oa{sv}")?.types.count == 2)
        #expect(DBusSignature(rawValue: "a{vs}") == nil)  // keys must be basic
        #expect(DBusSignature(rawValue: "(") == nil)
        #expect(DBusSignature(rawValue: "()") == nil)
        #expect(DBusSignature(rawValue: "a") == nil)
        #expect(DBusSignature(rawValue: "z") == nil)
        #expect(DBusSignature(rawValue: String(repeating: "a", count: 33) + "y") == nil)
        #expect(DBusObjectPath(rawValue: "/a/b_c/D1") != nil)
        #expect(DBusObjectPath(rawValue: "/a/") == nil)
        #expect(DBusObjectPath(rawValue: "a/b") == nil)
        #expect(DBusObjectPath(rawValue: "/a//b") == nil)
        #expect(DBusObjectPath(rawValue: "/a-b") == nil)
    }

    @Test("typed property reads")
    func typedReads() {
        let props: [String: DBusVariant] = [
            "RSSI": DBusVariant(Int16(-60)), "Name": DBusVariant("x"), "Data": DBusVariant(.bytes([1, 2])),
        ]
        #expect(props["RSSI", as: Int16.self] == -60)
        #expect(props["RSSI", as: Int32.self] == nil)
        #expect(props["Name", as: String.self] == "x")
        #expect(props["Data", as: [UInt8].self] == [1, 2])
        #expect(props["Missing", as: Bool.self] == nil)
    }
}
