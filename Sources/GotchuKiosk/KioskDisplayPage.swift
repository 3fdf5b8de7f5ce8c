import Foundation
import GotchuAPI
import GotchuCore

/// The customer display's page: rendered on the server from one status, so it is right before its script runs,
/// then kept current by that script from `/events`.
enum KioskDisplayPage {
    /// The large line for each state; the page's script receives the same table, so both renderings agree.
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

    /// What the page shows for one status, as text; the server renders it into HTML and the script into the DOM.
    struct View: Equatable {
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
                countdown = KioskDisplayPage.countdown(seconds: expiresAt.timeIntervalSince(status.now))
            }
            if let reference = charge?.reference, !reference.isEmpty { self.reference = "Reference: " + reference }
            if status.state == .advertising || status.state == .locked, let charge {
                fallback = KioskDisplayPage.fallback(sessionID: charge.sessionID, eid: charge.eid)
            }
            if KioskDisplayPage.checkoutURL(of: status) != nil, let eid = charge?.eid {
                qrCode = "qr.svg?eid=" + eid.rawValue
            }
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
    static func html(for status: KioskStatus) throws -> String {
        let status = status.forDisplay
        let view = View(status)
        let initial = try initialJSON(status)
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Gotchu</title>
            <link rel="icon" href="data:,">
            <style>\(style)</style>
            </head>
            <body data-state="\(escape(view.state))"\(view.qrCode == nil ? "" : " data-checkout")\
            \(status.onAir ? "" : " data-off-air")>
            <main>
            \(element("payee", view.payee))
            \(element("amount", view.amount))
            \(element("share", view.share))
            \(element("headline", view.headline))
            \(element("progress", view.progress))
            \(element("detail", view.detail))
            \(element("countdown", view.countdown))
            \(element("reference", view.reference))
            \(element("fallback", view.fallback))
            </main>
            \(checkout(view.qrCode))
            <p id="connection" role="status" hidden>Reconnecting…</p>
            <script type="application/json" id="initial">\(initial)</script>
            <script>\(script)</script>
            </body>
            </html>

            """
    }

    /// The QR code of the web checkout beside the rest, with its caption; hidden, with no image, when there is none
    /// (the script adds the image and shows it, and swaps it when the EID changes).
    private static func checkout(_ source: String?) -> String {
        guard let source else { return "<aside id=\"checkout\" hidden><p id=\"scan\">\(scanText)</p></aside>" }
        return "<aside id=\"checkout\"><img id=\"qr\" src=\"\(escape(source))\" alt=\"\(qrCodeText)\">"
            + "<p id=\"scan\">\(scanText)</p></aside>"
    }

    /// The caption under the QR code.
    static let scanText = "Scan to pay on your phone"

    /// The QR code's text alternative.
    static let qrCodeText = "QR code of this payment's web checkout"

    /// A paragraph with its text escaped, hidden when there is no text (the script shows it when there is).
    private static func element(_ id: String, _ text: String?) -> String {
        guard let text, !text.isEmpty else { return "<p id=\"\(id)\" hidden></p>" }
        return "<p id=\"\(id)\">\(escape(text))</p>"
    }

    /// Text made safe for an HTML element or a quoted attribute.
    static func escape(_ text: String) -> String { DisplayText.html(text) }

    /// The status and the headlines as JSON for a `<script type="application/json">`. Every `<` becomes `\u003c`
    /// (still the same JSON), so no text inside can close the script element or open a comment.
    static func initialJSON(_ status: KioskStatus) throws -> String {
        struct Initial: Encodable {
            var status: KioskStatus
            var headlines: [String: String]
            var offAirHeadline: String
            var qrCodeText: String
        }
        let headlines = Dictionary(uniqueKeysWithValues: headlines.map { ($0.key.rawValue, $0.value) })
        let data = try APIJSON.encoder().encode(
            Initial(status: status, headlines: headlines, offAirHeadline: offAirHeadline, qrCodeText: qrCodeText)
        )
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
    }

    // Sizes follow the screen's height so the 800×480 panel and a 1080p monitor both read from a distance.
    private static let style = """
        :root{color-scheme:light}
        *{box-sizing:border-box;margin:0}
        html,body{height:100%}
        body{background:#fff;color:#000;font-family:"DejaVu Sans",system-ui,sans-serif;overflow:hidden}
        main{height:100%;display:flex;flex-direction:column;justify-content:center;align-items:center;\
        gap:2.5vh;padding:3vh 4vw;text-align:center}
        main p{max-width:100%;overflow-wrap:anywhere}
        #payee{font-size:clamp(18px,min(7vh,5vw),72px);font-weight:600;color:#222}
        #amount{font-size:clamp(40px,min(22vh,15vw),240px);font-weight:800;line-height:1;\
        font-variant-numeric:tabular-nums}
        #headline{font-size:clamp(26px,min(11vh,7vw),120px);font-weight:700;line-height:1.1}
        #share{font-size:clamp(18px,min(7vh,5vw),72px);font-weight:600;font-variant-numeric:tabular-nums}
        #progress{font-size:clamp(20px,min(8vh,6vw),90px);font-weight:700;font-variant-numeric:tabular-nums}
        #detail{font-size:clamp(16px,min(5vh,4vw),56px)}
        #countdown{font-size:clamp(22px,min(9vh,6vw),100px);font-variant-numeric:tabular-nums}
        #reference{font-size:clamp(14px,min(4.5vh,3.5vw),48px);color:#333}
        #fallback{font-size:clamp(14px,min(4.5vh,3.5vw),48px);color:#333;font-variant-numeric:tabular-nums}
        body[data-checkout]{display:flex;align-items:center}
        body[data-checkout] main{flex:1 1 auto;min-width:0;padding-right:2vw}
        body[data-checkout] #amount{font-size:clamp(36px,min(20vh,9.5vw),220px)}
        body[data-checkout] #headline{font-size:clamp(20px,min(8vh,4.5vw),96px)}
        #checkout{flex:0 0 auto;display:flex;flex-direction:column;align-items:center;gap:1.5vh;\
        padding:3vh 4vw 3vh 0}
        #qr{display:block;width:min(62vh,40vw);height:auto;aspect-ratio:1;background:#fff}
        #scan{font-size:clamp(12px,min(4vh,2.6vw),40px);color:#222;text-align:center}
        body[data-off-air] #checkout{order:-1;padding:3vh 0 3vh 4vw}
        body[data-off-air] #qr{width:min(78vh,50vw)}
        body[data-off-air] #scan{font-size:clamp(16px,min(5vh,3.2vw),52px);font-weight:600}
        #connection{position:fixed;right:2vw;bottom:1.5vh;font-size:clamp(12px,3.5vh,36px);color:#444}
        body[data-state=paid] #headline{color:#05601f}
        body[data-state=failed] #headline,body[data-state=expired] #headline,\
        body[data-state=cancelled] #headline{color:#8a0000}
        [hidden]{display:none!important}
        """

    // Amounts are formatted with integer arithmetic, as Money.format does; the countdown runs on the kiosk's
    // clock (`now`) plus time elapsed here, so a wrong clock on the screen's computer does not matter.
    private static let script = """
        "use strict";
        (function () {
          var initial = JSON.parse(document.getElementById("initial").textContent);
          var headlines = initial.headlines;
          var status = initial.status;
          var receivedAt = performance.now();
          function formatCents(cents) {
            var magnitude = Math.abs(Math.trunc(cents));
            var fraction = magnitude % 100;
            var whole = (magnitude - fraction) / 100;
            return (cents < 0 ? "-" : "") + "$" + whole + "." + (fraction < 10 ? "0" : "") + fraction;
          }
          function formatCountdown(seconds) {
            var remainder = seconds % 60;
            return (seconds - remainder) / 60 + ":" + (remainder < 10 ? "0" : "") + remainder;
          }
          // ConfirmationCode.of(sessionID:): FNV-1a (64 bits) of the lowercased id's UTF-8 bytes, modulo 100.
          function confirmationCode(sessionID) {
            var hash = 0xcbf29ce484222325n;
            var bytes = new TextEncoder().encode(sessionID.toLowerCase());
            for (var i = 0; i < bytes.length; i++) {
              hash = ((hash ^ BigInt(bytes[i])) * 0x100000001b3n) & 0xffffffffffffffffn;
            }
            var code = Number(hash % 100n);
            return (code < 10 ? "0" : "") + code;
          }
          function fallback(charge) {
            if (!charge || !charge.session_id || !charge.eid) { return null; }
            var grouped = charge.eid.replace(/(.{4})(?=.)/g, "$1 ");
            return "Code " + confirmationCode(charge.session_id) + " · EID " + grouped;
          }
          // KioskCharge.cents(ofShare:): equal shares, the cents that do not divide evenly one each to the first.
          function shareCents(charge, number) {
            var shares = Math.max(charge.shares || 1, 1);
            var remainder = charge.amount_cents % shares;
            return (charge.amount_cents - remainder) / shares + (number <= remainder ? 1 : 0);
          }
          function setText(id, text) {
            var node = document.getElementById(id);
            node.textContent = text || "";
            node.hidden = !text;
          }
          function countdown() {
            var charge = status.charge;
            if (!charge || !charge.expires_at || (status.state !== "advertising" && status.state !== "locked")) {
              return null;
            }
            var kioskNow = Date.parse(status.now) + (performance.now() - receivedAt);
            var left = (Date.parse(charge.expires_at) - kioskNow) / 1000;
            return isFinite(left) ? formatCountdown(Math.max(0, Math.ceil(left))) : null;
          }
          function render() {
            var charge = status.state === "idle" ? null : status.charge;
            var failing = status.state === "failed" || status.state === "error";
            document.body.setAttribute("data-state", status.state);
            setText("payee", status.payee_name);
            var payable = status.state === "advertising" || status.state === "locked";
            var split = charge && charge.shares > 1;
            var paid = split ? charge.shares_paid || 0 : 0;
            setText("amount", charge ? formatCents(charge.amount_cents) : null);
            setText("share", split && payable
              ? "Your share: " + formatCents(shareCents(charge, Math.min(paid + 1, charge.shares))) : null);
            var offAir = status.on_air === false;
            document.body.toggleAttribute("data-off-air", offAir);
            setText("headline", offAir && status.state === "advertising"
              ? initial.offAirHeadline : headlines[status.state] || status.state);
            var counted = split && ["creating", "advertising", "locked", "paid"].indexOf(charge.state) >= 0;
            setText("progress", counted ? paid + " of " + charge.shares + " paid" : null);
            var detail = failing ? status.problem || (charge && charge.problem) : null;
            if (charge && (charge.state === "cancelled" || charge.state === "expired") && charge.refunded_cents > 0) {
              detail = formatCents(charge.refunded_cents) + " refunded to the payers";
            }
            if (charge && status.state === "paid" && charge.tip_cents > 0) {
              detail = "With " + formatCents(charge.tip_cents) + " in tips: "
                + formatCents(charge.amount_cents + charge.tip_cents);
            }
            setText("detail", detail);
            setText("countdown", countdown());
            setText("reference", charge && charge.reference ? "Reference: " + charge.reference : null);
            setText("fallback", payable ? fallback(charge) : null);
            showCheckout(payable && charge && charge.checkout_url && charge.eid
              ? "qr.svg?eid=" + encodeURIComponent(charge.eid) : null);
          }
          // The QR code of the EID on the air, from this server; a new EID gets a new image.
          var checkoutShown = null;
          function watchImage(image) {
            // An EID replaced before its image came has none: the next status names the new one.
            image.addEventListener("error", function () {
              if (image.getAttribute("src") === checkoutShown) { document.getElementById("checkout").hidden = true; }
            });
            image.addEventListener("load", function () {
              document.getElementById("checkout").hidden = !checkoutShown;
            });
          }
          if (document.getElementById("qr")) { watchImage(document.getElementById("qr")); }
          function showCheckout(source) {
            checkoutShown = source;
            var aside = document.getElementById("checkout");
            var image = document.getElementById("qr");
            if (source) {
              if (!image) {
                image = document.createElement("img");
                image.id = "qr";
                image.alt = initial.qrCodeText;
                watchImage(image);
                aside.insertBefore(image, aside.firstChild);
              }
              if (image.getAttribute("src") !== source) { image.setAttribute("src", source); }
              document.body.setAttribute("data-checkout", "");
            } else {
              if (image) { image.removeAttribute("src"); }
              document.body.removeAttribute("data-checkout");
            }
            aside.hidden = !source;
          }
          var lost = null;
          function connected() {
            clearTimeout(lost);
            lost = null;
            document.getElementById("connection").hidden = true;
          }
          function connect() {
            var events = new EventSource("events");
            events.onopen = connected;
            events.onmessage = function (event) {
              try { status = JSON.parse(event.data); } catch (error) { return; }
              receivedAt = performance.now();
              connected();
              render();
            };
            events.onerror = function () {
              // A dropped stream reconnects within a second or so; say so only if that does not happen.
              if (lost === null) {
                lost = setTimeout(function () { document.getElementById("connection").hidden = false; }, 2500);
              }
              // EventSource gives up for good after an HTTP error (a proxy's 502, say); start over then.
              if (events.readyState === EventSource.CLOSED) {
                events.close();
                setTimeout(connect, 3000);
              }
            };
          }
          render();
          setInterval(function () { setText("countdown", countdown()); }, 250);
          connect();
        })();
        """
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
