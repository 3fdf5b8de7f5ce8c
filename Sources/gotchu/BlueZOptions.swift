import ArgumentParser
import GotchuDBus

/// Options shared by the BlueZ commands and radios: which bus, which adapter.
struct BlueZCommandOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Bus to reach bluetoothd on: system (default; DBUS_SYSTEM_BUS_ADDRESS is honoured), session, or a D-Bus address such as unix:path=/tmp/bus.",
            valueName: "bus"
        )
    )
    var bus = "system"

    @Option(help: ArgumentHelp("Bluetooth adapter, such as hci0 (default: the first powered one).", valueName: "name"))
    var adapter: String?

    var dbusBus: DBusConnection.Bus {
        get throws {
            guard let named = DBusConnection.Bus(named: bus) else {
                throw ValidationError("--bus must be \(DBusConnection.Bus.namingHint)")
            }
            return named
        }
    }
}
