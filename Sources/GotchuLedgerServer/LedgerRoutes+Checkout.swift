import Foundation
import GotchuAPI
import GotchuCheckout
import GotchuCore
import GotchuLedgerAPI
import GotchuReceipts
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The web checkout's state in one server process: its settings, its cookie and its per-address limit.
struct Checkout: Sendable {
    let settings: CheckoutSettings
    let cookie: BrowserSessionCookie
    /// Every `/p/` request but the assets, per client address, at resolve's rate: a page resolves an EID.
    let pagesPerAddress: RateLimiter?

    init(_ settings: CheckoutSettings, limits: LedgerLimits) {
        self.settings = settings
        self.cookie = BrowserSessionCookie(secure: settings.secureCookies ?? false)
        self.pagesPerAddress = limits.resolvePerAddress.map {
            RateLimiter(limit: $0, capacity: limits.trackedClients, clock: limits.clock)
        }
    }
}

/// Who a request to the checkout comes from: the user its browser session signs in, if any, and that session's
/// secret (the key of the forms' tags).
struct CheckoutVisitor: Sendable {
    var user: LedgerUser?
    var token: String?
    /// The request sent a cookie that signs nobody in any more: the answer clears it.
    var staleCookie: Bool
}

extension LedgerRoutes {
    /// The web checkout: `GET /p/{eid}` and what its pages post to, read and load. Every answer is an HTML page (or a
    /// redirect, the event stream or an asset) with the checkout's security headers, never problem+json.
    var checkoutRoutes: [LedgerRoute] {
        [
            LedgerRoute(.get, "/p/{eid}", "checkoutPage") { request, context in
                await checkoutAnswer(request, context, root: "") { eid in try await page(eid, request, context) }
            },
            LedgerRoute(.post, "/p/{eid}/sign-in", "checkoutSignIn") { request, context in
                await checkoutAnswer(request, context, root: "../") { eid in try await signIn(eid, request, context) }
            },
            LedgerRoute(.post, "/p/{eid}/sign-out", "checkoutSignOut") { request, context in
                await checkoutAnswer(request, context, root: "../") { eid in try await signOut(eid, request, context) }
            },
            LedgerRoute(.post, "/p/{eid}/pay", "checkoutPay") { request, context in
                await checkoutAnswer(request, context, root: "../") { eid in try await pay(eid, request, context) }
            },
            LedgerRoute(.get, "/p/{eid}/receipt", "checkoutReceipt") { request, context in
                await checkoutAnswer(request, context, root: "../") { eid in try await receipt(eid, request, context) }
            },
            LedgerRoute(.get, "/p/{eid}/receipt.json", "checkoutReceiptJSON") { request, context in
                await checkoutAnswer(request, context, root: "../") { eid in
                    try await receipt(eid, request, context, download: true)
                }
            },
            LedgerRoute(.get, "/p/{eid}/events", "checkoutEvents") { request, context in
                await checkoutAnswer(request, context, root: "../") { eid in try await events(eid, request, context) }
            },
            LedgerRoute(.get, "/p/assets/{name}", "checkoutAsset") { _, context in
                let name = context.parameters.get("name") ?? ""
                guard let asset = CheckoutAssets.all[name] else {
                    let page = CheckoutPages.outcome("Not found", "There is nothing here.", root: "../", eid: nil)
                    return CheckoutHTML.response(page, status: .notFound)
                }
                var headers = HTTPFields()
                headers[.contentType] = asset.mediaType
                for (name, value) in CheckoutHTML.securityHeaders { headers[name] = value }
                // The assets hold nothing of a session or an EID: a phone keeps them for an hour instead of loading
                // them again with every page.
                headers[.cacheControl] = CheckoutAssets.cacheControl
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: asset.text)))
            },
        ]
    }

    // MARK: The routes

    /// `GET /p/{eid}`: the session and its pay form for a signed-in payer; the sign-in form otherwise, below the
    /// session's figures only when anyone may resolve.
    private func page(_ eid: CheckoutCode, _ request: Request, _ context: LedgerRequestContext) async throws -> Response
    {
        let visitor = try await visitor(request)
        guard let user = visitor.user, let token = visitor.token else {
            guard limiters.resolveAccess == .public else {
                return answer(
                    CheckoutPages.signIn(eid: eid.rawValue, root: "", issuer: oidcSignInName(for: request)),
                    .ok,
                    visitor
                )
            }
            let session = try await checkoutSession(eid)
            return answer(
                CheckoutPages.signIn(
                    eid: eid.rawValue,
                    root: "",
                    session: session,
                    issuer: oidcSignInName(for: request)
                ),
                .ok,
                visitor
            )
        }
        do {
            return try await payPage(eid, user: user, token: token, visitor: visitor, root: "")
        } catch let refusal as LedgerError where refusal.kind == .sessionAlreadyPaid {
            // A reload after paying: the payer's own payment, not a stranger's.
            if let own = try await ownPayment(eid, user: user.id) {
                return CheckoutHTML.redirect(to: "\(eid.rawValue)/" + own)
            }
            throw refusal
        }
    }

    /// The pay page of the live session `eid` names for a signed-in payer, as a new page view: with the payments it
    /// made of a split already (then its form asks for one more share), and `notice` above the form.
    private func payPage(
        _ eid: CheckoutCode,
        user: LedgerUser,
        token: String,
        visitor: CheckoutVisitor,
        root: String,
        notice: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        var session = try await checkoutSession(eid)
        if session.shares > 1 {
            session.paidBefore = try await ownPayments(sid: session.sid, user: user.id).map { payment in
                CheckoutPages.Session.PaidBefore(
                    total: format(payment.amount + payment.tip),
                    receipt: "receipt?" + receiptQuery(sid: session.sid, paymentID: payment.id)
                )
            }
        }
        let view = BrowserSessions.viewID()
        let fields = Self.payFields(
            view,
            session.sid,
            String(session.amountCents),
            session.tipList,
            another: !session.paidBefore.isEmpty
        )
        let page = CheckoutPages.session(
            session,
            view: view,
            tag: BrowserSessions.tag(token: token, fields),
            root: root,
            account: account(user, token: token, eid: eid, root: root),
            notice: notice
        )
        return answer(page, status, visitor)
    }

    /// `POST /p/{eid}/sign-in`: e-mail address and password, checked as `POST /auth/login` checks them (the same
    /// store call, bcrypt and back-off); a new browser session replaces any the browser had, and the browser goes
    /// back to the page.
    private func signIn(
        _ eid: CheckoutCode,
        _ request: Request,
        _ context: LedgerRequestContext
    ) async throws -> Response {
        try requireSameOrigin(request)
        let form = try await checkoutForm(request, context)
        let email = form["email"] ?? ""
        let password = form["password"] ?? ""
        func retry(_ problem: String, _ status: HTTPResponse.Status, headers: HTTPFields = [:]) -> Response {
            let page = CheckoutPages.signIn(
                eid: eid.rawValue,
                root: "../",
                email: email,
                problem: problem,
                issuer: oidcSignInName(for: request)
            )
            return CheckoutHTML.response(page, status: status, headers: headers)
        }
        guard !email.isEmpty, !password.isEmpty else {
            return retry("Enter your e-mail address and your password.", .badRequest)
        }
        let user: LedgerUser
        do {
            user = try await passwordLogin(email: email, password: password, address: clientAddress(request, context))
        } catch let exceeded as RateLimiter.Exceeded {
            return retry(
                "Too many tries. Wait \(exceeded.retryAfter) seconds, then try again.",
                .tooManyRequests,
                headers: [.retryAfter: String(exceeded.retryAfter)]
            )
        } catch let refusal as LedgerError where refusal.kind == .unknownUser {
            return retry("Wrong e-mail address or password.", .unauthorized)
        } catch let refusal as LedgerError where refusal.kind == .forbidden {
            return retry("This account is disabled; ask the ledger's operator.", .forbidden)
        } catch let refusal as LedgerError where refusal.kind == .emailUnconfirmed {
            return retry("Confirm your e-mail address first, with the code mailed to it.", .forbidden)
        }
        // Renewed at sign-in: whatever session the browser held ends, and it gets a new secret.
        if let old = checkout.cookie.token(in: request) { try await store.endBrowserSession(token: old) }
        return try await startBrowserSession(userID: user.id, location: "../\(eid.rawValue)")
    }

    /// Starts a browser session for `userID` and answers with its cookie and a `303` to `location` (relative to the
    /// request's address): how every sign-in on the checkout ends, whatever proved who the user is.
    func startBrowserSession(userID: String, location: String) async throws -> Response {
        let lifetime = checkout.settings.browserSessionLifetime
        let session = try await store.startBrowserSession(userID: userID, lifetime: lifetime)
        var headers = HTTPFields()
        headers[.setCookie] = checkout.cookie.setting(session.token, lifetime: lifetime)
        return CheckoutHTML.redirect(to: location, headers: headers)
    }

    /// `POST /p/{eid}/sign-out`: ends the browser session (its form's tag must match) and clears the cookie.
    private func signOut(
        _ eid: CheckoutCode,
        _ request: Request,
        _ context: LedgerRequestContext
    ) async throws -> Response {
        try requireSameOrigin(request)
        let form = try await checkoutForm(request, context)
        var headers = HTTPFields()
        headers[.setCookie] = checkout.cookie.clearing
        guard let token = checkout.cookie.token(in: request) else {
            return CheckoutHTML.redirect(to: "../\(eid.rawValue)", headers: headers)
        }
        guard let tag = form["csrf"], BrowserSessions.isTag(tag, token: token, ["sign-out"]) else {
            throw CheckoutRefusal.forgedForm
        }
        try await store.endBrowserSession(token: token)
        return CheckoutHTML.redirect(to: "../\(eid.rawValue)", headers: headers)
    }

    /// `POST /p/{eid}/pay`: pays what the page view showed, once however often it is posted, then sends the browser
    /// to the receipt (`303`), or answers with the page that says why not.
    private func pay(_ eid: CheckoutCode, _ request: Request, _ context: LedgerRequestContext) async throws -> Response
    {
        try requireSameOrigin(request)
        let visitor = try await visitor(request)
        let form = try await checkoutForm(request, context)
        guard let user = visitor.user, let token = visitor.token else {
            let page = CheckoutPages.signIn(
                eid: eid.rawValue,
                root: "../",
                problem: "Your sign-in has ended. Sign in again, then pay.",
                issuer: oidcSignInName(for: request)
            )
            return answer(page, .unauthorized, visitor)
        }
        let another = form["another"] == "1"
        guard let view = form["view"], view.utf8.count == 22, Self.isBase64URL(view),
            let sidText = form["sid"], let sid = try? SessionID.validate(sidText),
            let amountText = form["amount"], (1...19).contains(amountText.utf8.count),
            amountText.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let amount = Cents(amountText), amount > 0,
            let tag = form["csrf"],
            BrowserSessions.isTag(
                tag,
                token: token,
                Self.payFields(view, sid, amountText, form["tips"] ?? "", another: another)
            )
        else { throw CheckoutRefusal.forgedForm }
        // The tips the page offered, as its tag vouches for them: the session's suggestion when it was shown.
        let offered = (try? TipPrompt.parse(form["tips"] ?? "")) ?? .none
        let tipText = form["tip"] ?? "0"
        guard let percent = Int(tipText), percent == 0 || offered.percents.contains(percent) else {
            throw CheckoutRefusal.unknownTip
        }
        try limiters.lockPerUser?.take(user.id)
        try limiters.sendPerUser?.take(user.id)
        // One engine call: the share shown taken and paid in one transaction, or nothing. The key is the page
        // view's, so its taps (a double tap, a reload that posts again) pay once and all see that payment.
        let payment = ShownPayment(
            sid: sid,
            payerID: user.id,
            idempotencyKey: "checkout:" + view,
            amountCents: amount,
            tipCents: Tip.percent(hundredths: Int64(percent) * 100).cents(on: amount),
            another: another
        )
        let signedIn = account(user, token: token, eid: eid, root: "../")
        let notice: String
        switch try await store.pay(shown: payment) {
        case .paid(_, let paymentID, _):
            metrics?.payment(outcome: "paid")
            return CheckoutHTML.redirect(to: "receipt?" + receiptQuery(sid: sid, paymentID: paymentID))
        case .refused(let refusal):
            metrics?.payment(outcome: refusal.kind.rawValue)
            // Paid by this payer after all, from another view of the page: its receipt, not "already paid".
            if refusal.kind == .sessionAlreadyPaid, let own = try await ownPayment(eid, user: user.id) {
                return CheckoutHTML.redirect(to: own)
            }
            return problemPage(refusal, eid: eid.rawValue, root: "../", account: signedIn, logger: context.logger)
        case .amountChanged(let cents):
            metrics?.payment(outcome: "amount-changed")
            notice =
                "Someone else took the share this page showed. The share left costs " + format(cents)
                + ". Nothing was paid; pay again if that is right."
        case .paidBefore:
            metrics?.payment(outcome: "paid-before")
            notice = "You paid a share of this charge already. Nothing more was paid."
        }
        // The page again, with what the payer would pay now: nothing was paid or held meanwhile.
        return try await payPage(
            eid,
            user: user,
            token: token,
            visitor: visitor,
            root: "../",
            notice: notice,
            status: .conflict
        )
    }

    /// `GET /p/{eid}/receipt?sid=…[&payment=…]`: the signed-in payer's payment of that session, with its receipt;
    /// with `download` (`GET /p/{eid}/receipt.json`), the signed receipt alone, as the ledger wrote it, to save.
    private func receipt(
        _ eid: CheckoutCode,
        _ request: Request,
        _ context: LedgerRequestContext,
        download: Bool = false
    ) async throws -> Response {
        let visitor = try await visitor(request)
        guard let user = visitor.user, let token = visitor.token else {
            let page = CheckoutPages.signIn(
                eid: eid.rawValue,
                root: "../",
                problem: "Sign in to see your receipt.",
                issuer: oidcSignInName(for: request)
            )
            return answer(page, .unauthorized, visitor)
        }
        let query = request.uri.queryParameters
        guard let sidText = query.get("sid"), let sid = try? SessionID.validate(sidText) else {
            throw CheckoutRefusal.noSuchPayment
        }
        var paymentID: String?
        if let text = query.get("payment") {
            guard let id = try? SessionID.validate(text) else { throw CheckoutRefusal.noSuchPayment }
            paymentID = id
        }
        let view: SessionView
        do {
            view = try await store.session(sid: sid, viewerID: user.id)
        } catch let refusal as LedgerError where refusal.kind == .sessionNotFound {
            throw CheckoutRefusal.noSuchPayment
        }
        let ownReference = { (receipt: Receipt) in
            receipt.payerReference == Receipt.payerReference(receiptID: receipt.id, payerID: user.id)
        }
        var (receipt, amount, tip, refunded) = (view.receipt, view.amount, view.tip, view.refunded)
        if let paymentID {
            guard let payment = view.payments.first(where: { $0.id == paymentID }) else {
                throw CheckoutRefusal.noSuchPayment
            }
            (receipt, amount, tip, refunded) = (payment.receipt, payment.amount, payment.tip, payment.refunded)
        } else {
            guard view.shares == 1, view.status == .paid, view.receipt.map(ownReference) ?? true else {
                throw CheckoutRefusal.noSuchPayment
            }
        }
        if download {
            guard let receipt else { throw CheckoutRefusal.noSuchPayment }
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            // The id is a UUID: nothing in the file name comes from elsewhere.
            headers[.contentDisposition] = "attachment; filename=\"gotchu-receipt-\(receipt.id).json\""
            for (name, value) in CheckoutHTML.securityHeaders { headers[name] = value }
            return Response(
                status: .ok,
                headers: headers,
                body: .init(byteBuffer: ByteBuffer(bytes: Array(receipt.canonicalJSON)))
            )
        }
        // Who was paid, as the payer's own history names them (the verified name and the domain), and the balance.
        let balance = try? await store.wallet(userID: user.id, recentLimit: 0).balance
        let entries = try? await store.entries(userID: user.id, cursor: nil, limit: 20).entries
        let payee = entries?.first { $0.sessionID == sid && $0.direction == .debit }?.counterparty
        // The address a verifier reaches this ledger at: the public URL where one is set (the request's `Host` may
        // be a proxy's inside name), else the address the browser used.
        let server: String
        if let publicURL {
            server = String(publicURL.description.dropLast())
        } else {
            let host = DisplayText.escaped(request.head.authority ?? "THIS-LEDGER", maximumLength: 255)
            server = (checkout.cookie.secure ? "https://" : "http://") + host
        }
        let paid = CheckoutPages.Paid(
            eid: eid.rawValue,
            download: "receipt.json?" + receiptQuery(sid: sid, paymentID: paymentID),
            receipt: receipt,
            amount: format(amount),
            tip: tip > 0 ? format(tip) : nil,
            total: format(amount + tip),
            payee: payee.map(CheckoutPages.Payee.init),
            balance: balance.map(format),
            refunded: refunded > 0 ? format(refunded) : nil,
            refundedWhole: refunded > 0 && refunded >= amount + tip,
            sharesLeft: view.shares > 1 && view.status.isLive,
            server: server,
            reference: view.reference
        )
        let page = CheckoutPages.paid(paid, root: "../", account: account(user, token: token, eid: eid, root: "../"))
        return answer(page, .ok, visitor)
    }

    /// `GET /p/{eid}/events`: the page's live status (``CheckoutEventStream``), for whoever may see the page's
    /// session: a signed-in browser, or anyone when anyone may resolve.
    private func events(
        _ eid: CheckoutCode,
        _ request: Request,
        _ context: LedgerRequestContext
    ) async throws -> Response {
        let visitor = try await visitor(request)
        if limiters.resolveAccess == .requiresLogin, visitor.user == nil {
            let page = CheckoutPages.signIn(eid: eid.rawValue, root: "../")
            return answer(page, .unauthorized, visitor)
        }
        let holder = visitor.user.map { $0.id } ?? "address " + clientAddress(request, context)
        guard let slot = eventStreams.take(for: holder) else {
            throw RateLimiter.Exceeded(retryAfter: max(1, Int(limits.eventHeartbeat.components.seconds)))
        }
        let status = checkoutStatusReader(eid)
        let first = try await status()
        // Watching before the first read that counts: a change committed between the two still wakes the stream.
        let watcher = store.changes.watch(sid: first.sid)
        context.connectionClosed.whenComplete { _ in watcher.close() }
        let current = try await status()
        let stream = CheckoutEventStream<Store>(
            status: status,
            heartbeat: limits.eventHeartbeat,
            safetyPoll: limits.eventSafetyPoll
        )
        var headers = HTTPFields()
        headers[.contentType] = EventStreamMedia.type
        for (name, value) in CheckoutHTML.securityHeaders { headers[name] = value }
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody { writer in
                defer { withExtendedLifetime(slot) {} }
                defer { watcher.close() }
                try await withGracefulShutdownHandler {
                    try await stream.run(watcher: watcher, first: current, writer: &writer)
                } onGracefulShutdown: {
                    watcher.close()
                }
                try await writer.finish(nil)
            }
        )
    }

    // MARK: Shared steps

    /// Runs a checkout route for the `{eid}` of its path: the per-address limit first, then `body`, and any refusal
    /// on the way as its page (`root` leads from the route's address to `/p/`).
    private func checkoutAnswer(
        _ request: Request,
        _ context: LedgerRequestContext,
        root: String,
        _ body: (CheckoutCode) async throws -> Response
    ) async -> Response {
        let text = context.parameters.get("eid") ?? ""
        let path = CheckoutCode.names(text) ? text : nil
        do {
            try checkout.pagesPerAddress?.take(clientAddress(request, context))
            return try await body(try await checkoutCode(text))
        } catch {
            return problemPage(error, eid: path, root: root, logger: context.logger)
        }
    }

    /// What the `{eid}` of a checkout path names: a session's checkout link, followed to the EID the session
    /// advertises now, or an EID.
    private func checkoutCode(_ text: String) async throws -> CheckoutCode {
        if let link = CheckoutLink(rawValue: text) {
            guard let sid = checkoutLinks.sid(of: link) else { throw CheckoutRefusal.notAnEID }
            do {
                return CheckoutCode(eid: try await store.currentEID(sid: sid), rawValue: text, sid: sid)
            } catch let refusal as LedgerError where refusal.kind == .sessionNotFound {
                throw CheckoutRefusal.notAnEID
            }
        }
        guard let eid = EID(rawValue: text) else { throw CheckoutRefusal.notAnEID }
        return CheckoutCode(eid: eid, rawValue: text, sid: nil)
    }

    /// How a page's event stream reads its session: by the EID the page was opened with, which follows the session
    /// across rotations; a checkout link's page is told of none, since its link outlives every EID.
    private func checkoutStatusReader(_ code: CheckoutCode) -> @Sendable () async throws -> CheckoutStatus {
        { [store] in
            var status = try await store.checkoutStatus(eid: code.eid)
            if code.sid != nil { status.eidRetired = false }
            return status
        }
    }

    /// The browser session the request's cookie carries, if it still signs someone in.
    private func visitor(_ request: Request) async throws -> CheckoutVisitor {
        guard let token = checkout.cookie.token(in: request) else {
            return CheckoutVisitor(user: nil, token: nil, staleCookie: false)
        }
        guard let user = try await store.browserSessionUser(token: token) else {
            return CheckoutVisitor(user: nil, token: nil, staleCookie: true)
        }
        return CheckoutVisitor(user: user, token: token, staleCookie: false)
    }

    /// What the page shows of the live session `eid` names, for a payer about to pay one share of it: the figures of
    /// resolve (which refuses what a resolve refuses) and the time left.
    private func checkoutSession(_ eid: CheckoutCode) async throws -> CheckoutPages.Session {
        let resolved = try await store.resolve(eid: eid.eid)
        let status = try await store.checkoutStatus(eid: eid.eid)
        let split = resolved.shares > 1
        let amount = split ? resolved.shareCents : resolved.amount
        return CheckoutPages.Session(
            eid: eid.rawValue,
            sid: resolved.sid,
            payee: CheckoutPages.Payee(resolved.payee),
            amount: format(amount),
            amountCents: amount,
            total: split ? format(resolved.amount) : nil,
            shares: resolved.shares,
            sharesPaid: resolved.sharesPaid,
            secondsLeft: max(0, Int(status.expiresAt.timeIntervalSince(status.now).rounded(.up))),
            tips: resolved.tipPrompt.percents.map { percent in
                CheckoutPages.Session.Tip(
                    percent: percent,
                    total: format(amount + Tip.percent(hundredths: Int64(percent) * 100).cents(on: amount))
                )
            },
            reference: resolved.reference
        )
    }

    /// What a pay form's tag covers: the page view, the session, the amount shown and, when the session suggests
    /// tips, the tips offered (`10,15,20`), so a form posts only the tips its page showed.
    private static func payFields(
        _ view: String,
        _ sid: String,
        _ amount: String,
        _ tips: String,
        another: Bool
    ) -> [String] {
        ["pay", view, sid, amount] + (tips.isEmpty ? [] : ["tips", tips]) + (another ? ["another"] : [])
    }

    /// The payments `user` made of split session `sid`, oldest first (none when the session is not the user's to
    /// see).
    private func ownPayments(sid: String, user: String) async throws -> [SessionPayment] {
        guard let view = try? await store.session(sid: sid, viewerID: user) else { return [] }
        return view.payments.filter { payment in
            payment.receipt.map { $0.payerReference == Receipt.payerReference(receiptID: $0.id, payerID: user) }
                ?? false
        }
    }

    /// Where the receipt of the user's own payment of the paid session `eid` named is (`receipt?sid=…`), if the user
    /// paid it.
    private func ownPayment(_ eid: CheckoutCode, user: String) async throws -> String? {
        let status = try await store.checkoutStatus(eid: eid.eid)
        guard let view = try? await store.session(sid: status.sid, viewerID: user) else { return nil }
        if view.shares > 1 {
            let own = try await ownPayments(sid: status.sid, user: user).last
            return own.map { "receipt?" + receiptQuery(sid: status.sid, paymentID: $0.id) }
        }
        guard let receipt = view.receipt,
            receipt.payerReference == Receipt.payerReference(receiptID: receipt.id, payerID: user)
        else { return nil }
        return "receipt?" + receiptQuery(sid: status.sid, paymentID: nil)
    }

    private func receiptQuery(sid: String, paymentID: String?) -> String {
        "sid=\(sid)" + (paymentID.map { "&payment=\($0)" } ?? "")
    }

    /// The header's account line for a signed-in page.
    private func account(
        _ user: LedgerUser,
        token: String,
        eid: CheckoutCode,
        root: String
    ) -> CheckoutPages.Account {
        CheckoutPages.Account(
            name: user.displayName,
            tag: BrowserSessions.tag(token: token, ["sign-out"]),
            action: "\(root)\(eid.rawValue)/sign-out"
        )
    }

    /// `page` as an answer, clearing a cookie that signs nobody in any more.
    private func answer(
        _ page: CheckoutHTML.Page,
        _ status: HTTPResponse.Status,
        _ visitor: CheckoutVisitor
    ) -> Response {
        var headers = HTTPFields()
        if visitor.staleCookie { headers[.setCookie] = checkout.cookie.clearing }
        return CheckoutHTML.response(page, status: status, headers: headers)
    }

    /// `cents` in the server's locale and the ledger's currency.
    private func format(_ cents: Cents) -> String { checkout.settings.format(cents, currency: store.policy.currency) }

    /// Refuses a form that another site sent. A browser says so in `Sec-Fetch-Site`; one that does not send it
    /// (older Safari, embedded web views) still sends `Origin` with a form's POST, or at least a `Referer`, which must
    /// then be this server's own origin: the request's (its scheme and `Host`) or the public URL's. A request with
    /// none of the three comes from no browser page, so no other site can have made a browser send it.
    private func requireSameOrigin(_ request: Request) throws {
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!] {
            guard site == "same-origin" || site == "none" else { throw CheckoutRefusal.forgedForm }
            return
        }
        let claimed = request.headers[.origin] ?? request.headers[.referer].map { Self.origin(of: $0) ?? "null" }
        guard let claimed else { return }
        let scheme = checkout.cookie.secure ? "https://" : "http://"
        let own = [
            request.head.authority.flatMap { Self.origin(of: scheme + $0) },
            publicURL.flatMap { Self.origin(of: $0.description) },
        ]
        guard let origin = Self.origin(of: claimed), own.contains(origin) else { throw CheckoutRefusal.forgedForm }
    }

    /// The origin of an absolute URL, as browsers write it in `Origin`: the scheme and host in lower case, and the
    /// port unless it is the scheme's default (`https://pay.example.com`); `nil` for anything else (`null`).
    static func origin(of text: String) -> String? {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.percentEncodedHost, !host.isEmpty
        else { return nil }
        var origin = scheme + "://" + host.lowercased()
        if let port = components.port, port != (scheme == "https" ? 443 : 80) { origin += ":\(port)" }
        return origin
    }

    /// Whether `text` is unpadded base64url.
    private static func isBase64URL(_ text: String) -> Bool {
        text.utf8.allSatisfy { byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: "_")
        }
    }

    /// A form body (`application/x-www-form-urlencoded`) within the body limit, as each name's first value.
    private func checkoutForm(_ request: Request, _ context: LedgerRequestContext) async throws -> [String: String] {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: context.maxUploadSize)
        } catch is NIOTooManyBytesError {
            throw CheckoutRefusal.formTooLarge
        }
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            }
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : "") else { continue }
            if fields[name] == nil { fields[name] = value }
        }
        return fields
    }

    // MARK: Pages for refusals

    /// The page that says why a checkout request ended as it did: the answer the API would give, as the checkout's
    /// page (``CheckoutProblemPage``).
    func problemPage(
        _ error: any Error,
        eid: String?,
        root: String,
        account: CheckoutPages.Account? = nil,
        logger: Logger
    ) -> Response {
        CheckoutProblemPage(
            answer: HTTPProblem(answering: error, logger: logger, outage: outage),
            lockLifetime: store.policy.lockLifetime
        ).response(root: root, eid: eid, account: account)
    }
}

/// What a checkout path names: the EID its store reads go by, and the path's own text (a checkout link or that EID),
/// which every link and form of its pages keeps.
struct CheckoutCode: Sendable {
    /// The EID the session advertises (a link's: at the time of the request).
    var eid: EID
    /// The path's text, the link or the EID.
    var rawValue: String
    /// The session a checkout link names; `nil` for an EID.
    var sid: String?

    /// Whether `text` has the shape of a checkout path's code, a checkout link or an EID (whether it names a session
    /// is for the store to say).
    static func names(_ text: String) -> Bool { CheckoutLink(rawValue: text) != nil || EID(rawValue: text) != nil }
}

/// Refusals of the checkout's own, before the ledger is asked.
enum CheckoutRefusal: Error, Sendable {
    /// The path's EID is not 10 lowercase hex characters.
    case notAnEID
    /// A form without a valid tag for the browser session, or sent by another site.
    case forgedForm
    /// A tip the page does not offer.
    case unknownTip
    /// A form over the body limit.
    case formTooLarge
    /// No payment of the signed-in payer's at this address.
    case noSuchPayment

    /// The kind of problem it is, which gives its status.
    var kind: ProblemKind {
        switch self {
        case .notAnEID, .noSuchPayment: .notFound
        case .forgedForm: .forbidden
        case .unknownTip: .invalidTip
        case .formTooLarge: .bodyTooLarge
        }
    }

    var title: String {
        switch self {
        case .notAnEID: "Unknown QR code"
        case .forgedForm: "This form has expired"
        case .unknownTip: "Unknown tip"
        case .formTooLarge: "Too much data"
        case .noSuchPayment: "No such payment"
        }
    }

    var message: String {
        switch self {
        case .notAnEID: "This address names no charge. Scan the terminal's QR code again."
        case .forgedForm:
            "This form did not come from this page, or your sign-in changed since it was shown. Nothing was done. "
                + "Open the payment again and retry."
        case .unknownTip: "This page offers no such tip. Nothing was paid. Open the payment again and retry."
        case .formTooLarge: "The form sent more than a payment needs. Nothing was done."
        case .noSuchPayment: "You have no payment here. Open your wallet to see what you paid."
        }
    }
}
