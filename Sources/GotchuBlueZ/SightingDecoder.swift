public import GotchuCore
public import GotchuDBus

/// Turns BlueZ `Device1` properties into sightings: keeps what each device path last reported, decodes the EID
/// from service data, and reports malformed data instead of trusting it. Sans-IO, so it is tested directly.
public struct SightingDecoder: Sendable {
    /// What one update produced.
    public enum Outcome: Hashable, Sendable {
        /// A Gotchu advertisement was received.
        case sighting(eid: EID, rssi: Int16?, txPower: Int16?)
        /// Service data under our UUID (or the ServiceData property itself) was not a valid EID.
        case malformed(String)
        /// Nothing to report (another kind of device, or a change that is not a reception).
        case nothing
    }

    private struct Device {
        var eid: EID?
        var rssi: Int16?
        var txPower: Int16?
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

    /// A device seen in `GetManagedObjects` at start. Cached devices without RSSI are not in range now, so they
    /// are remembered but not reported.
    public mutating func known(_ path: DBusObjectPath, properties: [String: DBusVariant]) -> Outcome {
        let outcome = update(path, changed: properties, invalidated: [], isNew: true)
        if case .sighting(_, nil, _) = outcome, properties["RSSI"] == nil { return .nothing }
        return outcome
    }

    /// A device from `InterfacesAdded`: a fresh reception.
    public mutating func added(_ path: DBusObjectPath, properties: [String: DBusVariant]) -> Outcome {
        update(path, changed: properties, invalidated: [], isNew: true)
    }

    /// `PropertiesChanged` of a device.
    public mutating func changed(
        _ path: DBusObjectPath,
        properties: [String: DBusVariant],
        invalidated: [String]
    ) -> Outcome {
        update(path, changed: properties, invalidated: invalidated, isNew: false)
    }

    /// `InterfacesRemoved` of a device.
    public mutating func removed(_ path: DBusObjectPath) {
        devices[path] = nil
    }

    private mutating func update(
        _ path: DBusObjectPath,
        changed: [String: DBusVariant],
        invalidated: [String],
        isNew: Bool
    ) -> Outcome {
        var device = isNew ? Device() : devices[path] ?? Device()
        var problem: String?
        var received = isNew

        if let rssi = changed["RSSI"] {
            device.rssi = Self.signalStrength(rssi)
            received = true
        }
        if let txPower = changed["TxPower"] {
            device.txPower = Self.signalStrength(txPower)
        }
        if invalidated.contains("RSSI") { device.rssi = nil }
        if invalidated.contains("TxPower") { device.txPower = nil }
        if invalidated.contains("ServiceData") { device.eid = nil }

        if let serviceData = changed["ServiceData"] {
            received = true
            switch decodeEID(serviceData) {
            case .success(let eid): device.eid = eid
            case .failure(let reason):
                device.eid = nil
                problem = reason.description
            case nil: device.eid = nil
            }
        }
        devices[path] = device
        if let problem { return .malformed(problem) }
        guard received, let eid = device.eid else { return .nothing }
        return .sighting(eid: eid, rssi: device.rssi, txPower: device.txPower)
    }

    private struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// `nil` when the service data holds nothing under our UUID.
    private func decodeEID(_ serviceData: DBusVariant) -> Result<EID, Problem>? {
        guard case .dictionary(let dictionary) = serviceData.value, dictionary.keyType == .string else {
            return .failure(Problem(description: "ServiceData has type \(serviceData.value.type), not a{sv}"))
        }
        for entry in dictionary.entries {
            // BlueZ sends the canonical lowercase form; parse only what is spelled otherwise.
            guard case .string(let key) = entry.key, key == serviceUUID.uuidString || BluetoothUUID(key) == serviceUUID
            else { continue }
            guard case .variant(let inner) = entry.value, let bytes = [UInt8](dbusValue: inner.value) else {
                return .failure(Problem(description: "service data under \(key) is not ay"))
            }
            guard let eid = EID(serviceData: bytes) else {
                return .failure(Problem(description: "service data under \(key) is not an EID (\(bytes.count) bytes)"))
            }
            return .success(eid)
        }
        return nil
    }

    /// RSSI and TX power are `n`; 127 is the HCI "not available" value and other types are unknown too.
    static func signalStrength(_ variant: DBusVariant) -> Int16? {
        guard let value = Int16(dbusValue: variant.value), value != 127 else { return nil }
        return value
    }
}
