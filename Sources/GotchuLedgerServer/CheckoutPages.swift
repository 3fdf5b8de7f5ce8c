import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerAPI
import GotchuReceipts

/// The web checkout's pages, as ``CheckoutHTML/Page``s: the session a payer is about to pay, the sign-in form, the
/// receipt, and one page per outcome. Everything from elsewhere is escaped here; the ids and labels are stable, for
/// the tests that drive these pages as a person would.
enum CheckoutPages {
    /// The payee as a page shows it: its name quoted and made safe for a person to read, whether the ledger's operator
    /// verified it, and its address's domain.
    struct Payee {
        var name: String
        var domain: String?
        var verified: Bool

        /// The payee a resolve found, cleaned as every answer to a payer is (names stored before they were checked).
        init(_ counterparty: Counterparty) {
            let display = EmailAddress.cleaned(
                PayeeDisplay(name: counterparty.name, domain: counterparty.domain, verified: counterparty.verified)
            )
            name = display.name
            domain = display.domain
            verified = display.verified ?? false
        }

        /// `"Corner Shop"`, quoted and escaped (``DisplayText``), then escaped for HTML.
        var quotedHTML: String { CheckoutHTML.text(DisplayText.quoted(name)) }

        /// The line under the name: the verified mark or the warning, and the domain.
        var verificationHTML: String {
            let mark =
                verified
                ? "<span class=\"mark\" aria-hidden=\"true\">✓</span> Verified merchant"
                : "Name chosen by the payee, not verified"
            guard let domain else { return mark }
            return mark + " · " + CheckoutHTML.text(DisplayText.escaped(domain, maximumLength: 253))
        }
    }

    /// What the session page shows of the session.
    struct Session {
        var eid: String
        var sid: String
        var payee: Payee
        /// What this payer pays (its share of a split), before a tip.
        var amount: String
        var amountCents: Cents
        /// The whole amount of a split; `nil` when not split.
        var total: String?
        var shares: Int
        var sharesPaid: Int
        /// Whole seconds left before it expires.
        var secondsLeft: Int
        /// The tips the session's terminal suggests: percent and the total paid with it; none when it asks for none.
        var tips: [(percent: Int, total: String)]
        /// The payee's order reference; `nil` when it gave none.
        var reference: String?

        /// The payments this payer made of this split already, oldest first: what each paid (its tip included)
        /// and where its receipt is. The pay form then asks for one more share, not for a first.
        var paidBefore: [(total: String, receipt: String)] = []

        /// The percents of ``tips`` as the pay form carries them (`10,15,20`), bound to its tag; empty for none.
        var tipList: String { tips.map { String($0.percent) }.joined(separator: ",") }
    }

    /// The header's account line and sign-out button for `name`, whose form carries `tag`.
    static func account(name: String, tag: String, action: String) -> String {
        """
        <form id="sign-out" method="post" action="\(CheckoutHTML.attribute(action))">\
        <span class="who">Signed in as \(CheckoutHTML.text(DisplayText.escaped(name, maximumLength: 100)))</span>\
        <input type="hidden" name="csrf" value="\(CheckoutHTML.attribute(tag))">\
        <button type="submit" class="link">Sign out</button></form>
        """
    }

    /// The session's figures: payee, amount, split progress, confirmation code and time left.
    static func summary(_ session: Session, heading: String) -> String {
        var html = """
            <h1 id="payee">\(heading) \(session.payee.quotedHTML)</h1>
            <p id="verification" class="\(session.payee.verified ? "verified" : "unverified")">\
            \(session.payee.verificationHTML)</p>
            <p id="amount" class="amount">\(CheckoutHTML.text(session.amount))</p>

            """
        html += referenceLine(session.reference)
        if let total = session.total {
            html += """
                <p id="share">Your share of \(CheckoutHTML.text(total))</p>
                <p id="progress">\(session.sharesPaid) of \(session.shares) paid</p>

                """
        }
        let code = ConfirmationCode.of(sessionID: session.sid)
        html += """
            <dl class="facts">
            <div><dt>Confirmation code</dt><dd id="code">\(code)</dd></div>
            <div><dt>Time left</dt><dd id="time-left" data-seconds="\(session.secondsLeft)">\
            \(countdown(seconds: session.secondsLeft))</dd></div>
            </dl>
            <p class="hint">Check that the terminal shows confirmation code \(code) before you pay.</p>
            """
        return html
    }

    /// The session page of a signed-in payer: the figures and the pay form, which carries this page view's id, the
    /// session, the amount shown, the tips offered (when the session suggests any) and the tag that binds them to the
    /// browser session.
    /// A payer that paid a share before is shown those payments and asked to confirm one more (`another`, under
    /// the tag too); `notice` says why the page is shown again (the amount changed meanwhile).
    static func session(
        _ session: Session,
        view: String,
        tag: String,
        root: String,
        account: String,
        notice: String? = nil
    ) -> CheckoutHTML.Page {
        var before = ""
        if let notice {
            before += "<p id=\"problem\" class=\"problem\" role=\"alert\">\(CheckoutHTML.text(notice))</p>\n"
        }
        if !session.paidBefore.isEmpty {
            before += "<div id=\"paid-before\" class=\"problem\" role=\"alert\">\n<p>You paid "
            before += session.paidBefore.map { payment in
                "<a href=\"\(root)\(session.eid)/\(CheckoutHTML.attribute(payment.receipt))\">"
                    + CheckoutHTML.text(payment.total) + "</a>"
            }.joined(separator: " and ")
            before += " for this charge already. Pay again only if you mean to pay one more share.</p>\n</div>\n"
        }
        let again = session.paidBefore.isEmpty ? "" : " one more share:"
        var form = """
            <form id="pay" method="post" action="\(root)\(session.eid)/pay">
            <input type="hidden" name="view" value="\(CheckoutHTML.attribute(view))">
            <input type="hidden" name="sid" value="\(CheckoutHTML.attribute(session.sid))">
            <input type="hidden" name="amount" value="\(session.amountCents)">
            <input type="hidden" name="csrf" value="\(CheckoutHTML.attribute(tag))">

            """
        if !session.paidBefore.isEmpty { form += "<input type=\"hidden\" name=\"another\" value=\"1\">\n" }
        if !session.tips.isEmpty {
            form += "<input type=\"hidden\" name=\"tips\" value=\"\(CheckoutHTML.attribute(session.tipList))\">\n"
        }
        form += """
            <button type="submit" id="pay-button" name="tip" value="0">Pay\(again) \(CheckoutHTML.text(session.amount))</button>

            """
        if !session.tips.isEmpty {
            form += "<div class=\"tips\" role=\"group\" aria-label=\"Pay with a tip\">\n"
            for tip in session.tips {
                form += """
                    <button type="submit" id="tip-\(tip.percent)" name="tip" value="\(tip.percent)" class="secondary">\
                    Pay \(CheckoutHTML.text(tip.total)) with a \(tip.percent)% tip</button>

                    """
            }
            form += "</div>\n"
        }
        form += "</form>"
        let main =
            summary(session, heading: "Pay") + "\n" + before + form + "\n" + status(eid: session.eid, root: root)
        return CheckoutHTML.Page(
            title: "Pay \(DisplayText.quoted(session.payee.name))",
            main: main,
            root: root,
            account: account,
            script: true
        )
    }

    /// The live status line the script fills from the session's event stream.
    private static func status(eid: String, root: String) -> String {
        "<p id=\"status\" role=\"status\" aria-live=\"polite\" data-events=\"\(root)\(eid)/events\"></p>"
    }

    /// The order reference as a payer reads it, quoted so it cannot pose as the page's own words; empty for none.
    static func referenceLine(_ reference: String?) -> String {
        guard let reference else { return "" }
        return "<p id=\"reference\">Reference \(CheckoutHTML.text(DisplayText.quoted(reference)))</p>\n"
    }

    /// The sign-in form, posting to `/p/{eid}/sign-in`; `problem` says why the last try failed. With `issuer` (the
    /// name of an external identity provider the server signs browsers in through), a link to `/p/{eid}/sign-in/oidc`
    /// beside it.
    static func signInForm(
        eid: String,
        root: String,
        email: String = "",
        problem: String? = nil,
        issuer: String? = nil
    ) -> String {
        var html = ""
        if let problem {
            html += "<p id=\"problem\" class=\"problem\" role=\"alert\">\(CheckoutHTML.text(problem))</p>\n"
        }
        html += """
            <form id="sign-in" method="post" action="\(root)\(eid)/sign-in">
            <label for="email">E-mail address</label>
            <input id="email" name="email" type="email" autocomplete="username" required \
            value="\(CheckoutHTML.attribute(email))">
            <label for="password">Password</label>
            <input id="password" name="password" type="password" autocomplete="current-password" required>
            <button type="submit" id="sign-in-button">Sign in</button>
            </form>
            """
        if let issuer {
            html += """

                <p><a id="oidc-signin" href="\(root)\(eid)/sign-in/oidc">Sign in with \
                \(CheckoutHTML.text(DisplayText.escaped(issuer, maximumLength: 253)))</a></p>
                """
        }
        return html
    }

    /// The sign-in page: with `session` (the ledger lets anyone resolve) the session's figures above the form,
    /// without it nothing about the session at all; with `issuer`, a link to sign in through it too.
    static func signIn(
        eid: String,
        root: String,
        session: Session? = nil,
        email: String = "",
        problem: String? = nil,
        issuer: String? = nil
    ) -> CheckoutHTML.Page {
        var main = ""
        if let session {
            main += summary(session, heading: "Pay") + "\n<h2>Sign in to pay</h2>\n"
        } else {
            main += "<h1>Sign in to pay</h1>\n<p>Sign in with your Gotchu account to see this payment.</p>\n"
        }
        main += signInForm(eid: eid, root: root, email: email, problem: problem, issuer: issuer)
        if let session { main += "\n" + status(eid: session.eid, root: root) }
        return CheckoutHTML.Page(
            title: session.map { "Pay \(DisplayText.quoted($0.payee.name))" } ?? "Sign in to pay",
            main: main,
            root: root,
            script: session != nil
        )
    }

    /// A page that tells how something ended: a heading, what it means for the payer, and where to go on.
    static func outcome(
        _ title: String,
        _ message: String,
        root: String,
        eid: String?,
        link: String = "Back to the payment",
        account: String = ""
    ) -> CheckoutHTML.Page {
        var main =
            "<h1 id=\"outcome\">\(CheckoutHTML.text(title))</h1>\n<p id=\"message\">\(CheckoutHTML.text(message))</p>"
        if let eid { main += "\n<p><a id=\"back\" href=\"\(root)\(eid)\">\(CheckoutHTML.text(link))</a></p>" }
        return CheckoutHTML.Page(title: title, main: main, root: root, account: account)
    }

    /// What the receipt page shows.
    struct Paid {
        var eid: String
        /// Where the signed receipt is downloaded from, relative to the page.
        var download: String
        var receipt: Receipt?
        var amount: String
        var tip: String?
        var total: String
        var payee: Payee?
        var balance: String?
        /// What was refunded of it so far (its tip included); `nil` when nothing was.
        var refunded: String?
        /// Whether all of it was refunded.
        var refundedWhole = false
        /// Whether shares of the split are still to pay.
        var sharesLeft: Bool
        /// The `--server` a verifier passes: the public URL, else this server's address as the browser reached it.
        var server: String
        /// The payee's order reference; `nil` when it gave none.
        var reference: String?
    }

    /// The receipt page: what was paid, to whom, the signed receipt's fields and text, and how anyone checks it.
    static func paid(_ paid: Paid, root: String, account: String) -> CheckoutHTML.Page {
        let heading = paid.refundedWhole ? "Refunded" : "Paid"
        var main =
            "<h1 id=\"outcome\">\(heading)</h1>\n<p id=\"amount\" class=\"amount\">\(CheckoutHTML.text(paid.total))</p>\n"
        if let refunded = paid.refunded {
            let text =
                paid.refundedWhole
                ? "You paid \(paid.total); all of it was refunded to your wallet."
                : "\(refunded) of it was refunded to your wallet."
            main += "<p id=\"refunded\">\(CheckoutHTML.text(text))</p>\n"
        }
        if let tip = paid.tip {
            main += "<p id=\"tip\">\(CheckoutHTML.text(paid.amount)) and a \(CheckoutHTML.text(tip)) tip</p>\n"
        }
        main += referenceLine(paid.reference)
        if let payee = paid.payee {
            main +=
                "<p id=\"paid-to\">to \(payee.quotedHTML) <span class=\"\(payee.verified ? "verified" : "unverified")\">"
                + "(\(payee.verificationHTML))</span></p>\n"
        }
        if let balance = paid.balance {
            main += "<p id=\"balance\">Your balance: \(CheckoutHTML.text(balance))</p>\n"
        }
        if let receipt = paid.receipt {
            let issued = Date(timeIntervalSince1970: Double(receipt.issuedAtMilliseconds) / 1000)
            // In the payer's own time zone where the page's script runs (it rewrites the <time>), else in UTC.
            main +=
                "<p id=\"paid-at\">Paid at <time datetime=\"\(issued.formatted(.iso8601))\">"
                + CheckoutHTML.text(issued.formatted(.iso8601.dateSeparator(.dash).timeSeparator(.colon)) + " UTC")
                + "</time></p>\n"
            var fields: [(String, String, String)] = [
                ("receipt-id", "Receipt", receipt.id),
                ("receipt-session", "Session", receipt.sessionID),
                ("receipt-amount", "Amount", "\(receipt.amountCents) cents \(receipt.currency)"),
            ]
            if let tip = receipt.tipCents { fields.append(("receipt-tip", "Tip", "\(tip) cents \(receipt.currency)")) }
            if let shares = receipt.shareNumbers, let count = receipt.shares {
                let numbers = shares.map(String.init).joined(separator: ", ")
                fields.append(("receipt-shares", "Shares", "\(numbers) of \(count)"))
            }
            fields += [
                ("receipt-issued", "Issued", issued.formatted(.iso8601)),
                ("receipt-key", "Signed by key", receipt.keyID),
            ]
            // The technical part, folded: what a person checking the receipt needs, not one paying.
            main +=
                "<details id=\"receipt-details\"><summary>Signed receipt</summary>\n<dl id=\"receipt\" class=\"facts\">\n"
            for (id, term, value) in fields {
                main +=
                    "<div><dt>\(term)</dt><dd id=\"\(id)\">\(CheckoutHTML.text(DisplayText.escaped(value)))</dd></div>\n"
            }
            main += "</dl>\n"
            let json = String(decoding: receipt.canonicalJSON, as: UTF8.self)
            main += """
                <pre id="receipt-json">\(CheckoutHTML.text(json))</pre>
                <p><a id="download" href="\(CheckoutHTML.attribute(paid.download))" download>Download the receipt \
                (receipt.json)</a></p>
                <p id="verify">Anyone can check this receipt without an account: save its text as receipt.json and run \
                <code>gotchu receipt verify receipt.json --server \(CheckoutHTML.text(paid.server))</code>, or check its \
                Ed25519 signature against <a href="\(root)../.well-known/gotchu-receipt-keys">the ledger's receipt \
                keys</a>.</p>
                </details>

                """
        }
        if paid.sharesLeft {
            main += "<p><a id=\"another\" href=\"\(root)\(paid.eid)\">Pay another share</a></p>\n"
        }
        return CheckoutHTML.Page(title: heading, main: main, root: root, account: account, script: true)
    }

    /// `m:ss`, never negative.
    static func countdown(seconds: Int) -> String {
        let whole = max(0, seconds)
        let remainder = whole % 60
        return "\(whole / 60):" + (remainder < 10 ? "0" : "") + "\(remainder)"
    }
}
