import GotchuCore
import Testing

@Suite(.timeLimit(.minutes(10))) struct ReceiverStateMachineTests {
    static let first = ReceiverSession(sessionID: "s-1", eid: EID(rawValue: "0000000001")!, expiresAt: .seconds(60))
    static let second = ReceiverSession(sessionID: "s-2", eid: EID(rawValue: "0000000002")!, expiresAt: .seconds(125))

    private func advertising(_ configuration: ReceiverStateMachine.Configuration = .init()) -> ReceiverStateMachine {
        var machine = ReceiverStateMachine(configuration: configuration)
        #expect(machine.receive(.start, now: .zero) == .createSession)
        #expect(machine.state == .creating)
        #expect(machine.receive(.created(Self.first), now: .seconds(1)) == .startAdvertising(Self.first.eid))
        #expect(machine.state == .advertising(Self.first))
        return machine
    }

    @Test func paid() {
        var machine = advertising()
        #expect(machine.receive(.status(sessionID: "s-1", .pending), now: .seconds(2)) == .none)
        #expect(
            machine.receive(.status(sessionID: "s-1", .paid), now: .seconds(3))
                == .stopAdvertisingAndReport(.paid(Self.first))
        )
        #expect(machine.state == .finished(.paid(Self.first)))
        #expect(machine.receive(.cancel, now: .seconds(4)) == .none)
    }

    @Test func statusOfAnotherSessionIsIgnored() {
        var machine = advertising()
        #expect(machine.receive(.status(sessionID: "s-0", .paid), now: .seconds(3)) == .none)
        #expect(machine.state == .advertising(Self.first))
    }

    @Test func expiryStops() {
        var machine = advertising()
        #expect(
            machine.receive(.status(sessionID: "s-1", .expired), now: .seconds(60))
                == .stopAdvertisingAndReport(.expired(Self.first))
        )
    }

    @Test func expiryRecreates() {
        var machine = advertising(.init(recreateOnExpiry: true))
        #expect(
            machine.receive(.status(sessionID: "s-1", .expired), now: .seconds(60)) == .stopAdvertisingAndCreateSession
        )
        #expect(machine.state == .creating)
        #expect(machine.receive(.created(Self.second), now: .seconds(61)) == .startAdvertising(Self.second.eid))
        #expect(machine.sessionsCreated == 2)
        // The old session's news no longer matters.
        #expect(machine.receive(.status(sessionID: "s-1", .paid), now: .seconds(62)) == .none)
    }

    @Test func recreationStopsAtTheSessionLimit() {
        var machine = advertising(.init(recreateOnExpiry: true, maximumSessions: 2))
        _ = machine.receive(.status(sessionID: "s-1", .expired), now: .seconds(60))
        _ = machine.receive(.created(Self.second), now: .seconds(61))
        #expect(
            machine.receive(.status(sessionID: "s-2", .expired), now: .seconds(125))
                == .stopAdvertisingAndReport(.expired(Self.second))
        )
    }

    @Test func localExpiryWaitsForTheGrace() {
        var machine = advertising(.init(expiryGrace: .seconds(5)))
        #expect(machine.receive(.tick, now: .seconds(64)) == .none)
        #expect(machine.receive(.tick, now: .seconds(65)) == .stopAdvertisingAndReport(.expired(Self.first)))
    }

    @Test func cancelCancelsTheSession() {
        var machine = advertising()
        #expect(machine.receive(.cancel, now: .seconds(5)) == .stopAdvertisingAndCancel(sessionID: "s-1"))
        #expect(machine.state == .cancelling(Self.first))
        // Nothing is reported before the ledger has answered.
        #expect(machine.receive(.cancel, now: .seconds(5)) == .none)
        #expect(machine.receive(.tick, now: .seconds(100)) == .none)
        #expect(machine.receive(.cancelAnswered(sessionID: "s-1", .cancelled), now: .seconds(5)) == .report(.cancelled))
        #expect(machine.state == .finished(.cancelled))
    }

    @Test func paidWinsOverTheCancel() {
        var machine = advertising()
        _ = machine.receive(.cancel, now: .seconds(5))
        #expect(
            machine.receive(.cancelAnswered(sessionID: "s-1", .paid), now: .seconds(5)) == .report(.paid(Self.first))
        )
        #expect(machine.state == .finished(.paid(Self.first)))
    }

    @Test func expiredBeforeTheCancel() {
        var machine = advertising()
        _ = machine.receive(.cancel, now: .seconds(59))
        #expect(
            machine.receive(.cancelAnswered(sessionID: "s-1", .expired), now: .seconds(60))
                == .report(.expired(Self.first))
        )
    }

    @Test func anAnswerAboutAnotherSessionIsIgnored() {
        var machine = advertising()
        _ = machine.receive(.cancel, now: .seconds(5))
        #expect(machine.receive(.cancelAnswered(sessionID: "s-0", .paid), now: .seconds(5)) == .none)
        #expect(machine.state == .cancelling(Self.first))
    }

    @Test func anUnconfirmedCancelIsRetriedWithBackoffThenReportedUnconfirmed() {
        var machine = advertising(.init(cancelAttempts: 4, cancelRetryDelay: .milliseconds(500)))
        var now = Duration.seconds(5)
        #expect(machine.receive(.cancel, now: now) == .stopAdvertisingAndCancel(sessionID: "s-1"))
        var waits: [Duration] = []
        while case .cancelAgain(let sid, let wait) = machine.receive(
            .cancelAnswered(sessionID: "s-1", .unconfirmed(reason: "cannot reach the server")),
            now: now
        ) {
            #expect(sid == "s-1")
            waits.append(wait)
            now += wait
        }
        #expect(waits == [.milliseconds(500), .seconds(1), .seconds(2)])
        #expect(machine.state == .finished(.cancelUnconfirmed(Self.first, reason: "cannot reach the server")))
    }

    @Test func aRetriedCancelThatGetsThroughEndsTheUsualWay() {
        var machine = advertising()
        _ = machine.receive(.cancel, now: .seconds(5))
        #expect(
            machine.receive(.cancelAnswered(sessionID: "s-1", .unconfirmed(reason: "503")), now: .seconds(5))
                == .cancelAgain(sessionID: "s-1", after: .milliseconds(500))
        )
        // The first cancel did go through, its answer was lost: the second finds the session paid.
        #expect(
            machine.receive(.cancelAnswered(sessionID: "s-1", .paid), now: .milliseconds(5_600))
                == .report(.paid(Self.first))
        )
    }

    @Test func retriesStopWhenPatienceRunsOut() {
        // Requests that time out take long: the next wait would end past the patience.
        var machine = advertising(
            .init(cancelAttempts: 10, cancelRetryDelay: .seconds(1), cancelPatience: .seconds(15))
        )
        _ = machine.receive(.cancel, now: .seconds(5))
        let unconfirmed = ReceiverStateMachine.Event.cancelAnswered(sessionID: "s-1", .unconfirmed(reason: "timeout"))
        #expect(machine.receive(unconfirmed, now: .seconds(15)) == .cancelAgain(sessionID: "s-1", after: .seconds(1)))
        #expect(machine.receive(unconfirmed, now: .seconds(18)) == .cancelAgain(sessionID: "s-1", after: .seconds(2)))
        #expect(
            machine.receive(unconfirmed, now: .seconds(29))
                == .report(.cancelUnconfirmed(Self.first, reason: "timeout"))
        )
    }

    @Test func anUnconfirmedCancelPastExpiryAndGraceIsAnExpiry() {
        var machine = advertising(.init(expiryGrace: .seconds(5)))
        _ = machine.receive(.cancel, now: .seconds(58))
        #expect(
            machine.receive(.cancelAnswered(sessionID: "s-1", .unconfirmed(reason: "down")), now: .seconds(65))
                == .report(.expired(Self.first))
        )
    }

    @Test func cancelledOnTheServer() {
        var machine = advertising()
        #expect(
            machine.receive(.status(sessionID: "s-1", .cancelled), now: .seconds(5))
                == .stopAdvertisingAndReport(.cancelled)
        )
    }

    @Test func cancelWhileCreating() {
        var machine = ReceiverStateMachine()
        _ = machine.receive(.start, now: .zero)
        #expect(machine.receive(.cancel, now: .zero) == .report(.cancelled))
        #expect(machine.receive(.created(Self.first), now: .zero) == .none)
    }

    @Test func createFailure() {
        var machine = ReceiverStateMachine()
        _ = machine.receive(.start, now: .zero)
        #expect(machine.receive(.createFailed(reason: "401"), now: .zero) == .report(.createFailed(reason: "401")))
    }

    @Test func advertisingFailure() {
        var machine = advertising()
        #expect(
            machine.receive(.advertisingFailed(reason: "Maximum advertisements reached"), now: .seconds(2))
                == .stopAdvertisingAndReport(.advertisingFailed(reason: "Maximum advertisements reached"))
        )
    }

    @Test func eventsOutOfPlaceAreIgnored() {
        var machine = ReceiverStateMachine()
        #expect(machine.receive(.created(Self.first), now: .zero) == .none)
        #expect(machine.receive(.tick, now: .seconds(100)) == .none)
        #expect(machine.receive(.status(sessionID: "s-1", .paid), now: .zero) == .none)
        #expect(machine.state == .idle)
        _ = machine.receive(.start, now: .zero)
        #expect(machine.receive(.start, now: .zero) == .none)
        #expect(machine.receive(.status(sessionID: "s-1", .paid), now: .zero) == .none)
    }
}
