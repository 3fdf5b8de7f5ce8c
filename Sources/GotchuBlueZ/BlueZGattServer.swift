public import GotchuCore
import GotchuDBus
import Logging
import Synchronization

extension BlueZ {
    static let gattManagerInterface = "org.bluez.GattManager1"
    static let gattServiceInterface = "org.bluez.GattService1"
    static let gattCharacteristicInterface = "org.bluez.GattCharacteristic1"
}

extension BlueZRadio: GattRadio {
    /// Serves `service` as a GATT application of this process's own objects (an object manager at
    /// `/io/gotchu/gattN`, the service and its characteristics below it), registered with the adapter's
    /// `GattManager1` while `body` runs. bluetoothd calls the characteristics' `ReadValue` and `WriteValue` for each
    /// peer's read and write, with the part a long read's offset asks for served here; a notification is a change of
    /// the characteristic's `Value`, which bluetoothd sends to the peers that subscribed.
    public func withGattService<Result: Sendable>(
        _ service: GattService,
        _ body: @Sendable (any GattServing) async throws -> Result
    ) async throws -> Result {
        let number = exportCounter.wrappingAdd(1, ordering: .relaxed).newValue
        let application = DBusObjectPath(rawValue: "/io/gotchu/gatt\(number)")!
        let objects = BlueZGattApplication.objects(service, at: application, logger: logger)
        let adapter: BlueZAdapter
        do {
            for (path, object) in objects { try await connection.export(object, at: path) }
            adapter = try await self.adapter()
            try await call(
                path: adapter.path,
                interface: BlueZ.gattManagerInterface,
                method: "RegisterApplication",
                [.objectPath(application), [String: DBusVariant]().dbusValue],
                timeout: .seconds(10)
            )
        } catch {
            // Unexporting a path that was never exported is no error.
            for (path, _) in objects.reversed() { await connection.unexport(path) }
            throw (error as? DBusError).map(BlueZError.init) ?? error
        }
        logger.info("serving GATT", metadata: ["service": "\(service.uuid)", "path": "\(application)"])
        let serving = BlueZGattServing(
            connection: connection,
            paths: BlueZGattApplication.characteristicPaths(service, at: application)
        )
        // Runs while the caller may be cancelled: the calls themselves must still happen.
        let connection = self.connection
        let stop = {
            await Task {
                _ = try? await self.call(
                    path: adapter.path,
                    interface: BlueZ.gattManagerInterface,
                    method: "UnregisterApplication",
                    [.objectPath(application)],
                    timeout: .seconds(5)
                )
                for (path, _) in objects.reversed() { await connection.unexport(path) }
            }.value
        }
        do {
            let result = try await body(serving)
            await stop()
            return result
        } catch {
            await stop()
            throw error
        }
    }
}

/// The objects of a served service.
enum BlueZGattApplication {
    /// `a{sv}`, the options of a read or write.
    static let options = [String: DBusVariant].dbusType

    /// The path of each characteristic of `service` under `application`, by UUID.
    static func characteristicPaths(
        _ service: GattService,
        at application: DBusObjectPath
    ) -> [BluetoothUUID: DBusObjectPath] {
        var paths: [BluetoothUUID: DBusObjectPath] = [:]
        for (index, characteristic) in service.characteristics.enumerated() {
            paths[characteristic.uuid] = application.appending("service0").appending("char\(index)")
        }
        return paths
    }

    /// The application's root, its service and its characteristics, parents first.
    static func objects(
        _ service: GattService,
        at application: DBusObjectPath,
        logger: Logger
    ) -> [(DBusObjectPath, DBusObject)] {
        let servicePath = application.appending("service0")
        var objects: [(DBusObjectPath, DBusObject)] = [
            (application, DBusObject(interfaces: [], isObjectManager: true)),
            (
                servicePath,
                DBusObject(interfaces: [
                    DBusInterface(
                        BlueZ.gattServiceInterface,
                        properties: [DBusProperty("UUID", service.uuid.uuidString), DBusProperty("Primary", true)]
                    )
                ])
            ),
        ]
        let paths = characteristicPaths(service, at: application)
        for characteristic in service.characteristics {
            objects.append((paths[characteristic.uuid]!, object(characteristic, service: servicePath, logger: logger)))
        }
        return objects
    }

    private static func object(
        _ characteristic: GattCharacteristic,
        service: DBusObjectPath,
        logger: Logger
    ) -> DBusObject {
        var flags: [String] = []
        var methods: [DBusMethod] = []
        if let read = characteristic.read {
            flags.append("read")
            methods.append(
                DBusMethod("ReadValue", inputs: [Self.options], outputs: [.array(.byte)]) { message in
                    let options = BlueZGattRequest(message.argument(0, as: [String: DBusVariant].self) ?? [:])
                    let value: [UInt8]
                    do {
                        value = try await read(options.peer)
                    } catch {
                        throw GattRefusal(error).dbusError
                    }
                    // A long read asks for the rest from an offset, one ATT packet at a time.
                    guard options.offset <= value.count else {
                        throw DBusError("org.bluez.Error.InvalidOffset", "offset \(options.offset) of \(value.count)")
                    }
                    return [.bytes(Array(value[options.offset...]))]
                }
            )
        }
        if let write = characteristic.write {
            flags.append("write")
            methods.append(
                DBusMethod("WriteValue", inputs: [.array(.byte), Self.options]) { message in
                    guard let value = message.argument(0, as: [UInt8].self) else {
                        throw DBusError("org.bluez.Error.InvalidArguments", "not a byte array")
                    }
                    let options = BlueZGattRequest(message.argument(1, as: [String: DBusVariant].self) ?? [:])
                    // Every message is sent in chunks that fit one write (GattTransfer): a long write is not one.
                    guard options.offset == 0 else {
                        throw DBusError("org.bluez.Error.InvalidOffset", "long writes are not taken; send chunks")
                    }
                    do {
                        try await write(value, options.peer)
                    } catch {
                        let refusal = GattRefusal(error)
                        logger.info(
                            "GATT write refused",
                            metadata: ["peer": "\(options.peer.id)", "reason": "\(refusal.reason)"]
                        )
                        throw refusal.dbusError
                    }
                    return []
                }
            )
        }
        var properties = [
            DBusProperty("UUID", characteristic.uuid.uuidString),
            DBusProperty("Service", DBusValue.objectPath(service)),
        ]
        if characteristic.notifies {
            flags.append("notify")
            // bluetoothd subscribes once for every peer that does; the value's changes are the notifications.
            methods.append(DBusMethod("StartNotify") { _ in [] })
            methods.append(DBusMethod("StopNotify") { _ in [] })
            properties.append(DBusProperty("Value", DBusValue.bytes([])))
        }
        properties.append(DBusProperty("Flags", flags))
        return DBusObject(interfaces: [
            DBusInterface(BlueZ.gattCharacteristicInterface, methods: methods, properties: properties)
        ])
    }
}

/// The options bluetoothd passes with a read or write: the peer's device path, its MTU, and a long read's offset.
struct BlueZGattRequest {
    var peer: GattPeer
    var offset: Int

    init(_ options: [String: DBusVariant]) {
        let device = options["device", as: DBusObjectPath.self]?.rawValue ?? "unknown"
        let mtu = options["mtu", as: UInt16.self].map(Int.init) ?? GattTransfer.minimumMTU
        peer = GattPeer(id: device, mtu: mtu)
        offset = options["offset", as: UInt16.self].map(Int.init) ?? 0
    }
}

extension GattRefusal {
    /// The refusal a characteristic threw (`failed` for anything else).
    init(_ error: any Error) {
        self = error as? GattRefusal ?? .failed("\(error)")
    }

    /// The error bluetoothd turns into the ATT error the peer receives.
    var dbusError: DBusError {
        switch self {
        case .invalidValue(let reason): DBusError("org.bluez.Error.InvalidValueLength", reason)
        case .notPermitted(let reason): DBusError(.bluezNotPermitted, reason)
        case .failed(let reason): DBusError(.bluezFailed, reason)
        }
    }
}

/// Notifies through the served characteristics' `Value`.
struct BlueZGattServing: GattServing {
    let connection: DBusConnection
    let paths: [BluetoothUUID: DBusObjectPath]

    func notify(_ characteristic: BluetoothUUID, _ value: [UInt8]) async throws {
        guard let path = paths[characteristic] else {
            throw GattError.unreachable("no characteristic \(characteristic) is served")
        }
        try await connection.setProperty(
            "Value",
            of: BlueZ.gattCharacteristicInterface,
            at: path,
            to: .bytes(value)
        )
    }
}
