import Foundation
import GotchuAPI
import GotchuCore
import Mustache

/// The customer display's page: rendered by the kiosk from one status, so it is right before its script runs, then
/// kept current by that script from `/events`, which carries the same texts (``View``) with each status.
enum KioskDisplayPage {
    /// The large line for each state.
    static let headlines: [KioskStatus.State: String] = [
        .idle: "Ready",
        .creating: "Preparing…",
        .advertising: "Hold your phone near the terminal",
        .locked: "Paying…",
        .paid: "Paid ✓",
        .expired: "Expired",
        .cancelled: "Cancelled",
        .failed: "Failed",
        .error: "Please wait",
    ]

    /// The large line while a payer may pay on a kiosk with no radio: its QR code is the only way to the payment.
    static let offAirHeadline = "Scan the QR code to pay"

    /// The large line for `status`.
    static func headline(_ status: KioskStatus) -> String {
        if !status.onAir, status.state == .advertising { return offAirHeadline }
        return headlines[status.state] ?? status.state.rawValue
    }

    /// What the page shows for one status, as text: the kiosk renders it into the page, and sends it with each
    /// status on `/events` (`display`), which the page's script sets as it is.
    struct View: Equatable, Encodable {
        var state: String
        var payee: String
        var amount: String?
        /// For a split charge a payer may pay: what the next share costs.
        var share: String?
        var headline: String
        /// For a split charge: how many of its shares are paid.
        var progress: String?
        var detail: String?
        var countdown: String?
        var reference: String?
        /// While a payer may pay: the confirmation code and the EID to type when the radio cannot range.
        var fallback: String?
        /// While a payer may pay and the ledger has a web checkout: where the QR code of the EID's checkout is
        /// (`qr.svg?eid=EID`, on the display's own server).
        var qrCode: String?
        /// The QR code's text alternative, with ``qrCode``.
        var qrCodeText: String?
        /// Whether the kiosk has no radio: the QR code is then the only way to the payment, and leads.
        var offAir: Bool
        /// While the countdown runs: the seconds left when the status was made, for the script to count on from.
        var secondsLeft: Double?

        enum CodingKeys: String, CodingKey {
            case state, payee, amount, share, headline, progress, detail, countdown, reference, fallback
            case qrCode = "qr_code"
            case qrCodeText = "qr_code_text"
            case offAir = "off_air"
            case secondsLeft = "seconds_left"
        }

        init(_ status: KioskStatus) {
            // An idle kiosk may still report its last charge; "Ready" beside an old amount would mislead.
            let charge = status.state == .idle ? nil : status.charge
            state = status.state.rawValue
            payee = status.payeeName
            amount = charge.map { Money.format($0.amountCents) }
            headline = KioskDisplayPage.headline(status)
            // As the script does: an empty problem on the status gives way to the charge's.
            let problem = status.problem?.isEmpty == false ? status.problem : charge?.problem
            detail = status.state == .failed || status.state == .error ? problem : nil
            let payable = status.state == .advertising || status.state == .locked
            if let charge, charge.isSplit {
                if payable { share = "Your share: " + Money.format(charge.nextShareCents) }
                if !charge.state.isFinal || charge.state == .paid {
                    progress = "\(charge.sharesPaid) of \(charge.shares) paid"
                }
            }
            if let charge, charge.state == .cancelled || charge.state == .expired, charge.refundedCents > 0 {
                detail = Money.format(charge.refundedCents) + " refunded to the payers"
            }
            // Paid with tips: what came in with them, so the screen agrees with the payer's receipt.
            if let charge, status.state == .paid, charge.tipCents > 0 {
                detail =
                    "With " + Money.format(charge.tipCents) + " in tips: "
                    + Money.format(charge.amountCents + charge.tipCents)
            }
            if status.state == .advertising || status.state == .locked, let expiresAt = charge?.expiresAt {
                let seconds = expiresAt.timeIntervalSince(status.now)
                countdown = KioskDisplayPage.countdown(seconds: seconds)
                secondsLeft = seconds.isFinite ? max(0, min(seconds, 86_400 * 365)) : 0
            }
            if let reference = charge?.reference, !reference.isEmpty { self.reference = "Reference: " + reference }
            if status.state == .advertising || status.state == .locked, let charge {
                fallback = KioskDisplayPage.fallback(sessionID: charge.sessionID, eid: charge.eid)
            }
            if KioskDisplayPage.checkoutURL(of: status) != nil, let eid = charge?.eid {
                qrCode = "qr.svg?eid=" + eid.rawValue
                qrCodeText = KioskDisplayPage.qrCodeText
            }
            offAir = !status.onAir
        }
    }

    /// `Code 47 · EID a1b2 c3d4 e5`: the code the payer's device prints in its question (derived from the session
    /// id, see ``ConfirmationCode``) and the EID grouped for `gotchu pay --eid`; `nil` without both.
    static func fallback(sessionID: String?, eid: EID?) -> String? {
        guard let sessionID, let eid else { return nil }
        return "Code " + ConfirmationCode.of(sessionID: sessionID) + " · EID " + eid.grouped
    }

    /// The web checkout whose QR code the display shows: the charge's, while a payer may pay, if it is the address
    /// of the EID on the air (``CheckoutURL/validated(_:eid:)``); `nil` otherwise.
    static func checkoutURL(of status: KioskStatus) -> String? {
        guard status.state == .advertising || status.state == .locked, let charge = status.charge,
            let eid = charge.eid
        else { return nil }
        return CheckoutURL.validated(charge.checkoutURL, eid: eid)
    }

    /// `m:ss`, rounded up as countdowns are (a charge with 0.2 s left still shows 0:01), never negative.
    static func countdown(seconds: TimeInterval) -> String {
        let whole = seconds.isFinite ? max(0, Int(min(seconds, 86_400 * 365).rounded(.up))) : 0
        let remainder = whole % 60
        return "\(whole / 60):" + (remainder < 10 ? "0" : "") + "\(remainder)"
    }

    /// The whole page for `status`.
    static func html(for status: KioskStatus) -> String {
        struct Line {
            let id: String
            let text: String?
        }
        struct Content {
            let state: String
            let qrCode: String?
            let qrCodeText: String
            let scanText: String
            let offAir: Bool
            /// The countdown's seconds left, for the script to count on from.
            let secondsLeft: String?
            let lines: [Line]
        }
        let view = View(status.forDisplay)
        func line(_ id: String, _ text: String?) -> Line {
            Line(id: id, text: text?.isEmpty == false ? text : nil)
        }
        let content = Content(
            state: view.state,
            qrCode: view.qrCode,
            qrCodeText: qrCodeText,
            scanText: scanText,
            offAir: view.offAir,
            secondsLeft: view.secondsLeft.map { String(format: "%.3f", $0) },
            lines: [
                line("payee", view.payee), line("amount", view.amount), line("share", view.share),
                line("headline", view.headline), line("progress", view.progress), line("detail", view.detail),
                line("countdown", view.countdown), line("reference", view.reference), line("fallback", view.fallback),
            ]
        )
        return template.render(content)
    }

    /// The page's template (`Display/display.mustache`), parsed once; it escapes every value.
    private static let template: MustacheTemplate = {
        // Part of this build: one that does not parse is a programming error, which every test of the page finds.
        try! MustacheTemplate(string: String(decoding: PackageResources.display_mustache, as: UTF8.self))
    }()

    /// The caption under the QR code.
    static let scanText = "Scan to pay on your phone"

    /// The QR code's text alternative.
    static let qrCodeText = "QR code of this payment's web checkout"

    /// The page's style sheet and script, served beside it (`/display.css`, `/display.js`): the content security
    /// policy allows no inline script or style.
    static let assets: [String: (mediaType: String, text: String)] = [
        "/display.css": ("text/css; charset=utf-8", String(decoding: PackageResources.display_css, as: UTF8.self)),
        "/display.js": (
            "text/javascript; charset=utf-8", String(decoding: PackageResources.display_js, as: UTF8.self)
        ),
    ]
}

extension KioskStatus {
    /// The status as the customer display shows it: every text from elsewhere (the payee's name, a problem quoted
    /// from the ledger, the point-of-sale's reference) passed through ``DisplayText``, so no bidi override, invisible
    /// or look-alike blank character can reorder or disguise what the customer reads beside the amount.
    var forDisplay: KioskStatus {
        var status = self
        status.payeeName = DisplayText.escaped(payeeName, maximumLength: 100)
        status.problem = problem.map { DisplayText.escaped($0) }
        if var charge = status.charge {
            charge.reference = DisplayText.escaped(charge.reference, maximumLength: 200)
            charge.problem = charge.problem.map { DisplayText.escaped($0) }
            status.charge = charge
        }
        return status
    }
}
