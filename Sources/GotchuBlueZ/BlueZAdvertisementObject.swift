import GotchuCore
import GotchuDBus

/// How the advertisement presents itself (`LEAdvertisement1.Type`), and so which address it goes out from.
///
/// Nothing ever connects to a receiver, so ``broadcast`` is the default: bluetoothd sends a non-connectable
/// advertisement from a non-resolvable private address made when it is registered, and a rotated EID, registered
/// anew, goes out from a new one. A ``peripheral`` advertisement goes out from the adapter's own identity address
/// (its public address, or its static random one), the same for every EID: whoever listens can link every EID of
/// that receiver, and so a person's payments, to one machine. That suits only a terminal whose place is no secret.
/// While the adapter is discoverable, bluetoothd makes it connectable, and the kernel then sends a broadcast
/// connectable too, from the identity address: ``BlueZDoctor/addressPrivacy(of:on:)`` warns of it.
public enum BlueZAdvertisingType: String, Hashable, Sendable, CaseIterable {
    /// Connectable and discoverable, from the adapter's identity address: the same address for every EID. For a
    /// fixed kiosk only.
    case peripheral
    /// Non-connectable, from a private address bluetoothd makes at each registration; BlueZ refuses `Discoverable`
    /// on it, so it is never set. The default.
    case broadcast
}

/// Builds the `org.bluez.LEAdvertisement1` object for an ``Advertisement``.
enum BlueZAdvertisementObject {
    static func serviceUUIDText(_ uuid: BluetoothUUID) -> String {
        uuid.shortForm ?? uuid.uuidString
    }

    static func serviceData(_ advertisement: Advertisement) -> DBusValue {
        var entries = [
            serviceUUIDText(advertisement.serviceUUID): DBusVariant(
                .bytes(advertisement.eid.serviceData(offline: advertisement.offline))
            )
        ]
        // The calibration rides in an AD structure of its own, so the EID's service data is unchanged for payers.
        if let calibratedRSSI = advertisement.calibratedRSSI {
            entries[serviceUUIDText(.gotchuCalibration)] = DBusVariant(.bytes(Calibration.serviceData(calibratedRSSI)))
        }
        return entries.dbusValue
    }

    static func properties(_ advertisement: Advertisement, type: BlueZAdvertisingType) -> [DBusProperty] {
        var properties = [
            DBusProperty("Type", type.rawValue),
            DBusProperty("ServiceUUIDs", [serviceUUIDText(advertisement.serviceUUID)]),
            DBusProperty("ServiceData", serviceData(advertisement)),
            DBusProperty("Includes", advertisement.includesTxPower ? ["tx-power"] : [String]()),
        ]
        if type == .peripheral {
            properties.append(DBusProperty("Discoverable", true))
        }
        if let interval = advertisement.interval {
            properties.append(DBusProperty("MinInterval", milliseconds(interval.lowerBound)))
            properties.append(DBusProperty("MaxInterval", milliseconds(interval.upperBound)))
        }
        return properties
    }

    static func milliseconds(_ duration: Duration) -> UInt32 {
        let (seconds, attoseconds) = duration.components
        return UInt32(clamping: max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }

    static func object(
        _ advertisement: Advertisement,
        type: BlueZAdvertisingType,
        onRelease: @escaping @Sendable () -> Void
    ) -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                BlueZ.advertisementInterface,
                methods: [
                    DBusMethod("Release") { _ in
                        onRelease()
                        return []
                    }
                ],
                properties: properties(advertisement, type: type)
            )
        ])
    }
}
