import ArgumentParser
import GotchuBlueZ

/// `gotchu doctor`: checks the Bluetooth stack and says what to fix.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check that bluetoothd, an adapter and LE advertising are usable, and say how to fix what is not.",
        discussion: """
            Checks, in order: the D-Bus system bus, bluetoothd (org.bluez), each
            adapter (address, powered), and its LE advertising manager (instances in
            use and free, TX power support). Every problem comes with the command
            that usually fixes it. Exits with status 1 when something blocks
            advertising or scanning.
            """
    )

    @OptionGroup var options: BlueZCommandOptions

    func run() async throws {
        let report = await BlueZDoctor.examine(bus: try options.dbusBus)
        for adapter in report.adapters {
            var line = "\(adapter.name)  \(adapter.address ?? "-")  \(adapter.powered ? "on" : "off")"
            if let active = adapter.activeAdvertisements, let free = adapter.freeAdvertisements {
                line += "  advertisements: \(active) active, \(free) free"
            }
            print(line)
        }
        for finding in report.findings {
            let mark =
                switch finding.severity {
                case .ok: "ok     "
                case .warning: "warning"
                case .problem: "PROBLEM"
                }
            print("\(mark)  \(finding.text)")
        }
        print("scanning: \(report.discoveryPossible ? "possible" : "not possible")")
        print("advertising: \(report.advertisingPossible ? "possible" : "not possible")")
        if report.severity == .problem { throw ExitCode(1) }
    }
}
