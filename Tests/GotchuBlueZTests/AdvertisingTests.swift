import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuTesting
import Synchronization
import Testing

@Suite("Advertising against a fake bluetoothd", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct AdvertisingTests {
    @Test(
        "registers a broadcast LEAdvertisement1 by default, with exact types and no Discoverable; answers the GetAll call-back, unregisters at scope end"
    )
    func registersWithExactTypes() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                let registration = try #require(await fake.registrations.first)
                let properties = registration.properties
                #expect(properties["Type"] == DBusVariant("broadcast"))
                #expect(properties["ServiceUUIDs"] == DBusVariant(["feed"]))
                #expect(properties["ServiceData"]?.value.type.signature == "a{sv}")
                let data = properties["ServiceData", as: [String: DBusVariant].self]
                #expect(data?["feed"] == DBusVariant(.bytes(Array("a1b2c3d4e5".utf8))))
                #expect(properties["Includes"] == DBusVariant(["tx-power"]))
                // bluetoothd fails a broadcast with any Discoverable, even false.
                #expect(properties["Discoverable"] == nil)
                #expect(properties["MinInterval"] == nil)
                #expect(Set(properties.keys) == ["Type", "ServiceUUIDs", "ServiceData", "Includes"])
                let register = try #require(await fake.calls(named: "RegisterAdvertisement").first)
                #expect(register.arguments.map(\.type.signature) == ["o", "a{sv}"])
            }
            #expect(await fake.calls(named: "UnregisterAdvertisement").count == 1)
            #expect(await fake.registrations.isEmpty)
            #expect(await radio.connection.exportedPaths.isEmpty)
        }
    }

    @Test("peripheral, when configured, is discoverable: connectable from the adapter's own address")
    func peripheral() async throws {
        try await withFakeBlueZ(configuration: .init(advertisingType: .peripheral)) { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                let properties = try #require(await fake.registrations.first?.properties)
                #expect(properties["Type"] == DBusVariant("peripheral"))
                #expect(properties["Discoverable"] == DBusVariant(true))
                let data = properties["ServiceData", as: [String: DBusVariant].self]
                #expect(data?["feed"] == DBusVariant(.bytes(Array("a1b2c3d4e5".utf8))))
            }
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

    @Test(
        "a rotation unregisters the object on the air and registers a new one carrying the new EID; the old one is never changed",
        arguments: [BlueZAdvertisingType.broadcast, .peripheral]
    )
    func rotation(type: BlueZAdvertisingType) async throws {
        try await withFakeBlueZ(configuration: .init(advertisingType: type)) { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { handle in
                let first = try #require(await fake.registrations.first?.path)
                try await handle.update(Advertisement(eid: EID(rawValue: "0000000001")!))

                // Exactly: Register(first), Unregister(first), Register(second). Nothing else reached bluetoothd.
                let calls = await fake.calls
                #expect(
                    calls.map(\.method) == [
                        "RegisterAdvertisement", "UnregisterAdvertisement", "RegisterAdvertisement",
                    ]
                )
                let paths = calls.map { $0.arguments.first.flatMap { DBusObjectPath(dbusValue: $0) } }
                let second = try #require(paths.last ?? nil)
                #expect(paths == [first, first, second])
                #expect(second != first)
                // Had the EID been put into the registered object, bluetoothd would have rewritten the instance on the
                // air, keeping its address. The change would have arrived before the Unregister call.
                #expect(fake.advertisementChanges.withLock { $0.isEmpty })

                // bluetoothd read the new object in its GetAll call-back: the new EID, of the same type.
                let registrations = await fake.registrations
                #expect(registrations.map(\.path) == [second])
                let properties = try #require(registrations.first?.properties)
                let data = properties["ServiceData", as: [String: DBusVariant].self]
                #expect(data?["feed"] == DBusVariant(.bytes(Array("0000000001".utf8))))
                #expect(properties["Type"] == DBusVariant(type.rawValue))
                #expect(properties["Discoverable"] == (type == .broadcast ? nil : DBusVariant(true)))
                // The replaced object is gone from the bus.
                #expect(await radio.connection.exportedPaths == [second])

                // The next rotation replaces the second in turn.
                try await handle.update(Advertisement(eid: EID(rawValue: "0000000002")!))
                let third = try #require(await fake.registrations.first?.path)
                #expect(![first, second].contains(third))
                #expect(await fake.calls(named: "UnregisterAdvertisement").last?.arguments == [.objectPath(second)])
                #expect(await radio.connection.exportedPaths == [third])
            }
            #expect(await fake.calls(named: "UnregisterAdvertisement").count == 3)
            #expect(await fake.registrations.isEmpty)
            #expect(await radio.connection.exportedPaths.isEmpty)
        }
    }

    @Test("the fake records a change to a registered object before it answers the next call: its absence means none")
    func changesAreRecorded() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { _ in
                let path = try #require(await fake.registrations.first?.path)
                try await radio.connection.setProperty(
                    "ServiceData",
                    of: "org.bluez.LEAdvertisement1",
                    at: path,
                    to: ["feed": DBusVariant(.bytes(Array("0000000001".utf8)))].dbusValue
                )
                _ = try await radio.adapter()
                #expect(fake.advertisementChanges.withLock { $0.map(\.path) } == [path])
            }
        }
    }

    @Test("a rotation whose registration fails puts the last EID back on the air and says why")
    func rotationFailure() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { handle in
                let first = try #require(await fake.registrations.first?.path)
                await fake.setRegisterError(DBusError(.bluezFailed, "Failed to register advertisement"), times: 1)
                do {
                    try await handle.update(Advertisement(eid: EID(rawValue: "0000000001")!))
                    Issue.record("the rotation succeeded although its registration failed")
                } catch let error as BlueZError {
                    #expect(error.message == "Failed to register advertisement")
                }
                let registrations = await fake.registrations
                #expect(registrations.map(\.path) == [first])
                let data = registrations.first?.properties["ServiceData", as: [String: DBusVariant].self]
                #expect(data?["feed"] == DBusVariant(.bytes(Array("a1b2c3d4e5".utf8))))
                #expect(await radio.connection.exportedPaths == [first])
                // The next rotation works as usual.
                try await handle.update(Advertisement(eid: EID(rawValue: "0000000002")!))
                #expect(await fake.registrations.count == 1)
                #expect(await fake.registrations.first?.path != first)
            }
            #expect(await fake.registrations.isEmpty)
            #expect(await radio.connection.exportedPaths.isEmpty)
        }
    }

    @Test("Release of the object on the air registers it again; after a rotation, the new one")
    func releaseAfterRotation() async throws {
        try await withFakeBlueZ { _, fake, radio in
            try await radio.withAdvertisement(Advertisement(eid: sampleEID)) { handle in
                try await handle.update(Advertisement(eid: EID(rawValue: "0000000001")!))
                let current = try #require(await fake.registrations.first?.path)
                try await fake.releaseAll()
                let again = try await eventually { await fake.registrations.map(\.path) == [current] }
                #expect(again)
                #expect(await fake.registerCount == 3)
            }
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
