import GotchuCore
import Testing

@Suite("The payer's flow: shares of a split session and tips", .timeLimit(.minutes(10)))
struct PayerSplitTests {
    static let eid = EID(rawValue: "0123456789")!
    static let sid = "6f1c2a7e-0000-4000-8000-000000000002"

    /// A session of $40.00 in 4 shares, 2 of them paid.
    static let half = SessionShares(count: 4, paid: 2, nextShareCents: 1_000, remainingCents: 2_000)

    /// A machine that resolved the typed EID (no scan), with `configuration`'s shares and tip.
    private func resolve(
        _ configuration: PayerStateMachine.Configuration,
        amountCents: Cents = 4_000,
        shares: SessionShares? = half
    ) -> (PayerStateMachine, PayerStateMachine.Action) {
        var configuration = configuration
        configuration.eid = Self.eid
        var machine = PayerStateMachine(configuration: configuration)
        #expect(machine.receive(.start, now: .zero) == .resolve(Self.eid))
        let action = machine.receive(
            .resolved(sessionID: Self.sid, amountCents: amountCents, payeeName: "bob", shares: shares),
            now: .milliseconds(300)
        )
        return (machine, action)
    }

    private func offer(
        amountCents: Cents = 4_000,
        shares: Int = 4,
        sharesPaid: Int = 2,
        sharesToPay: Int = 1,
        payCents: Cents = 1_000,
        tipCents: Cents = 0,
        shareNumbers: [Int] = [],
        paymentID: String? = nil
    ) -> PaymentOffer {
        PaymentOffer(
            eid: Self.eid,
            sessionID: Self.sid,
            amountCents: amountCents,
            payeeName: "bob",
            shares: shares,
            sharesPaid: sharesPaid,
            sharesToPay: sharesToPay,
            payCents: payCents,
            tipCents: tipCents,
            shareNumbers: shareNumbers,
            paymentID: paymentID
        )
    }

    @Test("One share: the question names the share of the whole; the lock's shares are paid and the payment named")
    func oneShare() {
        var (machine, action) = resolve(.init())
        let asked = offer()
        #expect(action == .askConfirmation(asked))
        #expect(asked.isSplit && asked.totalCents == 1_000)
        #expect(machine.receive(.confirmed, now: .seconds(1)) == .lock(sessionID: Self.sid))
        #expect(
            machine.receive(.lockedShares(amountCents: 1_000, shareNumbers: [3]), now: .seconds(2))
                == .send(sessionID: Self.sid)
        )
        #expect(machine.state == .sending(offer(shareNumbers: [3])))
        #expect(
            machine.receive(.sent(newBalanceCents: 4_000, paymentID: "pay-3"), now: .seconds(3))
                == .report(.paid(offer(shareNumbers: [3], paymentID: "pay-3"), newBalanceCents: 4_000))
        )
    }

    @Test("Several shares cost what those shares cost, the odd cents included, from the next free one on")
    func severalShares() {
        let fresh = SessionShares(count: 4, paid: 0, nextShareCents: 251, remainingCents: 1_001)
        var (machine, action) = resolve(.init(shares: 2), amountCents: 1_001, shares: fresh)
        let asked = offer(amountCents: 1_001, sharesPaid: 0, sharesToPay: 2, payCents: 501)
        #expect(action == .askConfirmation(asked))
        _ = machine.receive(.confirmed, now: .seconds(1))
        #expect(
            machine.receive(.lockedShares(amountCents: 501, shareNumbers: [1, 2]), now: .seconds(2))
                == .send(sessionID: Self.sid)
        )
    }

    @Test("A percentage tip is of what is paid, rounded half up; it counts toward the limit")
    func percentageTip() {
        let (_, action) = resolve(.init(tip: .percent(hundredths: 1_500)))
        #expect(action == .askConfirmation(offer(tipCents: 150)))

        let (_, limited) = resolve(.init(maximumAmountCents: 1_100, tip: .percent(hundredths: 1_500)))
        #expect(limited == .report(.failed(.amountAboveLimit(offer(tipCents: 150), limitCents: 1_100))))
    }

    @Test("A tip on a session that is not split is on the whole amount")
    func tipWithoutSplit() {
        var (machine, action) = resolve(.init(preApproved: true, tip: .cents(200)), amountCents: 1_250, shares: nil)
        let paying = offer(amountCents: 1_250, shares: 1, sharesPaid: 0, payCents: 1_250, tipCents: 200)
        #expect(action == .lock(sessionID: Self.sid))
        #expect(machine.state == .locking(paying))
        // A ledger that predates splits answers the lock with no amount: the one resolved holds.
        #expect(machine.receive(.locked, now: .seconds(1)) == .send(sessionID: Self.sid))
        #expect(
            machine.receive(.sent(newBalanceCents: 50), now: .seconds(2)) == .report(.paid(paying, newBalanceCents: 50))
        )
    }

    @Test("A fixed tip above the amount it goes with is refused before anything is locked")
    func tipTooLarge() {
        let (machine, action) = resolve(.init(tip: .cents(1_001)))
        #expect(action == .report(.failed(.tipTooLarge(offer(tipCents: 1_001)))))
        #expect(machine.state == .finished(.failed(.tipTooLarge(offer(tipCents: 1_001)))))
    }

    @Test("Shares that cost more than confirmed are given back; nothing is sent")
    func lockCostsMoreThanConfirmed() {
        var (machine, _) = resolve(.init())
        _ = machine.receive(.confirmed, now: .seconds(1))
        #expect(
            machine.receive(.lockedShares(amountCents: 1_001, shareNumbers: [1]), now: .seconds(2))
                == .unlock(sessionID: Self.sid)
        )
        #expect(machine.receive(.sent(newBalanceCents: 0), now: .seconds(3)) == .none)
        guard case .report(.failed(.lockFailed(let locked, let reason))) = machine.receive(.unlocked, now: .seconds(3))
        else {
            Issue.record("expected a lock failure, in \(machine.state)")
            return
        }
        #expect(locked.payCents == 1_001 && locked.shareNumbers == [1])
        #expect(reason.contains("$10.01") && reason.contains("$10.00"))
    }

    @Test("Shares that cost less are paid, a percentage tip on what they cost; a fixed tip stays")
    func lockCostsLess() {
        var (machine, _) = resolve(.init(tip: .percent(hundredths: 1_000)), amountCents: 1_001, shares: nil)
        _ = machine.receive(.confirmed, now: .seconds(1))
        #expect(
            machine.receive(.lockedShares(amountCents: 999, shareNumbers: [1]), now: .seconds(2))
                == .send(sessionID: Self.sid)
        )
        guard case .sending(let sending) = machine.state else {
            Issue.record("expected to be sending, in \(machine.state)")
            return
        }
        #expect(sending.payCents == 999 && sending.tipCents == 100)

        var (fixed, _) = resolve(.init(tip: .cents(300)))
        _ = fixed.receive(.confirmed, now: .seconds(1))
        _ = fixed.receive(.lockedShares(amountCents: 999, shareNumbers: [3]), now: .seconds(2))
        guard case .sending(let fixedSending) = fixed.state else {
            Issue.record("expected to be sending, in \(fixed.state)")
            return
        }
        #expect(fixedSending.tipCents == 300)
    }

    @Test("More shares of a session that is not split: the whole amount is asked, and the ledger's refusal ends it")
    func sharesOfAnUnsplitSession() {
        var (machine, action) = resolve(.init(shares: 2), amountCents: 1_250, shares: nil)
        let asked = offer(amountCents: 1_250, shares: 1, sharesPaid: 0, sharesToPay: 2, payCents: 1_250)
        #expect(action == .askConfirmation(asked))
        _ = machine.receive(.confirmed, now: .seconds(1))
        #expect(
            machine.receive(.lockFailed(reason: "no-free-share"), now: .seconds(2))
                == .report(.failed(.lockFailed(asked, reason: "no-free-share")))
        )
    }

    @Test("Cancelled while shares that cost too much are given back: the outcome is the cancel")
    func cancelWhileGivingBack() {
        var (machine, _) = resolve(.init())
        _ = machine.receive(.confirmed, now: .seconds(1))
        _ = machine.receive(.lockedShares(amountCents: 5_000, shareNumbers: [3]), now: .seconds(2))
        #expect(machine.receive(.cancel, now: .seconds(2)) == .none)
        #expect(machine.receive(.unlockFailed(reason: "gone"), now: .seconds(3)) == .report(.failed(.cancelled)))
    }

    @Test("Cancelled while the lock is in flight: the shares granted are given back")
    func cancelWhileLocking() {
        var (machine, _) = resolve(.init())
        _ = machine.receive(.confirmed, now: .seconds(1))
        #expect(machine.receive(.cancel, now: .seconds(1)) == .none)
        #expect(
            machine.receive(.lockedShares(amountCents: 1_000, shareNumbers: [3]), now: .seconds(2))
                == .unlock(sessionID: Self.sid)
        )
        #expect(machine.receive(.unlocked, now: .seconds(3)) == .report(.failed(.cancelled)))
    }
}
