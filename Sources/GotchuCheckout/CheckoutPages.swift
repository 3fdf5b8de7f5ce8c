import Foundation
import GotchuAPI
package import GotchuCore
package import GotchuLedger
import GotchuLedgerAPI
package import GotchuReceipts

/// The web checkout's pages, as ``CheckoutHTML/Page``s: the session a payer is about to pay, the sign-in form, the
/// receipt, and one page per outcome. The markup is in this module's templates (`Templates/`), which escape every
/// value; what is built here is the text each shows, made safe for a person to read first (``DisplayText``). The
/// ids and labels are stable, for the tests that drive these pages as a person would.
package enum CheckoutPages {
    /// The payee as a page shows it: its name quoted and made safe for a person to read, whether the ledger's operator
    /// verified it, and its address's domain.
    package struct Payee: Sendable {
        /// `"Corner Shop"`, quoted and escaped (``DisplayText``).
        let quoted: String
        /// The domain of the payee's address, escaped; `nil` when it has none.
        let domain: String?
        let verified: Bool
        /// The class of its verification line: `verified` or `unverified`.
        let verificationClass: String

        /// The payee a resolve found, cleaned as every answer to a payer is (names stored before they were checked).
        package init(_ counterparty: Counterparty) {
            let display = EmailAddress.cleaned(
                PayeeDisplay(name: counterparty.name, domain: counterparty.domain, verified: counterparty.verified)
            )
            quoted = DisplayText.quoted(display.name)
            domain = display.domain.map { DisplayText.escaped($0, maximumLength: 253) }
            verified = display.verified ?? false
            verificationClass = verified ? "verified" : "unverified"
        }
    }

    /// What the session page shows of the session.
    package struct Session: Sendable {
        package var eid: String
        package var sid: String
        package var payee: Payee
        /// What this payer pays (its share of a split), before a tip.
        package var amount: String
        package var amountCents: Cents
        /// The whole amount of a split; `nil` when not split.
        package var total: String?
        package var shares: Int
        package var sharesPaid: Int
        /// Whole seconds left before it expires.
        package var secondsLeft: Int
        /// The tips the session's terminal suggests: percent and the total paid with it; none when it asks for none.
        package var tips: [Tip]
        /// The payee's order reference; `nil` when it gave none.
        package var reference: String?
        /// The payments this payer made of this split already, oldest first: what each paid (its tip included)
        /// and where its receipt is. The pay form then asks for one more share, not for a first.
        package var paidBefore: [PaidBefore] = []

        /// A tip the pay form offers: its percent, and the total paid with it.
        package struct Tip: Sendable {
            let percent: Int
            let total: String
            package init(percent: Int, total: String) {
                self.percent = percent
                self.total = total
            }
        }

        /// A share this payer paid before: what it paid, its tip included, and where its receipt is.
        package struct PaidBefore: Sendable {
            let total: String
            let receipt: String
            package init(total: String, receipt: String) {
                self.total = total
                self.receipt = receipt
            }
        }

        package init(
            eid: String,
            sid: String,
            payee: Payee,
            amount: String,
            amountCents: Cents,
            total: String?,
            shares: Int,
            sharesPaid: Int,
            secondsLeft: Int,
            tips: [Tip],
            reference: String?
        ) {
            self.eid = eid
            self.sid = sid
            self.payee = payee
            self.amount = amount
            self.amountCents = amountCents
            self.total = total
            self.shares = shares
            self.sharesPaid = sharesPaid
            self.secondsLeft = secondsLeft
            self.tips = tips
            self.reference = reference
        }

        /// The percents of ``tips`` as the pay form carries them (`10,15,20`), bound to its tag; empty for none.
        package var tipList: String { tips.map { String($0.percent) }.joined(separator: ",") }
    }

    /// The session's figures as the templates read them (`summary`, `session`).
    private struct SessionView {
        let eid: String
        let sid: String
        let payee: Payee
        let amount: String
        let amountCents: String
        let total: String?
        let shares: Int
        let sharesPaid: Int
        let secondsLeft: Int
        let countdown: String
        let code: String
        let reference: String?
        let tips: [Session.Tip]
        /// ``Session/tipList``; `nil` when the session suggests no tips.
        let tipList: String?
        /// Whether this payer paid a share before, and each such payment with what separates it from the one before.
        let another: Bool
        let paidBefore: [Earlier]

        struct Earlier {
            let separator: String
            let total: String
            let receipt: String
        }

        init(_ session: Session) {
            eid = session.eid
            sid = session.sid
            payee = session.payee
            amount = session.amount
            amountCents = String(session.amountCents)
            total = session.total
            shares = session.shares
            sharesPaid = session.sharesPaid
            secondsLeft = session.secondsLeft
            countdown = CheckoutPages.countdown(seconds: session.secondsLeft)
            code = ConfirmationCode.of(sessionID: session.sid)
            reference = CheckoutPages.quotedReference(session.reference)
            tips = session.tips
            tipList = session.tips.isEmpty ? nil : session.tipList
            another = !session.paidBefore.isEmpty
            paidBefore = session.paidBefore.enumerated().map { index, payment in
                Earlier(separator: index == 0 ? "" : " and ", total: payment.total, receipt: payment.receipt)
            }
        }
    }

    /// The header's account line and sign-out button: who is signed in, and the form that signs them out.
    package struct Account: Sendable {
        let name: String
        let tag: String
        let action: String

        /// The account line for `name`, whose sign-out form posts to `action` carrying `tag`.
        package init(name: String, tag: String, action: String) {
            self.name = DisplayText.escaped(name, maximumLength: 100)
            self.tag = tag
            self.action = action
        }
    }

    /// The session page of a signed-in payer: the figures and the pay form, which carries this page view's id, the
    /// session, the amount shown, the tips offered (when the session suggests any) and the tag that binds them to the
    /// browser session.
    /// A payer that paid a share before is shown those payments and asked to confirm one more (`another`, under
    /// the tag too); `notice` says why the page is shown again (the amount changed meanwhile).
    package static func session(
        _ session: Session,
        view: String,
        tag: String,
        root: String,
        account: Account,
        notice: String? = nil
    ) -> CheckoutHTML.Page {
        struct Content {
            let heading = "Pay"
            let session: SessionView
            let view: String
            let tag: String
            let notice: String?
        }
        return CheckoutHTML.Page(
            template: "session",
            title: "Pay " + session.payee.quoted,
            root: root,
            account: account,
            script: true,
            content: Content(session: SessionView(session), view: view, tag: tag, notice: notice)
        )
    }

    /// The order reference as a payer reads it, quoted so it cannot pose as the page's own words; `nil` for none.
    static func quotedReference(_ reference: String?) -> String? { reference.map { DisplayText.quoted($0) } }

    /// The sign-in page, whose form posts to `/p/{eid}/sign-in`: with `session` (the ledger lets anyone resolve) the
    /// session's figures above the form, without it nothing about the session at all; `problem` says why the last
    /// try failed. With `issuer` (the name of an external identity provider the server signs browsers in through), a
    /// link to `/p/{eid}/sign-in/oidc` beside it.
    package static func signIn(
        eid: String,
        root: String,
        session: Session? = nil,
        email: String = "",
        problem: String? = nil,
        issuer: String? = nil
    ) -> CheckoutHTML.Page {
        struct Content {
            let heading = "Pay"
            let eid: String
            let session: SessionView?
            let email: String
            let problem: String?
            let issuer: String?
        }
        return CheckoutHTML.Page(
            template: "sign-in",
            title: session.map { "Pay " + $0.payee.quoted } ?? "Sign in to pay",
            root: root,
            script: session != nil,
            content: Content(
                eid: eid,
                session: session.map(SessionView.init),
                email: email,
                problem: problem,
                issuer: issuer.map { DisplayText.escaped($0, maximumLength: 253) }
            )
        )
    }

    /// A page that tells how something ended: a heading, what it means for the payer, and where to go on.
    package static func outcome(
        _ title: String,
        _ message: String,
        root: String,
        eid: String?,
        link: String = "Back to the payment",
        account: Account? = nil
    ) -> CheckoutHTML.Page {
        struct Content {
            let title: String
            let message: String
            let eid: String?
            let link: String
        }
        return CheckoutHTML.Page(
            template: "outcome",
            title: title,
            root: root,
            account: account,
            content: Content(title: title, message: message, eid: eid, link: link)
        )
    }

    /// What the receipt page shows.
    package struct Paid: Sendable {
        package var eid: String
        /// Where the signed receipt is downloaded from, relative to the page.
        package var download: String
        package var receipt: Receipt?
        package var amount: String
        package var tip: String?
        package var total: String
        package var payee: Payee?
        package var balance: String?
        /// What was refunded of it so far (its tip included); `nil` when nothing was.
        package var refunded: String?
        /// Whether all of it was refunded.
        package var refundedWhole = false
        /// Whether shares of the split are still to pay.
        package var sharesLeft: Bool
        /// The `--server` a verifier passes: the public URL, else this server's address as the browser reached it.
        package var server: String
        /// The payee's order reference; `nil` when it gave none.
        package var reference: String?

        package init(
            eid: String,
            download: String,
            receipt: Receipt?,
            amount: String,
            tip: String?,
            total: String,
            payee: Payee?,
            balance: String?,
            refunded: String?,
            refundedWhole: Bool = false,
            sharesLeft: Bool,
            server: String,
            reference: String?
        ) {
            self.eid = eid
            self.download = download
            self.receipt = receipt
            self.amount = amount
            self.tip = tip
            self.total = total
            self.payee = payee
            self.balance = balance
            self.refunded = refunded
            self.refundedWhole = refundedWhole
            self.sharesLeft = sharesLeft
            self.server = server
            self.reference = reference
        }
    }

    /// The receipt page: what was paid, to whom, the signed receipt's fields and text, and how anyone checks it.
    package static func paid(_ paid: Paid, root: String, account: Account) -> CheckoutHTML.Page {
        struct Field {
            let id: String
            let term: String
            let value: String
        }
        struct ReceiptView {
            /// When it was issued, in ISO 8601 for `<time datetime>`, and as the page says it in UTC; the page's
            /// script rewrites it in the payer's own time zone.
            let issued: String
            let issuedUTC: String
            let fields: [Field]
            let json: String
            let download: String
            let server: String
        }
        struct PaidView {
            let heading: String
            let eid: String
            let total: String
            let refunded: String?
            let amount: String
            let tip: String?
            let reference: String?
            let payee: Payee?
            let balance: String?
            let receipt: ReceiptView?
            let sharesLeft: Bool
        }
        let heading = paid.refundedWhole ? "Refunded" : "Paid"
        let receipt = paid.receipt.map { receipt in
            let issued = Date(timeIntervalSince1970: Double(receipt.issuedAtMilliseconds) / 1000)
            var fields: [(id: String, term: String, value: String)] = [
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
            return ReceiptView(
                issued: issued.formatted(.iso8601),
                issuedUTC: issued.formatted(.iso8601.dateSeparator(.dash).timeSeparator(.colon)) + " UTC",
                fields: fields.map { Field(id: $0.id, term: $0.term, value: DisplayText.escaped($0.value)) },
                json: String(decoding: receipt.canonicalJSON, as: UTF8.self),
                download: paid.download,
                server: paid.server
            )
        }
        let refunded = paid.refunded.map { refunded in
            paid.refundedWhole
                ? "You paid \(paid.total); all of it was refunded to your wallet."
                : "\(refunded) of it was refunded to your wallet."
        }
        let view = PaidView(
            heading: heading,
            eid: paid.eid,
            total: paid.total,
            refunded: refunded,
            amount: paid.amount,
            tip: paid.tip,
            reference: quotedReference(paid.reference),
            payee: paid.payee,
            balance: paid.balance,
            receipt: receipt,
            sharesLeft: paid.sharesLeft
        )
        struct Content { let paid: PaidView }
        return CheckoutHTML.Page(
            template: "paid",
            title: heading,
            root: root,
            account: account,
            script: true,
            content: Content(paid: view)
        )
    }

    /// `m:ss`, never negative.
    static func countdown(seconds: Int) -> String {
        let whole = max(0, seconds)
        let remainder = whole % 60
        return "\(whole / 60):" + (remainder < 10 ? "0" : "") + "\(remainder)"
    }
}
