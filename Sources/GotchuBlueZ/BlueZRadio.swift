public import GotchuCore
public import GotchuDBus
public import Logging
import Synchronization

/// The ``Radio`` on Linux: advertises and scans through bluetoothd's D-Bus API.
///
/// Advertisements are exported objects registered with `LEAdvertisingManager1`, re-registered when bluetoothd
/// restarts or releases them. Scans set an explicit discovery filter, start discovery, and turn `Device1` updates
/// into sightings keyed by EID.
public final class BlueZRadio: Radio {
    /// Choices that rarely change.
    public struct Configuration: Sendable {
        /// The adapter to use (`hci0`); `nil` picks the first powered one.
        public var adapter: String?
        /// How advertisements present themselves: ``BlueZAdvertisingType/broadcast`` (the default) from a private
        /// address that changes with each EID, or ``BlueZAdvertisingType/peripheral`` from the adapter's own.
        public var advertisingType: BlueZAdvertisingType
        /// An RSSI threshold for BlueZ's own discovery filter. Off by default: with it the kernel drops every report
        /// whose RSSI is unavailable (127), so ``ScanFilter/minimumRSSI`` is applied here instead.
        public var controllerRSSIThreshold: Int16?
        /// Whether to put the service UUID in the discovery filter's `UUIDs` (matches advertised UUID lists).
        public var filtersByUUID: Bool
        /// How long to keep trying to register again after bluetoothd restarted.
        public var reregistrationTimeout: Duration
        /// Where a scan reads bluetoothd's device signals.
        public var signalReading: SignalReading

        /// The radio's behaviour; the defaults pick the first powered adapter, advertise as
        /// ``BlueZAdvertisingType/broadcast``, put the service UUID in the discovery filter, set no RSSI threshold
        /// in BlueZ (``ScanFilter/minimumRSSI`` applies instead) and try to re-register for 10 s after bluetoothd
        /// restarts.
        public init(
            adapter: String? = nil,
            advertisingType: BlueZAdvertisingType = .broadcast,
            controllerRSSIThreshold: Int16? = nil,
            filtersByUUID: Bool = true,
            reregistrationTimeout: Duration = .seconds(10),
            signalReading: SignalReading = .automatic
        ) {
            self.adapter = adapter
            self.advertisingType = advertisingType
            self.controllerRSSIThreshold = controllerRSSIThreshold
            self.filtersByUUID = filtersByUUID
            self.reregistrationTimeout = reregistrationTimeout
            self.signalReading = signalReading
        }
    }

    /// Where a scan reads bluetoothd's device signals: one arrives for every advertisement report, hundreds a second
    /// in a busy room, and libdbus's reading and validating of each costs more than the sighting made of it.
    public enum SignalReading: Hashable, Sendable {
        /// A receive-only connection of the scan's own, read straight from its socket, when the bus address names
        /// a Unix socket (the system bus always does); otherwise the radio's connection.
        case automatic
        /// Always a connection of the scan's own; a bus address without a Unix socket fails the scan.
        case ownSocket
        /// Always the radio's connection, through libdbus.
        case connection
    }

    /// The bus connection used for everything.
    public let connection: DBusConnection
    let configuration: Configuration
    let logger: Logger
    private let clock = ContinuousClock()
    private let origin: ContinuousClock.Instant
    private let counters = Mutex(RadioStatistics())
    /// Numbers the objects this radio exports (advertisements, GATT applications), so no path is used twice.
    let exportCounter = Atomic<Int>(0)

    /// Told of each call to bluetoothd and each registration made again.
    let observer: (any BlueZRadioObserver)?

    /// Creates a radio on an open connection (normally the system bus).
    /// - Parameter observer: told of each method call to bluetoothd and each time an advertisement is registered
    ///   again (for metrics).
    public init(
        connection: DBusConnection,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "gotchu.bluez"),
        observer: (any BlueZRadioObserver)? = nil
    ) {
        self.connection = connection
        self.configuration = configuration
        self.logger = logger
        self.observer = observer
        self.origin = clock.now
    }

    /// Connects to `bus` (the system bus by default, honouring `DBUS_SYSTEM_BUS_ADDRESS`) and checks that bluetoothd
    /// is there. The connection lives as long as the process, or until ``close()``.
    public static func connect(
        to bus: DBusConnection.Bus = .system,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "gotchu.bluez")
    ) async throws -> BlueZRadio {
        let connection = try await DBusConnection.connect(to: bus, logger: logger)
        do {
            guard try await connection.nameOwner(of: BlueZ.service) != nil else {
                throw BlueZError(
                    .serviceUnavailable,
                    message: "bluetoothd is not running on the \(bus): sudo systemctl start bluetooth"
                )
            }
        } catch {
            await connection.close()
            throw error
        }
        return BlueZRadio(connection: connection, configuration: configuration, logger: logger)
    }

    /// Closes the bus connection; advertisements and scans end with it.
    public func close() async {
        await connection.close()
    }

    public func now() async -> Duration { elapsed() }

    private func elapsed() -> Duration { origin.duration(to: clock.now) }

    public func sleep(for duration: Duration) async throws { try await clock.sleep(for: duration) }

    public func statistics() async -> RadioStatistics { counters.withLock { $0 } }

    /// Calls a method of bluetoothd, telling the observer how it went.
    @discardableResult
    func call(
        path: DBusObjectPath,
        interface: String,
        method: String,
        _ arguments: [DBusValue] = [],
        timeout: Duration
    ) async throws -> [DBusValue] {
        do {
            let reply = try await connection.call(
                destination: BlueZ.service,
                path: path,
                interface: interface,
                method: method,
                arguments,
                timeout: timeout
            )
            observer?.called(method, succeeded: true)
            return reply
        } catch {
            observer?.called(method, succeeded: false)
            throw error
        }
    }

    /// ``BlueZ/managedObjects(on:)``, told to the observer.
    private func managedObjects() async throws -> BlueZ.ManagedObjects {
        do {
            let objects = try await BlueZ.managedObjects(on: connection)
            observer?.called("GetManagedObjects", succeeded: true)
            return objects
        } catch {
            observer?.called("GetManagedObjects", succeeded: false)
            throw error
        }
    }

    // MARK: Adapters

    /// The adapter this radio uses, resolved now.
    public func adapter() async throws -> BlueZAdapter {
        let objects = try await managedObjects()
        return try BlueZ.selectAdapter(named: configuration.adapter, from: BlueZ.adapters(in: objects))
    }

    /// Which address this radio's advertisements go out from on its adapter, and whether a listener could follow
    /// it by that address (``BlueZDoctor/addressPrivacy(of:on:)``): a warning when it advertises as
    /// ``BlueZAdvertisingType/peripheral``.
    public func addressPrivacy() async throws -> BlueZDoctorReport.Finding {
        BlueZDoctor.addressPrivacy(of: configuration.advertisingType, on: try await adapter())
    }

    // MARK: Advertising

    public func withAdvertisement<Result: Sendable>(
        _ advertisement: Advertisement,
        _ body: @Sendable (any AdvertisingHandle) async throws -> Result
    ) async throws -> Result {
        let (events, eventSink) = AsyncStream.makeStream(
            of: AdvertisingEvent.self,
            bufferingPolicy: .bufferingNewest(16)
        )
        let connection = self.connection
        // Subscribe before registering, so a restart between the two is not missed.
        let ownerChanges = try await connection.nameOwnerChanges(of: BlueZ.service)
        let removals = try await connection.signals(
            matching: DBusMatchRule(
                sender: BlueZ.service,
                interface: BlueZ.objectManagerInterface,
                member: "InterfacesRemoved"
            )
        )
        let adapterChanges = try await connection.signals(
            matching: DBusMatchRule(
                sender: BlueZ.service,
                interface: BlueZ.propertiesInterface,
                member: "PropertiesChanged",
                arg0: BlueZ.adapterInterface
            )
        )
        // The object registered now; a rotation replaces it with a new one.
        let current = LockedValue(try await export(advertisement, events: eventSink))
        do {
            let adapter = LockedValue(try await self.adapter())
            do {
                try await self.register(current.value, on: adapter.value)
            } catch {
                // Cancelled while bluetoothd was registering it, it may be registered all the same.
                if Task.isCancelled { await self.unregister(current.value, on: adapter.value) }
                throw error
            }
            logger.info(
                "advertising",
                metadata: [
                    "eid": "\(advertisement.eid)", "adapter": "\(adapter.value.name)", "path": "\(current.value)",
                    "type": "\(configuration.advertisingType.rawValue)",
                ]
            )
            let handle = BlueZAdvertisingHandle { rotated in
                try await self.rotate(to: rotated, current: current, on: adapter.value, events: eventSink)
            }
            do {
                // The group outlives neither `body` nor this call, so `body` does not really escape.
                let result = try await withoutActuallyEscaping(body) { body in
                    try await withThrowingTaskGroup(of: Result?.self) { group in
                        group.addTask {
                            for await change in ownerChanges { eventSink.yield(.ownerChanged(change)) }
                            return nil
                        }
                        group.addTask {
                            for await signal in removals {
                                guard let removed = signal.argument(0, as: DBusObjectPath.self),
                                    let interfaces = signal.argument(1, as: [String].self)
                                else { continue }
                                eventSink.yield(.interfacesRemoved(removed, interfaces))
                            }
                            return nil
                        }
                        group.addTask {
                            for await signal in adapterChanges {
                                guard let changed = signal.path,
                                    let properties = signal.argument(1, as: [String: DBusVariant].self)
                                else { continue }
                                eventSink.yield(.adapterChanged(changed, properties))
                            }
                            return nil
                        }
                        group.addTask {
                            for await event in events {
                                adapter.value = try await self.supervise(
                                    event,
                                    current: current,
                                    adapter: adapter.value
                                )
                            }
                            return nil
                        }
                        group.addTask { try await body(handle) }
                        while let next = try await group.next() {
                            if let result = next {
                                group.cancelAll()
                                return result
                            }
                        }
                        throw CancellationError()
                    }
                }
                eventSink.finish()
                await self.unregister(current.value, on: adapter.value)
                await connection.unexport(current.value)
                return result
            } catch {
                eventSink.finish()
                await self.unregister(current.value, on: adapter.value)
                throw error
            }
        } catch {
            eventSink.finish()
            await connection.unexport(current.value)
            throw error
        }
    }

    /// Exports `advertisement` as a new `LEAdvertisement1` object, at a path never used before; returns the path.
    private func export(
        _ advertisement: Advertisement,
        events: AsyncStream<AdvertisingEvent>.Continuation
    ) async throws -> DBusObjectPath {
        let number = exportCounter.wrappingAdd(1, ordering: .relaxed).newValue
        let path = DBusObjectPath(rawValue: "/io/gotchu/advertisement\(number)")!
        let object = BlueZAdvertisementObject.object(advertisement, type: configuration.advertisingType) {
            events.yield(.released(path))
        }
        try await connection.export(object, at: path)
        return path
    }

    /// Puts a rotated EID on the air: a new object, registered in place of the current one.
    ///
    /// Changing the registered object's properties would make bluetoothd rewrite the data of the instance on the
    /// air, which keeps its address: a scanner would hear the new EID from the address that sent the old one, and
    /// link the two. The object bluetoothd knows is therefore never changed. The old one is unregistered first, so
    /// the two are never on the air together (nor need two free instances), then the new one is registered: a new
    /// instance, which for ``BlueZAdvertisingType/broadcast`` goes out from a new private address. A
    /// ``BlueZAdvertisingType/peripheral`` one keeps the adapter's address whatever is done.
    ///
    /// When the new one cannot be registered, the old one is registered again (its EID still resolves for the
    /// ledger's grace) and the error is thrown.
    private func rotate(
        to advertisement: Advertisement,
        current: LockedValue<DBusObjectPath>,
        on adapter: BlueZAdapter,
        events: AsyncStream<AdvertisingEvent>.Continuation
    ) async throws {
        let old = current.value
        let new = try await export(advertisement, events: events)
        await unregister(old, on: adapter)
        current.value = new
        do {
            try await register(new, on: adapter)
        } catch {
            current.value = old
            await connection.unexport(new)
            do {
                try await register(old, on: adapter)
            } catch {
                logger.warning("could not put the last EID back on the air", metadata: ["error": "\(error)"])
            }
            throw error
        }
        await connection.unexport(old)
        observer?.registeredAgain(.rotation)
        logger.debug("rotated", metadata: ["eid": "\(advertisement.eid)", "path": "\(new)"])
    }

    private enum AdvertisingEvent: Sendable {
        /// bluetoothd released the object at this path.
        case released(DBusObjectPath)
        case ownerChanged(DBusNameOwnerChange)
        case interfacesRemoved(DBusObjectPath, [String])
        case adapterChanged(DBusObjectPath, [String: DBusVariant])
    }

    /// Reacts to one lifecycle event; returns the adapter now in use, or throws to end the advertisement.
    private func supervise(
        _ event: AdvertisingEvent,
        current: LockedValue<DBusObjectPath>,
        adapter: BlueZAdapter
    ) async throws -> BlueZAdapter {
        switch event {
        case .released(let path):
            // An object a rotation replaced is not put back.
            guard path == current.value else { return adapter }
            logger.notice("BlueZ released the advertisement; registering it again", metadata: ["path": "\(path)"])
            do {
                let selected = try await self.adapter()
                try await register(path, on: selected)
                observer?.registeredAgain(.released)
                return selected
            } catch {
                throw BlueZError(.released, message: "released by BlueZ and could not register again: \(error)")
            }
        case .ownerChanged(let change):
            guard change.newOwner != nil else {
                logger.warning("bluetoothd left the bus; waiting for it to come back")
                return adapter
            }
            logger.notice("bluetoothd restarted; registering the advertisement again")
            return try await reregister(current, adapterName: adapter.name)
        case .interfacesRemoved(let removed, let interfaces):
            guard removed == adapter.path,
                interfaces.contains(BlueZ.adapterInterface) || interfaces.contains(BlueZ.advertisingManagerInterface)
            else { return adapter }
            throw BlueZError(.adapterRemoved, message: "adapter \(adapter.name) was removed")
        case .adapterChanged(let changed, let properties):
            guard changed == adapter.path else { return adapter }
            if configuration.advertisingType == .broadcast, properties["Discoverable", as: Bool.self] == true {
                var now = adapter
                now.discoverable = true
                logger.warning("\(BlueZDoctor.addressPrivacy(of: .broadcast, on: now).text)")
            }
            // BlueZ stops advertising on a powered-off adapter without releasing the advertisement: say so.
            guard properties["Powered", as: Bool.self] == false else { return adapter }
            throw BlueZError(.notReady, message: "adapter \(adapter.name) was powered off")
        }
    }

    /// Registers again on a restarted bluetoothd, waiting for the adapter to reappear.
    private func reregister(_ current: LockedValue<DBusObjectPath>, adapterName: String) async throws -> BlueZAdapter {
        let deadline = clock.now + configuration.reregistrationTimeout
        var delay = Duration.milliseconds(50)
        while true {
            do {
                let objects = try await managedObjects()
                let adapters = BlueZ.adapters(in: objects)
                let adapter = try BlueZ.selectAdapter(named: configuration.adapter ?? adapterName, from: adapters)
                guard adapter.canAdvertise else { throw BlueZError(.noAdapter, message: "no advertising manager yet") }
                try await register(current.value, on: adapter)
                observer?.registeredAgain(.restart)
                return adapter
            } catch let error as BlueZError where error.kind == .alreadyExists {
                return try await self.adapter()
            } catch {
                guard clock.now < deadline else { throw error }
                logger.debug("registration after restart not possible yet", metadata: ["error": "\(error)"])
                try await clock.sleep(for: delay)
                delay = min(delay * 2, .seconds(1))
            }
        }
    }

    private func register(_ path: DBusObjectPath, on adapter: BlueZAdapter) async throws {
        if adapter.powered == false {
            throw BlueZError(.notReady, message: "adapter \(adapter.name) is powered off (bluetoothctl power on)")
        }
        do {
            _ = try await self.call(
                path: adapter.path,
                interface: BlueZ.advertisingManagerInterface,
                method: "RegisterAdvertisement",
                [.objectPath(path), [String: DBusVariant]().dbusValue],
                timeout: .seconds(10)
            )
        } catch let error as DBusError {
            throw BlueZError(error)
        }
    }

    private func unregister(_ path: DBusObjectPath, on adapter: BlueZAdapter) async {
        // Runs while the caller may be cancelled: the call itself must still happen.
        let task = Task {
            try await self.call(
                path: adapter.path,
                interface: BlueZ.advertisingManagerInterface,
                method: "UnregisterAdvertisement",
                [.objectPath(path)],
                timeout: .seconds(5)
            )
        }
        do {
            _ = try await task.value
        } catch {
            logger.debug("UnregisterAdvertisement failed", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Scanning

    /// How long the connection lets device signals gather while scanning before it reads them: a flood of reports is
    /// then read, decoded and passed on many per wake-up instead of one or two. Selection windows are seconds long,
    /// so a sighting a few milliseconds late changes nothing.
    static let scanCoalescing: Duration = .milliseconds(5)

    public func scan(_ filter: ScanFilter) async throws -> AsyncThrowingStream<Sighting, any Error> {
        guard let owner = try await connection.nameOwner(of: BlueZ.service) else {
            throw BlueZError(.serviceUnavailable, message: "org.bluez is not on the bus (is bluetoothd running?)")
        }
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: Sighting.self,
            bufferingPolicy: .bufferingNewest(1024)
        )
        // Signals are decoded on the connection's thread as they arrive: one hop less per signal under a flood.
        let ingest = ScanIngest(radio: self, filter: filter, continuation: continuation)
        let connection = self.connection
        // Subscribe first, then take the snapshot: devices already known produce no InterfacesAdded. The rules are
        // as narrow as the bus can apply, so other interfaces' changes (adapters, batteries, media) never arrive.
        let rules = [
            DBusMatchRule(
                sender: owner,
                interface: BlueZ.propertiesInterface,
                member: "PropertiesChanged",
                pathNamespace: BlueZ.rootPath,
                arg0: BlueZ.deviceInterface
            ),
            DBusMatchRule(sender: owner, interface: BlueZ.objectManagerInterface, member: "InterfacesAdded"),
            DBusMatchRule(sender: owner, interface: BlueZ.objectManagerInterface, member: "InterfacesRemoved"),
        ]
        let signals = try await subscribe(rules, ingest) {
            continuation.finish(throwing: BlueZError(.serviceUnavailable, message: "bus connection closed"))
        }
        let adapter: BlueZAdapter
        let ownerChanges: AsyncStream<DBusNameOwnerChange>
        do {
            ownerChanges = try await connection.nameOwnerChanges(of: BlueZ.service)
            let objects = try await managedObjects()
            adapter = try BlueZ.selectAdapter(named: configuration.adapter, from: BlueZ.adapters(in: objects))
            ingest.start(adapter: adapter.path, known: objects)
            try await startDiscovery(on: adapter, filter: filter)
        } catch {
            await signals.end(on: connection)
            throw error
        }
        let watcher = Task {
            for await change in ownerChanges where change.oldOwner == owner {
                continuation.finish(throwing: BlueZError(.serviceUnavailable, message: "bluetoothd left the bus"))
                return
            }
            // The stream ends with the radio's connection, which ends the scan even when its signals come from a
            // socket of its own. (Cancelled, the scan has already ended.)
            continuation.finish(throwing: BlueZError(.serviceUnavailable, message: "bus connection closed"))
        }
        let logger = self.logger
        continuation.onTermination = { _ in
            watcher.cancel()
            Task {
                await signals.end(on: connection)
                do {
                    _ = try await self.call(
                        path: adapter.path,
                        interface: BlueZ.adapterInterface,
                        method: "StopDiscovery",
                        timeout: .seconds(5)
                    )
                } catch {
                    logger.debug("StopDiscovery failed", metadata: ["error": "\(error)"])
                }
            }
        }
        logger.info("scanning", metadata: ["adapter": "\(adapter.name)", "uuid": "\(filter.serviceUUID)"])
        return stream
    }

    /// Where a scan's signals come from, to be ended with it.
    private enum ScanSignals: Sendable {
        case ownSocket(DBusSignalReceiver)
        case connection([UInt64])

        func end(on connection: DBusConnection) async {
            switch self {
            case .ownSocket(let receiver): receiver.close()
            case .connection(let tokens): for token in tokens { await connection.removeSignalHandler(token) }
            }
        }
    }

    /// Subscribes `ingest` to `rules`, read as ``Configuration/signalReading`` says; `onEnd` runs if the signals end
    /// before the scan does.
    private func subscribe(
        _ rules: [DBusMatchRule],
        _ ingest: ScanIngest,
        onEnd: @escaping @Sendable () -> Void
    ) async throws -> ScanSignals {
        if configuration.signalReading != .connection {
            do {
                return .ownSocket(
                    try await DBusSignalReceiver.open(
                        address: connection.address,
                        rules: rules,
                        coalescing: Self.scanCoalescing,
                        logger: logger,
                        onEnd: onEnd,
                        drained: { ingest.flush() },
                        { ingest.receive($0) }
                    )
                )
            } catch let error as DBusError
                where error.name == .notSupported && configuration.signalReading == .automatic
            {
                logger.debug("reading device signals through the connection", metadata: ["reason": "\(error.message)"])
            }
        }
        var tokens: [UInt64] = []
        do {
            for rule in rules {
                tokens.append(
                    try await connection.addSignalViewHandler(
                        matching: rule,
                        coalescing: Self.scanCoalescing,
                        onEnd: onEnd,
                        drained: { ingest.flush() },
                        { ingest.receive($0) }
                    )
                )
            }
        } catch {
            await ScanSignals.connection(tokens).end(on: connection)
            throw error
        }
        return .connection(tokens)
    }

    /// The exact discovery filter this radio sets for `filter`.
    public func discoveryFilter(for filter: ScanFilter) -> [String: DBusVariant] {
        var dictionary: [String: DBusVariant] = [
            "Transport": DBusVariant("le"),
            "DuplicateData": DBusVariant(true),
        ]
        if configuration.filtersByUUID {
            dictionary["UUIDs"] = DBusVariant([filter.serviceUUID.uuidString])
        }
        if let threshold = configuration.controllerRSSIThreshold {
            dictionary["RSSI"] = DBusVariant(threshold)
        }
        return dictionary
    }

    private func startDiscovery(on adapter: BlueZAdapter, filter: ScanFilter) async throws {
        do {
            _ = try await self.call(
                path: adapter.path,
                interface: BlueZ.adapterInterface,
                method: "SetDiscoveryFilter",
                [discoveryFilter(for: filter).dbusValue],
                timeout: .seconds(10)
            )
            _ = try await self.call(
                path: adapter.path,
                interface: BlueZ.adapterInterface,
                method: "StartDiscovery",
                timeout: .seconds(10)
            )
        } catch let error as DBusError {
            throw BlueZError(error)
        }
    }

    /// `PropertiesChanged` of a device read in place (the signal BlueZ sends for every advertisement report); the
    /// sighting, if any, to pass on.
    fileprivate func process(
        propertiesChanged view: DBusMessageView,
        adapter: DBusObjectPath,
        decoder: inout SightingDecoder,
        filter: ScanFilter
    ) -> Sighting? {
        guard view.pathIsStrictlyBelow(adapter), let path = view.path else { return nil }
        switch decoder.readPropertiesChanged(view) {
        case .otherInterface:
            return nil
        case .malformed(let reason):
            countMalformed(reason, path)
            return nil
        case .changes(let changes):
            return sighting(decoder.changed(path, changes), path, filter)
        }
    }

    fileprivate func process(
        _ signal: DBusMessage,
        adapter: DBusObjectPath,
        decoder: inout SightingDecoder,
        filter: ScanFilter,
        _ continuation: AsyncThrowingStream<Sighting, any Error>.Continuation
    ) {
        switch (signal.interface, signal.member) {
        case (BlueZ.objectManagerInterface, "InterfacesAdded"):
            guard let path = signal.argument(0, as: DBusObjectPath.self), path.isDescendant(of: adapter) else {
                return
            }
            guard let interfaces = signal.argument(1, as: [String: [String: DBusVariant]].self) else {
                return countMalformed("InterfacesAdded with arguments \(signal.signature)", path)
            }
            guard let properties = interfaces[BlueZ.deviceInterface] else { return }
            deliver(decoder.added(path, properties: properties), path, filter, continuation)
        case (BlueZ.objectManagerInterface, "InterfacesRemoved"):
            guard let path = signal.argument(0, as: DBusObjectPath.self),
                signal.argument(1, as: [String].self)?.contains(BlueZ.deviceInterface) == true
            else { return }
            decoder.removed(path)
        case (BlueZ.propertiesInterface, "PropertiesChanged"):
            guard let path = signal.path, path.isDescendant(of: adapter), path != adapter,
                signal.argument(0, as: String.self) == BlueZ.deviceInterface
            else { return }
            guard let changed = signal.argument(1, as: [String: DBusVariant].self) else {
                return countMalformed("PropertiesChanged with arguments \(signal.signature)", path)
            }
            let invalidated = signal.argument(2, as: [String].self) ?? []
            deliver(
                decoder.changed(path, properties: changed, invalidated: invalidated),
                path,
                filter,
                continuation
            )
        default:
            return
        }
    }

    fileprivate func deliver(
        _ outcome: SightingDecoder.Outcome,
        _ path: DBusObjectPath,
        _ filter: ScanFilter,
        _ continuation: AsyncThrowingStream<Sighting, any Error>.Continuation
    ) {
        if let sighting = sighting(outcome, path, filter) { continuation.yield(sighting) }
    }

    /// Counts an outcome; the sighting to pass on, if any.
    fileprivate func sighting(
        _ outcome: SightingDecoder.Outcome,
        _ path: DBusObjectPath,
        _ filter: ScanFilter
    ) -> Sighting? {
        switch outcome {
        case .nothing:
            return nil
        case .malformed(let reason):
            countMalformed(reason, path)
            return nil
        case .sighting(let eid, let rssi, let txPower, let calibratedRSSI, let offline):
            if let minimum = filter.minimumRSSI {
                guard let rssi, rssi >= minimum else {
                    counters.withLock { $0.belowThreshold += 1 }
                    return nil
                }
            }
            counters.withLock { $0.sightings += 1 }
            return Sighting(
                eid: eid,
                rssi: rssi,
                txPower: txPower,
                time: elapsed(),
                source: path.rawValue,
                calibratedRSSI: calibratedRSSI,
                offline: offline
            )
        }
    }

    private func countMalformed(_ reason: String, _ path: DBusObjectPath) {
        counters.withLock { $0.malformed += 1 }
        logger.debug("ignored malformed advertisement", metadata: ["device": "\(path)", "reason": "\(reason)"])
    }
}

/// The handle ``BlueZRadio/withAdvertisement(_:_:)`` gives its body.
struct BlueZAdvertisingHandle: AdvertisingHandle {
    /// Registers a new object carrying the advertisement in place of the current one.
    let rotate: @Sendable (Advertisement) async throws -> Void

    /// Puts `advertisement` on the air as a new registration, never by changing the one on the air (see
    /// `BlueZRadio.rotate(to:current:on:events:)`): a broadcast then goes out from a new address with its new EID.
    func update(_ advertisement: Advertisement) async throws {
        try await rotate(advertisement)
    }
}

/// The decoding state of one scan, fed on the connection's thread. Signals that arrive before the adapter is known
/// wait, so none is lost between subscribing and the `GetManagedObjects` snapshot. Sightings decoded during one round
/// of dispatch are passed on together when it ends, so a flood wakes the consumer once per round, not per signal.
private final class ScanIngest: Sendable {
    private struct State {
        var decoder: SightingDecoder
        var adapter: DBusObjectPath?
        var waiting: [DBusMessage] = []
        /// Sightings of the current round of dispatch, not yet passed on.
        var batch: [Sighting] = []
    }

    /// A round's batch is passed on early when it grows this large, which bounds it under any flood.
    private static let batchLimit = 256

    private let radio: BlueZRadio
    private let filter: ScanFilter
    private let continuation: AsyncThrowingStream<Sighting, any Error>.Continuation
    private let state: Mutex<State>

    init(radio: BlueZRadio, filter: ScanFilter, continuation: AsyncThrowingStream<Sighting, any Error>.Continuation) {
        self.radio = radio
        self.filter = filter
        self.continuation = continuation
        self.state = Mutex(State(decoder: SightingDecoder(serviceUUID: filter.serviceUUID)))
    }

    /// Takes the snapshot's devices (unless a signal already told more), then the signals that waited.
    func start(adapter: DBusObjectPath, known objects: BlueZ.ManagedObjects) {
        state.withLock { state in
            let waiting = state.waiting
            state.waiting = []
            state.adapter = adapter
            for signal in waiting {
                radio.process(signal, adapter: adapter, decoder: &state.decoder, filter: filter, continuation)
            }
            for (path, interfaces) in objects.sorted(by: { $0.key < $1.key }) where path.isDescendant(of: adapter) {
                guard let properties = interfaces[BlueZ.deviceInterface], !state.decoder.tracks(path) else { continue }
                radio.deliver(state.decoder.known(path, properties: properties), path, filter, continuation)
            }
        }
    }

    func receive(_ view: DBusMessageView) {
        let isPropertiesChanged = view.isSignal(
            interface: "org.freedesktop.DBus.Properties",
            member: "PropertiesChanged"
        )
        let full = state.withLock { state -> [Sighting]? in
            guard let adapter = state.adapter else {
                // Bounded like every other buffer: a flood before the snapshot keeps only the newest.
                guard let signal = try? view.message() else { return nil }
                if state.waiting.count >= 4096 { state.waiting.removeFirst() }
                state.waiting.append(signal)
                return nil
            }
            if isPropertiesChanged {
                if let sighting = radio.process(
                    propertiesChanged: view,
                    adapter: adapter,
                    decoder: &state.decoder,
                    filter: filter
                ) {
                    state.batch.append(sighting)
                }
            } else if let signal = try? view.message() {
                // Devices appearing and going: rare, so read whole.
                flushLocked(&state)
                radio.process(signal, adapter: adapter, decoder: &state.decoder, filter: filter, continuation)
            }
            guard state.batch.count >= Self.batchLimit else { return nil }
            return takeBatch(&state)
        }
        if let full { yield(full) }
    }

    /// Passes on the sightings of the round of dispatch that ended.
    func flush() {
        let batch = state.withLock { takeBatch(&$0) }
        yield(batch)
    }

    private func flushLocked(_ state: inout State) {
        yield(takeBatch(&state))
    }

    private func takeBatch(_ state: inout State) -> [Sighting] {
        guard !state.batch.isEmpty else { return [] }
        let batch = state.batch
        state.batch.removeAll(keepingCapacity: true)
        return batch
    }

    private func yield(_ batch: [Sighting]) {
        for sighting in batch { continuation.yield(sighting) }
    }
}

/// A value shared between tasks under a lock.
final class LockedValue<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    var value: Value {
        get { mutex.withLock { $0 } }
        set { mutex.withLock { $0 = newValue } }
    }
}

/// Told what a ``BlueZRadio`` asks of bluetoothd, for metrics. Called on the radio's tasks: keep it quick.
public protocol BlueZRadioObserver: Sendable {
    /// A method call to bluetoothd (`RegisterAdvertisement`, `StartDiscovery`, …) was answered, or failed.
    func called(_ method: String, succeeded: Bool)
    /// An advertisement was registered again with bluetoothd.
    func registeredAgain(_ reason: BlueZReregistration)
}

/// Why an advertisement was registered again.
public enum BlueZReregistration: String, Sendable, CaseIterable {
    /// Its EID rotated: registered anew so bluetoothd sets it up as a new instance.
    case rotation
    /// bluetoothd restarted (its owner on the bus changed).
    case restart
    /// bluetoothd released it.
    case released
}
