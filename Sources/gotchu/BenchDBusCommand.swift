import ArgumentParser
@_spi(Benchmarks) import GotchuBlueZ
import GotchuDBus

struct BenchDBusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dbus",
        abstract: "Device1 PropertiesChanged signals turned into sightings per CPU second.",
        discussion: """
            Scans on the given bus, where an emitter owning org.bluez floods PropertiesChanged signals as soon as \\
            discovery starts. Benchmarks/dbus-ingest sets up a private bus with such an emitter and runs this \\
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

    func run() async throws {
        let result = try await BlueZIngestBenchmark.run(bus: .address(bus), count: count)
        Console().line(
            #"{"implementation": "gotchu", "sightings": \#(result.sightings), "sightings_per_cpu_second": \#(Int(result.sightingsPerCPUSecond))}"#
        )
    }
}
