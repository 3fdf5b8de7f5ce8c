import Foundation
import GotchuCore
import GotchuKiosk
import GotchuTesting
import Testing

extension KioskDisplayTests {
    /// The page as a browser shows it: headless Chromium loads it, runs its script for three seconds of virtual
    /// time, then prints the DOM and takes a screenshot.
    ///
    /// Chromium's virtual time stands still while a request is open, so an endless event stream would keep it from
    /// ever finishing. The source here ends each stream after its first status; the page reconnects (as it does
    /// when the kiosk restarts) and virtual time runs between the connections.
    @Suite(.serialized, .timeLimit(.minutes(10))) struct InChromium {
        @Test func showsTheAdvertisedCharge() async throws {
            let directory = try TemporaryDirectory(prefix: "gotchu-display")
            defer { directory.remove() }
            let source = SettableStatusSource(
                .advertising(payee: "Corner Café & Bakery", reference: "Order 42"),
                endsEachSubscription: true
            )
            let dom = try await withDisplay(source) { display in
                try await Chromium.render(port: display.port, in: directory, screenshot: "advertising.png")
            }
            #expect(dom.contains(#"<body data-state="advertising">"#))
            #expect(dom.contains(#"<p id="payee">Corner Café &amp; Bakery</p>"#))
            #expect(dom.contains(#"<p id="amount">$12.50</p>"#))
            #expect(dom.contains(#"<p id="headline">Hold your phone near the terminal</p>"#))
            #expect(dom.contains(#"<p id="reference">Reference: Order 42</p>"#))
            // Rendered by the page's script from the session id: the code must be the one payers are shown.
            let code = ConfirmationCode.of(sessionID: "session-1")
            #expect(dom.contains(#"<p id="fallback">Code \#(code) · EID 0123 4567 89</p>"#), "\(dom)")
            // Minutes and seconds left of the five: how many depends on how long the browser took to start.
            #expect(dom.contains(try Regex(#"<p id="countdown">[0-5]:[0-5][0-9]</p>"#)), "\(dom)")
            try Chromium.expectScreenshot(directory.url.appendingPathComponent("advertising.png"))
        }

        @Test func followsTheKioskToPaidAndLooksDifferent() async throws {
            let directory = try TemporaryDirectory(prefix: "gotchu-display")
            defer { directory.remove() }
            var advertising = KioskStatus.advertising(payee: "Corner Café", reference: "Order 42")
            // The script formats amounts itself (it renders every status it gets): a remainder under ten cents.
            advertising.charge?.amountCents = 100_005
            var paid = advertising
            paid.state = .paid
            paid.charge?.state = .paid
            paid.charge?.tipCents = 1_000

            let before = SettableStatusSource(advertising, endsEachSubscription: true)
            try await withDisplay(before) { display in
                try await Chromium.render(port: display.port, in: directory, screenshot: "advertising.png")
            }
            // The page arrives rendered as advertising; only its script, told over /events, can show it paid.
            let after = SettableStatusSource(advertising, endsEachSubscription: true, nextAfterFirstSubscription: paid)
            let dom = try await withDisplay(after) { display in
                try await Chromium.render(port: display.port, in: directory, screenshot: "paid.png")
            }
            #expect(await after.subscriptionCount >= 2)
            #expect(dom.contains(#"<body data-state="paid">"#), "\(dom)")
            #expect(dom.contains(#"<p id="headline">Paid ✓</p>"#))
            #expect(dom.contains(#"<p id="amount">$1000.05</p>"#))
            #expect(dom.contains(#"<p id="detail">With $10.00 in tips: $1010.05</p>"#), "\(dom)")
            #expect(dom.contains(#"<p id="countdown" hidden="">"#))
            #expect(dom.contains(#"<p id="fallback" hidden="">"#))

            let advertisingShot = try Chromium.expectScreenshot(directory.url.appendingPathComponent("advertising.png"))
            let paidShot = try Chromium.expectScreenshot(directory.url.appendingPathComponent("paid.png"))
            #expect(advertisingShot != paidShot)
        }

        @Test func followsASplitShareByShare() async throws {
            let directory = try TemporaryDirectory(prefix: "gotchu-display")
            defer { directory.remove() }
            // The page arrives rendered with one share paid; only its script, told over /events, can count the
            // second and price the third.
            let source = SettableStatusSource(
                .split(paid: 1),
                endsEachSubscription: true,
                nextAfterFirstSubscription: .split(paid: 2)
            )
            let dom = try await withDisplay(source) { display in
                try await Chromium.render(port: display.port, in: directory, screenshot: "split.png")
            }
            #expect(await source.subscriptionCount >= 2)
            #expect(dom.contains(#"<body data-state="advertising">"#), "\(dom)")
            #expect(dom.contains(#"<p id="amount">$10.02</p>"#))
            #expect(dom.contains(#"<p id="progress">2 of 4 paid</p>"#), "\(dom)")
            #expect(dom.contains(#"<p id="share">Your share: $2.50</p>"#), "\(dom)")
            #expect(dom.contains(#"<p id="headline">Hold your phone near the terminal</p>"#))
            try Chromium.expectScreenshot(directory.url.appendingPathComponent("split.png"))
        }
    }
}

/// Headless Chromium, as scripts/install-dependencies installs it.
enum Chromium {
    static var executable: String {
        get throws {
            let found = ChildProcess.which("chromium") ?? ChildProcess.which("chromium-browser")
            return try #require(
                found,
                "Chromium is not installed: run scripts/install-dependencies (the display tests render the page in it)"
            )
        }
    }

    /// Loads the display's page, lets its script run, and returns the DOM; saves a screenshot as `screenshot`.
    static func render(port: Int, in directory: TemporaryDirectory, screenshot: String) async throws -> String {
        // Headless Chromium on a starved machine now and then never ends its virtual-time budget, a hang of the
        // browser seen only under heavy load: it gets one more start (with a fresh profile, as the killed one may
        // still hold its lock), then the test fails.
        for attempt in 1...2 {
            let arguments = [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                "--hide-scrollbars",
                "--user-data-dir=\(directory.url.appendingPathComponent("profile-\(screenshot)-\(attempt)").path)",
                "--window-size=800,480", "--virtual-time-budget=3000",
                "--screenshot=\(directory.url.appendingPathComponent(screenshot).path)",
                "--dump-dom", "http://127.0.0.1:\(port)/",
            ]
            let command = try RunningCommand(URL(fileURLWithPath: try executable), arguments)
            let status: Int32
            do {
                status = try await command.waitForExit(timeout: .seconds(120))
            } catch {
                try? command.stopNow()
                if attempt == 2 { throw error }
                continue
            }
            try #require(status == 0, "chromium exited with \(status): \(command.standardError)")
            return command.lines.joined(separator: "\n")
        }
        throw RunningCommandError("unreachable: the last attempt returns or throws")
    }

    /// Checks that `file` is a PNG of plausible size and returns its bytes.
    @discardableResult
    static func expectScreenshot(_ file: URL) throws -> Data {
        let data = try Data(contentsOf: file)
        #expect(
            data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]),
            "\(file.lastPathComponent) is not a PNG"
        )
        // 800×480 of text on white compresses well, but not to nothing; a blank page is well under 4 KB.
        #expect((4_000...2_000_000).contains(data.count), "\(file.lastPathComponent) has \(data.count) bytes")
        return data
    }
}
