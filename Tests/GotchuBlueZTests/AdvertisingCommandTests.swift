import Foundation
import GotchuDBus
import GotchuTesting
import Synchronization
import Testing

@Suite(
    "gotchu advertise and gotchu doctor: which address an advertisement goes out from",
    requiresDBusDaemon,
    .timeLimit(.minutes(10))
)
struct AdvertisingCommandTests {
    @Test(
        "gotchu advertise registers a broadcast by default; --advertise-as peripheral, or its old spelling --type, a peripheral",
        arguments: [
            ([], "broadcast"),
            (["--advertise-as", "peripheral"], "peripheral"),
            (["--type", "peripheral"], "peripheral"),
            (["--type", "broadcast"], "broadcast"),
        ]
    )
    func advertise(options: [String], type: String) async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        try await withFakeBlueZ { bus, fake, _ in
            let command = try processes.start(
                ["advertise", "--eid", "a1b2c3d4e5", "--bus", bus.address] + options,
                user: "person"
            )
            _ = try await command.waitForLine { $0.hasPrefix("advertising a1b2c3d4e5 under feed on hci0 as \(type)") }
            let properties = try #require(await fake.registrations.first?.properties)
            #expect(properties["Type"] == DBusVariant(type))
            #expect(properties["Discoverable"] == (type == "broadcast" ? nil : DBusVariant(true)))
            #expect(try await command.stop(signal: SIGINT) == 0)
            #expect(await fake.registrations.isEmpty)
        }
    }

    @Test(
        "gotchu receive: a broadcast whose rotation is a new registration; --advertise-as peripheral warns, naming the address"
    )
    func receive() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "carol@example.com", "--server", url], user: "carol")
        try await withFakeBlueZ { bus, fake, _ in
            let receive = ["receive", "--amount", "1.00", "--radio", "bluez", "--bus", bus.address, "--server", url]
            let person = try processes.start(receive + ["--rotate-every", "5"], user: "carol")
            #expect(try await eventually { await fake.registrations.count == 1 }, "\(person.standardError)")
            let first = try #require(await fake.registrations.first)
            #expect(first.properties["Type"] == DBusVariant("broadcast"))
            #expect(first.properties["Discoverable"] == nil)
            // The rotation, 5 s on: the object on the air unregistered, a new one carrying the new EID registered.
            // A call is recorded before the fake reads the object's properties back; wait for the registration itself.
            #expect(try await eventually { await fake.registrations.contains { $0.path != first.path } })
            // On a busy machine a further rotation may already have followed; the first one is the one looked at.
            #expect(await fake.calls(named: "RegisterAdvertisement").count >= 2)
            let unregistered = await fake.calls(named: "UnregisterAdvertisement").map(\.arguments)
            #expect(unregistered.first == [.objectPath(first.path)])
            let second = try #require(await fake.registrations.first { $0.path != first.path })
            #expect(second.properties["Type"] == DBusVariant("broadcast"))
            #expect(second.properties["ServiceData"] != first.properties["ServiceData"])
            #expect(fake.advertisementChanges.withLock { $0.isEmpty })
            #expect(!person.standardError.contains("warning:"))
            _ = try await person.stop(signal: SIGINT)

            let counter = try processes.start(
                receive + ["--rotate-every", "off", "--advertise-as", "peripheral"],
                user: "carol"
            )
            #expect(
                // Whatever became of the first receiver's registration (it ended on SIGINT), the counter's is there.
                try await eventually {
                    await fake.registrations.contains { $0.properties["Type"] == DBusVariant("peripheral") }
                },
                "\(counter.standardError)"
            )
            let warned = try await eventually {
                counter.standardError.contains(
                    "warning: adapter hci0 advertises as peripheral: every EID goes out from its public address "
                        + "00:11:22:33:44:55"
                )
            }
            #expect(warned, "\(counter.standardError)")
            _ = try await counter.stop(signal: SIGINT)
        }
    }

    @Test("gotchu doctor says whether addresses are private, and warns about peripheral with the adapter's address")
    func doctor() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        try await withFakeBlueZ { bus, _, _ in
            // No ledger listens on the discard port: the doctor fails that check, after the Bluetooth ones.
            let common = ["doctor", "--bus", bus.address, "--server", "http://127.0.0.1:9"]
            let private_ = try processes.start(common, user: "person")
            _ = try await private_.waitForExit()
            #expect(private_.lines.contains("addresses: private, a new one with each EID (broadcast)"))
            #expect(!private_.lines.contains { $0.hasPrefix("warning") && $0.contains("advertises as") })

            let public_ = try processes.start(common + ["--advertise-as", "peripheral"], user: "person")
            _ = try await public_.waitForExit()
            #expect(public_.lines.contains("hci0  00:11:22:33:44:55 (public)  on  advertisements: 0 active, 5 free"))
            #expect(public_.lines.contains("addresses: the adapter's own, the same for every EID (peripheral)"))
            let warning = public_.lines.first { $0.hasPrefix("warning") && $0.contains("advertises as peripheral") }
            #expect(warning?.contains("public address 00:11:22:33:44:55") == true, "\(public_.lines)")
        }
    }
}
