public import GotchuCore
import GotchuDBus

extension BlueZRadio {
    /// Connects to the device a sighting came from (its ``Sighting/source`` is the device's path), waits until
    /// bluetoothd resolved its services, and finds `service` and its characteristics among bluetoothd's objects.
    public func connect(
        to sighting: Sighting,
        service: BluetoothUUID,
        timeout: Duration
    ) async throws -> any GattConnection {
        guard let device = DBusObjectPath(rawValue: sighting.source), device.isDescendant(of: BlueZ.rootPath) else {
            throw GattError.unreachable("the sighting names no Bluetooth device (\(sighting.source))")
        }
        let deadline = ContinuousClock.now + timeout
        do {
            _ = try await call(
                path: device,
                interface: BlueZ.deviceInterface,
                method: "Connect",
                timeout: timeout
            )
        } catch let error as DBusError {
            // Connected already (by bluetoothd itself, or by a connection this process made before) is connected.
            guard error.name == .bluezAlreadyConnected else { throw GattError.unreachable(error.description) }
        }
        do {
            var delay = Duration.milliseconds(20)
            while true {
                let objects = try await BlueZ.managedObjects(on: self.connection)
                if let found = try BlueZGattConnection.find(service, of: device, in: objects) {
                    return BlueZGattConnection(radio: self, device: device, characteristics: found)
                }
                guard ContinuousClock.now < deadline else {
                    throw GattError.unreachable("the device does not serve \(service)")
                }
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .milliseconds(250))
            }
        } catch {
            await BlueZGattConnection(radio: self, device: device, characteristics: [:]).disconnect()
            throw error
        }
    }
}

extension DBusError.Name {
    /// BlueZ: the device is connected already.
    static let bluezAlreadyConnected: DBusError.Name = "org.bluez.Error.AlreadyConnected"
}

/// A connection to a device's GATT service through bluetoothd's objects for it.
struct BlueZGattConnection: GattConnection {
    let radio: BlueZRadio
    let device: DBusObjectPath
    /// The service's characteristics by UUID.
    let characteristics: [BluetoothUUID: DBusObjectPath]

    /// The service's characteristics once bluetoothd resolved the device's services and lists `service`; `nil`
    /// while it has not resolved them yet.
    /// - Throws: ``GattError/unreachable(_:)`` once resolved without the service, or when the device is gone.
    static func find(
        _ service: BluetoothUUID,
        of device: DBusObjectPath,
        in objects: BlueZ.ManagedObjects
    ) throws -> [BluetoothUUID: DBusObjectPath]? {
        guard let deviceProperties = objects[device]?[BlueZ.deviceInterface] else {
            throw GattError.unreachable("the device \(device) is gone")
        }
        let services = objects.filter { path, interfaces in
            path.isDescendant(of: device)
                && interfaces[BlueZ.gattServiceInterface]?["UUID", as: String.self].flatMap(BluetoothUUID.init)
                    == service
        }
        guard let servicePath = services.keys.sorted().first else {
            if deviceProperties["ServicesResolved", as: Bool.self] == true {
                throw GattError.unreachable("the device does not serve \(service)")
            }
            return nil
        }
        var characteristics: [BluetoothUUID: DBusObjectPath] = [:]
        for (path, interfaces) in objects {
            guard let properties = interfaces[BlueZ.gattCharacteristicInterface],
                properties["Service", as: DBusObjectPath.self] == servicePath,
                let uuid = properties["UUID", as: String.self].flatMap(BluetoothUUID.init)
            else { continue }
            characteristics[uuid] = path
        }
        return characteristics
    }

    private func path(_ characteristic: BluetoothUUID) throws -> DBusObjectPath {
        guard let path = characteristics[characteristic] else {
            throw GattError.unreachable("the device has no characteristic \(characteristic)")
        }
        return path
    }

    func mtu() async -> Int {
        // BlueZ 5.62 and later report the link's MTU on each characteristic.
        guard let path = characteristics.values.first,
            let reply = try? await radio.connection.call(
                destination: BlueZ.service,
                path: path,
                interface: BlueZ.propertiesInterface,
                method: "Get",
                [.string(BlueZ.gattCharacteristicInterface), .string("MTU")],
                timeout: .seconds(5)
            ),
            case .variant(let variant) = reply.first,
            case .uint16(let mtu) = variant.value
        else { return GattTransfer.minimumMTU }
        return max(Int(mtu), GattTransfer.minimumMTU)
    }

    func read(_ characteristic: BluetoothUUID) async throws -> [UInt8] {
        let reply = try await gattCall(characteristic, "ReadValue", [[String: DBusVariant]().dbusValue])
        guard let value = reply.first.flatMap({ [UInt8](dbusValue: $0) }) else {
            throw GattError.refused("the read answered \(reply.map(\.type))")
        }
        return value
    }

    func write(_ value: [UInt8], to characteristic: BluetoothUUID) async throws {
        let options: [String: DBusVariant] = ["type": DBusVariant(.string("request"))]
        _ = try await gattCall(characteristic, "WriteValue", [.bytes(value), options.dbusValue])
    }

    func notifications(_ characteristic: BluetoothUUID) async throws -> AsyncThrowingStream<[UInt8], any Error> {
        let path = try path(characteristic)
        // Subscribed before notifications start, so the first is not missed.
        let changes = try await radio.connection.signals(
            matching: DBusMatchRule(
                sender: BlueZ.service,
                interface: BlueZ.propertiesInterface,
                member: "PropertiesChanged",
                path: path,
                arg0: BlueZ.gattCharacteristicInterface
            )
        )
        _ = try await gattCall(characteristic, "StartNotify", [])
        let radio = self.radio
        return AsyncThrowingStream { continuation in
            let task = Task {
                for await signal in changes {
                    guard let value = signal.argument(1, as: [String: DBusVariant].self)?["Value", as: [UInt8].self]
                    else { continue }
                    continuation.yield(value)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in
                task.cancel()
                Task {
                    _ = try? await radio.connection.call(
                        destination: BlueZ.service,
                        path: path,
                        interface: BlueZ.gattCharacteristicInterface,
                        method: "StopNotify",
                        timeout: .seconds(5)
                    )
                }
            }
        }
    }

    func disconnect() async {
        let radio = self.radio
        let device = self.device
        // Runs while the caller may be cancelled: the call itself must still happen.
        await Task {
            _ = try? await radio.call(
                path: device,
                interface: BlueZ.deviceInterface,
                method: "Disconnect",
                timeout: .seconds(5)
            )
        }.value
    }

    /// Calls a method of a characteristic's object; bluetoothd's refusals become ``GattError``s.
    private func gattCall(
        _ characteristic: BluetoothUUID,
        _ method: String,
        _ arguments: [DBusValue]
    ) async throws -> [DBusValue] {
        let path = try path(characteristic)
        do {
            return try await radio.call(
                path: path,
                interface: BlueZ.gattCharacteristicInterface,
                method: method,
                arguments,
                timeout: .seconds(10)
            )
        } catch let error as DBusError {
            switch error.name {
            case .unknownObject, .bluezNotConnected: throw GattError.disconnected
            case .noReply, .timeout: throw GattError.timedOut
            default: throw GattError.refused(error.message.isEmpty ? error.name.rawValue : error.message)
            }
        }
    }
}

extension DBusError.Name {
    /// BlueZ: the device is not connected (any more).
    static let bluezNotConnected: DBusError.Name = "org.bluez.Error.NotConnected"
}
