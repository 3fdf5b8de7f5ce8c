import ArgumentParser
import GotchuBlueZ
import GotchuDBus

struct BenchDBusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dbus",
        abstract: "Device1 PropertiesChanged signals turned into sightings per CPU second.",
        discussion: """
            Scans on the given bus, where an emitter owning org.bluez floods PropertiesChanged signals as soon as \
            discovery starts. Benchmarks/dbus-ingest sets up a private bus with such an emitter and runs this \
            and the same consumer written with Python's dbus-fast, and prints the ratio.
            """
    )

    @Option(
        help: ArgumentHelp(
            "D-Bus address of the bus with the emitter, such as unix:path=/tmp/bus.",
            valueName: "address"
        )
    )
    var bus: String

    @Option(help: "Signals to consume.")
    var count = 100_000

    @Flag(
        help: """
            Count the signals without reading them instead: what libdbus and the connection's loop cost alone, the \
            floor under any consumer built on libdbus.
            """
    )
    var libdbusFloor = false

    @Flag(
        help: """
            Read the signals through the radio's libdbus connection, as a scan does on a bus without a Unix \
            socket, instead of on a socket of the scan's own.
            """
    )
    var throughLibdbus = false

    func run() async throws {
        if libdbusFloor {
            let result = try await BlueZIngestBenchmark.runLibdbusFloor(bus: .address(bus), count: count)
            print(
                #"{"implementation": "libdbus-floor", "signals": \#(result.sightings), "sightings_per_cpu_second": \#(Int(result.sightingsPerCPUSecond))}"#
            )
            return
        }
        let result = try await BlueZIngestBenchmark.run(
            bus: .address(bus),
            count: count,
            signalReading: throughLibdbus ? .connection : .ownSocket
        )
        let name = throughLibdbus ? "gotchu-libdbus" : "gotchu"
        print(
            #"{"implementation": "\#(name)", "sightings": \#(result.sightings), "sightings_per_cpu_second": \#(Int(result.sightingsPerCPUSecond))}"#
        )
    }
}
