import GotchuCore
package import GotchuDBus
package import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Measures how fast `PropertiesChanged` signals become sightings: the whole path of a scan (reading, match, decode,
/// threshold) on a bus where an emitter owning `org.bluez` floods `Device1` updates as soon
/// as discovery starts (`Benchmarks/dbus_fast_ingest.py emit` is one).
///
/// Not part of the library's API: `gotchu-bench dbus`, in the same package, runs it.
package enum BlueZIngestBenchmark {
    /// What one run measured.
    package struct Result: Hashable, Sendable, CustomStringConvertible {
        /// Sightings received.
        package var sightings: Int
        /// Wall-clock time from the first to the last sighting.
        package var wallTime: Duration
        /// CPU time the process used between the first and the last sighting (all threads).
        package var cpuTime: Duration

        /// Sightings per CPU second: the rate one core sustains, independent of the emitter's speed.
        package var sightingsPerCPUSecond: Double {
            let seconds = cpuTime.seconds
            return seconds > 0 ? Double(sightings) / seconds : 0
        }

        package var description: String {
            "\(sightings) sightings in \(wallTime) wall, \(cpuTime) CPU: \(Int(sightingsPerCPUSecond)) per CPU second"
        }
    }

    /// Scans on `bus`, reading signals as `signalReading` says, until `count` sightings arrived or `timeout` passed.
    package static func run(
        bus: DBusConnection.Bus,
        count: Int,
        signalReading: BlueZRadio.SignalReading = .automatic,
        timeout: Duration = .seconds(120),
        logger: Logger = Logger(label: "gotchu.bench")
    ) async throws -> Result {
        var quiet = logger
        quiet.logLevel = .warning
        let radio = try await BlueZRadio.connect(
            to: bus,
            configuration: .init(filtersByUUID: false, signalReading: signalReading),
            logger: quiet
        )
        defer { Task { await radio.close() } }
        let stream = try await radio.scan(ScanFilter())
        let clock = ContinuousClock()
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                var received = 0
                var firstWall = clock.now
                var firstCPU = Duration.zero
                var lastWall = firstWall
                var lastCPU = firstCPU
                for try await _ in stream {
                    if received == 0 {
                        firstWall = clock.now
                        firstCPU = processCPUTime()
                    }
                    received += 1
                    if received >= count {
                        lastWall = clock.now
                        lastCPU = processCPUTime()
                        break
                    }
                }
                return Result(sightings: received, wallTime: lastWall - firstWall, cpuTime: lastCPU - firstCPU)
            }
            group.addTask {
                try await clock.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            guard let first else { throw BlueZError(.other, message: "fewer than \(count) sightings in \(timeout)") }
            return first
        }
    }

    /// The same flood counted by a handler that reads nothing of the signal: what libdbus (reading, validating and
    /// dispatching each message) and the connection's loop cost on their own, the floor under any consumer built on
    /// libdbus. Subscribes with the scanner's rule for device changes and starts discovery like a scan.
    package static func runLibdbusFloor(
        bus: DBusConnection.Bus,
        count: Int,
        timeout: Duration = .seconds(120),
        logger: Logger = Logger(label: "gotchu.bench")
    ) async throws -> Result {
        var quiet = logger
        quiet.logLevel = .warning
        let connection = try await DBusConnection.connect(to: bus, logger: quiet)
        defer { Task { await connection.close() } }
        guard let owner = try await connection.nameOwner(of: BlueZ.service) else {
            throw BlueZError(.serviceUnavailable, message: "org.bluez is not on the \(bus)")
        }
        let clock = ContinuousClock()
        let (done, finished) = AsyncStream.makeStream(of: Result.self, bufferingPolicy: .bufferingNewest(1))
        let counter = FloorCounter(count: count, clock: clock, finished: finished)
        _ = try await connection.addSignalViewHandler(
            matching: DBusMatchRule(
                sender: owner,
                interface: BlueZ.propertiesInterface,
                member: "PropertiesChanged",
                pathNamespace: BlueZ.rootPath,
                arg0: BlueZ.deviceInterface
            ),
            coalescing: BlueZRadio.scanCoalescing  // read as a scan reads
        ) { _ in counter.count() }
        let objects = try await BlueZ.managedObjects(on: connection)
        let adapter = try BlueZ.selectAdapter(named: nil, from: BlueZ.adapters(in: objects))
        _ = try await connection.call(
            destination: BlueZ.service,
            path: adapter.path,
            interface: BlueZ.adapterInterface,
            method: "StartDiscovery"
        )
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                for await result in done { return result }
                return nil
            }
            group.addTask {
                try await clock.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            finished.finish()
            guard let first else { throw BlueZError(.other, message: "fewer than \(count) signals in \(timeout)") }
            return first
        }
    }

    /// Counts signals on the connection's thread and reports once `count` arrived.
    private final class FloorCounter: Sendable {
        private struct State {
            var received = 0
            var firstWall: ContinuousClock.Instant?
            var firstCPU = Duration.zero
        }

        private let target: Int
        private let clock: ContinuousClock
        private let finished: AsyncStream<Result>.Continuation
        private let state = Mutex(State())

        init(count: Int, clock: ContinuousClock, finished: AsyncStream<Result>.Continuation) {
            self.target = count
            self.clock = clock
            self.finished = finished
        }

        func count() {
            state.withLock { state in
                if state.received == 0 {
                    state.firstWall = clock.now
                    state.firstCPU = processCPUTime()
                }
                state.received += 1
                guard state.received == target, let firstWall = state.firstWall else { return }
                finished.yield(
                    Result(
                        sightings: state.received,
                        wallTime: clock.now - firstWall,
                        cpuTime: processCPUTime() - state.firstCPU
                    )
                )
            }
        }
    }

    static func processCPUTime() -> Duration {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }
}
