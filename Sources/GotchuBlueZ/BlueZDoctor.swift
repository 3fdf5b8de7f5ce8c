public import GotchuDBus

/// What ``BlueZDoctor`` found, with sentences a Raspberry Pi owner can act on.
public struct BlueZDoctorReport: Hashable, Sendable {
    /// One adapter as the doctor saw it.
    public struct Adapter: Hashable, Sendable {
        public var name: String
        public var address: String?
        public var powered: Bool
        public var discovering: Bool
        /// `LEAdvertisingManager1.ActiveInstances`, when the adapter can advertise.
        public var activeAdvertisements: UInt8?
        /// `LEAdvertisingManager1.SupportedInstances`: advertisements still free.
        public var freeAdvertisements: UInt8?
        public var supportedIncludes: [String]
    }

    /// How serious a finding is.
    public enum Severity: String, Hashable, Sendable, Comparable {
        case ok, warning, problem

        public static func < (lhs: Severity, rhs: Severity) -> Bool {
            let order: [Severity] = [.ok, .warning, .problem]
            return order.firstIndex(of: lhs)! < order.firstIndex(of: rhs)!
        }
    }

    /// One sentence with its severity.
    public struct Finding: Hashable, Sendable {
        public var severity: Severity
        public var text: String
    }

    /// Whether the bus could be reached at all.
    public var busReachable: Bool
    /// Whether `org.bluez` (bluetoothd) is on the bus.
    public var bluetoothdRunning: Bool
    public var adapters: [Adapter]
    /// Whether a scan could start (an adapter is powered).
    public var discoveryPossible: Bool
    /// Whether an advertisement could be registered (a powered adapter with a free instance).
    public var advertisingPossible: Bool
    public var findings: [Finding]

    /// The worst severity among the findings.
    public var severity: Severity { findings.map(\.severity).max() ?? .ok }
}

/// Checks what the Bluetooth stack offers and explains what to fix.
public enum BlueZDoctor {
    /// Examines the system bus (or `DBUS_SYSTEM_BUS_ADDRESS`).
    public static func examine(bus: DBusConnection.Bus = .system) async -> BlueZDoctorReport {
        do {
            return try await DBusConnection.withConnection(to: bus) { connection in
                await examine(connection: connection)
            }
        } catch {
            return BlueZDoctorReport(
                busReachable: false,
                bluetoothdRunning: false,
                adapters: [],
                discoveryPossible: false,
                advertisingPossible: false,
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
    public static func examine(connection: DBusConnection) async -> BlueZDoctorReport {
        var report = BlueZDoctorReport(
            busReachable: true,
            bluetoothdRunning: false,
            adapters: [],
            discoveryPossible: false,
            advertisingPossible: false,
            findings: []
        )
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
            }
        }
        return report
    }
}
