public import GotchuCore

/// How radio waves behave in the simulated room: log-distance path loss, slowly varying shadowing per link, fast
/// fading per packet, packet loss and receiver sensitivity.
///
/// RSSI = TX power − loss at 1 m − 10·n·log10(d) + shadowing + fading, rounded and clamped to ``rssiRange``.
/// Shadowing is an Ornstein–Uhlenbeck process per (advertiser, scanner) link: stationary with deviation
/// ``shadowingSigma`` and correlation time ``shadowingCorrelationTime``, so averaging a 1 s window removes fading but
/// not shadowing, as indoors.
public struct AirModel: Hashable, Sendable, Codable {
    /// Path-loss exponent n (2 in free space, 1.8–3 indoors).
    public var pathLossExponent: Double
    /// Loss over the first metre in dB (≈ 40 dB at 2.44 GHz in free space, plus antennas).
    public var lossAtOneMetre: Double
    /// Standard deviation of the shadowing in dB (4–14 dB measured indoors).
    public var shadowingSigma: Double
    /// How fast shadowing changes: the time after which a link's shadowing is correlated by 1/e.
    public var shadowingCorrelationTime: Duration
    /// Standard deviation of the per-packet fading in dB.
    public var fastFadingSigma: Double
    /// Probability that an advertising event is not received at all (collisions, interference).
    public var packetLoss: Double
    /// Packets weaker than this (dBm, before clamping) are not received.
    public var sensitivity: Double
    /// Reported RSSI values are clamped to this range.
    public var rssiRange: ClosedRange<Int16>
    /// Distances are at least this (metres), so the logarithm stays finite when peers touch.
    public var minimumDistance: Double

    /// Creates a model; the defaults are an ordinary indoor room.
    public init(
        pathLossExponent: Double = 2.0,
        lossAtOneMetre: Double = 41,
        shadowingSigma: Double = 6,
        shadowingCorrelationTime: Duration = .seconds(2),
        fastFadingSigma: Double = 4,
        packetLoss: Double = 0.1,
        sensitivity: Double = -95,
        rssiRange: ClosedRange<Int16> = -120...10,
        minimumDistance: Double = 0.05
    ) {
        self.pathLossExponent = pathLossExponent
        self.lossAtOneMetre = lossAtOneMetre
        self.shadowingSigma = shadowingSigma
        self.shadowingCorrelationTime = shadowingCorrelationTime
        self.fastFadingSigma = fastFadingSigma
        self.packetLoss = packetLoss
        self.sensitivity = sensitivity
        self.rssiRange = rssiRange
        self.minimumDistance = minimumDistance
    }
}

/// One device in the simulated room.
public struct SimulatedPeer: Sendable {
    /// A name for diagnostics; it is the ``Sighting/source`` of what this peer sends.
    public var name: String
    /// Where the peer is over time.
    public var trajectory: Trajectory
    /// Radiated power in dBm, announced in the TX Power Level AD when the advertisement includes it.
    public var txPower: Int16
    /// Advertising interval; each event is delayed by a further random 0–10 ms (advDelay), as the link layer does.
    public var advertisingInterval: Duration
    /// How long the scanner listens in each ``scanInterval`` (equal to it for continuous scanning).
    public var scanWindow: Duration
    /// The scanner's duty-cycle period.
    public var scanInterval: Duration

    /// Creates a peer. Defaults: 0 dBm, 100 ms advertising, continuous scanning.
    public init(
        name: String,
        trajectory: Trajectory,
        txPower: Int16 = 0,
        advertisingInterval: Duration = .milliseconds(100),
        scanWindow: Duration = .milliseconds(100),
        scanInterval: Duration = .milliseconds(100)
    ) {
        self.name = name
        self.trajectory = trajectory
        self.txPower = txPower
        self.advertisingInterval = advertisingInterval
        self.scanWindow = scanWindow
        self.scanInterval = scanInterval
    }

    /// A peer standing still at `position`.
    public init(name: String, at position: Position) {
        self.init(name: name, trajectory: .fixed(position))
    }
}

/// What one advertising event carries, as a scanner decodes it. Anything can be put on the air, including
/// malformed service data, which scanners must count and ignore.
public struct AirPayload: Hashable, Sendable {
    /// The complete list of service UUIDs.
    public var serviceUUIDs: [BluetoothUUID]
    /// Service data by UUID.
    public var serviceData: [BluetoothUUID: [UInt8]]
    /// The TX Power Level AD, when present.
    public var txPower: Int16?

    /// Creates an arbitrary payload.
    public init(serviceUUIDs: [BluetoothUUID], serviceData: [BluetoothUUID: [UInt8]], txPower: Int16? = nil) {
        self.serviceUUIDs = serviceUUIDs
        self.serviceData = serviceData
        self.txPower = txPower
    }

    /// The payload of a well-formed Gotchu advertisement sent at `txPower`.
    public init(_ advertisement: Advertisement, txPower: Int16) {
        self.serviceUUIDs = [advertisement.serviceUUID]
        self.serviceData = [advertisement.serviceUUID: advertisement.eid.serviceData]
        self.txPower = advertisement.includesTxPower ? txPower : nil
    }

    /// What a scanner filtering on `serviceUUID` makes of this payload.
    public func decode(for serviceUUID: BluetoothUUID) -> Decoded {
        if let data = serviceData[serviceUUID] {
            return EID(serviceData: data).map(Decoded.eid) ?? .malformed
        }
        // Listing our UUID without carrying an EID under it is a malformed Gotchu advertisement; not mentioning it
        // at all is someone else's advertisement, which a UUID filter never reports.
        return serviceUUIDs.contains(serviceUUID) ? .malformed : .unrelated
    }

    /// The result of ``decode(for:)``.
    public enum Decoded: Hashable, Sendable {
        /// A valid EID.
        case eid(EID)
        /// Claims to be for the service but carries no valid EID (wrong length, non-hex, data under another UUID).
        case malformed
        /// Not for this service.
        case unrelated
    }
}
