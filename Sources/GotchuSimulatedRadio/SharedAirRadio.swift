public import Foundation
public import GotchuCore

/// A simulated radio whose air is shared between processes on one machine, through a directory: each advertiser
/// keeps a small file there (who, where, what) and every scanner hears all of them through the propagation model,
/// in real time. This is how `gotchu receive --radio sim` and `gotchu pay --radio sim` in two terminals meet.
///
/// An advertiser rewrites its file every ``heartbeat``; files not rewritten for ``staleAfter`` (a crashed process)
/// are off the air.
public struct SharedAirRadio: Radio {
    /// How often an advertiser refreshes its file.
    public static let heartbeat: Duration = .milliseconds(500)
    /// When a file that was not refreshed stops being heard.
    public static let staleAfter: Duration = .seconds(2)

    /// The shared directory.
    public let directory: URL

    /// The air processes of one user share unless told otherwise: `$XDG_RUNTIME_DIR/gotchu-air`, else
    /// `/tmp/gotchu-air-UID`.
    public static var defaultDirectory: URL {
        if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return URL(fileURLWithPath: runtime).appendingPathComponent("gotchu-air")
        }
        return URL(fileURLWithPath: "/tmp/gotchu-air-\(getuid())")
    }
    /// This device on the air: name, position, TX power.
    public let peer: SimulatedPeer
    private let local: SimulatedAir
    private let radio: SimulatedRadio

    /// Why a chosen air directory cannot be used.
    public struct DirectoryError: Error, CustomStringConvertible {
        /// The path and what is wrong with it.
        public let description: String
    }

    /// Makes sure a chosen air directory exists: an existing directory is used as it is; a missing one is created
    /// owner-only (0700) if its parent exists, and nothing else is ever created, so a mistyped path fails here
    /// instead of growing a tree somewhere unexpected.
    public static func prepare(directory: URL) throws(DirectoryError) {
        let path = directory.path
        var status = stat()
        if lstat(path, &status) == 0 {
            // lstat, then stat: a symbolic link to a directory is accepted, one to anything else is not.
            guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
                throw DirectoryError(description: "\(path) exists but is not a directory")
            }
            return
        }
        let parent = directory.deletingLastPathComponent().path
        var parentStatus = stat()
        guard stat(parent, &parentStatus) == 0, parentStatus.st_mode & S_IFMT == S_IFDIR else {
            throw DirectoryError(
                description:
                    "\(path): the directory \(parent) does not exist; create it first (only the last part is created)"
            )
        }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw DirectoryError(
                description: "\(path): cannot create the directory: \(String(cString: strerror(errno)))"
            )
        }
    }

    /// Joins the air in `directory` (created if needed) as `peer`. `seed` drives this scanner's view of the
    /// channel (shadowing, fading, loss).
    public init(directory: URL, peer: SimulatedPeer, model: AirModel = AirModel(), seed: UInt64) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        self.peer = peer
        self.local = SimulatedAir(model: model, seed: seed, clock: .realTime)
        self.radio = await local.addPeer(peer)
    }

    public func now() async -> Duration { await radio.now() }

    public func sleep(for duration: Duration) async throws { try await radio.sleep(for: duration) }

    public func statistics() async -> RadioStatistics { await radio.statistics() }

    public func withAdvertisement<Result: Sendable>(
        _ advertisement: Advertisement,
        _ body: @Sendable (any AdvertisingHandle) async throws -> Result
    ) async throws -> Result {
        let file = directory.appendingPathComponent("\(UUID().uuidString).json")
        let handle = SharedAdvertisement(file: file, record: AdvertiserRecord(peer: peer, advertisement: advertisement))
        try handle.write()
        defer { try? FileManager.default.removeItem(at: file) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: Self.heartbeat)
                    try handle.write()
                }
            }
            defer { group.cancelAll() }
            return try await body(handle)
        }
    }

    public func scan(_ filter: ScanFilter) async throws -> AsyncThrowingStream<Sighting, any Error> {
        let sightings = try await radio.scan(filter)
        let mirror = Task { [directory, local] in await Self.mirror(directory, into: local) }
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Sighting.self)
        let forward = Task {
            do {
                for try await sighting in sightings { continuation.yield(sighting) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in
            mirror.cancel()
            forward.cancel()
        }
        return stream
    }

    /// Keeps the local air's broadcasters equal to the directory's fresh advertiser files.
    private static func mirror(_ directory: URL, into air: SimulatedAir) async {
        var known: [String: (index: Int, record: AdvertiserRecord)] = [:]
        while !Task.isCancelled {
            let fresh = AdvertiserRecord.readFresh(in: directory, staleAfter: staleAfter)
            for (name, record) in fresh {
                if let existing = known[name] {
                    if existing.record.payload != record.payload {
                        await air.updateBroadcaster(existing.index, payload: record.payload)
                        known[name]?.record = record
                    }
                } else {
                    let index = await air.addBroadcaster(record.simulatedPeer, payload: record.payload)
                    known[name] = (index, record)
                }
            }
            for (name, entry) in known where fresh[name] == nil {
                await air.stopBroadcaster(entry.index)
                known[name] = nil
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// One advertiser's file.
struct AdvertiserRecord: Codable, Hashable {
    var name: String
    var x: Double
    var y: Double
    var txPower: Int16
    var intervalMilliseconds: Int
    var serviceUUID: String
    var serviceData: [UInt8]
    var includesTxPower: Bool
    /// Absent in records written before calibrations were carried.
    var calibratedRSSI: Int16?

    init(peer: SimulatedPeer, advertisement: Advertisement) {
        let position = peer.trajectory.position(at: .zero)
        self.name = peer.name
        self.x = position.x
        self.y = position.y
        self.txPower = peer.txPower
        self.intervalMilliseconds = Int(
            (advertisement.interval?.lowerBound ?? peer.advertisingInterval) / .milliseconds(1)
        )
        self.serviceUUID = advertisement.serviceUUID.uuidString
        self.serviceData = advertisement.eid.serviceData(offline: advertisement.offline)
        self.includesTxPower = advertisement.includesTxPower
        self.calibratedRSSI = advertisement.calibratedRSSI
    }

    var simulatedPeer: SimulatedPeer {
        SimulatedPeer(
            name: name,
            trajectory: .fixed(Position(x: x, y: y)),
            txPower: txPower,
            advertisingInterval: .milliseconds(max(20, intervalMilliseconds))
        )
    }

    var payload: AirPayload {
        let uuid = BluetoothUUID(serviceUUID) ?? .gotchu
        var data = [uuid: serviceData]
        if let calibratedRSSI { data[.gotchuCalibration] = Calibration.serviceData(calibratedRSSI) }
        return AirPayload(serviceUUIDs: [uuid], serviceData: data, txPower: includesTxPower ? txPower : nil)
    }

    /// The records in `directory` refreshed within `staleAfter`, by file name. Unreadable files are skipped.
    static func readFresh(in directory: URL, staleAfter: Duration) -> [String: AdvertiserRecord] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var records: [String: AdvertiserRecord] = [:]
        let oldest = Date().addingTimeInterval(-(staleAfter / .seconds(1)))
        for name in names where name.hasSuffix(".json") {
            let file = directory.appendingPathComponent(name)
            guard
                let modified = try? FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date
            else { continue }
            // Left behind by a process that was killed: clear it away once it is clearly dead.
            if modified < oldest.addingTimeInterval(-60) { try? FileManager.default.removeItem(at: file) }
            guard modified >= oldest,
                let data = try? Data(contentsOf: file),
                let record = try? JSONDecoder().decode(AdvertiserRecord.self, from: data)
            else { continue }
            records[name] = record
        }
        return records
    }
}

/// A live advertisement on the shared air: its file.
final class SharedAdvertisement: AdvertisingHandle, @unchecked Sendable {
    // Unchecked: `record` is guarded by `lock`; writes to the file are atomic renames.
    private let file: URL
    private let lock = NSLock()
    private var record: AdvertiserRecord

    init(file: URL, record: AdvertiserRecord) {
        self.file = file
        self.record = record
    }

    func update(_ advertisement: Advertisement) async throws {
        lock.withLock {
            let peer = record.simulatedPeer
            record = AdvertiserRecord(peer: peer, advertisement: advertisement)
        }
        try write()
    }

    /// Writes the record atomically (rename), which also refreshes the heartbeat.
    func write() throws {
        let data = try JSONEncoder().encode(lock.withLock { record })
        try data.write(to: file, options: .atomic)
    }
}
