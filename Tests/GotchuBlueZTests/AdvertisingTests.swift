import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuTesting
import Synchronization
import Testing

@Suite("Advertising against a fake bluetoothd", requiresDBusDaemon)
struct AdvertisingTests {
    @Test("registers an LEAdvertisement1 with exact types, answers the GetAll call-back, unregisters at scope end")
    func registersWithExactTypes() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                let registration = try #require(await fake.registrations.first)
                let properties = registration.properties
                #expect(properties["Type"] == DBusVariant("peripheral"))
                #expect(properties["ServiceUUIDs"] == DBusVariant(["feed"]))
                #expect(properties["ServiceData"]?.value.type.signature == "a{sv}")
                let data = properties["ServiceData", as: [String: DBusVariant].self]
                #expect(data?["feed"] == DBusVariant(.bytes(Array("a1b2c3d4e5".utf8))))
                #expect(properties["Includes"] == DBusVariant(["tx-power"]))
                #expect(properties["Discoverable"] == DBusVariant(true))
                #expect(properties["MinInterval"] == nil)
                let register = try #require(await fake.calls(named: "RegisterAdvertisement").first)
                #expect(register.arguments.map(\.type.signature) == ["o", "a{sv}"])
            }
            #expect(await fake.calls(named: "UnregisterAdvertisement").count == 1)
            #expect(await fake.registrations.isEmpty)
            #expect(await radio.connection.exportedPaths.isEmpty)
        }
    }

    @Test("a calibration is advertised as one byte of service data of its own, the EID's unchanged")
    func calibration() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID, calibratedRSSI: -61)) { _ in
                let properties = try #require(await fake.registrations.first?.properties)
                let data = properties["ServiceData", as: [String: DBusVariant].self]
                #expect(data?["feed"] == DBusVariant(.bytes(Array("a1b2c3d4e5".utf8))))
                #expect(data?["fedc"] == DBusVariant(.bytes([UInt8(bitPattern: -61)])))
                #expect(properties["ServiceUUIDs"] == DBusVariant(["feed"]))
            }
        }
    }

    @Test("broadcast never sets Discoverable; intervals are u milliseconds")
    func broadcast() async throws {
        try await withFakeBlueZ(configuration: .init(advertisingType: .broadcast)) { _, fake, radio in
            let advertisement = Advertisement(eid: sampleEID, interval: .milliseconds(100)...(.milliseconds(150)))
            try await radio.withAdvertisement(advertisement) { _ in
                let properties = try #require(await fake.registrations.first?.properties)
                #expect(properties["Type"] == DBusVariant("broadcast"))
                #expect(properties["Discoverable"] == nil)
                #expect(properties["MinInterval"] == DBusVariant(UInt32(100)))
                #expect(properties["MaxInterval"] == DBusVariant(UInt32(150)))
            }
        }
    }

    @Test("a rotation registers the advertisement anew with the new service data, so bluetoothd starts a new set")
    func update() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { handle in
                try await handle.update(Advertisement(eid: EID(rawValue: "0000000001")!))
                // The registration after the rotation read the new data in its GetAll call-back.
                #expect(await fake.registerCount == 2)
                #expect(await fake.calls(named: "UnregisterAdvertisement").count == 1)
                #expect(await fake.registrations.count == 1)
                let data = await fake.registrations.first?.properties["ServiceData", as: [String: DBusVariant].self]
                #expect(data?["feed"] == DBusVariant(.bytes(Array("0000000001".utf8))))
            }
            #expect(await fake.calls(named: "UnregisterAdvertisement").count == 2)
            #expect(await fake.registrations.isEmpty)
        }
    }

    @Test("the observer is told of each call to bluetoothd and of the registration again a rotation makes")
    func observed() async throws {
        let observer = RecordingObserver()
        try await withFakeBlueZ(observer: observer) { _, _, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { handle in
                #expect(observer.events.withLock { $0.reregistrations }.isEmpty)
                try await handle.update(Advertisement(eid: EID(rawValue: "0000000001")!))
                #expect(observer.events.withLock { $0.reregistrations } == [.rotation])
            }
        }
        let calls = observer.events.withLock { $0.calls }
        #expect(calls.filter { $0 == "RegisterAdvertisement ok" }.count == 2)
        #expect(calls.filter { $0 == "UnregisterAdvertisement ok" }.count == 2)
        #expect(calls.contains("GetManagedObjects ok"))
    }

    @Test(
        "BlueZ errors are classified and keep their raw name",
        arguments: [
            (DBusError(.bluezFailed, "Failed to parse advertisement."), BlueZError.Kind.parseFailure),
            (DBusError(.bluezNotPermitted, "Maximum advertisements reached"), .maximumAdvertisements),
            (DBusError(.bluezInvalidArguments, "Invalid arguments"), .invalidArguments),
            (DBusError(.bluezNotPermitted, "Not Permitted"), .notPermitted),
            (DBusError("org.bluez.Error.Whatever", "?"), .other),
        ]
    )
    func errors(error: DBusError, kind: BlueZError.Kind) async throws {
        try await withFakeBlueZ { _, fake, radio in
            await fake.setRegisterError(error)
            do {
                _ = try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                    Issue.record("advertised although registration failed")
                }
            } catch let failure as BlueZError {
                #expect(failure.kind == kind)
                #expect(failure.name == error.name.rawValue)
                #expect(failure.message == error.message)
            }
            #expect(await radio.connection.exportedPaths.isEmpty)
        }
    }

    @Test("registering the same object twice is AlreadyExists")
    func alreadyExists() async throws {
        try await withFakeBlueZ { _, _, radio in
            let adapter = try await radio.adapter()
            let path = DBusObjectPath(rawValue: "/io/gotchu/manual")!
            try await radio.connection.export(
                DBusObject(interfaces: [
                    DBusInterface("org.bluez.LEAdvertisement1", properties: [DBusProperty("Type", "broadcast")])
                ]),
                at: path
            )
            let arguments: [DBusValue] = [.objectPath(path), [String: DBusVariant]().dbusValue]
            _ = try await radio.connection.call(
                destination: "org.bluez",
                path: adapter.path,
                interface: "org.bluez.LEAdvertisingManager1",
                method: "RegisterAdvertisement",
                arguments
            )
            do {
                _ = try await radio.connection.call(
                    destination: "org.bluez",
                    path: adapter.path,
                    interface: "org.bluez.LEAdvertisingManager1",
                    method: "RegisterAdvertisement",
                    arguments
                )
                Issue.record("second registration succeeded")
            } catch let error as DBusError {
                #expect(BlueZError(error).kind == .alreadyExists)
            }
        }
    }

    @Test("a bluetoothd restart re-registers the advertisement")
    func restart() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                #expect(await fake.registrations.count == 1)
                try await fake.restart()
                let again = try await eventually { await fake.registrations.count == 1 }
                #expect(again)
                let data = await fake.registrations.first?.properties["ServiceData", as: [String: DBusVariant].self]
                #expect(data?["feed"] == DBusVariant(.bytes(Array("a1b2c3d4e5".utf8))))
            }
        }
    }

    @Test("Release re-registers")
    func release() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                try await fake.releaseAll()
                let again = try await eventually { await fake.registrations.count == 1 }
                #expect(again)
                #expect(await fake.registerCount == 2)
            }
        }
    }

    @Test("adapter removal ends the advertisement with adapterRemoved")
    func adapterRemoved() async throws {
        try await withFakeBlueZ { _, fake, radio in
            do {
                try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                    await fake.removeAdapter()
                    try await Task.sleep(for: .seconds(60))  // only bounds a hang
                }
                Issue.record("advertisement survived adapter removal")
            } catch let error as BlueZError {
                #expect(error.kind == .adapterRemoved)
            }
        }
    }

    @Test("powering the adapter off ends the advertisement with notReady; a powered-off adapter is not registered on")
    func poweredOff() async throws {
        try await withFakeBlueZ { _, fake, radio in
            do {
                try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                    try await fake.setPowered(false)
                    try await Task.sleep(for: .seconds(60))  // only bounds a hang
                }
                Issue.record("advertisement survived the adapter powering off")
            } catch let error as BlueZError {
                #expect(error.kind == .notReady && error.message.contains("powered off"))
            }
            let registered = await fake.registerCount
            do {
                try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in }
                Issue.record("registered on a powered-off adapter")
            } catch let error as BlueZError {
                #expect(error.kind == .notReady)
            }
            #expect(await fake.registerCount == registered)
            try await fake.setPowered(true)
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in }
            #expect(await fake.registerCount == registered + 1)
        }
    }
}

/// Records what a radio tells its observer.
private final class RecordingObserver: BlueZRadioObserver {
    let events = Mutex<(calls: [String], reregistrations: [BlueZReregistration])>(([], []))

    func called(_ method: String, succeeded: Bool) {
        events.withLock { $0.calls.append("\(method) \(succeeded ? "ok" : "failed")") }
    }

    func registeredAgain(_ reason: BlueZReregistration) {
        events.withLock { $0.reregistrations.append(reason) }
    }
}
