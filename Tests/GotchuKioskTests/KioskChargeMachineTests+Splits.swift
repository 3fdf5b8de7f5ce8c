import Foundation
import GotchuAPI
import GotchuCore
import GotchuKiosk
import Testing

/// A charge of 10.01 split four ways (2.51, 2.50, 2.50, 2.50), on synthetic time.
extension Bench {
    static let split = KioskChargeMachine.Session(
        sessionID: "s-1",
        eid: EID(rawValue: "00000000a1")!,
        expiresAt: start.addingTimeInterval(30),
        shares: 4
    )

    /// Started, with split charge `c-1` asked, its session created and on the air, its status asked once.
    static func splitAdvertising(configuration: KioskChargeMachine.Configuration = Bench.configuration) -> Bench {
        var bench = Bench(configuration: configuration)
        _ = bench.send(.start)
        let asked = bench.send(.chargeRequested(id: "c-1", amountCents: 1_001, shares: 4, reference: "table 9"))
        #expect(bench.charge.shares == 4 && bench.charge.sharesPaid == 0)
        #expect(
            asked.last
                == .createSession(amountCents: 1_001, shares: 4, reference: "table 9", idempotencyKey: "kiosk-c-1-1")
        )
        bench.advance(0.25)
        #expect(bench.send(.sessionCreated(split)).last == .advertise(split.eid, token: 1))
        bench.advance(0.25)
        #expect(bench.send(.advertisingStarted(token: 1)).last == .fetchStatus(sessionID: "s-1"))
        #expect(bench.charge.state == .advertising)
        return bench
    }

    /// Answers the status read under way with `state`, then lets the poll timer fire; returns the answer's actions.
    mutating func poll(_ state: KioskChargeMachine.SessionState) throws -> [Action] {
        let actions = send(.statusSeen(state))
        if let (delay, token) = timer(actions) {
            advance(Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
            #expect(send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
        }
        return actions
    }
}

@Suite("The kiosk's charge flow for a charge split among payers", .timeLimit(.minutes(10)))
struct KioskChargeMachineSplitTests {
    typealias State = KioskChargeMachine.SessionState

    @Test("Shares paid one by one keep the charge advertised, counted, until the last makes it paid")
    func paidShareByShare() throws {
        var bench = Bench.splitAdvertising()
        _ = try bench.poll(State(.advertising))

        let first = try bench.poll(State(.partiallyPaid, sharesPaid: 1, paidCents: 251, tipCents: 40))
        let record = try #require(written(first))
        #expect(record.charge.state == .advertising && record.charge.sharesPaid == 1)
        #expect(record.charge.paidCents == 251 && record.charge.tipCents == 40)
        #expect(!first.contains(.stopAdvertising))
        #expect(bench.charge.nextShareCents == 250)

        // The next payer holds a share, then pays it and a friend's.
        #expect(
            written(try bench.poll(State(.locked, sharesPaid: 1, paidCents: 251, tipCents: 40)))?.charge.state
                == .locked
        )
        let third = try bench.poll(State(.partiallyPaid, sharesPaid: 3, paidCents: 751, tipCents: 40))
        #expect(written(third)?.charge.state == .advertising && bench.charge.sharesPaid == 3)
        // Nothing new: nothing written.
        #expect(written(try bench.poll(State(.partiallyPaid, sharesPaid: 3, paidCents: 751, tipCents: 40))) == nil)

        let paid = bench.send(.statusSeen(State(.paid, sharesPaid: 4, paidCents: 1_001, tipCents: 90)))
        let ended = try #require(written(paid))
        #expect(ended.charge.state == .paid && ended.charge.sharesPaid == 4)
        #expect(ended.charge.paidCents == 1_001 && ended.charge.tipCents == 90 && ended.charge.refundedCents == 0)
        #expect(paid.contains(.stopAdvertising) && paid.contains(.settleAttempted))
    }

    @Test("On the event stream, the wait is for the next change of the split, not only of the status")
    func awaitsTheNextShare() {
        var configuration = Bench.configuration
        configuration.liveStatus = true
        configuration.safetyInterval = .seconds(20)
        var bench = Bench.splitAdvertising(configuration: configuration)
        let once = State(.partiallyPaid, sharesPaid: 1, paidCents: 251)
        let seen = bench.send(.statusSeen(once))
        #expect(written(seen)?.charge.sharesPaid == 1)
        #expect(seen.last == .awaitStatusChange(sessionID: "s-1", after: once, timeout: .seconds(20)))
        let twice = State(.partiallyPaid, sharesPaid: 2, paidCents: 501)
        #expect(
            bench.send(.statusSeen(twice)).last
                == .awaitStatusChange(sessionID: "s-1", after: twice, timeout: .seconds(20))
        )
        #expect(bench.charge.sharesPaid == 2)
    }

    @Test("Shares: 1 to 50, each at least a cent")
    func refusals() {
        var bench = Bench()
        _ = bench.send(.start)
        for (cents, shares) in [(1_000, 0), (1_000, -1), (1_000, 51), (3, 4)] as [(Cents, Int)] {
            #expect(
                bench.send(.chargeRequested(id: "x", amountCents: cents, shares: shares, reference: ""))
                    == [.refuse(.invalidShares(shares, amountCents: cents))]
            )
        }
        #expect(bench.machine.record == nil)
        #expect(
            KioskError.invalidShares(51, amountCents: 1_000).description
                == "the number of shares must be 1 to 50, not 51"
        )
        #expect(
            KioskError.invalidShares(4, amountCents: 3).description
                == "3 cents cannot be split into 4 shares of at least one cent"
        )
        let most = bench.send(.chargeRequested(id: "c-1", amountCents: 50, shares: 50, reference: ""))
        #expect(most.last == .createSession(amountCents: 50, shares: 50, idempotencyKey: "kiosk-c-1-1"))
    }

    @Test("A cancel with shares paid ends cancelled once the ledger says what it refunded")
    func cancelRefundsTheSharesPaid() throws {
        var bench = Bench.splitAdvertising()
        _ = bench.send(.statusSeen(State(.partiallyPaid, sharesPaid: 2, paidCents: 501, tipCents: 25)))
        let cancel = bench.send(.cancelRequested(id: "c-1"))
        #expect(Array(cancel.dropFirst(2)) == [.stopTimer, .stopAdvertising, .cancelSession(sessionID: "s-1")])
        // A split's cancel is followed by its status: shares may have been paid meanwhile, and refunds are told.
        #expect(bench.send(.sessionCancelled) == [.fetchStatus(sessionID: "s-1")])
        #expect(!bench.charge.state.isFinal)
        let ended = bench.send(
            .statusSeen(State(.cancelled, sharesPaid: 2, paidCents: 501, tipCents: 25, refundedCents: 526))
        )
        #expect(bench.charge.state == .cancelled && bench.charge.refundedCents == 526)
        #expect(bench.charge.sharesPaid == 2 && bench.charge.paidCents == 501 && bench.charge.problem == nil)
        #expect(ended.contains(.settleAttempted))
    }

    @Test("A cancel of a split with nothing paid ends cancelled at once, after one status read")
    func cancelWithNothingPaid() {
        var bench = Bench.splitAdvertising()
        _ = bench.send(.statusSeen(State(.advertising)))
        _ = bench.send(.cancelRequested(id: "c-1"))
        #expect(bench.send(.sessionCancelled) == [.fetchStatus(sessionID: "s-1")])
        _ = bench.send(.statusSeen(State(.cancelled)))
        #expect(bench.charge.state == .cancelled && bench.charge.refundedCents == 0)
    }

    @Test("A cancel that finds every share paid reports the charge paid")
    func cancelAfterTheLastShare() {
        var bench = Bench.splitAdvertising()
        _ = bench.send(.statusSeen(State(.partiallyPaid, sharesPaid: 3, paidCents: 751)))
        _ = bench.send(.cancelRequested(id: "c-1"))
        #expect(bench.send(.sessionAlreadyOver) == [.fetchStatus(sessionID: "s-1")])
        _ = bench.send(.statusSeen(State(.paid, sharesPaid: 4, paidCents: 1_001)))
        #expect(bench.charge.state == .paid && bench.charge.sharesPaid == 4)
    }

    @Test("A session that expires with shares paid is not renewed; the charge waits for their refund, then expires")
    func expiryWaitsForTheRefunds() throws {
        var bench = Bench.splitAdvertising()
        _ = try bench.poll(State(.partiallyPaid, sharesPaid: 1, paidCents: 251, tipCents: 10))
        let over = State(.expired, sharesPaid: 1, paidCents: 251, tipCents: 10)
        let expired = try bench.poll(over)
        #expect(expired.contains(.stopAdvertising))
        #expect(!expired.contains { if case .createSession = $0 { true } else { false } })
        #expect(!bench.charge.state.isFinal)
        // Read again every status interval until the refund shows.
        #expect(timer(expired)?.0 == .seconds(1))
        for _ in 1...3 {
            #expect(timer(try bench.poll(over))?.0 == .seconds(1))
            #expect(!bench.charge.state.isFinal)
        }
        let refunded = bench.send(
            .statusSeen(State(.expired, sharesPaid: 1, paidCents: 251, tipCents: 10, refundedCents: 261))
        )
        #expect(bench.charge.state == .expired && bench.charge.refundedCents == 261 && bench.charge.sharesPaid == 1)
        #expect(refunded.contains(.settleAttempted))
    }

    @Test("The wait for refunds is bounded: the charge then ends with what was refunded by then")
    func refundWaitBounded() throws {
        var configuration = Bench.configuration
        configuration.refundWait = .milliseconds(2_500)
        var bench = Bench.splitAdvertising(configuration: configuration)
        _ = try bench.poll(State(.partiallyPaid, sharesPaid: 2, paidCents: 501))
        let over = State(.expired, sharesPaid: 2, paidCents: 501)
        var actions = bench.send(.statusSeen(over))
        #expect(timer(actions)?.0 == .seconds(1))
        bench.advance(1)
        _ = bench.send(.timerFired(token: try #require(timer(actions)).1))
        // A failed read meanwhile is retried, and shown.
        actions = bench.send(.statusFailed(.ledgerUnreachable("timeout")))
        #expect(bench.charge.problem == "cannot reach the ledger: timeout" && !bench.charge.state.isFinal)
        let (delay, token) = try #require(timer(actions))
        #expect(delay == .seconds(1))
        bench.advance(1)
        #expect(bench.send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
        actions = bench.send(.statusSeen(over))
        // 2 s of the 2.5 are gone: the last wait is the half second left.
        #expect(timer(actions)?.0 == .milliseconds(500))
        bench.advance(0.5)
        _ = bench.send(.timerFired(token: try #require(timer(actions)).1))
        _ = bench.send(.statusSeen(over))
        #expect(bench.charge.state == .expired && bench.charge.refundedCents == 0 && bench.charge.problem == nil)
    }

    @Test("The charge's lifetime ending with shares paid cancels the session, then expires with the refund")
    func lifetimeOverWithSharesPaid() throws {
        var bench = Bench.splitAdvertising()
        _ = try bench.poll(State(.partiallyPaid, sharesPaid: 1, paidCents: 251))
        bench.advance(58)
        let (_, token) = try #require(
            timer(bench.send(.statusSeen(State(.partiallyPaid, sharesPaid: 1, paidCents: 251))))
        )
        bench.advance(0.5)
        #expect(bench.send(.timerFired(token: token)) == [.stopAdvertising, .cancelSession(sessionID: "s-1")])
        #expect(bench.send(.sessionCancelled) == [.fetchStatus(sessionID: "s-1")])
        _ = bench.send(.statusSeen(State(.cancelled, sharesPaid: 1, paidCents: 251, refundedCents: 251)))
        #expect(bench.charge.state == .expired && bench.charge.refundedCents == 251)
    }

    @Test("A ledger that makes one share of a split (it predates splits) fails the charge, its session cancelled")
    func ledgerWithoutSplits() throws {
        var bench = Bench(configuration: Bench.configuration)
        _ = bench.send(.start)
        _ = bench.send(.chargeRequested(id: "c-1", amountCents: 1_001, shares: 4, reference: ""))
        let whole = KioskChargeMachine.Session(sessionID: "s-1", eid: Bench.split.eid, expiresAt: Bench.split.expiresAt)
        let created = bench.send(.sessionCreated(whole))
        #expect(written(created)?.charge.sessionID == "s-1")
        #expect(created.last == .cancelSession(sessionID: "s-1"))
        #expect(!created.contains { if case .advertise = $0 { true } else { false } })
        _ = bench.send(.sessionCancelled)
        _ = bench.send(.statusSeen(State(.cancelled)))
        #expect(bench.charge.state == .failed)
        #expect(
            bench.charge.problem
                == "the ledger refused the charge: the ledger made a session of one share, not 4 (does it split?)"
        )
    }

    @Test("A share's amount: the cents that do not divide evenly go to the first shares")
    func shareAmounts() {
        var charge = KioskCharge(
            id: "c",
            amountCents: 1_001,
            shares: 4,
            reference: "",
            createdAt: Bench.start,
            updatedAt: Bench.start
        )
        #expect((1...4).map(charge.cents(ofShare:)) == [251, 250, 250, 250])
        #expect(charge.nextShareCents == 251)
        charge.sharesPaid = 1
        #expect(charge.nextShareCents == 250)
        charge.sharesPaid = 4
        #expect(charge.nextShareCents == 250)
        let whole = KioskCharge(
            id: "c",
            amountCents: 1_001,
            reference: "",
            createdAt: Bench.start,
            updatedAt: Bench.start
        )
        #expect(whole.nextShareCents == 1_001 && !whole.isSplit)
    }

    @Test("Every session of a charge suggests the charge's tips: the first and the one renewed after an expiry")
    func everySessionSuggestsTheChargesTips() {
        var bench = Bench(configuration: Bench.configuration)
        _ = bench.send(.start)
        let asked = bench.send(
            .chargeRequested(id: "c-1", amountCents: 1_250, shares: 1, reference: "", tipPercents: [10, 15, 20])
        )
        #expect(bench.charge.tipPercents == [10, 15, 20])
        #expect(
            asked.last
                == .createSession(
                    amountCents: 1_250,
                    shares: 1,
                    tipPercents: [10, 15, 20],
                    idempotencyKey: "kiosk-c-1-1"
                )
        )
        bench.advance(0.25)
        _ = bench.send(.sessionCreated(Bench.first))
        _ = bench.send(.advertisingStarted(token: 1))
        let expired = bench.send(.statusSeen(.expired))
        #expect(
            expired.last
                == .createSession(
                    amountCents: 1_250,
                    shares: 1,
                    tipPercents: [10, 15, 20],
                    idempotencyKey: "kiosk-c-1-2"
                )
        )
    }
}
