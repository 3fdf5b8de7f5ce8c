import Foundation
import GotchuAPI
import GotchuCore
import GotchuDBus
import GotchuKiosk
import GotchuKioskClient
import GotchuLedgerClient
import GotchuTesting
import Testing

/// `gotchu kiosk` as the service runs it: a process owning io.gotchu.Kiosk1 on a private bus, a real ledger server,
/// the simulated air shared with a `gotchu pay` process.
struct KioskDaemon {
    let processes: GotchuProcesses
    let bus: PrivateBus
    let server: RunningCommand
    let url: String

    /// Starts the bus and a ledger server (`gotchu server --dev` with `serverOptions`).
    static func start(serverOptions: [String] = []) async throws -> KioskDaemon {
        let processes = try GotchuProcesses()
        let bus = try await PrivateBus.start()
        let (server, url) = try await processes.startServer(serverOptions)
        try "{}".write(
            to: processes.directory.url.appendingPathComponent("kiosk.json"),
            atomically: true,
            encoding: .utf8
        )
        return KioskDaemon(processes: processes, bus: bus, server: server, url: url)
    }

    func stop() {
        _ = try? server.stopNow()
        bus.stop()
        processes.remove()
    }

    var air: String { processes.directory.url.appendingPathComponent("air").path }

    /// Starts the kiosk (`gotchu kiosk`, or `gotchu-kiosk` when `kioskOnly`) and waits until it is ready; returns
    /// it with the display's port.
    func startKiosk(
        _ extra: [String] = [],
        environment: [String: String] = [:],
        kioskOnly: Bool = false
    ) async throws -> (RunningCommand, Int) {
        let (kiosk, port, _) = try await startKiosk(
            extra,
            environment: environment,
            kioskOnly: kioskOnly,
            display: true
        )
        return (kiosk, try #require(port))
    }

    /// Starts the kiosk with the display on or off and, with `metrics`, its own metrics listener; returns it with the
    /// display's port and the metrics listener's.
    func startKiosk(
        _ extra: [String] = [],
        environment: [String: String] = [:],
        kioskOnly: Bool = false,
        display: Bool,
        metrics: Bool = false
    ) async throws -> (RunningCommand, Int?, Int?) {
        let kiosk = try processes.start(
            (kioskOnly ? [] : ["kiosk"]) + [
                "--config", processes.directory.url.appendingPathComponent("kiosk.json").path,
                "--server", url, "--email", "shop@example.com", "--payee-name", "Corner Shop",
                "--radio", "sim", "--air", air, "--control-bus", bus.address,
                "--state-directory", processes.directory.url.appendingPathComponent("kiosk-state").path,
                "--display", display ? "127.0.0.1:0" : "off",
            ] + (metrics ? ["--metrics", "127.0.0.1:0"] : []) + extra,
            user: "kiosk",
            extra: environment,
            executable: kioskOnly ? try BuiltProducts.gotchuKiosk : nil
        )
        var displayPort: Int?
        if display {
            let line = try await kiosk.waitForLine { $0.hasPrefix("display: http://127.0.0.1:") }
            displayPort = Int(line.dropFirst("display: http://127.0.0.1:".count).dropLast())
        }
        var metricsPort: Int?
        if metrics {
            let line = try await kiosk.waitForLine { $0.hasPrefix("metrics: http://127.0.0.1:") }
            metricsPort = Int(line.dropFirst("metrics: http://127.0.0.1:".count).dropLast("/metrics".count))
        }
        _ = try await kiosk.waitForLine { $0 == "kiosk ready" }
        return (kiosk, displayPort, metricsPort)
    }

    /// Scrapes the kiosk's metrics on `port`, read by `prometheus_client`.
    func scrape(port: Int) async throws -> [PrometheusText.Sample] {
        let connection = try LoopbackConnection(port: port)
        try connection.send("GET", "/metrics", headers: ["Connection": "close"])
        let response = try await connection.readResponse()
        #expect(response.status == 200)
        return try PrometheusText.parse(String(decoding: response.body, as: UTF8.self), in: processes.directory.url)
    }

    /// A funded payer that pays the terminal it finds, as a process.
    func pay(as user: String) async throws {
        try await processes.run(["login", "--email", "\(user)@example.com", "--server", url], user: user)
        try await processes.run(["fund", "--amount", "100.00", "--server", url], user: user)
        try await processes.run(
            ["pay", "--radio", "sim", "--air", air, "--yes", "--timeout", "60", "--server", url],
            user: user
        )
    }

    func connect() async throws -> DBusConnection { try await DBusConnection.connect(to: .address(bus.address)) }
}

extension DBusConnection {
    /// The kiosk on this bus, through the point-of-sale's library.
    var kiosk: KioskClient { KioskClient(connection: self) }
}

@Suite("gotchu kiosk as a process, driven over D-Bus", .serialized, .timeLimit(.minutes(3)))
struct KioskDaemonTests {
    @Test("--log-format json: every line of the kiosk's log is one JSON object, and no token is in it")
    func jsonLog() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, _) = try await daemon.startKiosk(["--log-format", "json", "--log-level", "trace"], kioskOnly: true)
        defer { _ = try? kiosk.stopNow() }
        // A charge makes the kiosk log in to the ledger and create a session.
        let pos = try daemon.processes.start(
            ["charge", "1.00", "--reference", "log test", "--bus", daemon.bus.address],
            user: "pos"
        )
        _ = try await pos.waitForLine { $0.hasPrefix("waiting for a payer") }
        _ = try? pos.stopNow()
        #expect(try await kiosk.stop(signal: SIGTERM) == 0)
        let lines = kiosk.standardError.split(separator: "\n", omittingEmptySubsequences: true)
        #expect(lines.count >= 2, "\(kiosk.standardError)")
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["message"] is String && object?["level"] is String && object?["time"] is String, "\(line)")
        }
        #expect(!kiosk.standardError.contains("Bearer"))
        #expect(!kiosk.standardError.contains("eyJ"), "a JWT in the log: \(kiosk.standardError)")
    }

    @Test(
        "A point-of-sale charge over D-Bus is paid by a payer; PaymentSucceeded, State and /events show it",
        arguments: [false, true]
    )
    func chargePaidOverDBus(kioskOnly: Bool) async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, port) = try await daemon.startKiosk(kioskOnly: kioskOnly)
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        let signals = try await connection.kiosk.events()
        let events = try LoopbackConnection(port: port)
        try events.send("GET", "/events")
        #expect(try await events.readHead().status == 200)
        #expect(try await events.nextData()?.contains("\"state\":\"idle\"") == true)

        let pos = try daemon.processes.start(
            ["charge", "12.50", "--reference", "order 1017", "--bus", daemon.bus.address],
            user: "pos"
        )
        _ = try await pos.waitForLine { $0.hasPrefix("waiting for a payer") }
        try await daemon.pay(as: "alice")
        #expect(try await pos.waitForExit() == 0)
        #expect(pos.lines.contains { $0.hasPrefix("paid: $12.50") })

        var succeeded: (id: String, cents: Int64, sessionID: String)?
        for await case .paymentSucceeded(let id, let cents, let sessionID) in signals {
            succeeded = (id, cents, sessionID)
            break
        }
        let id = try #require(succeeded?.id)
        #expect(succeeded?.cents == 1_250)
        let charge = try await connection.kiosk.charge(id)
        #expect(charge["state", as: String.self] == "paid" && charge["reference", as: String.self] == "order 1017")
        #expect(charge["session_id", as: String.self] == succeeded?.sessionID)
        #expect(try await connection.kiosk.state() == "paid")
        var sawPaid = false
        while !sawPaid, let data = try await events.nextData() {
            sawPaid = data.contains("\"state\":\"paid\"") && data.contains(id)
        }
        #expect(sawPaid)
        await connection.close()
        #expect(try await kiosk.stop() == 0)
    }

    @Test("Killed mid-charge, the kiosk comes back with the same session, refuses a second charge, and is paid")
    func restartMidCharge() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        var (kiosk, _) = try await daemon.startKiosk()
        let accepted = try await daemon.processes.run(
            ["charge", "9.90", "--no-wait", "--bus", daemon.bus.address],
            user: "pos"
        )
        let id = try #require(accepted.first?.split(separator: " ").dropFirst().first?.dropLast()).description
        let connection = try await daemon.connect()
        var before: [String: DBusVariant] = [:]
        #expect(
            try await eventually {
                before = try await connection.kiosk.charge(id)
                return before["state", as: String.self] == "advertising"
            }
        )
        await connection.close()
        #expect(try await kiosk.stop(signal: SIGKILL) != 0)

        (kiosk, _) = try await daemon.startKiosk()
        defer { _ = try? kiosk.stopNow() }
        let again = try await daemon.connect()
        defer { Task { await again.close() } }
        let after = try await again.kiosk.charge(id)
        #expect(after["session_id", as: String.self] == before["session_id", as: String.self])
        #expect(after["eid", as: String.self] == before["eid", as: String.self])
        await #expect {
            _ = try await again.kiosk.charge(amountCents: 100)
        } throws: { error in
            (error as? DBusError)?.name == KioskInterface.ErrorName.busy
        }
        try await daemon.pay(as: "bob")
        #expect(
            try await eventually {
                try await again.kiosk.charge(id)["state", as: String.self] == "paid"
            }
        )
        let shown = try await daemon.processes.run(["charge", "--show", id, "--bus", daemon.bus.address], user: "pos")
        #expect(shown.first?.contains("paid") == true && shown.first?.contains("$9.90") == true)
    }

    @Test("Under systemd the kiosk reports READY=1 once it serves, feeds the watchdog, and says STOPPING=1 on SIGTERM")
    func systemdNotification() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let notify = try NotifySocket()
        let (kiosk, _) = try await daemon.startKiosk(
            environment: ["NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "400000"]
        )
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        var messages: [String] = []
        var ownedAtReady: Bool?
        while messages.filter({ $0 == "WATCHDOG=1" }).count < 3, let message = await notify.receive() {
            messages.append(message)
            // The name is owned by the time READY=1 is sent: a unit ordered after the kiosk can charge at once.
            if message.hasPrefix("READY=1") {
                ownedAtReady = try await connection.nameOwner(of: KioskInterface.busName) != nil
            }
        }
        await connection.close()
        let ready = try #require(messages.first { $0.hasPrefix("READY=1") })
        #expect(ready.contains("STATUS=ready, idle"))
        #expect(ownedAtReady == true)
        #expect(messages.filter { $0 == "WATCHDOG=1" }.count == 3)
        #expect(try await kiosk.stop() == 0)
        // The kiosk has exited: everything it sent is queued on the socket already.
        var rest: [String] = []
        while let message = await notify.receive(timeout: .zero) { rest.append(message) }
        #expect(rest.contains { $0.hasPrefix("STOPPING=1") })
    }

    @Test("--metrics serves GET /metrics with the display off: D-Bus calls by method and outcome, the state")
    func metricsWithDisplayOff() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, display, metrics) = try await daemon.startKiosk(kioskOnly: true, display: false, metrics: true)
        defer { _ = try? kiosk.stopNow() }
        #expect(display == nil)
        let port = try #require(metrics)
        let connection = try await daemon.connect()

        let before = try await daemon.scrape(port: port)
        #expect(before.value("gotchu_kiosk_dbus_calls_total", ["method": "Charge", "outcome": "ok"]) == 0)
        #expect(before.type("gotchu_kiosk_dbus_calls_total") == "counter")
        #expect(before.type("gotchu_kiosk_bluez_reregistrations_total") == "counter")
        #expect(before.type("gotchu_kiosk_ledger_errors_total") == "counter")

        _ = try await connection.kiosk.charge(amountCents: 100, reference: "metrics")
        await #expect(throws: DBusError.self) { try await connection.kiosk.cancel("no-such-charge") }
        await #expect(throws: DBusError.self) {
            _ = try await connection.kiosk.charge(amountCents: 0, reference: "zero")
        }

        let after = try await daemon.scrape(port: port)
        #expect(after.value("gotchu_kiosk_dbus_calls_total", ["method": "Charge", "outcome": "ok"]) == 1)
        #expect(after.value("gotchu_kiosk_dbus_calls_total", ["method": "Charge", "outcome": "InvalidArgs"]) == 1)
        #expect(after.value("gotchu_kiosk_dbus_calls_total", ["method": "Cancel", "outcome": "NotFound"]) == 1)
        // The status reaches the metrics without the display.
        #expect(after.type("gotchu_kiosk_state") == "gauge")
        #expect(after.contains { $0.name == "gotchu_kiosk_state" && $0.value == 1 })
        // Nothing but /metrics is served there.
        let other = try LoopbackConnection(port: port)
        try other.send("GET", "/", headers: ["Connection": "close"])
        #expect(try await other.readResponse().status == 404)
        await connection.close()
        #expect(try await kiosk.stop() == 0)
    }

    @Test(
        "With --radio none the display leads with the QR code, names the payee as the ledger does, and a phone pays"
    )
    func offAir() async throws {
        let daemon = try await KioskDaemon.start(serverOptions: ["--public-url", "https://pay.example.com/"])
        defer { daemon.stop() }
        // The config names the payee "Corner Shop"; the ledger knows it by the name it chose, "shop".
        let (kiosk, port) = try await daemon.startKiosk(["--radio", "none"])
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        _ = try await connection.kiosk.charge(amountCents: 1_250, reference: "order 5")
        var page = ""
        let shown = try await eventually(timeout: .seconds(60)) {
            let connection = try LoopbackConnection(port: port)
            try connection.send("GET", "/", headers: ["Connection": "close"])
            page = String(decoding: try await connection.readResponse().body, as: UTF8.self)
            return page.contains(#"data-state="advertising""#)
        }
        #expect(shown, "\(page)")
        #expect(page.contains(#"<body data-state="advertising" data-checkout data-off-air>"#), "\(page)")
        #expect(page.contains(#"<p id="headline">Scan the QR code to pay</p>"#))
        #expect(page.contains(#"<p id="payee">shop</p>"#), "\(page)")
        #expect(page.contains(#"<p id="reference">Reference: order 5</p>"#))
        #expect(page.contains(#"<img id="qr" src="qr.svg?eid="#))
        // Nothing is on the air: the only way in is the session's checkout link, which a payer pays.
        let current = try await connection.kiosk.currentCharge()
        let sid = try #require(current[KioskInterface.ChargeKey.sessionID.rawValue, as: String.self])
        let payer = try await SplitPayer.funded("alice@example.com", cents: 5_000, url: daemon.url)
        let eid = try #require(EID(rawValue: current[KioskInterface.ChargeKey.eid.rawValue, as: String.self] ?? ""))
        #expect(try await payer.client.resolve(eid: eid).reference == "order 5")
        try await payer.client.lock(sid: sid)
        _ = try await payer.client.send(sid: sid, idempotencyKey: "off-air-1")
        let paid = try await eventually(timeout: .seconds(60)) {
            let connection = try LoopbackConnection(port: port)
            try connection.send("GET", "/", headers: ["Connection": "close"])
            return String(decoding: try await connection.readResponse().body, as: UTF8.self)
                .contains(#"data-state="paid""#)
        }
        #expect(paid)
    }

    @Test("Without a kiosk on the bus, `gotchu charge` says so and fails")
    func noKiosk() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let command = try daemon.processes.start(["charge", "1.00", "--bus", daemon.bus.address], user: "pos")
        #expect(try await command.waitForExit() != 0)
        #expect(command.standardError.contains("no kiosk on the bus"))
    }
}

extension [PrometheusText.Sample] {
    /// The value of the first sample named `name` with (at least) these labels.
    func value(_ name: String, _ labels: [String: String]) -> Double? {
        first { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }?.value
    }

    /// The type of the family of the samples named `name`.
    func type(_ name: String) -> String? { first { $0.name == name }?.type }
}
