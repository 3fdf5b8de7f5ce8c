package import Foundation
package import GotchuAPI
import GotchuCore
package import GotchuLedger

// The ledger's answers as the API spells them: each domain value mapped, field by field, to its response body, once
// for the API's routes, the checkout's pages and the webhooks' events.

extension CreateSessionResponse {
    /// `POST /sessions/create`: the session made (or the one its idempotency key made first).
    package init(_ session: NewSession) {
        self.init(
            sid: session.sid,
            eid: session.eid,
            expiresAt: session.expiresAt,
            shareCents: session.shareCents,
            tipPercents: session.tipPrompt.percentsIfAny,
            reference: session.reference
        )
        // Names stored before they were checked reach terminals only cleaned, as they reach payers.
        self.payeeDisplay = session.payee.map { EmailAddress.cleaned(PayeeDisplay($0)) }
    }
}

extension TipPrompt {
    /// The percents as the answers carry them: absent when the session asks for no tip.
    var percentsIfAny: [Int]? { isEmpty ? nil : percents }
}

extension EIDRotationResponse {
    /// `POST /sessions/{sid}/eids`: the session's new EID, and until when the ones it replaced resolve.
    package init(_ rotation: EIDRotation) {
        self.init(
            sid: rotation.sid,
            eid: rotation.eid,
            previousValidUntil: rotation.retiredResolveUntil,
            expiresAt: rotation.expiresAt
        )
    }
}

extension PayeeDisplay {
    /// A counterparty as a payer or a wallet's history is shown it.
    package init(_ counterparty: Counterparty) {
        self.init(name: counterparty.name, domain: counterparty.domain, verified: counterparty.verified)
    }
}

extension ResolveResponse {
    /// `POST /sessions/resolve`: what the payer confirms.
    package init(_ session: ResolvedSession) {
        self.init(
            sid: session.sid,
            amountCents: session.amount,
            payeeDisplay: PayeeDisplay(session.payee),
            shares: session.shares,
            sharesPaid: session.sharesPaid,
            shareCents: session.shareCents,
            remainingCents: session.remaining,
            tipPercents: session.tipPrompt.percentsIfAny,
            reference: session.reference
        )
    }
}

extension SessionStatusResponse {
    /// `GET /sessions/{sid}`, and the data of each of its events.
    package init(_ session: SessionView) {
        self.init(
            sid: session.sid,
            status: session.status,
            amountCents: session.amount,
            expiresAt: session.expiresAt,
            paidAt: session.paidAt,
            receipt: session.receipt,
            refundedCents: session.refunded,
            shares: session.shares,
            sharesPaid: session.sharesPaid,
            paidCents: session.paid,
            tipCents: session.tip,
            payments: session.payments.map(SharePayment.init),
            tipPercents: session.tipPrompt.percentsIfAny,
            reference: session.reference
        )
    }
}

extension SharePayment {
    /// One payment of a split, in `GET /sessions/{sid}`.
    package init(_ payment: SessionPayment) {
        self.init(
            paymentID: payment.id,
            shareNumbers: payment.shareNumbers,
            amountCents: payment.amount,
            tipCents: payment.tip,
            paidAt: payment.paidAt,
            refundedCents: payment.refunded,
            receipt: payment.receipt
        )
    }
}

extension LockResponse {
    /// `POST /sessions/lock`: what the payer will pay for the shares it holds.
    package init(_ lock: LockedShares) {
        self.init(amountCents: lock.amount, shareNumbers: lock.shareNumbers)
    }
}

extension WalletResponse {
    /// `GET /wallet/me`.
    package init(_ wallet: Wallet) {
        self.init(walletID: wallet.id, availableCents: wallet.balance, recent: wallet.recent.map(LedgerEntry.init))
    }
}

extension LedgerEntry {
    /// One of the latest entries of `GET /wallet/me`.
    package init(_ entry: WalletEntry) {
        self.init(
            id: entry.id,
            direction: entry.direction,
            amountCents: entry.amount,
            type: entry.type,
            refType: entry.refType,
            refID: entry.refID,
            createdAt: entry.createdAt
        )
    }
}

extension WalletEntriesResponse {
    /// `GET /wallet/entries`.
    package init(_ page: WalletEntriesPage) {
        self.init(entries: page.entries.map(WalletHistoryEntry.init), nextCursor: page.nextCursor)
    }
}

extension WalletHistoryEntry {
    /// One entry of `GET /wallet/entries`.
    package init(_ entry: WalletEntry) {
        self.init(
            id: entry.id,
            createdAt: entry.createdAt,
            direction: entry.direction,
            amountCents: entry.amount,
            counterparty: entry.counterparty.map(PayeeDisplay.init),
            sessionID: entry.sessionID,
            kind: entry.type,
            reference: entry.reference
        )
    }
}

extension RefundResponse {
    /// `POST /sessions/{sid}/refunds`, replays included.
    package init(_ refund: Refund) {
        self.init(
            refundID: refund.id,
            sid: refund.sid,
            amountCents: refund.amount,
            refundedCents: refund.refundedTotal,
            receipt: refund.receipt,
            reference: refund.reference
        )
    }
}

extension PayoutResponse {
    /// `POST /wallet/payouts`, replays included.
    package init(_ payout: Payout) {
        self.init(
            payoutID: payout.id,
            amountCents: payout.amount,
            status: payout.status.rawValue,
            newBalanceCents: payout.balanceAfter
        )
    }
}

extension PayoutResponse {
    /// A payout as it ended, in the data of `payout.settled` and `payout.failed`.
    package init(_ payout: PayoutRow) {
        self.init(
            payoutID: payout.id,
            amountCents: payout.amount,
            status: payout.status.rawValue,
            newBalanceCents: payout.balanceAfter
        )
        self.reference = payout.reference
        self.failureReason = payout.reason
        self.resolvedAt = payout.resolvedAt.map(Date.init(storeMilliseconds:))
    }
}

extension Date {
    /// A time in milliseconds since 1970, as the store keeps them.
    package init(storeMilliseconds milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

extension Problem {
    /// The problem a ledger refusal is answered with: each refusal kind is named as the problem type it is answered
    /// with (LedgerErrorProblemTests holds every kind to one), so the name is the mapping; its detail is passed on.
    package init(_ refusal: LedgerError) {
        self.init(ProblemKind(rawValue: refusal.kind.rawValue) ?? .internalError, detail: refusal.detail)
    }
}
