import GotchuAPI
import GotchuCore
import GotchuLedger
import GotchuLedgerAPI

/// The web checkout's Pay against the oracle: mostly the amount a page would show now (a resolve's next share),
/// sometimes another (a page shown before another payer took a share), under a fresh key or one used before.
extension Driver {
    mutating func payShown() async throws {
        // Often a split with shares paid, where a payer who paid before may ask again (as after a reload).
        let oracle = self.model
        let partlyPaid = sids.filter { oracle.status(oracle.sessions[$0]!) == .partiallyPaid }
        let pickPartlyPaid = !partlyPaid.isEmpty && Int.random(in: 0..<3, using: &random) == 0
        guard
            let sid = pickPartlyPaid ? partlyPaid[Int.random(in: 0..<partlyPaid.count, using: &random)] : session()
        else { return }
        let session = model.sessions[sid]!
        let shown: Cents
        switch Int.random(in: 0..<6, using: &random) {
        case 0: shown = session.shares.map(\.amount).randomElement(using: &random) ?? session.amount
        case 1: shown = model.resolvedShares(sid).next + 1
        default: shown = model.resolvedShares(sid).next
        }
        // Often someone with a stake in it: a lock holder, or a payer of a share (asked again, as after a reload).
        let payer =
            switch Int.random(in: 0..<3, using: &random) {
            case 0: lockHolder(sid) ?? user()
            case 1: session.payments.last?.payer ?? user()
            default: user()
            }
        let key = Int.random(in: 0..<5, using: &random) == 0 ? (usedKey(of: payer)?.key ?? freshKey()) : freshKey()
        let another = Bool.random(using: &random)
        let tip: Cents =
            switch Int.random(in: 0..<12, using: &random) {
            case 0: -1
            case 1: shown + 1
            case 2..<6: Cents.random(in: 0...max(shown, 0), using: &random)
            default: 0
            }
        note("pay shown \(sid.prefix(8)) by u\(payer) key \(key) amount \(shown) tip \(tip) another \(another)")
        touched.insert(sid)
        let payment = ShownPayment(
            sid: sid,
            payerID: users[payer].id,
            idempotencyKey: key,
            amountCents: shown,
            tipCents: tip,
            another: another
        )
        var paidBefore: String?
        let actual: LedgerModel.ShownExpected
        do {
            switch try await store.pay(shown: payment) {
            case .paid(let balance, _, _): actual = .outcome(.ok(balance))
            case .refused(let refusal): actual = .outcome(.refused(Problem(refusal).kind ?? .internalError))
            case .amountChanged(let cents): actual = .amountChanged(cents)
            case .paidBefore(let paymentID):
                paidBefore = paymentID
                actual = .paidBefore(session.payments.firstIndex { $0.id == paymentID } ?? -1)
            }
        } catch let refusal as LedgerError {
            actual = .outcome(.refused(Problem(refusal).kind ?? .internalError))
        }
        let expected = model.payShown(sid, by: payer, key: key, amount: shown, tip: tip, another: another)
        guard actual == expected else {
            throw DriverFailure(
                message: "pay shown: store \(actual)\(paidBefore.map { " (\($0))" } ?? ""), model \(expected)"
            )
        }
        switch expected {
        case .outcome(.ok):
            saw("pay shown ok")
            try await nameLastPayment(payer: payer, key: key)
        case .outcome(.refused(let kind)): saw("pay shown refused(\(kind.rawValue))")
        case .amountChanged: saw("pay shown amount changed")
        case .paidBefore: saw("pay shown paid before")
        }
    }
}
