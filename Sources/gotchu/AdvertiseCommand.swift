import ArgumentParser
import Dispatch
import GotchuBlueZ
import GotchuCore
import GotchuDBus

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `gotchu advertise`: puts one EID on the air through BlueZ until interrupted.
struct AdvertiseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise",
        abstract: "Advertise an EID over Bluetooth LE through BlueZ until Ctrl-C.",
        discussion: """
            The advertisement carries the EID as 10 ASCII hex characters of service
            data under the service UUID (0xFEED by default), lists that UUID, and
            includes the TX power so scanners can compute attenuation. It is
            registered again if bluetoothd restarts.

            It goes out as a non-connectable broadcast, from a private address
            bluetoothd makes for it, not from the adapter's own. --advertise-as
            peripheral (also spelt --type) sends it from the adapter's public
            address, which anyone listening can recognise wherever the machine goes.

            Examples:
              gotchu advertise --eid a1b2c3d4e5
              gotchu advertise --eid a1b2c3d4e5 --adapter hci1 --advertise-as peripheral

            No root is needed: any user may register advertisements with
            bluetoothd. If registration fails, run `gotchu doctor`.
            """
    )

    @Option(help: ArgumentHelp("The EID to advertise: 10 lowercase hex characters.", valueName: "eid"))
    var eid: String

    @Option(help: ArgumentHelp("Service UUID: 16-bit (feed) or 128-bit.", valueName: "uuid"))
    var serviceUUID = "feed"

    @Option(
        name: [.customLong("advertise-as"), .customLong("type")],
        help: ArgumentHelp(
            "broadcast (default: non-connectable, from a private address) or peripheral (connectable and "
                + "discoverable, from the adapter's public address).",
            valueName: "broadcast|peripheral"
        )
    )
    var type = "broadcast"

    @Option(
        help: ArgumentHelp(
            "Advertising interval in milliseconds (BlueZ before 5.77 ignores it unless bluetoothd runs with -E).",
            valueName: "ms"
        )
    )
    var intervalMs: UInt32?

    @OptionGroup var options: BlueZCommandOptions

    func validate() throws {
        guard EID(rawValue: eid) != nil else { throw ValidationError("--eid must be 10 lowercase hex characters") }
        guard BluetoothUUID(serviceUUID) != nil else {
            throw ValidationError("--service-uuid must be a 16-bit (feed) or 128-bit Bluetooth UUID")
        }
        guard BlueZAdvertisingType(rawValue: type) != nil else {
            throw ValidationError("--advertise-as must be broadcast or peripheral")
        }
    }

    func run() async throws {
        guard let eid = EID(rawValue: eid), let uuid = BluetoothUUID(serviceUUID),
            let advertisingType = BlueZAdvertisingType(rawValue: type)
        else { throw ValidationError("invalid arguments") }
        let interval = intervalMs.map { Duration.milliseconds($0)...Duration.milliseconds($0) }
        let configuration = BlueZRadio.Configuration(adapter: options.adapter, advertisingType: advertisingType)
        let bus = try options.dbusBus
        let output = Console()
        // Ctrl-C is taken from the start, so it always ends in an unregistered advertisement and a closed radio.
        do {
            try await withTaskCancellationOnSignals {
                let radio = try await BlueZRadio.connect(to: bus, configuration: configuration)
                do {
                    let adapter = try await radio.adapter()
                    let advertisement = Advertisement(eid: eid, serviceUUID: uuid, interval: interval)
                    try await radio.withAdvertisement(advertisement) { _ in
                        output.line(
                            "advertising \(eid) under \(uuid.shortForm ?? uuid.uuidString) on \(adapter.name) as "
                                + "\(advertisingType.rawValue); Ctrl-C to stop"
                        )
                        while true { try await Task.sleep(for: .seconds(3600)) }
                    }
                } catch {
                    await radio.close()
                    throw error
                }
            }
        } catch is CancellationError {
        }
        output.line("stopped")
    }
}
