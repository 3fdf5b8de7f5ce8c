public import GotchuCore
public import GotchuDBus

/// Turns BlueZ `Device1` properties into sightings: keeps what each device path last reported, decodes the EID
/// from service data, and reports malformed data instead of trusting it. Sans-IO, so it is tested directly.
public struct SightingDecoder: Sendable {
    /// What one update produced.
    public enum Outcome: Hashable, Sendable {
        /// A Gotchu advertisement was received, with the terminal's calibration when its service data carries one
        /// (one byte under ``BluetoothUUID/gotchuCalibration``; its plausibility is the selector's judgement).
        case sighting(eid: EID, rssi: Int16?, txPower: Int16?, calibratedRSSI: Int16? = nil, offline: Bool = false)
        /// Service data under our UUID (or the ServiceData property itself) was not a valid EID.
        case malformed(String)
        /// Nothing to report (another kind of device, or a change that is not a reception).
        case nothing
    }

    private struct Device {
        var eid: EID?
        /// Whether the EID came with ``EID/offlineMarker``.
        var offline = false
        var rssi: Int16?
        var txPower: Int16?
        var calibratedRSSI: Int16?
    }

    /// The service UUID whose service data carries EIDs.
    public let serviceUUID: BluetoothUUID
    private var devices: [DBusObjectPath: Device] = [:]

    /// Creates a decoder for `serviceUUID`.
    public init(serviceUUID: BluetoothUUID) {
        self.serviceUUID = serviceUUID
    }

    /// The number of devices tracked.
    public var deviceCount: Int { devices.count }

    /// Whether `path` is tracked already.
    public func tracks(_ path: DBusObjectPath) -> Bool { devices[path] != nil }

    /// What one update says about the properties a sighting needs, already typed. It is built from a property
    /// dictionary, or read in place from a `PropertiesChanged` signal (the scanner's fast path); either way the same
    /// rules then apply.
    public struct Changes: Hashable, Sendable {
        /// What the service data said.
        public enum ServiceData: Hashable, Sendable {
            /// An EID under our UUID, and whether ``EID/offlineMarker`` followed it.
            case eid(EID, offline: Bool = false)
            /// Nothing under our UUID.
            case notOurs
            /// Not a valid EID, or not of the types BlueZ sends; the reason is for the debug log.
            case malformed(String)
        }

        /// The RSSI when the update carries one: `.some(nil)` when it is unknown (127) or of another type.
        public var rssi: Int16??
        /// The TX power when the update carries one, as for ``rssi``.
        public var txPower: Int16??
        /// The service data when the update carries it.
        public var serviceData: ServiceData?
        /// The calibration found in the service data, when the update carries service data: `nil` when there is
        /// none or it is not one byte.
        public var calibratedRSSI: Int16?
        /// Which of these properties the update invalidates.
        public var invalidatesRSSI = false
        /// Whether the update invalidates `TxPower`, forgetting the TX power last reported.
        public var invalidatesTxPower = false
        /// Whether the update invalidates `ServiceData`, forgetting the EID and calibration last reported.
        public var invalidatesServiceData = false

        /// Changes that carry nothing.
        public init() {}
    }

    /// A device seen in `GetManagedObjects` at start. Cached devices without RSSI are not in range now, so they
    /// are remembered but not reported.
    public mutating func known(_ path: DBusObjectPath, properties: [String: DBusVariant]) -> Outcome {
        let outcome = update(path, changes(properties, invalidated: []), isNew: true)
        if case .sighting(_, nil, _, _, _) = outcome, properties["RSSI"] == nil { return .nothing }
        return outcome
    }

    /// A device from `InterfacesAdded`: a fresh reception.
    public mutating func added(_ path: DBusObjectPath, properties: [String: DBusVariant]) -> Outcome {
        update(path, changes(properties, invalidated: []), isNew: true)
    }

    /// `PropertiesChanged` of a device.
    public mutating func changed(
        _ path: DBusObjectPath,
        properties: [String: DBusVariant],
        invalidated: [String]
    ) -> Outcome {
        update(path, changes(properties, invalidated: invalidated), isNew: false)
    }

    /// `PropertiesChanged` of a device, with its properties already typed.
    public mutating func changed(_ path: DBusObjectPath, _ changes: Changes) -> Outcome {
        update(path, changes, isNew: false)
    }

    /// `InterfacesRemoved` of a device.
    public mutating func removed(_ path: DBusObjectPath) {
        devices[path] = nil
    }

    /// Types the properties a sighting needs and ignores the others.
    public func changes(_ properties: [String: DBusVariant], invalidated: [String]) -> Changes {
        var changes = Changes()
        if let rssi = properties["RSSI"] { changes.rssi = .some(Self.signalStrength(rssi)) }
        if let txPower = properties["TxPower"] { changes.txPower = .some(Self.signalStrength(txPower)) }
        if let serviceData = properties["ServiceData"] {
            changes.serviceData = decodeServiceData(serviceData)
            changes.calibratedRSSI = Self.calibration(serviceData)
        }
        changes.invalidatesRSSI = invalidated.contains("RSSI")
        changes.invalidatesTxPower = invalidated.contains("TxPower")
        changes.invalidatesServiceData = invalidated.contains("ServiceData")
        return changes
    }

    private mutating func update(_ path: DBusObjectPath, _ changes: Changes, isNew: Bool) -> Outcome {
        if isNew { devices[path] = Device() }
        // One lookup: the device is updated where it is stored.
        return Self.apply(changes, to: &devices[path, default: Device()], isNew: isNew)
    }

    private static func apply(_ changes: Changes, to device: inout Device, isNew: Bool) -> Outcome {
        var problem: String?
        var received = isNew
        if let rssi = changes.rssi {
            device.rssi = rssi
            received = true
        }
        if let txPower = changes.txPower { device.txPower = txPower }
        if changes.invalidatesRSSI { device.rssi = nil }
        if changes.invalidatesTxPower { device.txPower = nil }
        if changes.invalidatesServiceData {
            device.eid = nil
            device.calibratedRSSI = nil
        }

        if let serviceData = changes.serviceData {
            received = true
            device.calibratedRSSI = changes.calibratedRSSI
            switch serviceData {
            case .eid(let eid, let offline):
                device.eid = eid
                device.offline = offline
            case .malformed(let reason):
                device.eid = nil
                problem = reason
            case .notOurs: device.eid = nil
            }
        }
        if let problem { return .malformed(problem) }
        guard received, let eid = device.eid else { return .nothing }
        return .sighting(
            eid: eid,
            rssi: device.rssi,
            txPower: device.txPower,
            calibratedRSSI: device.calibratedRSSI,
            offline: device.offline
        )
    }

    /// The calibration in a `ServiceData` property: the `ay` under ``BluetoothUUID/gotchuCalibration``, one byte.
    static func calibration(_ serviceData: DBusVariant) -> Int16? {
        guard case .dictionary(let dictionary) = serviceData.value else { return nil }
        for entry in dictionary.entries {
            guard case .string(let key) = entry.key, BluetoothUUID(key) == .gotchuCalibration else { continue }
            guard case .variant(let inner) = entry.value, let bytes = [UInt8](dbusValue: inner.value) else {
                return nil
            }
            return Calibration.calibratedRSSI(serviceData: bytes)
        }
        return nil
    }

    private func decodeServiceData(_ serviceData: DBusVariant) -> Changes.ServiceData {
        guard case .dictionary(let dictionary) = serviceData.value, dictionary.keyType == .string else {
            return .malformed("ServiceData has type \(serviceData.value.type), not a{sv}")
        }
        for entry in dictionary.entries {
            guard case .string(let key) = entry.key, isOurs(key) else { continue }
            guard case .variant(let inner) = entry.value, let bytes = [UInt8](dbusValue: inner.value) else {
                return .malformed("service data under \(key) is not ay")
            }
            return Self.eid(bytes, key: key)
        }
        return .notOurs
    }

    /// Whether a service data key names our UUID. BlueZ sends the canonical lowercase form; parse only what is
    /// spelled otherwise.
    func isOurs(_ key: String) -> Bool {
        key == serviceUUID.uuidString || BluetoothUUID(key) == serviceUUID
    }

    static func eid(_ bytes: some Collection<UInt8>, key: @autoclosure () -> String) -> Changes.ServiceData {
        guard let (eid, offline) = EID.sighted(serviceData: bytes) else {
            return .malformed("service data under \(key()) is not an EID (\(bytes.count) bytes)")
        }
        return .eid(eid, offline: offline)
    }

    /// RSSI and TX power are `n`; 127 is the HCI "not available" value and other types are unknown too.
    static func signalStrength(_ variant: DBusVariant) -> Int16? {
        guard let value = Int16(dbusValue: variant.value), value != 127 else { return nil }
        return value
    }
}

extension SightingDecoder {
    /// What a `PropertiesChanged` signal read in place holds.
    enum SignalReading: Hashable, Sendable {
        /// The changes of another interface than `Device1`.
        case otherInterface
        /// Arguments of other types than `sa{sv}as`; the reason is for the debug log.
        case malformed(String)
        /// The changes of a device.
        case changes(Changes)
    }

    /// Reads a `PropertiesChanged` signal where it lies: the interface name, the three properties a sighting needs
    /// and the invalidated names. Every other property is stepped over without being decoded, and nothing is
    /// copied out of the message but an EID. The same rules as ``changes(_:invalidated:)``.
    func readPropertiesChanged(_ view: DBusMessageView) -> SignalReading {
        var arguments = view.arguments
        guard arguments.typeCode == UInt8(ascii: "s"), arguments.isString("org.bluez.Device1") else {
            return .otherInterface
        }
        guard view.signatureHasPrefix("sa{sv}") else {
            return .malformed("PropertiesChanged with arguments \(view.signatureText)")
        }
        arguments.next()
        var changes = Changes()
        arguments.forEachStringKeyedEntry { name, value in
            // `value` is the entry's variant.
            if name.equals("RSSI") {
                changes.rssi = .some(Self.signalStrength(value))
            } else if name.equals("TxPower") {
                changes.txPower = .some(Self.signalStrength(value))
            } else if name.equals("ServiceData") {
                var calibration: Int16?
                changes.serviceData = value.contents.map { readServiceData($0, calibration: &calibration) } ?? .notOurs
                changes.calibratedRSSI = calibration
            }
            return true
        }
        if arguments.next(), arguments.typeCode == UInt8(ascii: "a"), arguments.elementTypeCode == UInt8(ascii: "s"),
            var names = arguments.contents
        {
            while names.typeCode == UInt8(ascii: "s") {
                if names.isString("RSSI") {
                    changes.invalidatesRSSI = true
                } else if names.isString("TxPower") {
                    changes.invalidatesTxPower = true
                } else if names.isString("ServiceData") {
                    changes.invalidatesServiceData = true
                }
                names.next()
            }
        }
        return .changes(changes)
    }

    /// The service data inside its variant: a dictionary with string keys whose entry under our UUID holds `ay`.
    private func readServiceData(_ value: DBusArgumentReader, calibration: inout Int16?) -> Changes.ServiceData {
        var result = Changes.ServiceData.notOurs
        var entries = 0
        var decided = false
        var calibrationSeen = false
        let isDictionary =
            value.typeCode == UInt8(ascii: "a")
            && value.forEachStringKeyedEntry { key, entry in
                entries += 1
                // BlueZ writes keys as full lowercase UUIDs: those two are compared in place, and only a key in any
                // other spelling is parsed (once).
                let uuid =
                    key.equals(serviceUUID.uuidString)
                    ? serviceUUID
                    : key.equals(BluetoothUUID.gotchuCalibration.uuidString)
                        ? .gotchuCalibration : BluetoothUUID(key.string)
                if uuid == .gotchuCalibration, !calibrationSeen {
                    // The first entry under the calibration's UUID decides; anything but one byte is no calibration.
                    calibrationSeen = true
                    calibration = entry.contents?.bytes.flatMap { Calibration.calibratedRSSI(serviceData: $0) }
                    return !decided
                }
                guard !decided, uuid == serviceUUID else { return true }
                // The first entry under our UUID decides.
                result =
                    entry.contents?.bytes.map { Self.eid($0, key: key.string) }
                    ?? .malformed("service data under \(key.string) is not ay")
                decided = true
                return !calibrationSeen
            }
        // An empty dictionary has no entry to show its key type: ask for the signature then (rare).
        guard isDictionary, entries > 0 || value.signatureText.hasPrefix("a{s") else {
            return .malformed("ServiceData has type \(value.signatureText), not a{sv}")
        }
        return result
    }

    /// ``signalStrength(_:)`` on a variant read in place.
    private static func signalStrength(_ variant: DBusArgumentReader) -> Int16? {
        guard let value = variant.contents?.int16, value != 127 else { return nil }
        return value
    }
}
