/// What a receiver puts on the air: one EID under one service UUID.
public struct Advertisement: Hashable, Sendable {
    /// The service UUID listed in the advertisement and keying its service data.
    public var serviceUUID: BluetoothUUID
    /// The session's EID, sent as service data.
    public var eid: EID
    /// Whether to include the TX Power Level AD, so payers can compute attenuation (TX power − RSSI).
    public var includesTxPower: Bool
    /// Requested advertising interval; radios may ignore it (BlueZ does unless bluetoothd runs with `-E`).
    public var interval: ClosedRange<Duration>?
    /// The terminal's calibration: the RSSI in dBm a phone measured at ``Calibration/referenceDistance`` from it
    /// (`gotchu kiosk calibrate`). Sent as one signed byte of service data under
    /// ``BluetoothUUID/gotchuCalibration``, beside the EID's service data, which stays exactly as payers parse it.
    public var calibratedRSSI: Int16?
    /// Whether the terminal cannot reach the ledger: payers then connect over GATT and read its signed charge
    /// (``EID/offlineMarker`` follows the EID on the air).
    public var offline: Bool

    /// Creates an advertisement for `eid`.
    public init(
        eid: EID,
        serviceUUID: BluetoothUUID = .gotchu,
        includesTxPower: Bool = true,
        interval: ClosedRange<Duration>? = nil,
        calibratedRSSI: Int16? = nil,
        offline: Bool = false
    ) {
        self.offline = offline
        self.eid = eid
        self.serviceUUID = serviceUUID
        self.includesTxPower = includesTxPower
        self.interval = interval
        self.calibratedRSSI = calibratedRSSI
    }
}

/// One reception of a Gotchu advertisement by a scanner.
public struct Sighting: Hashable, Sendable {
    /// The EID decoded from the service data.
    public var eid: EID
    /// Received signal strength in dBm; `nil` when the controller did not report one (HCI value 127).
    public var rssi: Int16?
    /// The advertiser's TX power in dBm, when it included the TX Power Level AD.
    public var txPower: Int16?
    /// When it was received, on the radio's clock (see ``Radio/now()``).
    public var time: Duration
    /// Which advertiser it came from as the radio sees it (a D-Bus device path, a simulated peer's name).
    /// Only for diagnostics: peers are identified by EID, since addresses are random.
    public var source: String
    /// The advertiser's calibration (its RSSI at 1 m, see ``Advertisement/calibratedRSSI``), as received.
    public var calibratedRSSI: Int16?
    /// Whether the advertiser says it cannot reach the ledger (``Advertisement/offline``): connect to it over GATT.
    public var offline: Bool

    /// A reception of `eid` at `time` (radio clock), with `rssi` and `txPower` in dBm when the controller
    /// reported them; `source` is for diagnostics only.
    public init(
        eid: EID,
        rssi: Int16?,
        txPower: Int16?,
        time: Duration,
        source: String,
        calibratedRSSI: Int16? = nil,
        offline: Bool = false
    ) {
        self.offline = offline
        self.eid = eid
        self.rssi = rssi
        self.txPower = txPower
        self.time = time
        self.source = source
        self.calibratedRSSI = calibratedRSSI
    }

    /// The level the advertiser's signal is measured against (see ``Calibration/referencePower(txPower:calibratedRSSI:)``):
    /// its calibration when it carries a plausible one, else its announced TX power when plausible, else `nil`.
    public var referencePower: Int16? {
        Calibration.referencePower(txPower: txPower, calibratedRSSI: calibratedRSSI)
    }

    /// Reference power − RSSI in dB (see ``referencePower``), when both are known: lower means closer, and it
    /// compares across advertisers that transmit at different powers or were built differently.
    public var attenuation: Int16? {
        guard let rssi, let referencePower else { return nil }
        return referencePower - rssi
    }
}

/// What a scan listens for.
public struct ScanFilter: Hashable, Sendable {
    /// Only advertisements carrying service data under this UUID are reported.
    public var serviceUUID: BluetoothUUID
    /// Sightings weaker than this (dBm) are dropped by the radio; `nil` keeps all. Radios apply it themselves rather
    /// than trusting a controller filter, which silently drops reports without RSSI.
    public var minimumRSSI: Int16?

    /// A filter for advertisements carrying service data under `serviceUUID` (Gotchu's by default), and when
    /// `minimumRSSI` is set, only those received at least that strong (dBm).
    public init(serviceUUID: BluetoothUUID = .gotchu, minimumRSSI: Int16? = nil) {
        self.serviceUUID = serviceUUID
        self.minimumRSSI = minimumRSSI
    }
}

/// A live advertisement, valid inside the scope that started it.
public protocol AdvertisingHandle: Sendable {
    /// Replaces what is advertised in place (for example a rotated EID) without stopping.
    func update(_ advertisement: Advertisement) async throws
}

/// A Bluetooth LE radio as the payment flows see it. BlueZ and the simulator are the two implementations.
///
/// Time is the radio's own: ``now()`` and ``sleep(for:)`` run on a virtual clock in simulations and on the
/// continuous clock on hardware, and every ``Sighting/time`` is on that same scale.
public protocol Radio: Sendable {
    /// The current time on the radio's clock.
    func now() async -> Duration

    /// Sleeps on the radio's clock.
    func sleep(for duration: Duration) async throws

    /// Advertises `advertisement` while `body` runs, and stops when it returns, throws or is cancelled.
    func withAdvertisement<Result: Sendable>(
        _ advertisement: Advertisement,
        _ body: @Sendable (any AdvertisingHandle) async throws -> Result
    ) async throws -> Result

    /// Scans until the returned stream is dropped or its consuming task is cancelled. Malformed advertisements are
    /// never yielded; the radio counts them in ``RadioStatistics``.
    func scan(_ filter: ScanFilter) async throws -> AsyncThrowingStream<Sighting, any Error>

    /// Counters for diagnostics.
    func statistics() async -> RadioStatistics

    /// Releases what the radio holds (a bus connection, files); advertisements and scans end with it. The radio is
    /// not used afterwards.
    func close() async
}

extension Radio {
    /// Radios that hold nothing beyond their own memory have nothing to release.
    public func close() async {}
}

/// Counters a radio keeps about what it heard.
public struct RadioStatistics: Hashable, Sendable {
    /// Sightings delivered to scanners.
    public var sightings: Int
    /// Advertisements ignored because their service data was not an EID (wrong length, non-hex, wrong type).
    public var malformed: Int
    /// Sightings dropped below the scan's RSSI threshold or without RSSI when a threshold was set.
    public var belowThreshold: Int

    /// Creates counters.
    public init(sightings: Int = 0, malformed: Int = 0, belowThreshold: Int = 0) {
        self.sightings = sightings
        self.malformed = malformed
        self.belowThreshold = belowThreshold
    }
}
