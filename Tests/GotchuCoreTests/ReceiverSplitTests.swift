import GotchuCore
import Testing

@Suite("The receiver's flow: a split session paid share by share, or ended with its refunds", .timeLimit(.minutes(10)))
struct ReceiverSplitTests {
    static let split = ReceiverSession(
        sessionID: "s-4",
        eid: EID(rawValue: "0000000004")!,
        expiresAt: .seconds(60),
        shares: 4
    )

    private func advertising(_ configuration: ReceiverStateMachine.Configuration = .init()) -> ReceiverStateMachine {
        var machine = ReceiverStateMachine(configuration: configuration)
        #expect(machine.receive(.start, now: .zero) == .createSession)
        #expect(machine.receive(.created(Self.split), now: .seconds(1)) == .startAdvertising(Self.split.eid))
        return machine
    }

    private func session(_ payments: SessionPayments) -> ReceiverSession {
        var session = Self.split
        session.payments = payments
        return session
    }

    private func paid(_ shares: Int, tips: Cents = 0) -> SessionPayments {
        SessionPayments(sharesPaid: shares, paidCents: Cents(shares) * 1_000, tipCents: tips)
    }

    @Test("Each share that lands is shown once; the session stays on the air until every share is paid")
    func paidShareByShare() {
        var machine = advertising()
        #expect(
            machine.receive(.status(sessionID: "s-4", .pending, payments: SessionPayments()), now: .seconds(2))
                == .none
        )
        #expect(
            machine.receive(.status(sessionID: "s-4", .partiallyPaid, payments: paid(1)), now: .seconds(3))
                == .showSharesPaid(session(paid(1)))
        )
        #expect(machine.state == .advertising(session(paid(1))))
        // The same count again (a safety read, a lock taken meanwhile) shows nothing.
        #expect(
            machine.receive(.status(sessionID: "s-4", .partiallyPaid, payments: paid(1)), now: .seconds(4)) == .none
        )
        #expect(machine.receive(.status(sessionID: "s-4", .pending, payments: paid(1)), now: .seconds(4)) == .none)
        // Two at once (one payer paying for a friend) show as one step.
        #expect(
            machine.receive(.status(sessionID: "s-4", .partiallyPaid, payments: paid(3, tips: 150)), now: .seconds(5))
                == .showSharesPaid(session(paid(3, tips: 150)))
        )
        // Another session's news changes nothing.
        #expect(
            machine.receive(.status(sessionID: "s-0", .partiallyPaid, payments: paid(4)), now: .seconds(6)) == .none
        )
        #expect(
            machine.receive(.status(sessionID: "s-4", .paid, payments: paid(4, tips: 150)), now: .seconds(7))
                == .stopAdvertisingAndReport(.paid(session(paid(4, tips: 150))))
        )
        #expect(
            machine.receive(.status(sessionID: "s-4", .partiallyPaid, payments: paid(4)), now: .seconds(8)) == .none
        )
    }

    @Test("Cancelled with shares paid, the outcome says what the ledger refunded")
    func cancelledWithRefunds() {
        var machine = advertising()
        _ = machine.receive(.status(sessionID: "s-4", .partiallyPaid, payments: paid(2)), now: .seconds(2))
        #expect(machine.receive(.cancel, now: .seconds(3)) == .stopAdvertisingAndCancel(sessionID: "s-4"))
        var refunded = paid(2, tips: 150)
        refunded.refundedCents = 2_150
        refunded.refundedPayments = 2
        #expect(
            machine.receive(.cancelAnswered(sessionID: "s-4", .cancelled, payments: refunded), now: .seconds(4))
                == .report(.cancelledWithRefunds(session(refunded)))
        )
    }

    @Test("Cancelled with no share paid is a plain cancel")
    func cancelledUnpaid() {
        var machine = advertising()
        _ = machine.receive(.cancel, now: .seconds(3))
        #expect(
            machine.receive(
                .cancelAnswered(sessionID: "s-4", .cancelled, payments: SessionPayments()),
                now: .seconds(4)
            )
                == .report(.cancelled)
        )
    }

    @Test("A cancel the ledger refuses because every share is paid ends paid")
    func cancelRefusedAllPaid() {
        var machine = advertising()
        _ = machine.receive(.status(sessionID: "s-4", .partiallyPaid, payments: paid(3)), now: .seconds(2))
        _ = machine.receive(.cancel, now: .seconds(3))
        #expect(
            machine.receive(.cancelAnswered(sessionID: "s-4", .paid, payments: paid(4)), now: .seconds(4))
                == .report(.paid(session(paid(4))))
        )
    }

    @Test("Cancelled on the server with shares paid: stop advertising, with the refunds")
    func cancelledElsewhere() {
        var machine = advertising()
        var refunded = paid(1)
        refunded.refundedCents = 1_000
        refunded.refundedPayments = 1
        #expect(
            machine.receive(.status(sessionID: "s-4", .cancelled, payments: refunded), now: .seconds(5))
                == .stopAdvertisingAndReport(.cancelledWithRefunds(session(refunded)))
        )
    }

    @Test("Expired with shares paid: the outcome carries the refunds; past the grace without a word, the last known")
    func expiredWithRefunds() {
        var machine = advertising()
        var refunded = paid(2)
        refunded.refundedCents = 2_000
        refunded.refundedPayments = 2
        #expect(
            machine.receive(.status(sessionID: "s-4", .expired, payments: refunded), now: .seconds(60))
                == .stopAdvertisingAndReport(.expired(session(refunded)))
        )

        var silent = advertising(.init(expiryGrace: .seconds(5)))
        _ = silent.receive(.status(sessionID: "s-4", .partiallyPaid, payments: paid(1)), now: .seconds(30))
        #expect(silent.receive(.tick, now: .seconds(64)) == .none)
        #expect(silent.receive(.tick, now: .seconds(65)) == .stopAdvertisingAndReport(.expired(session(paid(1)))))
    }

    @Test("Paid, but a receipt does not verify: reported so, not as paid")
    func paidUnverified() {
        var machine = advertising()
        #expect(
            machine.receive(
                .status(sessionID: "s-4", .paidUnverified(reason: "bad signature"), payments: paid(4)),
                now: .seconds(9)
            ) == .stopAdvertisingAndReport(.paidUnverified(session(paid(4)), reason: "bad signature"))
        )
    }

    @Test("A status without figures leaves the known ones")
    func statusWithoutFigures() {
        var machine = advertising()
        _ = machine.receive(.status(sessionID: "s-4", .partiallyPaid, payments: paid(2)), now: .seconds(2))
        #expect(machine.receive(.status(sessionID: "s-4", .partiallyPaid), now: .seconds(3)) == .none)
        #expect(
            machine.receive(.status(sessionID: "s-4", .paid), now: .seconds(4))
                == .stopAdvertisingAndReport(.paid(session(paid(2))))
        )
    }
}
