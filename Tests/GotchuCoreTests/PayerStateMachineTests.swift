import GotchuCore
import Testing

@Suite(.timeLimit(.minutes(10))) struct PayerStateMachineTests {
    static let near = EID(rawValue: "0123456789")!
    static let far = EID(rawValue: "abcdefabcd")!
    static let sid = "6f1c2a7e-0000-4000-8000-000000000001"

    private func sighting(_ eid: EID, _ rssi: Int16, at ms: Int64) -> Sighting {
        Sighting(eid: eid, rssi: rssi, txPower: 0, time: .milliseconds(ms), source: "test")
    }

    /// Feeds a few strong sightings of `near` and weak ones of `far`, returning the first non-`none` action.
    private func scanNear(_ machine: inout PayerStateMachine) -> PayerStateMachine.Action {
        for step in 0..<10 {
            let ms = Int64(step) * 100
            for (eid, rssi) in [(Self.far, Int16(-60)), (Self.near, Int16(-30))] {
                let action = machine.receive(.sighting(sighting(eid, rssi, at: ms)), now: .milliseconds(ms))
                if action != .none { return action }
            }
        }
        return .none
    }

    private var offer: PaymentOffer {
        PaymentOffer(eid: Self.near, sessionID: Self.sid, amountCents: 1250, payeeName: "Corner Café")
    }

    private func machineAtResolving(_ configuration: PayerStateMachine.Configuration = .init()) -> PayerStateMachine {
        var machine = PayerStateMachine(configuration: configuration)
        _ = machine.receive(.start, now: .zero)
        #expect(scanNear(&machine) == .stopScanAndResolve(Self.near))
        return machine
    }

    private func machineAtConfirming() -> PayerStateMachine {
        var machine = machineAtResolving()
        let action = machine.receive(
            .resolved(sessionID: Self.sid, amountCents: 1250, payeeName: "Corner Café"),
            now: .seconds(1)
        )
        #expect(action == .askConfirmation(offer))
        return machine
    }

    private func machineAtSending() -> PayerStateMachine {
        var machine = machineAtConfirming()
        #expect(machine.receive(.confirmed, now: .seconds(2)) == .lock(sessionID: Self.sid))
        #expect(machine.receive(.locked, now: .seconds(2)) == .send(sessionID: Self.sid))
        #expect(machine.state == .sending(offer))
        return machine
    }

    @Test func happyPath() {
        var machine = PayerStateMachine()
        #expect(machine.state == .idle)
        #expect(machine.receive(.start, now: .zero) == .startScan)
        #expect(machine.state == .scanning(since: .zero))
        #expect(scanNear(&machine) == .stopScanAndResolve(Self.near))
        #expect(machine.state == .resolving(Self.near))
        #expect(
            machine.receive(
                .resolved(sessionID: Self.sid, amountCents: 1250, payeeName: "Corner Café"),
                now: .seconds(1)
            )
                == .askConfirmation(offer)
        )
        #expect(machine.state == .confirming(offer))
        #expect(machine.receive(.confirmed, now: .seconds(2)) == .lock(sessionID: Self.sid))
        #expect(machine.state == .locking(offer))
        #expect(machine.receive(.locked, now: .seconds(2)) == .send(sessionID: Self.sid))
        #expect(
            machine.receive(.sent(newBalanceCents: 8750), now: .seconds(3))
                == .report(.paid(offer, newBalanceCents: 8750))
        )
        #expect(machine.state == .finished(.paid(offer, newBalanceCents: 8750)))
    }

    @Test func startIsAcceptedOnce() {
        var machine = PayerStateMachine()
        _ = machine.receive(.start, now: .zero)
        #expect(machine.receive(.start, now: .zero) == .none)
    }

    @Test func eventsBeforeStartAreIgnored() {
        var machine = PayerStateMachine()
        #expect(machine.receive(.sighting(sighting(Self.near, -30, at: 0)), now: .zero) == .none)
        #expect(machine.receive(.tick, now: .seconds(20)) == .none)
        #expect(machine.receive(.cancel, now: .zero) == .none)
        #expect(machine.state == .idle)
    }

    @Test func ambiguousTerminalsArePresentedAfterTheSelectionTimeout() {
        var machine = PayerStateMachine()
        _ = machine.receive(.start, now: .zero)
        for step in 0..<30 {
            let ms = Int64(step) * 100
            for (eid, rssi) in [(Self.near, Int16(-30)), (Self.far, Int16(-33))] {
                #expect(machine.receive(.sighting(sighting(eid, rssi, at: ms)), now: .milliseconds(ms)) == .none)
            }
        }
        guard case .stopScanAndPresentCandidates(let candidates) = machine.receive(.tick, now: .seconds(3)) else {
            Issue.record("expected the candidates")
            return
        }
        #expect(candidates.map(\.eid) == [Self.near, Self.far])
        #expect(machine.state == .choosing(candidates))
        // Something never shown cannot be chosen.
        #expect(machine.receive(.chose(EID(rawValue: "ffffffffff")!), now: .seconds(4)) == .none)
        #expect(machine.receive(.chose(Self.far), now: .seconds(4)) == .resolve(Self.far))
        #expect(machine.state == .resolving(Self.far))
    }

    @Test func alwaysChooseNeverAutoSelects() {
        var machine = PayerStateMachine(configuration: .init(alwaysChoose: true, chooseAfter: .seconds(1)))
        _ = machine.receive(.start, now: .zero)
        #expect(scanNear(&machine) == .none)
        guard case .stopScanAndPresentCandidates(let candidates) = machine.receive(.tick, now: .seconds(1)) else {
            Issue.record("expected the candidates")
            return
        }
        #expect(candidates.first?.eid == Self.near)
    }

    @Test func terminalsHeardWithoutRSSIAreListedAfterTheRangedOnesAndCanBeChosen() {
        let unranged = EID(rawValue: "00000000ff")!
        var machine = PayerStateMachine(configuration: .init(alwaysChoose: true, chooseAfter: .seconds(1)))
        _ = machine.receive(.start, now: .zero)
        // BlueZ reports an unchanged advertisement without RSSI once: one sighting, early in the scan.
        let once = Sighting(eid: unranged, rssi: nil, txPower: nil, time: .zero, source: "test")
        #expect(machine.receive(.sighting(once), now: .zero) == .none)
        #expect(scanNear(&machine) == .none)
        guard case .stopScanAndPresentCandidates(let candidates) = machine.receive(.tick, now: .seconds(1)) else {
            Issue.record("expected the candidates")
            return
        }
        #expect(candidates.map(\.eid) == [Self.near, Self.far, unranged])
        #expect(candidates.last?.rssi == nil && candidates.first?.rssi != nil)
        #expect(machine.receive(.chose(unranged), now: .seconds(2)) == .resolve(unranged))
    }

    @Test func onlyUnrangedTerminalsStillGiveAList() {
        let unranged = EID(rawValue: "00000000ff")!
        // Without --choose too: nothing can be auto-selected, but the payer may pick what it sees.
        var machine = PayerStateMachine(configuration: .init(selectionTimeout: .seconds(3)))
        _ = machine.receive(.start, now: .zero)
        let once = Sighting(eid: unranged, rssi: nil, txPower: nil, time: .zero, source: "test")
        #expect(machine.receive(.sighting(once), now: .zero) == .none)
        #expect(machine.receive(.tick, now: .seconds(2)) == .none)
        guard case .stopScanAndPresentCandidates(let candidates) = machine.receive(.tick, now: .seconds(3)) else {
            Issue.record("expected the candidates")
            return
        }
        #expect(candidates.map(\.eid) == [unranged])
    }

    @Test func aTypedEIDIsResolvedWithoutScanning() {
        var machine = PayerStateMachine(configuration: .init(eid: Self.far))
        #expect(machine.receive(.start, now: .zero) == .resolve(Self.far))
        #expect(machine.state == .resolving(Self.far))
        let action = machine.receive(
            .resolved(sessionID: Self.sid, amountCents: 1_250, payeeName: "bob"),
            now: .seconds(1)
        )
        guard case .askConfirmation(let offer) = action else {
            Issue.record("expected the question, got \(action)")
            return
        }
        #expect(offer.eid == Self.far)
        #expect(offer.confirmationCode == ConfirmationCode.of(sessionID: Self.sid))
    }

    @Test func nothingNearbyTimesOut() {
        var machine = PayerStateMachine(configuration: .init(scanTimeout: .seconds(15)))
        _ = machine.receive(.start, now: .zero)
        #expect(machine.receive(.tick, now: .seconds(14)) == .none)
        #expect(machine.receive(.tick, now: .seconds(15)) == .stopScanAndReport(.failed(.noTerminalNearby)))
        #expect(machine.receive(.sighting(sighting(Self.near, -30, at: 15_000)), now: .seconds(15)) == .none)
    }

    @Test func cancelWhileScanningStopsTheScan() {
        var machine = PayerStateMachine()
        _ = machine.receive(.start, now: .zero)
        #expect(machine.receive(.cancel, now: .seconds(1)) == .stopScanAndReport(.failed(.cancelled)))
        #expect(machine.state == .finished(.failed(.cancelled)))
    }

    @Test func cancelWhileChoosing() {
        var machine = PayerStateMachine(configuration: .init(alwaysChoose: true))
        _ = machine.receive(.start, now: .zero)
        _ = scanNear(&machine)
        _ = machine.receive(.tick, now: .seconds(1))
        #expect(machine.receive(.cancel, now: .seconds(2)) == .report(.failed(.cancelled)))
    }

    @Test(arguments: [PayerStateMachine.ResolveFailure.notFound, .expired, .other("timed out")])
    func resolveFailures(_ failure: PayerStateMachine.ResolveFailure) {
        var machine = machineAtResolving()
        #expect(
            machine.receive(.resolveFailed(failure), now: .seconds(1))
                == .report(.failed(.resolveFailed(Self.near, failure)))
        )
    }

    @Test func cancelWhileResolving() {
        var machine = machineAtResolving()
        #expect(machine.receive(.cancel, now: .seconds(1)) == .report(.failed(.cancelled)))
        // The late answer changes nothing.
        #expect(
            machine.receive(.resolved(sessionID: Self.sid, amountCents: 1, payeeName: "x"), now: .seconds(1)) == .none
        )
    }

    @Test func amountAboveTheLimitIsRefusedWithoutAsking() {
        var machine = machineAtResolving(.init(preApproved: true, maximumAmountCents: 1000))
        let action = machine.receive(
            .resolved(sessionID: Self.sid, amountCents: 1250, payeeName: "Corner Café"),
            now: .seconds(1)
        )
        #expect(action == .report(.failed(.amountAboveLimit(offer, limitCents: 1000))))
    }

    @Test func amountAtTheLimitIsAccepted() {
        var machine = machineAtResolving(.init(maximumAmountCents: 1250))
        let action = machine.receive(
            .resolved(sessionID: Self.sid, amountCents: 1250, payeeName: "Corner Café"),
            now: .seconds(1)
        )
        #expect(action == .askConfirmation(offer))
    }

    @Test func preApprovedSkipsTheQuestion() {
        var machine = machineAtResolving(.init(preApproved: true))
        let action = machine.receive(
            .resolved(sessionID: Self.sid, amountCents: 1250, payeeName: "Corner Café"),
            now: .seconds(1)
        )
        #expect(action == .lock(sessionID: Self.sid))
    }

    @Test func declining() {
        var machine = machineAtConfirming()
        #expect(machine.receive(.declined, now: .seconds(2)) == .report(.failed(.declined(offer))))
        #expect(machine.receive(.confirmed, now: .seconds(2)) == .none)
    }

    @Test func cancelWhileConfirming() {
        var machine = machineAtConfirming()
        #expect(machine.receive(.cancel, now: .seconds(2)) == .report(.failed(.cancelled)))
    }

    @Test func lockFailure() {
        var machine = machineAtConfirming()
        _ = machine.receive(.confirmed, now: .seconds(2))
        #expect(
            machine.receive(.lockFailed(reason: "session-locked"), now: .seconds(2))
                == .report(.failed(.lockFailed(offer, reason: "session-locked")))
        )
    }

    @Test func cancelWhileLockingReleasesTheLockOnceGrantedAndSendsNothing() {
        var machine = machineAtConfirming()
        _ = machine.receive(.confirmed, now: .seconds(2))
        // The lock request is in flight: its answer decides whether there is a lock to release.
        #expect(machine.receive(.cancel, now: .seconds(2)) == .none)
        #expect(machine.state == .locking(offer))
        #expect(machine.receive(.locked, now: .seconds(3)) == .unlock(sessionID: Self.sid))
        #expect(machine.state == .unlocking(offer))
        #expect(machine.receive(.cancel, now: .seconds(3)) == .none)
        #expect(machine.receive(.sent(newBalanceCents: 0), now: .seconds(3)) == .none)
        #expect(machine.receive(.unlocked, now: .seconds(3)) == .report(.failed(.cancelled)))
    }

    @Test func cancelWhileLockingWhenTheLockIsRefused() {
        var machine = machineAtConfirming()
        _ = machine.receive(.confirmed, now: .seconds(2))
        _ = machine.receive(.cancel, now: .seconds(2))
        #expect(
            machine.receive(.lockFailed(reason: "session-locked"), now: .seconds(3)) == .report(.failed(.cancelled))
        )
    }

    @Test func aReleaseThatFailsStillEndsCancelled() {
        var machine = machineAtConfirming()
        _ = machine.receive(.confirmed, now: .seconds(2))
        _ = machine.receive(.cancel, now: .seconds(2))
        _ = machine.receive(.locked, now: .seconds(2))
        #expect(
            machine.receive(.unlockFailed(reason: "cannot reach the server"), now: .seconds(3))
                == .report(.failed(.cancelled))
        )
    }

    @Test func cancelBeforeTheLockWasAskedForSendsNothing() {
        var machine = machineAtConfirming()
        #expect(machine.receive(.cancel, now: .seconds(2)) == .report(.failed(.cancelled)))
        #expect(machine.receive(.confirmed, now: .seconds(2)) == .none)
        #expect(machine.receive(.locked, now: .seconds(2)) == .none)
    }

    @Test func sendFailure() {
        var machine = machineAtSending()
        #expect(
            machine.receive(.sendFailed(reason: "insufficient-funds"), now: .seconds(3))
                == .report(.failed(.sendFailed(offer, reason: "insufficient-funds")))
        )
    }

    @Test func cancelWhileSendingSettlesAndPaidIsPaid() {
        var machine = machineAtSending()
        #expect(machine.receive(.cancel, now: .seconds(3)) == .settle(offer))
        #expect(machine.state == .sending(offer))
        #expect(machine.receive(.cancel, now: .seconds(3)) == .none)
        #expect(
            machine.receive(.sent(newBalanceCents: 0), now: .seconds(3)) == .report(.paid(offer, newBalanceCents: 0))
        )
    }

    @Test func cancelWhileSendingThenARefusalIsACancelWithNothingPaid() {
        var machine = machineAtSending()
        _ = machine.receive(.cancel, now: .seconds(3))
        #expect(
            machine.receive(.sendFailed(reason: "session-cancelled"), now: .seconds(3))
                == .report(.failed(.cancelledWhileSending(offer, reason: "session-cancelled")))
        )
    }

    @Test func anUnansweredSendIsRetriedWithTheSameKeyWithBackoffThenReportedUnknown() {
        var configuration = PayerStateMachine.Configuration()
        configuration.sendAttempts = 4
        configuration.sendRetryDelay = .milliseconds(200)
        var machine = PayerStateMachine(configuration: configuration)
        _ = machine.receive(.start, now: .zero)
        _ = scanNear(&machine)
        _ = machine.receive(.resolved(sessionID: Self.sid, amountCents: 1250, payeeName: "Corner Café"), now: .zero)
        _ = machine.receive(.confirmed, now: .seconds(1))
        #expect(machine.receive(.locked, now: .seconds(1)) == .send(sessionID: Self.sid))
        var now = Duration.seconds(1)
        var waits: [Duration] = []
        while case .retrySend(let sid, let wait) = machine.receive(.sendUnanswered(reason: "timed out"), now: now) {
            #expect(sid == Self.sid)
            waits.append(wait)
            now += wait
        }
        #expect(waits == [.milliseconds(200), .milliseconds(400), .milliseconds(800)])
        #expect(machine.state == .finished(.failed(.outcomeUnknown(offer, reason: "timed out"))))
    }

    @Test func aCancelDuringRetriesKeepsSettlingUntilTheLedgerAnswers() {
        var machine = machineAtSending()
        #expect(
            machine.receive(.sendUnanswered(reason: "503"), now: .seconds(3))
                == .retrySend(sessionID: Self.sid, after: .milliseconds(200))
        )
        #expect(machine.receive(.cancel, now: .milliseconds(3_100)) == .settle(offer))
        #expect(
            machine.receive(.sendUnanswered(reason: "503"), now: .milliseconds(3_300))
                == .retrySend(sessionID: Self.sid, after: .milliseconds(400))
        )
        #expect(
            machine.receive(.sent(newBalanceCents: 10), now: .milliseconds(3_800))
                == .report(.paid(offer, newBalanceCents: 10))
        )
    }

    @Test func aCancelledPaymentWithoutAnswerIsReportedUnknownNotCancelled() {
        var configuration = PayerStateMachine.Configuration()
        configuration.sendAttempts = 1
        var machine = PayerStateMachine(configuration: configuration)
        _ = machine.receive(.start, now: .zero)
        _ = scanNear(&machine)
        _ = machine.receive(.resolved(sessionID: Self.sid, amountCents: 1250, payeeName: "Corner Café"), now: .zero)
        _ = machine.receive(.confirmed, now: .seconds(1))
        _ = machine.receive(.locked, now: .seconds(1))
        _ = machine.receive(.cancel, now: .seconds(1))
        #expect(
            machine.receive(.sendUnanswered(reason: "down"), now: .seconds(2))
                == .report(.failed(.outcomeUnknown(offer, reason: "down")))
        )
    }

    @Test func finishedIgnoresEverything() {
        var machine = machineAtSending()
        _ = machine.receive(.sent(newBalanceCents: 5), now: .seconds(3))
        for event: PayerStateMachine.Event in [.start, .tick, .cancel, .confirmed, .locked, .sent(newBalanceCents: 1)] {
            #expect(machine.receive(event, now: .seconds(4)) == .none)
        }
        #expect(machine.state == .finished(.paid(offer, newBalanceCents: 5)))
    }
}
