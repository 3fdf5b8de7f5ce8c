import Foundation
import GotchuAPI
import GotchuCore
import GotchuDBus
import GotchuKiosk
import GotchuKioskClient
import GotchuTesting
import Testing

extension KioskStatus {
    /// ``advertising(payee:reference:)`` with the EID `eid` and its web checkout on `pay.example.com`.
    static func advertising(eid: String, checkout: Bool = true) -> KioskStatus {
        var status = advertising(payee: "Corner Café", reference: "Order 42")
        status.charge?.eid = EID(rawValue: eid)
        status.charge?.checkoutURL = checkout ? KioskCheckoutTests.checkoutURL(eid) : nil
        return status
    }
}

/// The web checkout of each EID, from the ledger's answers to the kiosk's record, its D-Bus interface and its
/// display's QR code.
@Suite("The kiosk shows the web checkout of the EID on the air", .timeLimit(.minutes(3)))
struct KioskCheckoutTests {
    static let base = "https://pay.example.com/shop/"

    static func checkoutURL(_ eid: String) -> String { base + "p/" + eid }

    /// The image's text alternative.
    static let qrCodeText = "QR code of this payment's web checkout"

    /// Options that give the session a new EID every five seconds of virtual time.
    static let rotating = Kiosk.Options(
        payeeName: "Corner Shop",
        charges: .init(statusInterval: .milliseconds(100), rotateEvery: .seconds(5))
    )

    @Test("Each EID's checkout address is recorded with it, through a rotation and a restart")
    func recordedWithTheEID() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        await harness.ledger.setCheckoutBase(Self.base)
        let kiosk = try await harness.makeKiosk(options: Self.rotating)
        try await withRunning(kiosk) {
            let charge = try await kiosk.charge(amountCents: 1_250, reference: "")
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            let first = try #require(advertising.charge?.eid)
            #expect(advertising.charge?.checkoutURL == Self.checkoutURL(first.rawValue))
            #expect(try KioskStore(directory: harness.stateDirectory).active()?.charge.checkoutURL != nil)
            let rotated = try await harness.advance(kiosk) {
                $0.charge?.eid.map { $0 != first } == true && $0.state == .advertising
            }
            let second = try #require(rotated.charge?.eid)
            #expect(rotated.charge?.checkoutURL == Self.checkoutURL(second.rawValue))
            let stored = try #require(try KioskStore(directory: harness.stateDirectory).record(id: charge.id))
            #expect(stored.charge.eid == second && stored.charge.checkoutURL == Self.checkoutURL(second.rawValue))
            #expect(try await kiosk.charge(id: charge.id).checkoutURL == Self.checkoutURL(second.rawValue))
        }
    }

    @Test("A ledger with no public URL gives no checkout address")
    func noPublicURL() async throws {
        let harness = try KioskHarness()
        defer { harness.remove() }
        let kiosk = try await harness.makeKiosk()
        try await withRunning(kiosk) {
            _ = try await kiosk.charge(amountCents: 1_250, reference: "")
            let advertising = try await harness.advance(kiosk) { $0.state == .advertising }
            #expect(advertising.charge?.eid != nil && advertising.charge?.checkoutURL == nil)
        }
    }

    @Test("CheckoutURL and the charge's checkout_url follow each EID over D-Bus, and empty once it is paid")
    func overDBus() async throws {
        let served = try await ServedKiosk.start(options: Self.rotating)
        await served.harness.ledger.setCheckoutBase(Self.base)
        #expect(try await served.pos.checkoutURL() == "")
        let id = try await served.pos.charge(amountCents: 900, reference: "order 5")
        let advertising = try await served.harness.advance(served.kiosk) { $0.state == .advertising }
        let first = try #require(advertising.charge?.eid)
        #expect(
            try await eventually(timeout: .seconds(60)) {
                try await served.pos.checkoutURL() == Self.checkoutURL(first.rawValue)
            }
        )
        let charge = try await served.pos.charge(id)
        #expect(
            charge[KioskInterface.ChargeKey.checkoutURL.rawValue, as: String.self] == Self.checkoutURL(first.rawValue)
        )

        let rotated = try await served.harness.advance(served.kiosk) {
            $0.charge?.eid.map { $0 != first } == true && $0.state == .advertising
        }
        let second = try #require(rotated.charge?.eid)
        #expect(
            try await eventually(timeout: .seconds(60)) {
                try await served.pos.checkoutURL() == Self.checkoutURL(second.rawValue)
            }
        )
        let current = try await served.pos.currentCharge()
        #expect(current[KioskInterface.ChargeKey.eid.rawValue, as: String.self] == second.rawValue)

        try await served.harness.ledger.pay(try #require(rotated.charge?.sessionID))
        try await served.harness.advance(served.kiosk) { $0.state == .paid }
        #expect(try await eventually(timeout: .seconds(60)) { try await served.pos.checkoutURL() == "" })
        await served.stop()
    }

    @Test("The display page shows the QR code beside the code and EID while a payer may pay, and serves it")
    func displayServesTheQRCode() async throws {
        let source = SettableStatusSource(.advertising(eid: "0123456789"))
        try await withDisplay(source) { display in
            let (head, page) = try await Self.get(display, "/")
            #expect(head.headers["content-security-policy"]?.contains("img-src 'self' data:") == true)
            #expect(page.contains(#"<body data-state="advertising" data-checkout>"#))
            #expect(page.contains(#"<aside id="checkout"><img id="qr" src="qr.svg?eid=0123456789" alt=""#))
            #expect(page.contains(#"<p id="scan">Scan to pay on your phone</p></aside>"#))
            #expect(page.contains(#"<p id="fallback">Code "#))

            let (imageHead, svg) = try await Self.get(display, "/qr.svg?eid=0123456789")
            #expect(imageHead.status == 200)
            #expect(imageHead.headers["content-type"] == "image/svg+xml")
            #expect(imageHead.headers["cache-control"] == "no-store")
            #expect(imageHead.headers["x-content-type-options"] == "nosniff")
            #expect(try QRCodeReader.texts(inSVG: svg) == [Self.checkoutURL("0123456789")])
            // Only the EID on the air has a code; POST is refused as on the other paths.
            #expect(try await Self.get(display, "/qr.svg?eid=9876543210").head.status == 404)
            #expect(try await Self.get(display, "/qr.svg").head.status == 404)
            #expect(try await Self.get(display, "/qr.svg?eid=0123456789", method: "POST").head.status == 405)

            // Paid, or with no web checkout (or one for another EID), there is none.
            var paid = KioskStatus.advertising(eid: "0123456789")
            paid.state = .paid
            paid.charge?.state = .paid
            var wrong = KioskStatus.advertising(eid: "0123456789")
            wrong.charge?.checkoutURL = Self.checkoutURL("9876543210")
            for status in [paid, .advertising(eid: "0123456789", checkout: false), wrong] {
                await source.set(status)
                let page = try await Self.get(display, "/").body
                #expect(page.contains(#"<aside id="checkout" hidden><p id="scan">"#), "\(status.state)")
                #expect(!page.contains("<img"))
                #expect(page.contains("<body data-state=\"\(status.state.rawValue)\">"), "\(status.state)")
                #expect(try await Self.get(display, "/qr.svg?eid=0123456789").head.status == 404)
            }
        }
    }

    static func get(
        _ display: RunningDisplay,
        _ path: String,
        method: String = "GET"
    ) async throws -> (head: LoopbackConnection.Head, body: String) {
        let connection = try LoopbackConnection(port: display.port)
        try connection.send(method, path, headers: ["Connection": "close"])
        let head = try await connection.readHead()
        return (head, try await connection.readBody())
    }
}

extension KioskDisplayTests.InChromium {
    /// A phone's camera pointed at the screen: zbarimg finds the checkout address in Chromium's screenshot.
    @Test func showsTheQRCodeAPhoneReads() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-display")
        defer { directory.remove() }
        let source = SettableStatusSource(.advertising(eid: "0123456789"), endsEachSubscription: true)
        let dom = try await withDisplay(source) { display in
            try await Chromium.render(port: display.port, in: directory, screenshot: "qr.png")
        }
        #expect(dom.contains(#"<img id="qr" src="qr.svg?eid=0123456789""#), "\(dom)")
        #expect(dom.contains(#"<aside id="checkout">"#), "\(dom)")
        let screenshot = directory.url.appendingPathComponent("qr.png")
        try Chromium.expectScreenshot(screenshot)
        #expect(try QRCodeReader.texts(inImage: screenshot) == [KioskCheckoutTests.checkoutURL("0123456789")])
    }

    /// A kiosk with no radio: the QR code comes first, larger, under a headline that says to scan it, and still reads.
    @Test func leadsWithTheQRCodeOffTheAir() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-display")
        defer { directory.remove() }
        var status = KioskStatus.advertising(eid: "0123456789")
        status.onAir = false
        let source = SettableStatusSource(status, endsEachSubscription: true)
        let dom = try await withDisplay(source) { display in
            try await Chromium.render(port: display.port, in: directory, screenshot: "off-air.png")
        }
        #expect(dom.contains(#"<body data-state="advertising" data-checkout="" data-off-air="">"#), "\(dom)")
        #expect(dom.contains(#"<p id="headline">Scan the QR code to pay</p>"#), "\(dom)")
        let screenshot = directory.url.appendingPathComponent("off-air.png")
        try Chromium.expectScreenshot(screenshot)
        #expect(try QRCodeReader.texts(inImage: screenshot) == [KioskCheckoutTests.checkoutURL("0123456789")])
    }

    /// The page arrives while the charge is being created, with no image; its script adds the code once the EID is
    /// on the air.
    @Test func addsTheQRCodeOnceAPayerMayPay() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-display")
        defer { directory.remove() }
        var creating = KioskStatus.advertising(eid: "0123456789")
        creating.state = .creating
        creating.charge?.state = .creating
        creating.charge?.eid = nil
        creating.charge?.checkoutURL = nil
        let source = SettableStatusSource(
            creating,
            endsEachSubscription: true,
            nextAfterFirstSubscription: .advertising(eid: "0123456789")
        )
        let dom = try await withDisplay(source) { display in
            try await Chromium.render(port: display.port, in: directory, screenshot: "added.png")
        }
        #expect(dom.contains(#"<body data-state="advertising" data-checkout="">"#), "\(dom)")
        #expect(dom.contains(#"<img id="qr" alt="\#(KioskCheckoutTests.qrCodeText)" src="qr.svg?eid=0123456789">"#))
        let screenshot = directory.url.appendingPathComponent("added.png")
        try Chromium.expectScreenshot(screenshot)
        #expect(try QRCodeReader.texts(inImage: screenshot) == [KioskCheckoutTests.checkoutURL("0123456789")])
    }

    /// The page arrives with the first EID's code; only its script, told over `/events` of the new EID, can swap the
    /// image for the new one's.
    @Test func swapsTheQRCodeWhenTheEIDRotates() async throws {
        let directory = try TemporaryDirectory(prefix: "gotchu-display")
        defer { directory.remove() }
        let source = SettableStatusSource(
            .advertising(eid: "0123456789"),
            endsEachSubscription: true,
            nextAfterFirstSubscription: .advertising(eid: "abcdef0123")
        )
        let dom = try await withDisplay(source) { display in
            try await Chromium.render(port: display.port, in: directory, screenshot: "rotated.png")
        }
        #expect(await source.subscriptionCount >= 2)
        #expect(dom.contains(#"<img id="qr" src="qr.svg?eid=abcdef0123""#), "\(dom)")
        #expect(dom.contains(#"<p id="fallback">Code "#) && dom.contains("EID abcd ef01 23"), "\(dom)")
        let screenshot = directory.url.appendingPathComponent("rotated.png")
        try Chromium.expectScreenshot(screenshot)
        #expect(try QRCodeReader.texts(inImage: screenshot) == [KioskCheckoutTests.checkoutURL("abcdef0123")])
    }
}
