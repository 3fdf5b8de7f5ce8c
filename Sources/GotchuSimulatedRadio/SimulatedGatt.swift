public import GotchuCore

/// How GATT connections behave on a simulated air: the link's MTU, and the air time each step takes, counted in
/// connection intervals (one ATT request and its answer per interval).
public struct GattTiming: Hashable, Sendable {
    /// The MTU links agree on (BlueZ and phones usually reach 185 to 517; 23 is the least).
    public var mtu: Int
    /// The connection interval.
    public var connectionInterval: Duration
    /// Intervals from the connection request to the service found (connection, MTU exchange, discovery).
    public var connectIntervals: Int

    /// A link of `mtu` with a `connectionInterval`, found in `connectIntervals`; by default 247, 30 ms and 6.
    public init(mtu: Int = 247, connectionInterval: Duration = .milliseconds(30), connectIntervals: Int = 6) {
        self.mtu = mtu
        self.connectionInterval = connectionInterval
        self.connectIntervals = connectIntervals
    }
}

/// The GATT services served on an air and the links to them.
struct GattLinks {
    struct Served {
        var peer: Int
        var token: Int
        var service: GattService
    }

    struct Link {
        var central: Int
        var peripheral: Int
        var token: Int
        var subscriptions: [Int: (BluetoothUUID, AsyncThrowingStream<[UInt8], any Error>.Continuation)] = [:]
    }

    var served: [Int: Served] = [:]
    var links: [Int: Link] = [:]

    /// Ends every link to `peer`'s service `token`: their notifications end with ``GattError/disconnected``.
    mutating func stopServing(_ peer: Int, token: Int) {
        guard served[peer]?.token == token else { return }
        served[peer] = nil
        for (id, link) in links where link.peripheral == peer && link.token == token {
            end(id)
        }
    }

    mutating func end(_ id: Int) {
        guard let link = links.removeValue(forKey: id) else { return }
        for (_, continuation) in link.subscriptions.values { continuation.finish(throwing: GattError.disconnected) }
    }
}

extension SimulatedAir {
    func startServing(_ peer: Int, _ service: GattService) -> Int {
        let token = makeID()
        gatt.served[peer] = GattLinks.Served(peer: peer, token: token, service: service)
        return token
    }

    func stopServing(_ peer: Int, token: Int) {
        gatt.stopServing(peer, token: token)
    }

    /// Connects `central` to the peer named `name` and finds `service` on it; returns the link's id.
    func connect(_ central: Int, to name: String, service: BluetoothUUID, timeout: Duration) async throws -> Int {
        let setup = gattTiming.connectionInterval * gattTiming.connectIntervals
        guard setup <= timeout else {
            try await sleep(for: timeout)
            throw GattError.timedOut
        }
        try await sleep(for: setup)
        guard let peripheral = peerIndex(named: name) else { throw GattError.unreachable("no peer \(name)") }
        guard let served = gatt.served[peripheral], served.service.uuid == service else {
            throw GattError.unreachable("\(name) does not serve \(service)")
        }
        let id = makeID()
        gatt.links[id] = GattLinks.Link(central: central, peripheral: peripheral, token: served.token)
        return id
    }

    /// The characteristic `uuid` of link `id`'s service, and the central as its server sees it.
    func characteristic(_ id: Int, _ uuid: BluetoothUUID) throws -> (GattCharacteristic, GattPeer) {
        guard let link = gatt.links[id], let served = gatt.served[link.peripheral], served.token == link.token else {
            throw GattError.disconnected
        }
        guard let characteristic = served.service.characteristics.first(where: { $0.uuid == uuid }) else {
            throw GattError.unreachable("no characteristic \(uuid)")
        }
        return (characteristic, GattPeer(id: peerName(link.central), mtu: gattTiming.mtu))
    }

    /// Sleeps for the air time of `packets` ATT exchanges.
    func transmit(packets: Int) async throws {
        try await sleep(for: gattTiming.connectionInterval * max(packets, 1))
    }

    func subscribe(
        _ id: Int,
        _ uuid: BluetoothUUID,
        _ continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation
    ) throws -> Int {
        guard gatt.links[id] != nil else { throw GattError.disconnected }
        let subscription = makeID()
        gatt.links[id]?.subscriptions[subscription] = (uuid, continuation)
        return subscription
    }

    func unsubscribe(_ id: Int, _ subscription: Int) {
        gatt.links[id]?.subscriptions[subscription] = nil
    }

    func notify(_ peer: Int, token: Int, _ uuid: BluetoothUUID, _ value: [UInt8]) {
        for link in gatt.links.values where link.peripheral == peer && link.token == token {
            for (subscribed, continuation) in link.subscriptions.values where subscribed == uuid {
                continuation.yield(value)
            }
        }
    }

    func disconnect(_ id: Int) {
        gatt.end(id)
    }
}

extension SimulatedRadio: GattRadio {
    public func withGattService<Result: Sendable>(
        _ service: GattService,
        _ body: @Sendable (any GattServing) async throws -> Result
    ) async throws -> Result {
        let token = await air.startServing(peer, service)
        do {
            let result = try await body(SimulatedServing(air: air, peer: peer, token: token))
            await air.stopServing(peer, token: token)
            return result
        } catch {
            await air.stopServing(peer, token: token)
            throw error
        }
    }

    public func connect(
        to sighting: Sighting,
        service: BluetoothUUID,
        timeout: Duration
    ) async throws -> any GattConnection {
        let id = try await air.connect(peer, to: sighting.source, service: service, timeout: timeout)
        return SimulatedGattConnection(air: air, id: id)
    }

    private struct SimulatedServing: GattServing {
        let air: SimulatedAir
        let peer: Int
        let token: Int

        func notify(_ characteristic: BluetoothUUID, _ value: [UInt8]) async throws {
            await air.notify(peer, token: token, characteristic, value)
        }
    }
}

/// A link on a simulated air. As over BlueZ, a read is at most 512 bytes (ATT's longest value) in parts of `mtu - 1`,
/// a write at most ``GattTransfer/writeLength(mtu:)`` bytes, and a refusal reaches the central as a refusal.
struct SimulatedGattConnection: GattConnection {
    let air: SimulatedAir
    let id: Int

    func mtu() async -> Int { air.gattTiming.mtu }

    func read(_ characteristic: BluetoothUUID) async throws -> [UInt8] {
        let (served, peer) = try await air.characteristic(id, characteristic)
        guard let read = served.read else { throw GattError.refused("not readable") }
        let value: [UInt8]
        do {
            value = try await read(peer)
        } catch {
            throw GattError.refused(error.reason)
        }
        guard value.count <= 512 else { throw GattError.refused("a value longer than 512 bytes") }
        try await air.transmit(packets: value.count / (peer.mtu - 1) + 1)
        // The link may have ended meanwhile.
        _ = try await air.characteristic(id, characteristic)
        return value
    }

    func write(_ value: [UInt8], to characteristic: BluetoothUUID) async throws {
        let (served, peer) = try await air.characteristic(id, characteristic)
        guard let write = served.write else { throw GattError.refused("not writable") }
        guard value.count <= GattTransfer.writeLength(mtu: peer.mtu) else {
            throw GattError.refused("longer than one write")
        }
        try await air.transmit(packets: 1)
        _ = try await air.characteristic(id, characteristic)
        do {
            try await write(value, peer)
        } catch {
            throw GattError.refused(error.reason)
        }
    }

    func notifications(_ characteristic: BluetoothUUID) async throws -> AsyncThrowingStream<[UInt8], any Error> {
        let (served, _) = try await air.characteristic(id, characteristic)
        guard served.notifies else { throw GattError.refused("does not notify") }
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self)
        let subscription = try await air.subscribe(id, characteristic, continuation)
        let (air, id) = (self.air, self.id)
        continuation.onTermination = { _ in Task { await air.unsubscribe(id, subscription) } }
        return stream
    }

    func disconnect() async {
        await air.disconnect(id)
    }
}
