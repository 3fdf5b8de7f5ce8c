import ArgumentParser
import GotchuBlueZ
import GotchuLedgerClient

/// `gotchu doctor`: checks the Bluetooth stack and says what to fix.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract:
            "Check that bluetoothd, an adapter, LE advertising and the ledger are usable, and say how to fix what is not.",
        discussion: """
            Checks, in order: the D-Bus system bus, bluetoothd (org.bluez), each
            adapter (address, powered), its LE advertising manager (instances in
            use and free, TX power support), and which address a receiver's
            advertisements would go out from: a private one, new with each EID, when
            advertising as broadcast (the default); the adapter's public address,
            which anyone listening can follow, with --advertise-as peripheral (a
            warning: only a fixed kiosk should) or while the adapter is
            discoverable, which makes even a broadcast connectable. Then the ledger (--server, --ca-file): that
            it is reachable, that its TLS certificate is valid, that this clock is
            within 30 s of the server's (its Date header), and that the cached token
            is accepted. Every problem comes with the command that usually fixes it.
            Exits with status 1 when something blocks advertising, scanning or
            reaching the ledger.
            """
    )

    @OptionGroup var options: BlueZCommandOptions
    @OptionGroup var server: ServerOptions

    @Flag(help: "Check only the ledger, not Bluetooth (on a machine without a radio).")
    var skipBluetooth = false

    @Option(
        help: ArgumentHelp(
            "Judge the addresses of this advertisement type, as `gotchu receive --advertise-as` or the kiosk's "
                + "advertise_as sets it: broadcast (default) or peripheral.",
            valueName: "broadcast|peripheral"
        )
    )
    var advertiseAs: BlueZAdvertisingType = .broadcast

    func run() async throws {
        var failed = false
        if !skipBluetooth { failed = try await checkBluetooth() }
        let findings = await LedgerDoctor.examine(try server.client(requireLogin: false))
        for finding in findings {
            print("\(Self.mark(finding.severity))  ledger \(finding.check): \(finding.text)")
        }
        if findings.contains(where: { $0.severity == .problem }) { failed = true }
        if failed { throw ExitCode(1) }
    }

    private static func mark(_ severity: LedgerDoctor.Finding.Severity) -> String {
        switch severity {
        case .ok: "ok     "
        case .warning: "warning"
        case .problem: "PROBLEM"
        }
    }

    /// Prints the Bluetooth report; returns whether something blocks advertising or scanning.
    private func checkBluetooth() async throws -> Bool {
        let report = await BlueZDoctor.examine(bus: try options.dbusBus, advertisingType: advertiseAs)
        for adapter in report.adapters {
            var line = "\(adapter.name)  \(adapter.address ?? "-")"
            if let type = adapter.addressType { line += " (\(type))" }
            line += "  \(adapter.powered ? "on" : "off")"
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
        if report.advertisingPossible {
            print(
                "addresses: "
                    + (report.addressesPrivate
                        ? "private, a new one with each EID (broadcast)"
                        : "the adapter's own, the same for every EID (peripheral)")
            )
        }
        return report.severity == .problem
    }
}
