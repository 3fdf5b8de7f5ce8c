import Foundation
import GotchuAPI
import GotchuCore
import GotchuKiosk
import GotchuTesting
import Logging
import ServiceLifecycle
import Testing

@Suite(.timeLimit(.minutes(10))) struct KioskDisplayTests {
    static let hostilePayee = #"Bob's <script>alert("x")</script> & Co"#
    static let hostileReference = "<img src=x onerror=alert(1)>"

    @Test func statusIsTheSourcesStatusAsJSON() async throws {
        let source = SettableStatusSource(.advertising(payee: Self.hostilePayee, reference: Self.hostileReference))
        try await withDisplay(source) { display in
            let asked = Date()
            let connection = try LoopbackConnection(port: display.port)
            try connection.send("GET", "/status", headers: ["Connection": "close"])
            let head = try await connection.readHead()
            #expect(head.status == 200)
            #expect(head.headers["content-type"] == "application/json")
            let decoded = try APIJSON.decoder().decode(
                KioskStatus.self,
                from: Data(try await connection.readBody().utf8)
            )
            var expected = await source.status()
            // The status is stamped when it is served: between the request and the answer (to the millisecond).
            #expect(
                decoded.now >= asked.addingTimeInterval(-0.001) && decoded.now <= expected.now.addingTimeInterval(0.001)
            )
            expected.now = decoded.now
            // Times travel as milliseconds.
            var received = decoded
            let sent = try #require(expected.charge)
            let charge = try #require(decoded.charge)
            let times = [(sent.expiresAt, charge.expiresAt), (sent.createdAt, charge.createdAt)]
            for (sentTime, receivedTime) in times + [(sent.updatedAt, charge.updatedAt)] {
                #expect(abs((receivedTime ?? .distantPast).timeIntervalSince(sentTime ?? .distantFuture)) < 0.002)
            }
            received.charge?.expiresAt = sent.expiresAt
            received.charge?.createdAt = sent.createdAt
            received.charge?.updatedAt = sent.updatedAt
            #expect(received == expected)
        }
    }

    @Test func pageShowsTheStatusWithEveryTextEscaped() async throws {
        let source = SettableStatusSource(.advertising(payee: Self.hostilePayee, reference: Self.hostileReference))
        try await withDisplay(source) { display in
            let (head, page) = try await get(display, "/")
            #expect(head.status == 200)
            #expect(head.headers["content-type"] == "text/html; charset=utf-8")
            #expect(head.headers["content-security-policy"]?.hasPrefix("default-src 'none'; script-src") == true)
            #expect(head.headers["x-content-type-options"] == "nosniff")
            #expect(head.headers["referrer-policy"] == "no-referrer")

            #expect(page.contains(#"<html lang="en">"#))
            #expect(page.contains(#"<meta name="viewport""#))
            #expect(
                page.contains(
                    #"<p id="payee">Bob&#39;s &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co</p>"#
                )
            )
            #expect(page.contains(#"<p id="amount">$12.50</p>"#))
            #expect(page.contains(#"<p id="headline">Hold your phone near the terminal</p>"#))
            // The status is stamped when served: a starved machine may have used some of the five minutes already.
            #expect(page.contains(#/<p id="countdown">(5:00|[0-4]:[0-5]\d)<\/p>/#))
            #expect(page.contains(#"<p id="reference">Reference: &lt;img src=x onerror=alert(1)&gt;</p>"#))
            #expect(!page.contains("<script>alert"))
            #expect(!page.contains("<img"))
            // No inline script or style: the page's own script and style sheet come from the display's server.
            #expect(page.components(separatedBy: "<script").count == 2 && page.contains(#"<script src="display.js">"#))
            #expect(!page.contains("<style"))
            for (path, type) in [("/display.js", "text/javascript"), ("/display.css", "text/css")] {
                let (assetHead, asset) = try await get(display, path)
                #expect(
                    assetHead.status == 200 && assetHead.headers["content-type"]?.hasPrefix(type) == true,
                    "\(path)"
                )
                #expect(asset.utf8.count > 1000, "\(path)")
            }
        }
    }

    @Test(arguments: [
        (KioskStatus.State.idle, "Ready"), (.creating, "Preparing…"), (.locked, "Paying…"), (.paid, "Paid ✓"),
        (.expired, "Expired"), (.cancelled, "Cancelled"),
    ])
    func pageSaysWhatTheStateMeans(state: KioskStatus.State, headline: String) async throws {
        var status = KioskStatus.advertising(payee: "Corner Café", reference: "")
        status.state = state
        let source = SettableStatusSource(status)
        try await withDisplay(source) { display in
            let (_, page) = try await get(display, "/")
            #expect(page.contains("<p id=\"headline\">\(headline)</p>"))
            #expect(page.contains(#"<p id="reference" hidden></p>"#))
            // An idle kiosk's last charge is not shown beside "Ready"; the countdown runs only while it can be paid.
            #expect(page.contains(#"<p id="amount">$12.50</p>"#) == (state != .idle))
            #expect(page.contains(#"<p id="countdown" hidden></p>"#) == (state != .locked))
            // The code and the EID to type are shown exactly while a payer may pay.
            let fallback =
                "<p id=\"fallback\">Code \(ConfirmationCode.of(sessionID: "session-1")) · EID 0123 4567 89</p>"
            #expect(page.contains(fallback) == (state == .locked))
            #expect(page.contains(#"<p id="fallback" hidden></p>"#) == (state != .locked))
        }
    }

    @Test(arguments: [KioskStatus.State.failed, .error])
    func pageExplainsAProblem(state: KioskStatus.State) async throws {
        var status = KioskStatus.advertising(payee: "Corner Café", reference: "")
        status.state = state
        status.problem = "the ledger <is> unreachable"
        let source = SettableStatusSource(status)
        try await withDisplay(source) { display in
            let (_, page) = try await get(display, "/")
            #expect(page.contains("<p id=\"headline\">\(state == .failed ? "Failed" : "Please wait")</p>"))
            #expect(page.contains(#"<p id="detail">the ledger &lt;is&gt; unreachable</p>"#))
        }
    }

    @Test func pageShowsASplitsProgressAndTheNextShare() async throws {
        let source = SettableStatusSource(.split(paid: 1))
        try await withDisplay(source) { display in
            var (_, page) = try await get(display, "/")
            // 10.02 in four: 2.51, 2.51, 2.50, 2.50; the second share is next.
            #expect(page.contains(#"<p id="amount">$10.02</p>"#))
            #expect(page.contains(#"<p id="share">Your share: $2.51</p>"#))
            #expect(page.contains(#"<p id="headline">Hold your phone near the terminal</p>"#))
            #expect(page.contains(#"<p id="progress">1 of 4 paid</p>"#))

            var paid = KioskStatus.split(paid: 4)
            paid.state = .paid
            paid.charge?.state = .paid
            await source.set(paid)
            (_, page) = try await get(display, "/")
            #expect(page.contains(#"<p id="progress">4 of 4 paid</p>"#))
            #expect(page.contains(#"<p id="share" hidden></p>"#))

            var cancelled = KioskStatus.split(paid: 2)
            cancelled.state = .cancelled
            cancelled.charge?.state = .cancelled
            cancelled.charge?.refundedCents = 552
            await source.set(cancelled)
            (_, page) = try await get(display, "/")
            #expect(page.contains(#"<p id="detail">$5.52 refunded to the payers</p>"#))
            #expect(page.contains(#"<p id="progress" hidden></p>"#))
            #expect(page.contains(#"<p id="share" hidden></p>"#))
        }
        // A charge that is not split shows neither.
        try await withDisplay(SettableStatusSource(.advertising(payee: "Corner Café", reference: ""))) { display in
            let (_, page) = try await get(display, "/")
            #expect(page.contains(#"<p id="share" hidden></p>"#) && page.contains(#"<p id="progress" hidden></p>"#))
        }
    }

    @Test func otherPathsAreNotFoundAndOtherMethodsNotAllowed() async throws {
        let source = SettableStatusSource(.advertising(payee: "Corner Café", reference: ""))
        try await withDisplay(source) { display in
            #expect(try await get(display, "/nope").head.status == 404)
            #expect(try await get(display, "/favicon.ico").head.status == 404)
            for (method, path) in [("POST", "/"), ("PUT", "/status"), ("DELETE", "/events"), ("HEAD", "/")] {
                let (head, _) = try await get(display, path, method: method)
                #expect(head.status == 405, "\(method) \(path)")
                #expect(head.headers["allow"] == "GET", "\(method) \(path)")
            }
            #expect(try await get(display, "/nope", method: "POST").head.status == 404)
        }
    }

    @Test func eventsSendEveryStatusAndEndTheSubscriptionWhenTheBrowserLeaves() async throws {
        let source = SettableStatusSource(.advertising(payee: "Corner Café", reference: "Order 42"))
        // A short keep-alive, so the server notices the departed browser quickly.
        try await withDisplay(source, keepAliveInterval: .milliseconds(100)) { display in
            let connection = try LoopbackConnection(port: display.port)
            try connection.send("GET", "/events", headers: ["Accept": "text/event-stream"])
            let head = try await connection.readHead()
            #expect(head.status == 200)
            #expect(head.headers["content-type"] == "text/event-stream; charset=utf-8")
            #expect(head.headers["cache-control"] == "no-cache")

            let first = try decodeStatus(try #require(await connection.nextData()))
            #expect(first.state == .advertising)
            #expect(first.charge?.amountCents == 1250)
            #expect(await source.liveSubscriptions == 1)

            var paid = KioskStatus.advertising(payee: "Corner Café", reference: "Order 42")
            paid.state = .paid
            paid.charge?.state = .paid
            await source.set(paid)
            let second = try decodeStatus(try #require(await connection.nextData()))
            #expect(second.state == .paid)
            #expect(second.charge?.state == .paid)

            connection.disconnect()
            #expect(await source.waitUntilNoSubscriptions())
        }
    }

    /// The page's script formats and decides nothing: each event carries the texts the kiosk computed for the
    /// status, which are the texts the kiosk renders into the page for the same status.
    @Test func eventsCarryThePagesTextsAsThePageShowsThem() async throws {
        struct Event: Decodable {
            struct Display: Decodable {
                var state: String
                var headline: String
                var share: String?
                var progress: String?
                var fallback: String?
                var countdown: String?
                var secondsLeft: Double?
                var offAir: Bool
                enum CodingKeys: String, CodingKey {
                    case state, headline, share, progress, fallback, countdown
                    case secondsLeft = "seconds_left"
                    case offAir = "off_air"
                }
            }
            var display: Display
        }
        let status = KioskStatus.split(paid: 1)
        try await withDisplay(SettableStatusSource(status)) { display in
            let connection = try LoopbackConnection(port: display.port)
            try connection.send("GET", "/events")
            _ = try await connection.readHead()
            let event = try APIJSON.decoder().decode(
                Event.self,
                from: Data(try #require(await connection.nextData()).utf8)
            )
            let (_, page) = try await get(display, "/")
            let shown = event.display
            #expect(shown.state == "advertising" && !shown.offAir)
            #expect(shown.share == "Your share: $2.51" && shown.progress == "1 of 4 paid")
            let code = ConfirmationCode.of(sessionID: try #require(status.charge?.sessionID))
            #expect(shown.fallback?.hasPrefix("Code \(code) · EID ") == true)
            for (id, text) in [
                ("headline", shown.headline), ("share", shown.share), ("progress", shown.progress),
                ("fallback", shown.fallback),
            ] {
                #expect(page.contains("<p id=\"\(id)\">\(try #require(text))</p>"), "\(id)")
            }
            let seconds = try #require(shown.secondsLeft)
            #expect(seconds > 0 && seconds <= 300)
            #expect(page.contains(#"<main data-seconds-left=""#))
        }
    }

    @Test func eventsKeepAnIdleConnectionAlive() async throws {
        let source = SettableStatusSource(.advertising(payee: "Corner Café", reference: ""))
        try await withDisplay(source, keepAliveInterval: .milliseconds(200)) { display in
            let connection = try LoopbackConnection(port: display.port)
            try connection.send("GET", "/events")
            _ = try await connection.readHead()
            #expect(try await connection.nextEvent() == ["retry: 1000"])
            _ = try #require(try await connection.nextData())
            #expect(try await connection.nextEvent() == [": keep-alive"])
            #expect(try await connection.nextEvent() == [": keep-alive"])
        }
    }

    @Test func eventsEndWhenTheKioskStops() async throws {
        let source = SettableStatusSource(.advertising(payee: "Corner Café", reference: ""))
        try await withDisplay(source) { display in
            let connection = try LoopbackConnection(port: display.port)
            try connection.send("GET", "/events")
            _ = try await connection.readHead()
            _ = try #require(try await connection.nextData())
            await source.finishAll()
            #expect(try await connection.nextData() == nil)
            #expect(await source.waitUntilNoSubscriptions())
        }
    }

    @Test func gracefulShutdownEndsOpenEventStreams() async throws {
        let source = SettableStatusSource(.advertising(payee: "Corner Café", reference: ""))
        // No keep-alive within the test: only the shutdown itself can end the stream.
        let display = try await RunningDisplay.start(source, keepAliveInterval: .seconds(3_600))
        let connection = try LoopbackConnection(port: display.port)
        try connection.send("GET", "/events")
        _ = try await connection.readHead()
        _ = try #require(try await connection.nextData())
        try await display.stop()
        #expect(try await connection.nextData() == nil)
        #expect(await source.waitUntilNoSubscriptions())
    }

    @Test("GET /metrics: the state, charges by outcome once each, and error states, read by prometheus_client")
    func metrics() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let advertising = KioskStatus.advertising(payee: "Shop", reference: "order 1")
        let source = SettableStatusSource(advertising)
        let display = try await RunningDisplay.start(source, metrics: KioskMetrics())
        func ended(_ status: KioskStatus, _ state: KioskChargeState, id: String? = nil) -> KioskStatus {
            var status = status
            status.charge?.state = state
            if let id { status.charge?.id = id }
            status.state = KioskStatus.State(rawValue: state.rawValue) ?? .failed
            return status
        }
        // The metrics follow the status from their subscription on.
        let deadline = ContinuousClock.now + .seconds(60)
        while await source.subscriptionCount < 1, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        await source.set(ended(advertising, .paid))
        await source.set(ended(advertising, .paid))
        await source.set(KioskStatus(state: .error, payeeName: "Shop", charge: nil, problem: "down", now: Date()))
        await source.set(ended(advertising, .advertising, id: "second"))
        await source.set(ended(advertising, .expired, id: "second"))

        var samples: [PrometheusText.Sample] = []
        func value(_ name: String, _ labels: [String: String]) -> Double? {
            samples.first { sample in
                sample.name == name && labels.allSatisfy { key, value in sample.labels[key] == value }
            }?.value
        }
        // Until the last change has been taken in; the deadline only bounds a hang.
        while ContinuousClock.now < deadline {
            let (head, body) = try await get(display, "/metrics")
            #expect(head.status == 200)
            samples = try PrometheusText.parse(body, in: directory.url)
            if value("gotchu_kiosk_charges_total", ["outcome": "expired"]) == 1 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(value("gotchu_kiosk_charges_total", ["outcome": "paid"]) == 1)
        #expect(value("gotchu_kiosk_charges_total", ["outcome": "expired"]) == 1)
        #expect(value("gotchu_kiosk_charges_total", ["outcome": "cancelled"]) == 0)
        #expect(value("gotchu_kiosk_error_states_total", [:]) == 1)
        #expect(value("gotchu_kiosk_state", ["state": "expired"]) == 1)
        #expect(value("gotchu_kiosk_state", ["state": "advertising"]) == 0)
        try await display.stop()
    }

    private func get(
        _ display: RunningDisplay,
        _ path: String,
        method: String = "GET"
    ) async throws -> (head: LoopbackConnection.Head, body: String) {
        let connection = try LoopbackConnection(port: display.port)
        try connection.send(method, path, headers: ["Connection": "close"])
        let head = try await connection.readHead()
        return (head, method == "HEAD" ? "" : try await connection.readBody())
    }

    private func decodeStatus(_ data: String) throws -> KioskStatus {
        try APIJSON.decoder().decode(KioskStatus.self, from: Data(data.utf8))
    }
}

extension KioskStatus {
    /// A charge of $12.50 advertised for five minutes from now.
    static func advertising(payee: String, reference: String) -> KioskStatus {
        let now = Date()
        let charge = KioskCharge(
            id: "2F1B5C0E-8E0B-4E55-9C53-4B8E2F6A7D10",
            amountCents: 1250,
            reference: reference,
            state: .advertising,
            sessionID: "session-1",
            eid: EID(rawValue: "0123456789"),
            expiresAt: now.addingTimeInterval(300),
            createdAt: now,
            updatedAt: now
        )
        return KioskStatus(state: .advertising, payeeName: payee, charge: charge, problem: nil, now: now)
    }

    /// A charge of $10.02 split four ways (2.51, 2.51, 2.50, 2.50), `paid` of its shares paid, advertised.
    static func split(paid: Int) -> KioskStatus {
        var status = advertising(payee: "Corner Café", reference: "Table 9")
        status.charge?.amountCents = 1_002
        status.charge?.shares = 4
        status.charge?.sharesPaid = paid
        status.charge?.paidCents = [0, 251, 502, 752, 1_002][paid]
        return status
    }
}

/// A display on a free loopback port, in its own service group as the daemon runs it.
struct RunningDisplay {
    let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    static func start(
        _ source: SettableStatusSource,
        keepAliveInterval: Duration = .seconds(15),
        metrics: KioskMetrics? = nil
    ) async throws
        -> RunningDisplay
    {
        let logger = Logger(label: "gotchu.kiosk.display") { _ in SwiftLogNoOpLogHandler() }
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let display = KioskDisplay(
            source: source,
            host: "127.0.0.1",
            port: 0,
            keepAliveInterval: keepAliveInterval,
            metrics: metrics,
            logger: logger
        ) { listening.yield($0) }
        let group = ServiceGroup(services: [display], gracefulShutdownSignals: [], logger: logger)
        let task = Task {
            defer { listening.finish() }
            try await group.run()
        }
        guard let port = await ports.first(where: { _ in true }) else {
            try await task.value
            throw LoopbackConnectionError("the display stopped before it listened")
        }
        return RunningDisplay(port: port, group: group, task: task)
    }

    /// Shuts the display down gracefully; fails (after cancelling it) if that takes longer than `timeout`, which only
    /// bounds a hang.
    func stop(within timeout: Duration = .seconds(60)) async throws {
        await group.triggerGracefulShutdown()
        let task = self.task
        let stoppedInTime = await withTaskGroup(of: Bool.self) { waiters in
            waiters.addTask {
                _ = try? await task.value
                return true
            }
            waiters.addTask {
                try? await Task.sleep(for: timeout)
                if !Task.isCancelled { task.cancel() }
                return false
            }
            let first = await waiters.next() ?? false
            waiters.cancelAll()
            return first
        }
        guard stoppedInTime else { throw LoopbackConnectionError("the display did not shut down within \(timeout)") }
        try await task.value
    }
}

/// Runs `body` with a display over `source`, then shuts the display down.
@discardableResult
func withDisplay<Result>(
    _ source: SettableStatusSource,
    keepAliveInterval: Duration = .seconds(15),
    _ body: (RunningDisplay) async throws -> Result
) async throws -> Result {
    let display = try await RunningDisplay.start(source, keepAliveInterval: keepAliveInterval)
    let result: Result
    do {
        result = try await body(display)
    } catch {
        try? await display.stop()
        throw error
    }
    try await display.stop()
    return result
}
