import Foundation
import GotchuCore
public import GotchuReceipts

/// Everything `gotchu ledger verify` reads, from one snapshot of the database.
package struct LedgerSnapshot: Sendable {
    /// Every wallet and system account.
    package var wallets: [WalletRow]
    /// Every entry, in the order they were written (`seq`).
    package var entries: [StoredEntry]
    /// The chain's head as stored.
    package var chainHead: ChainHead
    /// Every session.
    package var sessions: [SessionRow]
    /// Every receipt.
    package var receipts: [StoredReceipt]
    /// Every receipt key ever used, package halves, with when each was made.
    package var receiptKeys: [(key: ReceiptPublicKey, createdAt: Int64)]
    /// Every deposit.
    package var deposits: [DepositRow]
    /// Every payout.
    package var payouts: [PayoutRow]
    /// Every refund (the `refunds` table; ``RefundRow/receiptBody`` is not read).
    package var refunds: [RefundRow]
    /// Every share of every split session, by session and number.
    package var shares: [ShareRow]
    /// Every webhook event, oldest first, without its body.
    package var webhookEvents: [WebhookEvent]
    /// The `seq` of the first entry written with the webhook outbox in place: every money movement from it on has its
    /// event. `nil` where the ledger has no outbox.
    package var webhookOutboxStart: Int64?

    /// A snapshot as a backend read it.
    package init(
        wallets: [WalletRow],
        entries: [StoredEntry],
        chainHead: ChainHead,
        sessions: [SessionRow],
        receipts: [StoredReceipt],
        receiptKeys: [(key: ReceiptPublicKey, createdAt: Int64)],
        deposits: [DepositRow] = [],
        payouts: [PayoutRow] = [],
        refunds: [RefundRow] = [],
        shares: [ShareRow] = [],
        webhookEvents: [WebhookEvent] = [],
        webhookOutboxStart: Int64? = nil
    ) {
        self.shares = shares
        self.webhookEvents = webhookEvents
        self.webhookOutboxStart = webhookOutboxStart
        self.wallets = wallets
        self.entries = entries
        self.chainHead = chainHead
        self.sessions = sessions
        self.receipts = receipts
        self.receiptKeys = receiptKeys
        self.deposits = deposits
        self.payouts = payouts
        self.refunds = refunds
    }
}

/// A `receipts` row: the signed receipt as JSON, and the columns it is found by.
public struct StoredReceipt: Sendable, Hashable {
    /// The receipt's id, which its signed body carries too.
    public var id: String
    /// A ``ReceiptKind`` raw value: a payment's receipt or a refund's.
    public var kind: String
    /// The session the receipt is for.
    public var sessionID: String
    /// The signed receipt's JSON, as the ledger wrote it (``Receipt/canonicalJSON``).
    public var body: String

    /// A row as read from the database.
    public init(id: String, kind: String, sessionID: String, body: String) {
        self.id = id
        self.kind = kind
        self.sessionID = sessionID
        self.body = body
    }

    /// The receipt, decoded; a row that does not decode is an inconsistency.
    public func receipt() throws(LedgerError) -> Receipt {
        do {
            return try Receipt(json: Data(body.utf8))
        } catch {
            throw LedgerError(.inconsistent, detail: "receipt \(id) is not a readable receipt")
        }
    }
}

/// What `gotchu ledger verify` found: each check that passed, and the first broken row, if any.
public struct LedgerVerification: Sendable, Hashable {
    /// One line per check that passed, saying what it covered.
    public var passed: [String]
    /// The first check that failed, naming the row; `nil` when every check passed.
    public var failure: String?

    /// Whether every check passed.
    public var isValid: Bool { failure == nil }
}

/// The audit of a whole ledger, from its entries up, in a fixed order that stops at the first broken row: the hash
/// chain, each transfer, every balance recomputed from the entries, the sum over all accounts, sessions against
/// their entries, refunds against their entries, receipts (read strictly: ``Receipt/init(strictJSON:)``) against
/// their payments and keys, and the refunds table against the refund transfers and their receipts.
public enum LedgerVerifier {
    /// The types of a payment's two entries.
    static let paymentTypes = (debit: "SEND_P2P", credit: "RECEIVE_P2P")
    /// The types of a refund's two entries (payee to payer).
    static let refundTypes = (debit: "REFUND_OUT", credit: "REFUND_IN")

    /// Checks `snapshot`.
    package static func verify(_ snapshot: LedgerSnapshot) -> LedgerVerification {
        var result = LedgerVerification(passed: [], failure: nil)
        do {
            try verify(snapshot, into: &result)
        } catch {
            result.failure = error.description
        }
        return result
    }

    private struct Broken: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    private static func verify(_ snapshot: LedgerSnapshot, into result: inout LedgerVerification) throws(Broken) {
        // 1. The chain, row by row: the first row whose contents do not hash to what it stores is named.
        var previous = LedgerChain.genesis
        for entry in snapshot.entries {
            guard let stored = entry.hash else {
                throw Broken("entry seq \(entry.seq) (\(entry.id)) has no chain hash")
            }
            let expected = LedgerChain.hash(previous: previous, entry: entry)
            guard stored == expected else {
                throw Broken(
                    "entry seq \(entry.seq) (\(entry.id), wallet \(entry.walletID), \(entry.direction.rawValue) "
                        + "\(entry.amount) cents): its contents hash to \(expected) but it stores \(stored); the row "
                        + "was edited, or a row before it was inserted or deleted"
                )
            }
            previous = stored
        }
        guard snapshot.chainHead.hash == previous, snapshot.chainHead.count == Int64(snapshot.entries.count) else {
            throw Broken(
                "the chain head says \(snapshot.chainHead.count) entries ending in \(snapshot.chainHead.hash), but the "
                    + "table holds \(snapshot.entries.count) ending in \(previous): entries were deleted or added "
                    + "outside the ledger"
            )
        }
        result.passed.append("hash chain: \(snapshot.entries.count) entries, each hash recomputed, head matches")

        // 2. Each transfer: one DEBIT and one CREDIT of the same amount.
        var transfers: [String: [StoredEntry]] = [:]
        var transferOrder: [String] = []
        for entry in snapshot.entries {
            if transfers[entry.transferID] == nil { transferOrder.append(entry.transferID) }
            transfers[entry.transferID, default: []].append(entry)
        }
        for id in transferOrder {
            let entries = transfers[id] ?? []
            let debits = entries.filter { $0.direction == .debit }
            let credits = entries.filter { $0.direction == .credit }
            guard entries.count == 2, debits.count == 1, credits.count == 1, debits[0].amount == credits[0].amount
            else {
                let rows = entries.map { "seq \($0.seq) \($0.direction.rawValue) \($0.amount)" }.joined(separator: ", ")
                throw Broken("transfer \(id) does not debit what it credits: \(rows)")
            }
        }
        result.passed.append("transfers: \(transferOrder.count), each one debit equal to one credit")

        // 3. Every balance, recomputed from its entries.
        var sums: [String: Cents] = [:]
        for entry in snapshot.entries {
            let (sum, overflow) =
                entry.direction == .credit
                ? sums[entry.walletID, default: 0].addingReportingOverflow(entry.amount)
                : sums[entry.walletID, default: 0].subtractingReportingOverflow(entry.amount)
            guard !overflow else {
                throw Broken("the entries of wallet \(entry.walletID) overflow at seq \(entry.seq)")
            }
            sums[entry.walletID] = sum
        }
        let walletIDs = Set(snapshot.wallets.map(\.id))
        if let stray = snapshot.entries.first(where: { !walletIDs.contains($0.walletID) }) {
            throw Broken("entry seq \(stray.seq) (\(stray.id)) names the unknown wallet \(stray.walletID)")
        }
        for wallet in snapshot.wallets.sorted(by: { $0.id < $1.id }) {
            let recomputed = sums[wallet.id] ?? 0
            guard wallet.balance == recomputed else {
                throw Broken(
                    "wallet \(wallet.id): balance \(wallet.balance) cents, but its entries add up to \(recomputed)"
                )
            }
            guard wallet.kind == .system || wallet.balance >= 0 else {
                throw Broken("wallet \(wallet.id) is a user's and below zero (\(wallet.balance) cents)")
            }
        }
        result.passed.append("balances: \(snapshot.wallets.count) accounts, each equal to the sum of its entries")

        // 4. The sum over all accounts.
        var total: Cents = 0
        for wallet in snapshot.wallets {
            let (sum, overflow) = total.addingReportingOverflow(wallet.balance)
            guard !overflow else { throw Broken("the sum over all accounts overflows at wallet \(wallet.id)") }
            total = sum
        }
        guard total == 0 else { throw Broken("the sum over all accounts is \(total) cents, not 0") }
        result.passed.append("sum over all accounts: 0")

        // 5. Sessions against their entries: a PAID session has exactly one payment, of its amount, from its payer
        // to its payee; no other session has one.
        let walletOwners = Dictionary(
            snapshot.wallets.map { ($0.id, $0.userID) },
            uniquingKeysWith: { first, _ in first }
        )
        var payments: [String: [String]] = [:]
        for id in transferOrder {
            guard let debit = transfers[id]?.first(where: { $0.direction == .debit }),
                debit.refType == "session", debit.type == paymentTypes.debit
            else { continue }
            payments[debit.refID, default: []].append(id)
        }
        let sessions = Dictionary(snapshot.sessions.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        if let stray = payments.keys.sorted().first(where: { sessions[$0] == nil }) {
            throw Broken("transfer \(payments[stray]![0]) pays the unknown session \(stray)")
        }
        var paidCount = 0
        let sharesBySession = Dictionary(grouping: snapshot.shares, by: \.sessionID)
        if let stray = sharesBySession.keys.sorted().first(where: { sessions[$0]?.isSplit != true }) {
            throw Broken("session \(stray) has share rows but is not a split session")
        }
        // What each payer paid into each session (shares and tips).
        var paidByPayer: [String: [String: Cents]] = [:]
        for session in snapshot.sessions.sorted(by: { $0.id < $1.id }) {
            let paying = payments[session.id] ?? []
            if session.storedStatus == .paid { paidCount += 1 }
            if session.isSplit {
                let split = try verifySplit(
                    session,
                    shares: sharesBySession[session.id] ?? [],
                    paying: paying,
                    transfers: transfers,
                    walletOwners: walletOwners
                )
                paidByPayer[session.id] = split.paidByPayer
                continue
            }
            guard session.storedStatus == .paid else {
                guard paying.isEmpty else {
                    throw Broken(
                        "session \(session.id) is \(session.storedStatus.rawValue) but transfer \(paying[0]) pays it"
                    )
                }
                guard session.sharesPaid == 0, session.paidCents == 0, session.tip == 0 else {
                    throw Broken("session \(session.id) is \(session.storedStatus.rawValue) but counts a payment")
                }
                continue
            }
            guard paying.count == 1 else {
                throw Broken("session \(session.id) is PAID but has \(paying.count) payments, not exactly one")
            }
            let entries = transfers[paying[0]] ?? []
            guard let debit = entries.first(where: { $0.direction == .debit }),
                let credit = entries.first(where: { $0.direction == .credit })
            else { throw Broken("transfer \(paying[0]) of session \(session.id) lacks a side") }
            guard session.sharesPaid == 1, session.paidCents == session.amount, session.tip >= 0,
                session.tip <= session.amount, debit.amount == session.amount + session.tip
            else {
                throw Broken(
                    "session \(session.id) asks \(session.amount) cents with a tip of \(session.tip) but transfer "
                        + "\(paying[0]) moved \(debit.amount)"
                )
            }
            guard credit.type == paymentTypes.credit, credit.refType == "session", credit.refID == session.id,
                walletOwners[credit.walletID] == session.payeeID,
                walletOwners[debit.walletID] == session.paidBy, let payerID = session.paidBy
            else {
                throw Broken(
                    "transfer \(paying[0]) of session \(session.id) does not go from its payer's wallet to its payee's"
                )
            }
            paidByPayer[session.id] = [payerID: debit.amount]
        }
        result.passed.append(
            "sessions: \(snapshot.sessions.count), \(paidCount) paid, each paid exactly once from payer to payee "
                + "(a split: each share once, never beyond its amount)"
        )

        // 5b. Refunds: only of paid sessions, from the payee back to the payer, adding up to no more than was paid.
        var refundsBySession: [String: [String]] = [:]
        for id in transferOrder {
            guard let debit = transfers[id]?.first(where: { $0.direction == .debit }),
                debit.refType == "session", debit.type == refundTypes.debit
            else { continue }
            refundsBySession[debit.refID, default: []].append(id)
        }
        var refundTransfers = 0
        // Who each refund went back to, for its receipt's payer reference.
        var refundPayers: [String: String] = [:]
        for (sid, ids) in refundsBySession.sorted(by: { $0.key < $1.key }) {
            guard let session = sessions[sid], let paid = paidByPayer[sid], !paid.isEmpty else {
                throw Broken("transfer \(ids[0]) refunds session \(sid), which is not a paid session")
            }
            var refunded: Cents = 0
            var refundedTo: [String: Cents] = [:]
            for id in ids {
                let entries = transfers[id] ?? []
                guard let debit = entries.first(where: { $0.direction == .debit }),
                    let credit = entries.first(where: { $0.direction == .credit }),
                    credit.type == refundTypes.credit, credit.refType == "session", credit.refID == sid,
                    walletOwners[debit.walletID] == session.payeeID, let payerID = walletOwners[credit.walletID] ?? nil,
                    let payerPaid = paid[payerID]
                else {
                    throw Broken("refund transfer \(id) of session \(sid) does not go from its payee to a payer of it")
                }
                let (sum, overflow) = refunded.addingReportingOverflow(debit.amount)
                let toPayer = refundedTo[payerID, default: 0] + debit.amount
                guard !overflow, sum <= session.paidCents + session.tip, toPayer <= payerPaid else {
                    throw Broken(
                        "session \(sid) was paid \(session.paidCents + session.tip) cents (\(payerPaid) by this payer) "
                            + "but refund transfer \(id) brings its refunds above that"
                    )
                }
                refunded = sum
                refundedTo[payerID] = toPayer
                refundPayers[id] = payerID
                refundTransfers += 1
            }
        }
        result.passed.append(
            "refunds: \(refundTransfers), each from payee to payer of a paid session, none above what was paid"
        )

        // 6. Receipts: each verifies against a published key and says what the ledger holds; a session paid since
        // the first receipt key was made has one.
        let keys = ReceiptKeySet(keys: snapshot.receiptKeys.map(\.key))
        let receiptsSince = snapshot.receiptKeys.map(\.createdAt).min()
        var receiptsBySession: [String: Receipt] = [:]
        let entryTransfer = Dictionary(
            snapshot.entries.map { ($0.id, $0.transferID) },
            uniquingKeysWith: { first, _ in first }
        )
        var refundReceipts = 0
        // The split payments that have their receipt, and the transfers those receipts name.
        var splitReceipts: Set<String> = []
        var receiptTransfers: Set<String> = []
        // Each refund receipt's transfer, for the refund rows.
        var refundReceiptTransfers: [String: (transferID: String, sessionID: String)] = [:]
        for row in snapshot.receipts {
            let receipt: Receipt
            do {
                // Strictly: a stored text other readers would take other fields from is not the receipt it signs.
                receipt = try Receipt(strictJSON: Array(row.body.utf8))
                try receipt.verify(against: keys)
            } catch {
                throw Broken("receipt \(row.id) of session \(row.sessionID): \(error)")
            }
            guard receipt.id == row.id, receipt.sessionID == row.sessionID, receipt.kind.rawValue == row.kind else {
                throw Broken("receipt \(row.id) does not match the columns it is stored under")
            }
            if receipt.kind == .refund {
                // A refund's receipt describes one refund transfer of its session, debit first.
                let transferID = entryTransfer[receipt.entryIDs.first ?? ""] ?? ""
                let entries = transfers[transferID] ?? []
                let ordered = entries.filter { $0.direction == .debit } + entries.filter { $0.direction == .credit }
                guard refundsBySession[row.sessionID]?.contains(transferID) == true,
                    let session = sessions[row.sessionID],
                    receipt.amountCents == ordered.first?.amount, receipt.payeeID == session.payeeID,
                    receipt.entryIDs == ordered.map(\.id), receipt.issuedAtMilliseconds == ordered.first?.createdAt,
                    !receipt.isSplitFormat,
                    receipt.payerReference
                        == Receipt.payerReference(receiptID: receipt.id, payerID: refundPayers[transferID] ?? "")
                else {
                    throw Broken("refund receipt \(receipt.id) of session \(row.sessionID) does not describe a refund")
                }
                refundReceiptTransfers[receipt.id] = (transferID, row.sessionID)
                refundReceipts += 1
                continue
            }
            guard receipt.kind == .payment else { continue }
            if sessions[row.sessionID]?.isSplit == true {
                // A split's payment receipt describes the payment whose id it has, debit first: a transfer of the
                // session's payments (one payer's equal payments in one millisecond are alike: any of them, once).
                let transferID = entryTransfer[receipt.entryIDs.first ?? ""] ?? ""
                guard payments[row.sessionID]?.contains(transferID) == true,
                    receiptTransfers.insert(transferID).inserted
                else {
                    throw Broken(
                        "receipt \(receipt.id) of session \(row.sessionID) names no payment transfer of its own"
                    )
                }
                let entries = transfers[transferID] ?? []
                let ordered = entries.filter { $0.direction == .debit } + entries.filter { $0.direction == .credit }
                let session = sessions[row.sessionID]
                let debit = ordered.first
                let payment = SharePaymentRecord.grouping(sharesBySession[row.sessionID] ?? []).first {
                    $0.id == receipt.id
                }
                guard let session, let payment, receipt.amountCents == payment.amount,
                    debit?.amount == payment.amount + payment.tip,
                    walletOwners[debit?.walletID ?? ""] == payment.payerID,
                    receipt.tipCents == payment.tip, receipt.shares == session.shares,
                    receipt.shareNumbers == payment.shareNumbers, receipt.payeeID == session.payeeID,
                    receipt.entryIDs == ordered.map(\.id), receipt.issuedAtMilliseconds == ordered.first?.createdAt,
                    receipt.payerReference == Receipt.payerReference(receiptID: receipt.id, payerID: payment.payerID)
                else {
                    throw Broken("receipt \(receipt.id) of session \(row.sessionID) does not describe a payment of it")
                }
                splitReceipts.insert(receipt.id)
                continue
            }
            guard receiptsBySession.updateValue(receipt, forKey: row.sessionID) == nil else {
                throw Broken("session \(row.sessionID) has more than one payment receipt")
            }
        }
        var missing = 0
        for session in snapshot.sessions.sorted(by: { $0.id < $1.id }) where session.isSplit {
            for payment in SharePaymentRecord.grouping(sharesBySession[session.id] ?? [])
            where !splitReceipts.contains(payment.id) {
                if let since = receiptsSince, payment.paidAt >= since {
                    throw Broken(
                        "payment \(payment.id) of session \(session.id) was made after receipts began but has no receipt"
                    )
                }
                missing += 1
            }
        }
        for session in snapshot.sessions.sorted(by: { $0.id < $1.id })
        where session.storedStatus == .paid && !session.isSplit {
            guard let receipt = receiptsBySession.removeValue(forKey: session.id) else {
                if let since = receiptsSince, let paidAt = session.paidAt, paidAt >= since {
                    throw Broken("session \(session.id) was paid after receipts began but has no receipt")
                }
                missing += 1
                continue
            }
            let entries = transfers[payments[session.id]?.first ?? ""] ?? []
            let ordered = entries.filter { $0.direction == .debit } + entries.filter { $0.direction == .credit }
            let tipped = session.tip > 0
            guard receipt.amountCents == session.amount, receipt.payeeID == session.payeeID,
                receipt.tipCents == (tipped ? session.tip : nil), receipt.shares == (tipped ? 1 : nil),
                receipt.shareNumbers == (tipped ? [1] : nil),
                receipt.entryIDs == ordered.map(\.id), receipt.issuedAtMilliseconds == ordered.first?.createdAt,
                receipt.payerReference
                    == Receipt.payerReference(receiptID: receipt.id, payerID: session.paidBy ?? "")
            else {
                throw Broken("receipt \(receipt.id) of session \(session.id) does not describe its payment")
            }
        }
        if let orphan = receiptsBySession.keys.sorted().first {
            throw Broken("session \(orphan) has a payment receipt but is not paid")
        }
        result.passed.append(
            "receipts: \(snapshot.receipts.count), each signature valid with one of \(keys.keys.count) published keys"
                + " and matching its payment" + (missing > 0 ? "; \(missing) sessions paid before receipts began" : "")
                + (refundReceipts > 0 ? "; \(refundReceipts) of refunds, each matching its refund" : "")
        )

        // 6b. The refunds table against the refund transfers and their receipts.
        try verifyRefundRows(
            snapshot,
            transfers: transfers,
            refundsBySession: refundsBySession,
            receiptTransfers: refundReceiptTransfers,
            receiptsSince: receiptsSince,
            into: &result
        )

        // 7. Deposits and payouts against their entries and the system accounts they move money through.
        try verifyMoneyInOut(snapshot, transfers: transfers, order: transferOrder, into: &result)

        // 8. Webhook events against the money movements, cancels and expiries they announce.
        switch verifyWebhookEvents(snapshot, transfers: transfers, order: transferOrder) {
        case .success(let line): result.passed.append(line)
        case .failure(let mismatch): throw Broken(mismatch.description)
        }
    }
}

extension LedgerVerifier {
    /// A split session against its shares and its payment transfers: its shares are the split of its amount, each
    /// paid at most once (one payment id per share); each payment (the shares one send paid, with the tip on its
    /// first) is exactly one transfer of its amount and tip from its payer to the payee, and no transfer pays the
    /// session without a payment recording it; the session's counts and sums are those of its paid shares, never
    /// beyond its amount, and it is PAID exactly when every share is.
    /// - Returns: each payment's transfer, and what each payer paid into the session, tips included.
    private static func verifySplit(
        _ session: SessionRow,
        shares: [ShareRow],
        paying: [String],
        transfers: [String: [StoredEntry]],
        walletOwners: [String: String?]
    ) throws(Broken) -> (transfers: [String: String], paidByPayer: [String: Cents]) {
        let sid = session.id
        guard let split = try? SessionSplit(amount: session.amount, shares: session.shares),
            shares.map(\.number) == Array(1...session.shares), shares.map(\.amount) == split.allCents
        else {
            throw Broken("session \(sid) is split into \(session.shares) but its share rows are not that split")
        }
        let paid = shares.filter { $0.paymentID != nil }
        let payments = SharePaymentRecord.grouping(shares)
        let paidCents = paid.reduce(0) { $0 + $1.amount }
        let tips = payments.reduce(0) { $0 + $1.tip }
        guard session.sharesPaid == paid.count, session.paidCents == paidCents, session.tip == tips,
            (session.storedStatus == .paid) == (paid.count == session.shares)
        else {
            throw Broken(
                "session \(sid) counts \(session.sharesPaid) shares paid for \(session.paidCents) cents and "
                    + "\(session.tip) in tips (\(session.storedStatus.rawValue)), but its shares say \(paid.count), "
                    + "\(paidCents) and \(tips)"
            )
        }
        var unmatched = paying
        var matched: [String: String] = [:]
        var byPayer: [String: Cents] = [:]
        for payment in payments {
            guard payment.tip >= 0, payment.tip <= payment.amount,
                let index = unmatched.firstIndex(where: { id in
                    let entries = transfers[id] ?? []
                    guard let debit = entries.first(where: { $0.direction == .debit }),
                        let credit = entries.first(where: { $0.direction == .credit })
                    else { return false }
                    return debit.amount == payment.amount + payment.tip && debit.createdAt == payment.paidAt
                        && walletOwners[debit.walletID] == payment.payerID
                        && walletOwners[credit.walletID] == session.payeeID && credit.type == paymentTypes.credit
                        && credit.refType == "session" && credit.refID == sid
                })
            else {
                throw Broken(
                    "payment \(payment.id) of session \(sid) has no transfer of its \(payment.amount) cents and "
                        + "\(payment.tip) tip from its payer to the payee"
                )
            }
            matched[payment.id] = unmatched.remove(at: index)
            byPayer[payment.payerID, default: 0] += payment.amount + payment.tip
        }
        if let stray = unmatched.first {
            throw Broken("transfer \(stray) pays session \(sid) but no share records it")
        }
        return (matched, byPayer)
    }

    /// The `refunds` table says which request made each refund, and the server answers a refund's replays from it,
    /// so it must agree with the ledger: each row names one refund transfer of its session
    /// (of its amount, made by the session's payee) and that transfer's receipt, no two rows share a transfer, every
    /// refund transfer and refund receipt has its row, and each row's refunded total is the sum of its session's
    /// refund transfers up to and including its own.
    private static func verifyRefundRows(
        _ snapshot: LedgerSnapshot,
        transfers: [String: [StoredEntry]],
        refundsBySession: [String: [String]],
        receiptTransfers: [String: (transferID: String, sessionID: String)],
        receiptsSince: Int64?,
        into result: inout LedgerVerification
    ) throws(Broken) {
        let sessions = Dictionary(snapshot.sessions.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var rowByTransfer: [String: RefundRow] = [:]
        var rowByReceipt: [String: RefundRow] = [:]
        for row in snapshot.refunds.sorted(by: { $0.id < $1.id }) {
            let what = "refund \(row.id) of session \(row.sessionID)"
            guard let session = sessions[row.sessionID] else {
                throw Broken("\(what) names a session that does not exist")
            }
            guard refundsBySession[row.sessionID]?.contains(row.transferID) == true,
                let debit = transfers[row.transferID]?.first(where: { $0.direction == .debit })
            else {
                throw Broken(
                    "\(what) names transfer \(row.transferID), which is not a refund transfer of that session: no "
                        + "money moved back for it"
                )
            }
            if let other = rowByTransfer.updateValue(row, forKey: row.transferID) {
                throw Broken(
                    "\(what) and refund \(other.id) both name transfer \(row.transferID): one movement counted twice"
                )
            }
            guard debit.amount == row.amount else {
                throw Broken(
                    "\(what) is of \(row.amount) cents but its transfer \(row.transferID) moved \(debit.amount)"
                )
            }
            guard row.requestedBy == session.payeeID else {
                throw Broken("\(what) was made by \(row.requestedBy), not by the session's payee")
            }
            if let receiptID = row.receiptID {
                guard let described = receiptTransfers[receiptID], described.sessionID == row.sessionID,
                    described.transferID == row.transferID
                else {
                    throw Broken(
                        "\(what) names receipt \(receiptID), which is not the refund receipt of its transfer "
                            + "\(row.transferID)"
                    )
                }
                if let other = rowByReceipt.updateValue(row, forKey: receiptID) {
                    throw Broken("\(what) and refund \(other.id) both name receipt \(receiptID)")
                }
            } else if let since = receiptsSince, row.createdAt >= since {
                throw Broken("\(what) was made after receipts began but names no receipt")
            }
        }
        for (sid, ids) in refundsBySession.sorted(by: { $0.key < $1.key }) {
            guard let session = sessions[sid] else { continue }  // Named by the refund transfers' check.
            var running: Cents = 0
            for id in ids {
                guard let row = rowByTransfer[id] else {
                    throw Broken(
                        "session \(sid): refund transfer \(id) has no refunds row (the row was deleted, or the money "
                            + "moved outside the ledger)"
                    )
                }
                // Within what was paid, checked with the refund transfers.
                running += row.amount
                guard row.refundedTotal == running else {
                    throw Broken(
                        "refund \(row.id) of session \(sid) records \(row.refundedTotal) cents refunded in total, but the "
                            + "session's refund transfers up to it add up to \(running) (of \(session.amount) paid)"
                    )
                }
            }
        }
        for (receiptID, described) in receiptTransfers.sorted(by: { $0.key < $1.key })
        where rowByReceipt[receiptID] == nil {
            throw Broken(
                "refund receipt \(receiptID) of session \(described.sessionID) is named by no refunds row (the row "
                    + "was deleted or edited)"
            )
        }
        result.passed.append(
            "refund rows: \(snapshot.refunds.count), each naming one refund transfer of its amount and its receipt; "
                + "every refund transfer has its row, and each running total agrees with the entries"
        )
    }
}

extension LedgerVerifier {
    /// Each deposit is one transfer of its amount from the deposits account to its user; each payout one request
    /// transfer from its user into the payouts clearing account, then, as its status says, nothing more (pending),
    /// one transfer on to the settled-payouts account (settled) or one back to its user (failed); no transfer names
    /// a deposit or payout that does not exist; and each of those system accounts holds what the rows say.
    private static func verifyMoneyInOut(
        _ snapshot: LedgerSnapshot,
        transfers: [String: [StoredEntry]],
        order: [String],
        into result: inout LedgerVerification
    ) throws(Broken) {
        let owners = Dictionary(snapshot.wallets.map { ($0.id, $0.userID) }, uniquingKeysWith: { first, _ in first })
        var byDeposit: [String: [String]] = [:]
        var byPayout: [String: [String]] = [:]
        for id in order {
            guard let debit = transfers[id]?.first(where: { $0.direction == .debit }) else { continue }
            switch debit.refType {
            case MoneyInOutEntries.depositRefType: byDeposit[debit.refID, default: []].append(id)
            case MoneyInOutEntries.payoutRefType: byPayout[debit.refID, default: []].append(id)
            default: continue
            }
        }
        /// The one transfer's two sides, if it moved `amount` from `from` to `to` with these entry types.
        func matches(
            _ transferID: String,
            from: (String) -> Bool,
            to: (String) -> Bool,
            amount: Cents,
            kinds: (debit: String, credit: String)
        ) -> Bool {
            let entries = transfers[transferID] ?? []
            guard let debit = entries.first(where: { $0.direction == .debit }),
                let credit = entries.first(where: { $0.direction == .credit })
            else { return false }
            return debit.amount == amount && from(debit.walletID) && to(credit.walletID) && debit.type == kinds.debit
                && credit.type == kinds.credit && credit.refType == debit.refType && credit.refID == debit.refID
        }
        func add(_ sum: Cents, _ amount: Cents) throws(Broken) -> Cents {
            let (total, overflow) = sum.addingReportingOverflow(amount)
            guard !overflow else { throw Broken("the deposits or payouts add up past the largest amount") }
            return total
        }
        let isAccount = { (account: String) in { (wallet: String) in wallet == account } }
        let isUsers = { (user: String) in { (wallet: String) in owners[wallet] == user } }

        var deposited: Cents = 0
        for deposit in snapshot.deposits.sorted(by: { $0.id < $1.id }) {
            let moving = byDeposit.removeValue(forKey: deposit.id) ?? []
            guard moving.count == 1 else {
                throw Broken("deposit \(deposit.id) has \(moving.count) transfers, not exactly one")
            }
            guard
                matches(
                    moving[0],
                    from: isAccount(LedgerAccounts.depositsWalletID),
                    to: isUsers(deposit.userID),
                    amount: deposit.amount,
                    kinds: MoneyInOutEntries.deposit
                )
            else {
                throw Broken(
                    "transfer \(moving[0]) of deposit \(deposit.id) does not move its \(deposit.amount) cents from the "
                        + "deposits account to its user"
                )
            }
            deposited = try add(deposited, deposit.amount)
        }
        if let stray = byDeposit.keys.sorted().first {
            throw Broken("transfer \(byDeposit[stray]![0]) names the unknown deposit \(stray)")
        }

        var pending: Cents = 0
        var settled: Cents = 0
        for payout in snapshot.payouts.sorted(by: { $0.id < $1.id }) {
            let moving = byPayout.removeValue(forKey: payout.id) ?? []
            let expected = payout.status == .pending ? 1 : 2
            guard moving.count == expected else {
                throw Broken(
                    "payout \(payout.id) is \(payout.status.rawValue) but has \(moving.count) transfers, not \(expected)"
                )
            }
            guard
                matches(
                    moving[0],
                    from: isUsers(payout.userID),
                    to: isAccount(LedgerAccounts.payoutsWalletID),
                    amount: payout.amount,
                    kinds: MoneyInOutEntries.payout
                )
            else {
                throw Broken(
                    "transfer \(moving[0]) of payout \(payout.id) does not move its \(payout.amount) cents from its "
                        + "user into the payouts clearing account"
                )
            }
            switch payout.status {
            case .pending:
                pending = try add(pending, payout.amount)
            case .settled:
                guard
                    matches(
                        moving[1],
                        from: isAccount(LedgerAccounts.payoutsWalletID),
                        to: isAccount(LedgerAccounts.payoutsSettledWalletID),
                        amount: payout.amount,
                        kinds: MoneyInOutEntries.settle
                    )
                else {
                    throw Broken(
                        "payout \(payout.id) is SETTLED but transfer \(moving[1]) does not move it out of the clearing "
                            + "account to the settled payouts"
                    )
                }
                settled = try add(settled, payout.amount)
            case .failed:
                guard
                    matches(
                        moving[1],
                        from: isAccount(LedgerAccounts.payoutsWalletID),
                        to: isUsers(payout.userID),
                        amount: payout.amount,
                        kinds: MoneyInOutEntries.payoutReturn
                    )
                else {
                    throw Broken(
                        "payout \(payout.id) is FAILED but transfer \(moving[1]) does not return its money to its user"
                    )
                }
            }
        }
        if let stray = byPayout.keys.sorted().first {
            throw Broken("transfer \(byPayout[stray]![0]) names the unknown payout \(stray)")
        }

        // The accounts hold exactly what the rows say: no other transfer touched them.
        let balances = Dictionary(snapshot.wallets.map { ($0.id, $0.balance) }, uniquingKeysWith: { first, _ in first })
        for (account, expected, what) in [
            (LedgerAccounts.depositsWalletID, -deposited, "minus the sum of the deposits"),
            (LedgerAccounts.payoutsWalletID, pending, "the sum of the pending payouts"),
            (LedgerAccounts.payoutsSettledWalletID, settled, "the sum of the settled payouts"),
        ] {
            let balance = balances[account] ?? 0
            guard balance == expected else {
                throw Broken("account \(account) holds \(balance) cents, not \(what) (\(expected))")
            }
        }
        result.passed.append(
            "deposits and payouts: \(snapshot.deposits.count) deposits, \(snapshot.payouts.count) payouts "
                + "(\(pending) cents pending, \(settled) settled), each matching its transfers; clearing accounts agree"
        )
    }
}
