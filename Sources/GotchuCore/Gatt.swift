/// The GATT side of a radio: a terminal serves a service while it advertises connectably, and a payer that saw it
/// connects and reads, writes and subscribes to its characteristics. BlueZ and the simulated air are the two
/// implementations, as for ``Radio``; the shape is that of BlueZ's GATT API (a local application of services and
/// characteristics, remote characteristics reached through a connection to a device).
public protocol GattRadio: Radio {
    /// Serves `service` while `body` runs, and stops serving when it returns, throws or is cancelled. Peers find the
    /// service once they connect to this radio's connectable advertisement.
    func withGattService<Result: Sendable>(
        _ service: GattService,
        _ body: @Sendable (any GattServing) async throws -> Result
    ) async throws -> Result

    /// Connects to the advertiser `sighting` came from and finds `service` on it, within `timeout` on the radio's
    /// clock.
    /// - Throws: ``GattError/unreachable(_:)`` when the peer cannot be connected or does not serve `service`.
    func connect(
        to sighting: Sighting,
        service: BluetoothUUID,
        timeout: Duration
    ) async throws -> any GattConnection
}

/// A service a radio serves: its UUID and its characteristics.
public struct GattService: Sendable {
    /// The service's UUID.
    public var uuid: BluetoothUUID
    /// Its characteristics, in the order peers discover them.
    public var characteristics: [GattCharacteristic]

    /// A primary service `uuid` with `characteristics`.
    public init(uuid: BluetoothUUID, characteristics: [GattCharacteristic]) {
        self.uuid = uuid
        self.characteristics = characteristics
    }
}

/// One characteristic of a served ``GattService``: what a peer's read answers, what its write does, and whether
/// peers may subscribe to its notifications.
public struct GattCharacteristic: Sendable {
    /// The characteristic's UUID.
    public var uuid: BluetoothUUID
    /// Answers a peer's read with the whole value (the radio serves the part a long read's offset asks for);
    /// not readable when `nil`.
    public var read: (@Sendable (GattPeer) async throws(GattRefusal) -> [UInt8])?
    /// Takes a peer's write (with a response: the peer learns of a refusal); not writable when `nil`.
    public var write: (@Sendable ([UInt8], GattPeer) async throws(GattRefusal) -> Void)?
    /// Whether peers may subscribe to its notifications (``GattServing/notify(_:_:)``).
    public var notifies: Bool

    /// A characteristic `uuid`, readable, writable and notifying as the arguments say.
    public init(
        uuid: BluetoothUUID,
        read: (@Sendable (GattPeer) async throws(GattRefusal) -> [UInt8])? = nil,
        write: (@Sendable ([UInt8], GattPeer) async throws(GattRefusal) -> Void)? = nil,
        notifies: Bool = false
    ) {
        self.uuid = uuid
        self.read = read
        self.write = write
        self.notifies = notifies
    }
}

/// The peer a served characteristic is read or written by.
public struct GattPeer: Hashable, Sendable {
    /// Which peer, as the radio names it (a BlueZ device path, a simulated peer's name): stable for one
    /// connection, so a transfer in several writes is put together per peer.
    public var id: String
    /// The connection's ATT MTU: a write carries at most ``GattTransfer/writeLength(mtu:)`` bytes.
    public var mtu: Int

    /// A peer `id` on a connection with `mtu`.
    public init(id: String, mtu: Int) {
        self.id = id
        self.mtu = mtu
    }
}

/// A service being served: what it tells its subscribers.
public protocol GattServing: Sendable {
    /// Sends `value` to every peer subscribed to `characteristic`'s notifications (none: nothing is sent).
    func notify(_ characteristic: BluetoothUUID, _ value: [UInt8]) async throws
}

/// A connection to a peer's service.
public protocol GattConnection: Sendable {
    /// The connection's ATT MTU: a write carries at most ``GattTransfer/writeLength(mtu:)`` bytes.
    func mtu() async -> Int

    /// Reads the whole value of `characteristic`.
    func read(_ characteristic: BluetoothUUID) async throws -> [UInt8]

    /// Writes `value` (at most ``GattTransfer/writeLength(mtu:)`` bytes) to `characteristic`, with a response.
    /// - Throws: ``GattError/refused(_:)`` with the peer's refusal.
    func write(_ value: [UInt8], to characteristic: BluetoothUUID) async throws

    /// Subscribes to `characteristic`'s notifications until the stream is dropped or the connection ends.
    func notifications(_ characteristic: BluetoothUUID) async throws -> AsyncThrowingStream<[UInt8], any Error>

    /// Disconnects; the connection is not used afterwards.
    func disconnect() async
}

/// Why a served characteristic refused a read or a write, sent back to the peer as an ATT error.
public enum GattRefusal: Error, Hashable, Sendable {
    /// The value is not one the characteristic takes (malformed, too long, out of order).
    case invalidValue(String)
    /// Not now: the characteristic takes no such request in this state.
    case notPermitted(String)
    /// The request failed on the server's side.
    case failed(String)

    /// The reason, for logs and for the peer.
    public var reason: String {
        switch self {
        case .invalidValue(let reason), .notPermitted(let reason), .failed(let reason): reason
        }
    }
}

/// How a GATT operation of a connecting peer failed.
public enum GattError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The peer could not be connected, or does not serve the service or characteristic.
    case unreachable(String)
    /// The peer refused the read or write.
    case refused(String)
    /// The connection ended.
    case disconnected
    /// No answer in time.
    case timedOut

    public var description: String {
        switch self {
        case .unreachable(let reason): "the terminal cannot be reached over Bluetooth: \(reason)"
        case .refused(let reason): "the terminal refused: \(reason)"
        case .disconnected: "the Bluetooth connection to the terminal ended"
        case .timedOut: "the terminal did not answer in time over Bluetooth"
        }
    }
}
