import CGotchuDBus
import GotchuCore
import GotchuTesting
import Testing

@testable import GotchuBlueZ
@testable import GotchuDBus

extension Fuzzing {
    /// BlueZ `Device1` properties as a hostile or buggy `org.bluez` could send them: wrong types, huge arrays, nested
    /// variants, odd UUID spellings. The decoder must ignore or report them, and only ever report what was sent.
    @Suite("Fuzzing: BlueZ sighting decoder", .timeLimit(.minutes(10)))
    struct SightingDecoderFuzzTests {
        static let ours = BluetoothUUID.gotchu
        static let paths = (0..<4).map { DBusObjectPath(rawValue: "/org/bluez/hci0/dev_00_00_00_00_00_0\($0)")! }
        static let uuidKeys = [
            "0000feed-0000-1000-8000-00805f9b34fb", "feed", "FEED", "0000FEED", "0000fe2c-0000-1000-8000-00805f9b34fb",
            "----", "fe-d", "", "0000feed-0000-1000-8000-00805f9b34fb ",
        ]

        /// Service data: usually `a{sv}` with `ay` values near a valid EID, sometimes anything at all.
        static func serviceData(_ input: inout FuzzInput) -> DBusVariant {
            guard !input.oneIn(6) else { return DBusVariant(DBusFuzzing.anyValue(&input, depth: 3)) }
            let entries = (0..<input.int(in: 0...3)).map { _ in
                let key = input.oneIn(5) ? input.string(maxLength: 8) : input.pick(uuidKeys)
                let eid = EID.random(using: &input.random).serviceData
                let value: DBusValue =
                    switch input.int(in: 0...5) {
                    case 0: .bytes(input.mutate(eid))
                    case 1: .variant(DBusVariant(.bytes(eid)))
                    case 2: DBusFuzzing.anyValue(&input, depth: 2)
                    default: .bytes(eid)
                    }
                return DBusDictionary.Entry(key: .string(key), value: .variant(DBusVariant(value)))
            }
            return DBusVariant(.dictionary(DBusDictionary(keyType: .string, valueType: .variant, entries: entries)))
        }

        /// RSSI or TX power: usually `n` (127 included), sometimes another type.
        static func signal(_ input: inout FuzzInput) -> DBusVariant {
            switch input.int(in: 0...3) {
            case 0: return DBusVariant(.int16(127))
            case 1: return DBusVariant(DBusFuzzing.anyValue(&input, depth: 2))
            default: return DBusVariant(.int16(input.boundaryInteger()))
            }
        }

        /// What the service data says about our UUID: `nil` if nothing is under it, else the EID or a refusal.
        static func expectedEID(_ serviceData: DBusVariant) -> EID?? {
            guard case .dictionary(let dictionary) = serviceData.value, dictionary.keyType == .string else {
                return .some(nil)
            }
            for entry in dictionary.entries {
                guard case .string(let key) = entry.key, BluetoothUUID(key) == ours else { continue }
                guard case .variant(let inner) = entry.value, case .array(let array) = inner.value,
                    array.elementType == .byte
                else { return .some(nil) }
                let bytes = array.elements.compactMap { UInt8(dbusValue: $0) }
                // An EID's 10 bytes, or those and the offline marker (0x01).
                let digits = bytes.count == 11 && bytes.last == 0x01 ? Array(bytes.prefix(10)) : bytes
                return .some(EID(serviceData: digits))
            }
            return nil
        }

        /// Random `Device1` properties, as `PropertiesChanged` carries them.
        static func properties(_ input: inout FuzzInput) -> [String: DBusVariant] {
            var properties: [String: DBusVariant] = [:]
            if input.oneIn(2) { properties["RSSI"] = Self.signal(&input) }
            if input.oneIn(3) { properties["TxPower"] = Self.signal(&input) }
            if input.oneIn(2) { properties["ServiceData"] = Self.serviceData(&input) }
            if input.oneIn(3) {
                properties[input.string(maxLength: 6)] = DBusVariant(DBusFuzzing.anyValue(&input, depth: 2))
            }
            return properties
        }

        /// `changes` with the reasons of refusals left out: the two readings word them differently.
        static func unworded(_ changes: SightingDecoder.Changes) -> SightingDecoder.Changes {
            var changes = changes
            if case .malformed = changes.serviceData { changes.serviceData = .malformed("") }
            return changes
        }

        @Test("PropertiesChanged read in place, in either byte order, says what the same properties read whole say")
        func inPlaceAgreesWithWhole() throws {
            let decoder = SightingDecoder(serviceUUID: Self.ours)
            let report = try Fuzz.run(iterations: 5_000, budget: .seconds(4)) { input in
                let properties = Self.properties(&input)
                let invalidated = (0..<input.int(in: 0...2)).map { _ in
                    input.pick(["RSSI", "TxPower", "ServiceData", "Name"])
                }
                let whole = decoder.changes(properties, invalidated: invalidated)
                let body: [DBusValue] = [.string("org.bluez.Device1"), .properties(properties), .strings(invalidated)]
                // Only what D-Bus can carry (a key with a NUL cannot be sent).
                guard let written = try? DBusWireFuzzTests.message(body) else { return }
                dbus_message_unref(written)
                for bigEndian in [false, true] {
                    let message = try #require(
                        DBusWireFuzzTests.demarshal(WireWriter.message(body, bigEndian: bigEndian)),
                        "\(input.replay)"
                    )
                    defer { dbus_message_unref(message) }
                    let reading = DBusMessageView.reading(message) { decoder.readPropertiesChanged($0) }
                    guard case .changes(let inPlace)? = reading else {
                        Issue.record("read as \(reading) \(input.replay)")
                        continue
                    }
                    #expect(Self.unworded(inPlace) == Self.unworded(whole), "\(properties) \(input.replay)")
                }
            }
            #expect(report.iterations > 0)
        }

        @Test("outcomes follow the properties sent; malformed data is reported, never decoded")
        func randomDevices() {
            let report = Fuzz.run(iterations: 10_000, budget: .seconds(5)) { input in
                var decoder = SightingDecoder(serviceUUID: Self.ours)
                var tracked = Set<DBusObjectPath>()
                for _ in 0..<input.int(in: 1...12) {
                    let path = input.pick(Self.paths)
                    let properties = Self.properties(&input)
                    let invalidated = input.oneIn(4) ? [input.pick(["RSSI", "TxPower", "ServiceData", "Name"])] : []
                    let event = input.int(in: 0...3)
                    let outcome: SightingDecoder.Outcome
                    switch event {
                    case 0: outcome = decoder.known(path, properties: properties)
                    case 1: outcome = decoder.added(path, properties: properties)
                    case 2: outcome = decoder.changed(path, properties: properties, invalidated: invalidated)
                    default:
                        decoder.removed(path)
                        tracked.remove(path)
                        #expect(!decoder.tracks(path), "\(input.replay)")
                        continue
                    }
                    tracked.insert(path)
                    #expect(decoder.tracks(path), "\(input.replay)")

                    if let serviceData = properties["ServiceData"], let expected = Self.expectedEID(serviceData) {
                        if let eid = expected {
                            if case .sighting(let got, _, _, _, _) = outcome {
                                #expect(got == eid, "\(input.replay)")
                            } else {
                                // `known` stays silent about cached devices that report no RSSI.
                                #expect(
                                    event == 0 && properties["RSSI"] == nil && outcome == .nothing,
                                    "\(input.replay)"
                                )
                            }
                        } else {
                            guard case .malformed = outcome else {
                                Issue.record("\(serviceData) gave \(outcome), not malformed \(input.replay)")
                                continue
                            }
                        }
                    }
                    if case .sighting(_, let rssi, let txPower, _, _) = outcome {
                        #expect(rssi != 127 && txPower != 127, "\(input.replay)")
                        if let sent = properties["RSSI"], !invalidated.contains("RSSI") || event != 2 {
                            let value = Int16(dbusValue: sent.value)
                            #expect(
                                rssi == (value == 127 ? nil : value),
                                "\(sent) gave \(String(describing: rssi)) \(input.replay)"
                            )
                        }
                    }
                }
                #expect(decoder.deviceCount == tracked.count, "\(input.replay)")
            }
            #expect(report.iterations > 0)
        }
    }
}
