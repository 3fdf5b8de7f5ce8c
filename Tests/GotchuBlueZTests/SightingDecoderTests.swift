import GotchuBlueZ
import GotchuCore
import GotchuDBus
import Testing

@Suite("Sighting decoder", .timeLimit(.minutes(10)))
struct SightingDecoderTests {
    let path = DBusObjectPath(rawValue: "/org/bluez/hci0/dev_11_22_33_44_55_66")!
    let feed = "0000feed-0000-1000-8000-00805f9b34fb"

    func serviceData(_ bytes: [UInt8], key: String? = nil) -> DBusVariant {
        DBusVariant([key ?? feed: DBusVariant(.bytes(bytes))].dbusValue)
    }

    @Test("EID, RSSI and TX power from InterfacesAdded, then RSSI updates")
    func decodes() {
        var decoder = SightingDecoder(serviceUUID: .gotchu)
        let added = decoder.added(
            path,
            properties: [
                "RSSI": DBusVariant(Int16(-60)), "TxPower": DBusVariant(Int16(4)),
                "ServiceData": serviceData(Array("a1b2c3d4e5".utf8)),
            ]
        )
        #expect(added == .sighting(eid: EID(rawValue: "a1b2c3d4e5")!, rssi: -60, txPower: 4))
        let moved = decoder.changed(path, properties: ["RSSI": DBusVariant(Int16(-48))], invalidated: [])
        #expect(moved == .sighting(eid: EID(rawValue: "a1b2c3d4e5")!, rssi: -48, txPower: 4))
        let unknown = decoder.changed(path, properties: ["RSSI": DBusVariant(Int16(127))], invalidated: [])
        #expect(unknown == .sighting(eid: EID(rawValue: "a1b2c3d4e5")!, rssi: nil, txPower: 4))
        #expect(decoder.changed(path, properties: ["Connected": DBusVariant(false)], invalidated: []) == .nothing)
    }

    @Test("a calibration beside the EID is carried; one that is not one byte is none")
    func calibration() {
        var decoder = SightingDecoder(serviceUUID: .gotchu)
        let calibrationKey = "0000fedc-0000-1000-8000-00805f9b34fb"
        let eid = EID(rawValue: "a1b2c3d4e5")!
        let both = DBusVariant(
            [
                feed: DBusVariant(.bytes(Array("a1b2c3d4e5".utf8))),
                calibrationKey: DBusVariant(.bytes([UInt8(bitPattern: -59)])),
            ].dbusValue
        )
        let added = decoder.added(path, properties: ["RSSI": DBusVariant(Int16(-60)), "ServiceData": both])
        #expect(added == .sighting(eid: eid, rssi: -60, txPower: nil, calibratedRSSI: -59))
        // An RSSI update keeps what the service data said.
        let moved = decoder.changed(path, properties: ["RSSI": DBusVariant(Int16(-50))], invalidated: [])
        #expect(moved == .sighting(eid: eid, rssi: -50, txPower: nil, calibratedRSSI: -59))
        let long = DBusVariant(
            [
                feed: DBusVariant(.bytes(Array("a1b2c3d4e5".utf8))),
                calibrationKey: DBusVariant(.bytes([0xC5, 0x00])),
            ].dbusValue
        )
        let garbled = decoder.changed(path, properties: ["ServiceData": long], invalidated: [])
        #expect(garbled == .sighting(eid: eid, rssi: -50, txPower: nil, calibratedRSSI: nil))
        // A calibration alone is no Gotchu advertisement.
        var other = SightingDecoder(serviceUUID: .gotchu)
        let alone = other.added(path, properties: ["ServiceData": serviceData([0xC5], key: calibrationKey)])
        #expect(alone == .nothing)
    }

    @Test("short UUID keys are the same UUID")
    func shortKeys() {
        var decoder = SightingDecoder(serviceUUID: .gotchu)
        let outcome = decoder.added(
            path,
            properties: ["ServiceData": serviceData(Array("0123456789".utf8), key: "FEED")]
        )
        #expect(outcome == .sighting(eid: EID(rawValue: "0123456789")!, rssi: nil, txPower: nil))
    }

    @Test(
        "malformed service data is reported, never decoded",
        arguments: [
            Array("a1b2c3d4e".utf8), Array("a1b2c3d4e5f".utf8), Array("A1B2C3D4E5".utf8), Array("zzzzzzzzzz".utf8), [],
        ]
    )
    func malformed(bytes: [UInt8]) {
        var decoder = SightingDecoder(serviceUUID: .gotchu)
        let outcome = decoder.added(
            path,
            properties: ["ServiceData": serviceData(bytes), "RSSI": DBusVariant(Int16(-50))]
        )
        guard case .malformed = outcome else {
            Issue.record("expected malformed, got \(outcome)")
            return
        }
    }

    @Test("wrong D-Bus types are malformed or unknown")
    func wrongTypes() {
        var decoder = SightingDecoder(serviceUUID: .gotchu)
        let asString = decoder.added(path, properties: ["ServiceData": DBusVariant("a1b2c3d4e5")])
        #expect({ if case .malformed = asString { true } else { false } }())
        let innerString = decoder.added(
            path,
            properties: ["ServiceData": DBusVariant([feed: DBusVariant("a1b2c3d4e5")].dbusValue)]
        )
        #expect({ if case .malformed = innerString { true } else { false } }())
        let rssiAsInt32 = decoder.added(
            path,
            properties: ["ServiceData": serviceData(Array("a1b2c3d4e5".utf8)), "RSSI": DBusVariant(Int32(-50))]
        )
        #expect(rssiAsInt32 == .sighting(eid: EID(rawValue: "a1b2c3d4e5")!, rssi: nil, txPower: nil))
    }

    @Test("other UUIDs are not ours, and cached devices without RSSI are not in range")
    func notOurs() {
        var decoder = SightingDecoder(serviceUUID: .gotchu)
        #expect(
            decoder.added(path, properties: ["ServiceData": serviceData(Array("a1b2c3d4e5".utf8), key: "180f")])
                == .nothing
        )
        #expect(decoder.known(path, properties: ["ServiceData": serviceData(Array("a1b2c3d4e5".utf8))]) == .nothing)
    }
}
