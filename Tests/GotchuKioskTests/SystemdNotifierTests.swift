import Foundation
import GotchuKiosk
import GotchuSystemd
import GotchuTesting
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

#if os(Linux)
    @Suite(.timeLimit(.minutes(5))) struct SystemdNotifierTests {
        @Test(arguments: [false, true])
        func sendsEachMessageAsOneDatagram(abstract: Bool) async throws {
            let socket = try NotifySocket(abstract: abstract)
            let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.address])
            #expect(notifier.isEnabled)
            notifier.ready(status: "advertising\nfor Bob")
            #expect(await socket.receive() == "READY=1\nSTATUS=advertising for Bob")
            notifier.status("idle")
            #expect(await socket.receive() == "STATUS=idle")
            notifier.watchdog()
            #expect(await socket.receive() == "WATCHDOG=1")
            notifier.stopping()
            #expect(await socket.receive() == "STOPPING=1")
            #expect(notifier.send(["EXTEND_TIMEOUT_USEC=5000000"]))
            #expect(await socket.receive() == "EXTEND_TIMEOUT_USEC=5000000")
        }

        @Test func withoutNotifySocketNothingHappens() {
            let notifier = SystemdNotifier(environment: ["WATCHDOG_USEC": "1000000"])
            #expect(!notifier.isEnabled)
            #expect(notifier.watchdogInterval == nil)
            notifier.ready()
            #expect(notifier.send(["READY=1"]))
        }

        @Test func aSocketThatIsGoneIsReportedNotFatal() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString)")
            let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": directory.appendingPathComponent("gone").path]
            )
            #expect(!notifier.send(["READY=1"]))
            notifier.watchdog()
            let relative = SystemdNotifier(environment: ["NOTIFY_SOCKET": "relative/socket"])
            #expect(!relative.send(["READY=1"]))
            let tooLong = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/" + String(repeating: "x", count: 200)])
            #expect(!tooLong.send(["READY=1"]))
        }

        @Test func watchdogIntervalHonoursWatchdogPID() {
            let socket = ["NOTIFY_SOCKET": "/run/systemd/notify"]
            let ours = ProcessInfo.processInfo.processIdentifier
            func interval(_ extra: [String: String]) -> Duration? {
                SystemdNotifier(environment: socket.merging(extra) { $1 }, processID: ours).watchdogInterval
            }
            #expect(interval(["WATCHDOG_USEC": "30000000"]) == .seconds(30))
            #expect(interval(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "\(ours)"]) == .seconds(30))
            #expect(interval(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "\(ours + 1)"]) == nil)
            #expect(interval(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "init"]) == nil)
            #expect(interval(["WATCHDOG_USEC": "0"]) == nil)
            #expect(interval(["WATCHDOG_USEC": "soon"]) == nil)
            #expect(interval([:]) == nil)
        }

        @Test func watchdogServicePingsEveryHalfIntervalUntilGracefulShutdown() async throws {
            let socket = try NotifySocket()
            let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "200000"])
            #expect(notifier.watchdogInterval == .milliseconds(200))
            let start = ContinuousClock.now
            try await testGracefulShutdown { shutdown in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await WatchdogService(notifier: notifier).run() }
                    var pings = 0
                    while pings < 5, await socket.receive() == "WATCHDOG=1" { pings += 1 }
                    #expect(pings == 5)
                    // Five pings 100 ms apart, the first at once: about 400 ms, never much less.
                    #expect(ContinuousClock.now - start >= .milliseconds(350))
                    shutdown.triggerGracefulShutdown()
                    try await group.waitForAll()
                }
            }
        }

        @Test func watchdogServiceSkipsPingsWhileUnhealthy() async throws {
            let socket = try NotifySocket()
            let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "100000"])
            // Each health check is announced; waiting for them takes no deadline (the suite's time limit bounds a
            // hang), so a starved machine only makes the test slower.
            let (checks, announce) = AsyncStream.makeStream(of: Void.self)
            try await testGracefulShutdown { shutdown in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        try await WatchdogService(notifier: notifier) {
                            announce.yield()
                            return false
                        }.run()
                    }
                    // The third check means the first two rounds are over, each of which would have pinged by now:
                    // a datagram is queued on the socket as it is sent, so a look without waiting finds it.
                    var seen = 0
                    for await _ in checks {
                        seen += 1
                        if seen == 3 { break }
                    }
                    #expect(seen == 3)
                    #expect(await socket.receive(timeout: .zero) == nil)
                    shutdown.triggerGracefulShutdown()
                    try await group.waitForAll()
                }
            }
        }

        @Test func watchdogServiceWithoutWatchdogWaitsForShutdown() async throws {
            let notifier = SystemdNotifier(environment: [:])
            try await testGracefulShutdown { shutdown in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await WatchdogService(notifier: notifier).run() }
                    try await Task.sleep(for: .milliseconds(50))
                    shutdown.triggerGracefulShutdown()
                    try await group.waitForAll()
                }
            }
        }

        @Test func watchdogServiceStopsOnCancellation() async throws {
            let socket = try NotifySocket()
            let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "10000000"])
            let task = Task { try await WatchdogService(notifier: notifier).run() }
            #expect(await socket.receive() == "WATCHDOG=1")
            task.cancel()
            try await task.value
        }
    }
#endif
