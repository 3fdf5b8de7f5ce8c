public import GotchuDBus

/// What ``BlueZDoctor`` found, with sentences a Raspberry Pi owner can act on.
public struct BlueZDoctorReport: Hashable, Sendable {
    /// One adapter as the doctor saw it.
    public struct Adapter: Hashable, Sendable {
        /// The adapter's name, the last element of its object path, such as `hci0`.
        public var name: String
        /// `Adapter1.Address`, such as `DC:A6:32:01:02:03`; `nil` when bluetoothd did not report one.
        public var address: String?
        /// `Adapter1.AddressType`: `public` or (static) `random`, the kind of ``address``.
        public var addressType: String?
        /// `Adapter1.Powered`; an adapter that is off can neither scan nor advertise.
        public var powered: Bool
        /// `Adapter1.Discovering`: whether a scan (by any program) is running on it.
        public var discovering: Bool
        /// `LEAdvertisingManager1.ActiveInstances`, when the adapter can advertise.
        public var activeAdvertisements: UInt8?
        /// `LEAdvertisingManager1.SupportedInstances`: advertisements still free.
        public var freeAdvertisements: UInt8?
        /// `LEAdvertisingManager1.SupportedIncludes`, such as `tx-power`; empty when the adapter cannot advertise.
        public var supportedIncludes: [String]
    }

    /// How serious a finding is.
    public enum Severity: String, Hashable, Sendable, Comparable {
        /// `ok`: nothing to do; `warning`: works, but worth fixing; `problem`: stops scanning or advertising.
        /// Ordered from least to most serious.
        case ok, warning, problem

        public static func < (lhs: Severity, rhs: Severity) -> Bool {
            let order: [Severity] = [.ok, .warning, .problem]
            return order.firstIndex(of: lhs)! < order.firstIndex(of: rhs)!
        }
    }

    /// One sentence with its severity.
    public struct Finding: Hashable, Sendable {
        /// How serious it is.
        public var severity: Severity
        /// What was found and, unless it is `ok`, what to do about it.
        public var text: String
    }

    /// Whether the bus could be reached at all.
    public var busReachable: Bool
    /// Whether `org.bluez` (bluetoothd) is on the bus.
    public var bluetoothdRunning: Bool
    /// Every adapter bluetoothd exports, in object-path order; empty when none is present or bluetoothd is not running.
    public var adapters: [Adapter]
    /// Whether a scan could start (an adapter is powered).
    public var discoveryPossible: Bool
    /// Whether an advertisement could be registered (a powered adapter with a free instance).
    public var advertisingPossible: Bool
    /// The advertisement type the adapters were judged for.
    public var advertisingType: BlueZAdvertisingType
    /// Whether advertisements would go out from private addresses that change with each EID: advertising is
    /// possible, as ``BlueZAdvertisingType/broadcast``, on adapters that are not discoverable.
    public var addressesPrivate: Bool
    /// What the doctor found, one sentence each, in the order checked.
    public var findings: [Finding]

    /// The worst severity among the findings.
    public var severity: Severity { findings.map(\.severity).max() ?? .ok }
}

/// Checks what the Bluetooth stack offers and explains what to fix.
public enum BlueZDoctor {
    /// Examines the system bus (or `DBUS_SYSTEM_BUS_ADDRESS`).
    /// - Parameter advertisingType: The type the receiver advertises as, whose addresses are judged.
    public static func examine(
        bus: DBusConnection.Bus = .system,
        advertisingType: BlueZAdvertisingType = .broadcast
    ) async -> BlueZDoctorReport {
        do {
            return try await DBusConnection.withConnection(to: bus) { connection in
                await examine(connection: connection, advertisingType: advertisingType)
            }
        } catch {
            return BlueZDoctorReport(
                busReachable: false,
                bluetoothdRunning: false,
                adapters: [],
                discoveryPossible: false,
                advertisingPossible: false,
                advertisingType: advertisingType,
                addressesPrivate: false,
                findings: [
                    .init(
                        severity: .problem,
                        text: "cannot reach the D-Bus \(bus) (\(error)): is dbus running? sudo systemctl start dbus"
                    )
                ]
            )
        }
    }

    /// Examines the bus `connection` is on.
    /// - Parameter advertisingType: The type the receiver advertises as, whose addresses are judged.
    public static func examine(
        connection: DBusConnection,
        advertisingType: BlueZAdvertisingType = .broadcast
    ) async -> BlueZDoctorReport {
        var report = BlueZDoctorReport(
            busReachable: true,
            bluetoothdRunning: false,
            adapters: [],
            discoveryPossible: false,
            advertisingPossible: false,
            advertisingType: advertisingType,
            addressesPrivate: false,
            findings: []
        )
        var everyAddressPrivate = true
        func add(_ severity: BlueZDoctorReport.Severity, _ text: String) {
            report.findings.append(.init(severity: severity, text: text))
        }
        guard (try? await connection.nameOwner(of: BlueZ.service)) != nil else {
            add(
                .problem,
                "bluetoothd is not running: sudo systemctl start bluetooth (install it with sudo apt install bluez)"
            )
            return report
        }
        report.bluetoothdRunning = true
        add(.ok, "bluetoothd is running")
        let objects: BlueZ.ManagedObjects
        do {
            objects = try await BlueZ.managedObjects(on: connection)
        } catch {
            add(.problem, "bluetoothd did not list its objects (\(error)); try: sudo systemctl restart bluetooth")
            return report
        }
        let adapters = BlueZ.adapters(in: objects)
        if adapters.isEmpty {
            add(
                .problem,
                "no Bluetooth adapter: check that one is present (hciconfig -a or btmgmt info) and not blocked "
                    + "(rfkill list; sudo rfkill unblock bluetooth)"
            )
        }
        for adapter in adapters {
            let manager = objects[adapter.path]?[BlueZ.advertisingManagerInterface]
            let entry = BlueZDoctorReport.Adapter(
                name: adapter.name,
                address: adapter.address,
                addressType: adapter.addressType,
                powered: adapter.powered ?? false,
                discovering: adapter.discovering ?? false,
                activeAdvertisements: manager?["ActiveInstances", as: UInt8.self],
                freeAdvertisements: manager?["SupportedInstances", as: UInt8.self],
                supportedIncludes: manager?["SupportedIncludes", as: [String].self] ?? []
            )
            report.adapters.append(entry)
            let label = "adapter \(adapter.name) (\(adapter.address ?? "no address"))"
            guard entry.powered else {
                add(
                    .problem,
                    "\(label) is off: bluetoothctl power on (if that fails: rfkill list; sudo rfkill unblock bluetooth)"
                )
                continue
            }
            add(.ok, "\(label) is powered")
            report.discoveryPossible = true
            if manager == nil {
                add(.warning, "\(label) cannot advertise (no LEAdvertisingManager1): it may not support Bluetooth LE")
            } else if let free = entry.freeAdvertisements, free == 0 {
                add(
                    .warning,
                    "\(label) has no free advertising instance (\(entry.activeAdvertisements ?? 0) in use): "
                        + "stop other advertisers or sudo systemctl restart bluetooth"
                )
            } else {
                report.advertisingPossible = true
                if !entry.supportedIncludes.isEmpty, !entry.supportedIncludes.contains("tx-power") {
                    add(.warning, "\(label) cannot include TX power; payers will see RSSI only")
                }
                let privacy = addressPrivacy(of: advertisingType, on: adapter)
                if privacy.severity != .ok { everyAddressPrivate = false }
                report.findings.append(privacy)
            }
        }
        report.addressesPrivate = report.advertisingPossible && everyAddressPrivate
        return report
    }

    /// Which address advertisements of `type` go out from on `adapter`, and whether that lets a listener follow the
    /// receiver: a warning for ``BlueZAdvertisingType/peripheral``, whose address is the adapter's own, and for a
    /// broadcast on a discoverable adapter.
    ///
    /// The kernel sends an advertisement connectable when its type asks for it *or* when the adapter is connectable,
    /// and a connectable one goes out from the adapter's identity address (or, with bluetoothd's `Privacy` on, a
    /// resolvable private address that changes on a timer, not with the EID). bluetoothd 5.66 keeps the adapter
    /// connectable only while it is `Discoverable`, which the bus shows. The rest does not show: `Adapter1` has no
    /// privacy property (`Privacy` lives in bluetoothd's main.conf), its `AddressType` is that of the identity address
    /// even with privacy on, `btmgmt connectable on` is not seen, and the advertising manager's `SupportedFeatures`
    /// and `SupportedSecondaryChannels` describe TX power and extended advertising, not addresses.
    public static func addressPrivacy(
        of type: BlueZAdvertisingType,
        on adapter: BlueZAdapter
    ) -> BlueZDoctorReport.Finding {
        let address = adapter.address ?? "(address unknown)"
        switch type {
        case .broadcast where adapter.discoverable == true:
            let kind = adapter.addressType == "random" ? "static random address" : "public address"
            return .init(
                severity: .warning,
                text: "adapter \(adapter.name) is discoverable, so bluetoothd has made it connectable: while it is, "
                    + "even a broadcast goes out connectable, from its \(kind) \(address), and every EID can be "
                    + "linked to this machine. Turn it off: bluetoothctl discoverable off"
            )
        case .broadcast:
            return .init(
                severity: .ok,
                text: "adapter \(adapter.name) advertises as broadcast: each EID from a new private address, "
                    + "never from \(address)"
            )
        case .peripheral:
            let kind = adapter.addressType == "random" ? "static random address" : "public address"
            return .init(
                severity: .warning,
                text: "adapter \(adapter.name) advertises as peripheral: every EID goes out from its \(kind) "
                    + "\(address), so anyone listening can link them all, and the payments made to them, to this "
                    + "machine. Only a fixed kiosk should; a person's receiver should advertise as broadcast "
                    + "(the default)"
            )
        }
    }
}
