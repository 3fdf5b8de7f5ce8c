import Foundation
import GotchuAPI
import GotchuCore
import GotchuKiosk
import Testing

/// A machine on synthetic time: `now` moves only when a test says so.
struct Bench {
    typealias Action = KioskChargeMachine.Action

    static let configuration = KioskChargeMachine.Configuration(
        sessionLifetime: .seconds(60),
        renewExpiredSessions: true,
        statusInterval: .seconds(1),
        // The polling rules; the event stream's are tested with `Bench.live`.
        liveStatus: false,
        retry: Backoff(initial: .seconds(1), maximum: .seconds(8), jitter: 1...1),
        idleAfter: .seconds(10)
    )
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let first = KioskChargeMachine.Session(
        sessionID: "s-1",
        eid: EID(rawValue: "00000000a1")!,
        expiresAt: start.addingTimeInterval(30)
    )
    static let second = KioskChargeMachine.Session(
        sessionID: "s-2",
        eid: EID(rawValue: "00000000a2")!,
        expiresAt: start.addingTimeInterval(90)
    )

    var machine: KioskChargeMachine
    var now = Bench.start

    init(configuration: KioskChargeMachine.Configuration = Bench.configuration, record: KioskStore.Record? = nil) {
        machine = KioskChargeMachine(configuration: configuration, record: record)
    }

    mutating func send(_ event: KioskChargeMachine.Event) -> [Action] {
        machine.receive(event, now: now)
    }

    mutating func advance(_ seconds: TimeInterval) {
        now = now.addingTimeInterval(seconds)
    }

    var charge: KioskCharge { machine.record!.charge }

    /// Started, with charge `c-1` of 1 250 cents asked and its first session created.
    static func creating(configuration: KioskChargeMachine.Configuration = Bench.configuration) -> Bench {
        var bench = Bench(configuration: configuration)
        #expect(bench.send(.start).isEmpty)
        let actions = bench.send(.chargeRequested(id: "c-1", amountCents: 1_250, shares: 1, reference: "order 17"))
        let charge = bench.charge
        #expect(charge.state == .creating && charge.createdAt == start)
        #expect(charge.expiresAt == start.addingTimeInterval(60))
        #expect(
            actions == [
                .persist(KioskStore.Record(charge: charge), isNew: true),
                .publish(from: nil, to: charge),
                .createSession(amountCents: 1_250, shares: 1, reference: "order 17", idempotencyKey: "kiosk-c-1-1"),
            ]
        )
        return bench
    }

    /// The first session on the air, its status asked once.
    static func advertising(configuration: KioskChargeMachine.Configuration = Bench.configuration) -> Bench {
        var bench = creating(configuration: configuration)
        bench.advance(0.25)
        let created = bench.send(.sessionCreated(first))
        #expect(bench.machine.record?.sessionNumber == 1 && bench.charge.sessionID == "s-1")
        #expect(created.last == .advertise(first.eid, token: 1))
        #expect(created.contains(.persist(bench.machine.record!, isNew: false)))
        bench.advance(0.25)
        let started = bench.send(.advertisingStarted(token: 1))
        #expect(bench.charge.state == .advertising)
        #expect(started.last == .fetchStatus(sessionID: "s-1"))
        return bench
    }
}

extension KioskChargeMachine.SessionState {
    // The statuses of sessions that are not split, as `.statusSeen(.paid)` reads.
    static let created = Self(.created)
    static let advertising = Self(.advertising)
    static let locked = Self(.locked)
    static let paid = Self(.paid, sharesPaid: 1)
    static let expired = Self(.expired)
    static let cancelled = Self(.cancelled)
}

func written(_ actions: [KioskChargeMachine.Action]) -> KioskStore.Record? {
    for case .persist(let record, _) in actions { return record }
    return nil
}

func timer(_ actions: [KioskChargeMachine.Action]) -> (Duration, Int)? {
    for case .retryAfter(let delay, let token) in actions { return (delay, token) }
    return nil
}

@Suite(.timeLimit(.minutes(10))) struct KioskChargeMachineTests {
    @Test func paidAfterLocked() throws {
        var bench = Bench.advertising()
        bench.advance(0.1)
        let polled = bench.send(.statusSeen(.advertising))
        #expect(written(polled) == nil)
        let (delay, token) = try #require(timer(polled))
        #expect(delay == .seconds(1))
        bench.advance(1)
        #expect(bench.send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
        let locked = bench.send(.statusSeen(.locked))
        #expect(written(locked)?.charge.state == .locked)
        let (_, next) = try #require(timer(locked))
        bench.advance(1)
        _ = bench.send(.timerFired(token: next))
        let paid = bench.send(.statusSeen(.paid))
        let record = try #require(written(paid))
        #expect(record.charge.state == .paid && record.charge.problem == nil && record.charge.updatedAt == bench.now)
        #expect(
            paid == [
                .persist(record, isNew: false),
                .publish(from: locked.compactMap(\.record).first?.charge, to: record.charge),
                .settleAttempted,
                .publishStatus(after: .seconds(10)),
                .stopAdvertising,
            ]
        )
        // Over: nothing moves it any more.
        #expect(bench.send(.statusSeen(.cancelled)).isEmpty)
        #expect(bench.send(.cancelRequested(id: "c-1")) == [.refuse(.alreadyFinal(record.charge))])
    }

    @Test func rotatesTheEIDOnItsIntervalAsANewAdvertisement() throws {
        var configuration = Bench.configuration
        configuration.rotateEvery = .seconds(5)
        var bench = Bench.advertising(configuration: configuration)
        let rotated = EID(rawValue: "00000000b1")!
        // Within the interval the status is asked as usual.
        var (_, token) = try #require(timer(bench.send(.statusSeen(.advertising))))
        bench.advance(1)
        #expect(bench.send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
        (_, token) = try #require(timer(bench.send(.statusSeen(.advertising))))
        // Five seconds after the EID went on the air, the next step is a rotation instead.
        bench.advance(4)
        #expect(bench.send(.timerFired(token: token)) == [.rotateEID(sessionID: "s-1")])
        #expect(bench.send(.eidRotated(sessionID: "s-1", eid: rotated)).count > 0)
        #expect(bench.charge.eid == rotated && bench.charge.sessionID == "s-1")
        // Already recorded: a stale answer is ignored.
        #expect(bench.send(.eidRotated(sessionID: "s-1", eid: EID(rawValue: "00000000c1")!)).isEmpty)
        #expect(bench.charge.eid == rotated)

        // The same in one batch, checked action by action on a fresh bench.
        var fresh = Bench.advertising(configuration: configuration)
        (_, token) = try #require(timer(fresh.send(.statusSeen(.advertising))))
        fresh.advance(5)
        #expect(fresh.send(.timerFired(token: token)) == [.rotateEID(sessionID: "s-1")])
        let actions = fresh.send(.eidRotated(sessionID: "s-1", eid: rotated))
        let record = try #require(written(actions))
        #expect(record.charge.eid == rotated)
        #expect(actions.first == .persist(record, isNew: false))
        let stop = try #require(actions.firstIndex(of: .stopAdvertising))
        let advertise = try #require(
            actions.firstIndex(where: { if case .advertise(rotated, _) = $0 { true } else { false } })
        )
        #expect(stop < advertise)
        guard case .advertise(_, let onAir) = actions[advertise] else { return }
        #expect(fresh.send(.advertisingStarted(token: onAir)) == [.fetchStatus(sessionID: "s-1")])

        // A rotation that fails keeps the EID on the air and waits another interval.
        (_, token) = try #require(timer(fresh.send(.statusSeen(.advertising))))
        fresh.advance(5)
        #expect(fresh.send(.timerFired(token: token)) == [.rotateEID(sessionID: "s-1")])
        #expect(fresh.send(.rotateFailed(.ledgerUnreachable("down"))) == [.fetchStatus(sessionID: "s-1")])
        #expect(fresh.charge.eid == rotated && fresh.machine.problem == nil)
        (_, token) = try #require(timer(fresh.send(.statusSeen(.advertising))))
        fresh.advance(1)
        #expect(fresh.send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
    }

    @Test func nothingIsSentBeforeStart() {
        var bench = Bench()
        let actions = bench.send(.chargeRequested(id: "c-1", amountCents: 100, shares: 1, reference: ""))
        #expect(actions.count == 2 && written(actions)?.charge.id == "c-1")
        #expect(bench.send(.start) == [.createSession(amountCents: 100, shares: 1, idempotencyKey: "kiosk-c-1-1")])
        #expect(bench.send(.start).isEmpty)
    }

    @Test func refusals() {
        var bench = Bench()
        _ = bench.send(.start)
        for amount: Cents in [0, -5, .min] {
            #expect(
                bench.send(.chargeRequested(id: "x", amountCents: amount, shares: 1, reference: "")) == [
                    .refuse(.invalidAmount(amount))
                ]
            )
        }
        #expect(
            bench.send(.chargeRequested(id: "x", amountCents: 1, shares: 1, reference: "a\u{7}b"))
                == [.refuse(.invalidReference("must be printable text; it holds U+7"))]
        )
        #expect(
            bench.send(
                .chargeRequested(id: "x", amountCents: 1, shares: 1, reference: String(repeating: "x", count: 129))
            )
                == [.refuse(.invalidReference("must be at most 128 characters, got 129"))]
        )
        #expect(bench.machine.record == nil)
        #expect(bench.send(.cancelRequested(id: "x")) == [.refuse(.notFound(id: "x"))])
        _ = bench.send(
            .chargeRequested(id: "c-1", amountCents: 1, shares: 1, reference: String(repeating: "x", count: 128))
        )
        #expect(
            bench.send(.chargeRequested(id: "c-2", amountCents: 1, shares: 1, reference: "")) == [
                .refuse(.busy(activeID: "c-1"))
            ]
        )
        #expect(bench.send(.cancelRequested(id: "c-2")) == [.refuse(.notFound(id: "c-2"))])
    }

    @Test func unreachableLedgerRetriesWithBackoffAndTheSameKey() throws {
        var bench = Bench.creating()
        var delays: [Duration] = []
        for attempt in 1...6 {
            let failed = bench.send(.createFailed(.ledgerUnreachable("connection refused")))
            #expect(written(failed)?.charge.problem == "cannot reach the ledger: connection refused" || attempt > 1)
            #expect(bench.machine.problem == .ledgerUnreachable("connection refused"))
            let (delay, token) = try #require(timer(failed))
            delays.append(delay)
            bench.advance(seconds(delay))
            #expect(
                bench.send(.timerFired(token: token)) == [
                    .createSession(amountCents: 1_250, shares: 1, reference: "order 17", idempotencyKey: "kiosk-c-1-1")
                ]
            )
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8), .seconds(8)])
        let created = bench.send(.sessionCreated(Bench.first))
        #expect(written(created)?.charge.problem == nil && bench.machine.problem == nil)
        #expect(created.last == .advertise(Bench.first.eid, token: 7))
    }

    @Test func ledgerRefusalFailsTheChargeAndFreesTheKiosk() {
        var bench = Bench.creating()
        let refused = bench.send(.createFailed(.chargeRefused("amount over the limit")))
        #expect(bench.charge.state == .failed)
        #expect(bench.charge.problem == "the ledger refused the charge: amount over the limit")
        #expect(refused.contains(.settleAttempted) && timer(refused) == nil)
        let next = bench.send(.chargeRequested(id: "c-2", amountCents: 500, shares: 1, reference: ""))
        #expect(next.last == .createSession(amountCents: 500, shares: 1, idempotencyKey: "kiosk-c-2-1"))
        #expect(bench.machine.problem == nil)
    }

    @Test func radioFailureShowsAndClearsWhenAdvertisingStarts() throws {
        var bench = Bench.creating()
        let created = bench.send(.sessionCreated(Bench.first))
        #expect(created.last == .advertise(Bench.first.eid, token: 1))
        let failed = bench.send(.advertisingFailed(token: 1, .radio("adapter off")))
        #expect(bench.charge.problem == "Bluetooth: adapter off" && bench.charge.state == .creating)
        let (delay, token) = try #require(timer(failed))
        #expect(delay == .seconds(1))
        // News of the advertisement that failed is stale.
        #expect(bench.send(.advertisingStarted(token: 1)).isEmpty)
        #expect(bench.send(.advertisingFailed(token: 1, .radio("again"))).isEmpty)
        bench.advance(1)
        #expect(bench.send(.timerFired(token: token)) == [.advertise(Bench.first.eid, token: 3)])
        let started = bench.send(.advertisingStarted(token: 3))
        #expect(bench.charge.problem == nil && bench.charge.state == .advertising)
        #expect(started.last == .fetchStatus(sessionID: "s-1"))
    }

    @Test func ledgerProblemsWhileWatchingKeepTheAdvertisement() throws {
        var bench = Bench.advertising()
        var token = 0
        for (attempt, expected) in [(1, 1), (2, 2), (3, 4)] {
            let failed = bench.send(.statusFailed(.credentialsRejected("401")))
            #expect(!failed.contains(.stopAdvertising))
            #expect(bench.charge.problem == KioskProblem.credentialsRejected("401").description, "attempt \(attempt)")
            #expect(bench.charge.state == .advertising)
            let (delay, next) = try #require(timer(failed))
            #expect(delay == .seconds(expected))
            token = next
            bench.advance(seconds(delay))
            #expect(bench.send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
        }
        let seen = bench.send(.statusSeen(.advertising))
        #expect(bench.charge.problem == nil && timer(seen)?.0 == .seconds(1))
        // A rejected status read after a success starts the backoff over.
        _ = bench.send(.timerFired(token: timer(seen)!.1))
        #expect(timer(bench.send(.statusFailed(.ledgerUnreachable("timeout"))))?.0 == .seconds(1))
    }

    @Test func expiredSessionIsRenewedWithTheNextKey() {
        var bench = Bench.advertising()
        let expired = bench.send(.statusSeen(.expired))
        #expect(expired.contains(.stopAdvertising))
        #expect(
            expired.last
                == .createSession(amountCents: 1_250, shares: 1, reference: "order 17", idempotencyKey: "kiosk-c-1-2")
        )
        #expect(bench.charge.state == .creating && bench.charge.sessionID == nil && bench.charge.eid == nil)
        let created = bench.send(.sessionCreated(Bench.second))
        #expect(created.last == .advertise(Bench.second.eid, token: 2))
        #expect(bench.machine.record?.sessionNumber == 2)
        // A charge whose lifetime lasts does not shorten to its sessions'.
        #expect(bench.charge.expiresAt == Bench.start.addingTimeInterval(60))
    }

    @Test func withoutRenewalTheSessionsExpiryEndsTheCharge() {
        var configuration = Bench.configuration
        configuration.renewExpiredSessions = false
        var bench = Bench.advertising(configuration: configuration)
        #expect(bench.charge.expiresAt == Bench.first.expiresAt)
        let expired = bench.send(.statusSeen(.expired))
        #expect(bench.charge.state == .expired && expired.contains(.stopAdvertising))
        #expect(!expired.contains { if case .createSession = $0 { true } else { false } })
    }

    @Test func lifetimeOverCancelsTheSessionThenExpires() throws {
        var bench = Bench.advertising()
        bench.advance(59.25)
        // The status is asked again at the end of the lifetime, not a whole interval later.
        let (delay, token) = try #require(timer(bench.send(.statusSeen(.advertising))))
        #expect(delay == .milliseconds(250))
        bench.advance(0.25)
        #expect(bench.send(.timerFired(token: token)) == [.stopAdvertising, .cancelSession(sessionID: "s-1")])
        let ended = bench.send(.sessionCancelled)
        #expect(bench.charge.state == .expired && bench.charge.problem == nil)
        #expect(ended.contains(.settleAttempted))
    }

    @Test func cancelStopsAdvertisingAndCancelsTheSession() throws {
        var bench = Bench.advertising()
        let polled = bench.send(.statusSeen(.advertising))
        #expect(timer(polled) != nil)
        let cancel = bench.send(.cancelRequested(id: "c-1"))
        let record = try #require(written(cancel))
        #expect(record.cancelRequested && record.charge.state == .advertising)
        #expect(Array(cancel.dropFirst(2)) == [.stopTimer, .stopAdvertising, .cancelSession(sessionID: "s-1")])
        // Asked again while the ledger is asked: nothing more to do.
        #expect(bench.send(.cancelRequested(id: "c-1")).isEmpty)
        let ended = bench.send(.sessionCancelled)
        #expect(bench.charge.state == .cancelled && ended.contains(.settleAttempted))
    }

    @Test func cancelOfAPaidSessionReportsPaid() {
        var bench = Bench.advertising()
        _ = bench.send(.statusSeen(.advertising))
        _ = bench.send(.cancelRequested(id: "c-1"))
        #expect(bench.send(.sessionAlreadyOver) == [.fetchStatus(sessionID: "s-1")])
        _ = bench.send(.statusSeen(.paid))
        #expect(bench.charge.state == .paid)
    }

    @Test func cancelOfAnExpiredSessionReportsCancelled() {
        var bench = Bench.advertising()
        _ = bench.send(.statusSeen(.advertising))
        _ = bench.send(.cancelRequested(id: "c-1"))
        _ = bench.send(.sessionAlreadyOver)
        _ = bench.send(.statusSeen(.expired))
        #expect(bench.charge.state == .cancelled)
    }

    @Test func unconfirmedCancelIsPendingAndRetried() throws {
        var bench = Bench.advertising()
        _ = bench.send(.statusSeen(.advertising))
        _ = bench.send(.cancelRequested(id: "c-1"))
        let failed = bench.send(.cancelFailed(.ledgerUnreachable("connection refused")))
        #expect(
            bench.charge.problem
                == "cannot cancel the charge's session yet: cannot reach the ledger: connection refused"
        )
        #expect(!bench.charge.state.isFinal && failed.contains(.settleAttempted))
        // The waiters are answered only after the problem is written.
        #expect(failed.firstIndex(of: .settleAttempted)! > failed.firstIndex { written([$0]) != nil }!)
        let (delay, token) = try #require(timer(failed))
        bench.advance(seconds(delay))
        #expect(bench.send(.timerFired(token: token)) == [.cancelSession(sessionID: "s-1")])
        _ = bench.send(.sessionCancelled)
        #expect(bench.charge.state == .cancelled && bench.charge.problem == nil)
    }

    @Test func cancelBeforeAnySessionCreatesItWithTheSameKeyThenCancelsIt() throws {
        var bench = Bench.creating()
        let failed = bench.send(.createFailed(.ledgerUnreachable("down")))
        let (_, token) = try #require(timer(failed))
        let cancel = bench.send(.cancelRequested(id: "c-1"))
        #expect(
            Array(cancel.dropFirst(2)) == [
                .stopTimer,
                .createSession(amountCents: 1_250, shares: 1, reference: "order 17", idempotencyKey: "kiosk-c-1-1"),
            ]
        )
        #expect(bench.send(.timerFired(token: token)).isEmpty)
        let created = bench.send(.sessionCreated(Bench.first))
        #expect(written(created)?.charge.sessionID == "s-1" && created.last == .cancelSession(sessionID: "s-1"))
        _ = bench.send(.sessionCancelled)
        #expect(bench.charge.state == .cancelled && bench.charge.sessionID == "s-1")
    }

    @Test func cancelWhenTheLedgerRefusesToCreateEndsWithNoSession() {
        var bench = Bench.creating()
        _ = bench.send(.createFailed(.ledgerUnreachable("down")))
        _ = bench.send(.cancelRequested(id: "c-1"))
        _ = bench.send(.createFailed(.chargeRefused("too much")))
        #expect(bench.charge.state == .cancelled && bench.charge.sessionID == nil && bench.charge.problem == nil)
    }

    @Test func cancelWhileCreatingWaitsForTheAnswer() {
        var bench = Bench.creating()
        let cancel = bench.send(.cancelRequested(id: "c-1"))
        #expect(cancel.count == 2 && written(cancel)?.cancelRequested == true)
        let created = bench.send(.sessionCreated(Bench.first))
        #expect(created.last == .cancelSession(sessionID: "s-1"))
        #expect(!created.contains { if case .advertise = $0 { true } else { false } })
    }

    @Test func cancelDuringARadioRetryCancelsAtOnce() throws {
        var bench = Bench.creating()
        _ = bench.send(.sessionCreated(Bench.first))
        _ = bench.send(.advertisingFailed(token: 1, .radio("off")))
        let cancel = bench.send(.cancelRequested(id: "c-1"))
        #expect(Array(cancel.dropFirst(2)) == [.stopTimer, .cancelSession(sessionID: "s-1")])
    }

    @Test func aFailedWriteIsUndoneAndTheStepRetried() throws {
        var bench = Bench.creating()
        let created = bench.send(.sessionCreated(Bench.first))
        #expect(written(created) != nil)
        let undone = bench.send(.persistFailed)
        #expect(bench.charge.sessionID == nil && bench.machine.record?.sessionNumber == 0)
        let (delay, token) = try #require(timer(undone))
        #expect(delay == .seconds(1))
        #expect(bench.send(.persistFailed).isEmpty)
        #expect(
            bench.send(.timerFired(token: token)) == [
                .createSession(amountCents: 1_250, shares: 1, reference: "order 17", idempotencyKey: "kiosk-c-1-1")
            ]
        )
    }

    @Test func aChargeThatCannotBeStoredIsForgotten() {
        var bench = Bench()
        _ = bench.send(.start)
        _ = bench.send(.chargeRequested(id: "c-1", amountCents: 100, shares: 1, reference: ""))
        #expect(bench.send(.persistFailed).isEmpty)
        #expect(bench.machine.record == nil)
    }

    @Test func aFailedCancelWriteLeavesTheChargeRunning() throws {
        var bench = Bench.advertising()
        let polled = bench.send(.statusSeen(.advertising))
        let (_, token) = try #require(timer(polled))
        _ = bench.send(.cancelRequested(id: "c-1"))
        #expect(bench.send(.persistFailed).isEmpty)
        #expect(bench.machine.record?.cancelRequested == false)
        // The timer and the advertisement were never stopped, so they go on.
        #expect(bench.send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
    }

    @Test func aRestartContinuesTheStoredSession() {
        let stored = KioskStore.Record(
            charge: KioskCharge(
                id: "c-9",
                amountCents: 990,
                reference: "table 4",
                state: .advertising,
                sessionID: "s-9",
                eid: Bench.first.eid,
                problem: "Bluetooth: adapter off",
                createdAt: Bench.start,
                updatedAt: Bench.start
            ),
            sessionNumber: 1
        )
        var bench = Bench(record: stored)
        #expect(bench.machine.problem == .recorded("Bluetooth: adapter off"))
        bench.advance(5)
        #expect(bench.send(.start) == [.advertise(Bench.first.eid, token: 1)])
        _ = bench.send(.advertisingStarted(token: 1))
        _ = bench.send(.statusSeen(.paid))
        #expect(bench.charge.state == .paid && bench.charge.reference == "table 4")
    }

    @Test func aStoredSessionWithoutEIDFailsAfterCancellingIt() {
        let stored = KioskStore.Record(
            charge: KioskCharge(
                id: "c-9",
                amountCents: 990,
                reference: "",
                sessionID: "s-9",
                createdAt: Bench.start,
                updatedAt: Bench.start
            ),
            sessionNumber: 1
        )
        var bench = Bench(record: stored)
        #expect(bench.send(.start) == [.cancelSession(sessionID: "s-9")])
        _ = bench.send(.sessionCancelled)
        #expect(bench.charge.state == .failed && bench.charge.problem == KioskProblem.unreadableEID.description)
    }

    @Test func theEndOfTheLastChargeGivesWayToIdle() {
        let stored = KioskStore.Record(
            charge: KioskCharge(
                id: "c-9",
                amountCents: 990,
                reference: "",
                state: .paid,
                createdAt: Bench.start,
                updatedAt: Bench.start
            )
        )
        var bench = Bench(record: stored)
        bench.advance(3)
        #expect(bench.send(.start) == [.publishStatus(after: .seconds(7))])
        var later = Bench(record: stored)
        later.advance(11)
        #expect(later.send(.start).isEmpty)
    }

    @Test func staleTimersAreIgnored() throws {
        var bench = Bench.advertising()
        let (_, first) = try #require(timer(bench.send(.statusSeen(.advertising))))
        _ = bench.send(.timerFired(token: first))
        #expect(bench.send(.timerFired(token: first)).isEmpty)
        #expect(bench.send(.statusFailed(.ledgerUnreachable("x"))).contains { timer([$0]) != nil })
        #expect(bench.send(.sessionCancelled).isEmpty && bench.send(.sessionCreated(Bench.second)).isEmpty)
    }

    @Test func problemsReadAsBefore() {
        #expect(KioskProblem.radio("x").description == "Bluetooth: x")
        #expect(KioskProblem.sessionNotShown("404").description.hasSuffix("check its credentials"))
        #expect(KioskProblem.ledgerAnswered("500").description == "the ledger answered: 500")
        #expect(KioskProblem.recorded("as stored").description == "as stored")
    }
}

extension KioskChargeMachine.Action {
    fileprivate var record: KioskStore.Record? {
        if case .persist(let record, _) = self { record } else { nil }
    }
}

private func seconds(_ duration: Duration) -> TimeInterval {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

@Suite("The kiosk's charge flow on the session's event stream", .timeLimit(.minutes(10)))
struct KioskChargeMachineLiveStatusTests {
    static var live: KioskChargeMachine.Configuration {
        var configuration = Bench.configuration
        configuration.liveStatus = true
        configuration.safetyInterval = .seconds(20)
        return configuration
    }

    @Test("After a status, the next is awaited on the stream, not polled; locked then paid end the charge")
    func awaitsChanges() {
        var bench = Bench.advertising(configuration: Self.live)
        let seen = bench.send(.statusSeen(.advertising))
        #expect(seen == [.awaitStatusChange(sessionID: "s-1", after: .advertising, timeout: .seconds(20))])
        let locked = bench.send(.statusSeen(.locked))
        #expect(bench.charge.state == .locked)
        #expect(locked.last == .awaitStatusChange(sessionID: "s-1", after: .locked, timeout: .seconds(20)))
        #expect(!locked.contains { if case .retryAfter = $0 { true } else { false } })
        _ = bench.send(.statusSeen(.paid))
        #expect(bench.charge.state == .paid)
    }

    @Test("The wait ends by the charge's lifetime")
    func waitBoundedByLifetime() {
        var bench = Bench.advertising(configuration: Self.live)
        bench.advance(50)
        // Advertising since 0.5 s into a 60 s lifetime: 9.5 s are left.
        #expect(
            bench.send(.statusSeen(.advertising)) == [
                .awaitStatusChange(sessionID: "s-1", after: .advertising, timeout: .milliseconds(9_500))
            ]
        )
    }

    @Test("A ledger without event streams is polled from then on")
    func fallsBackToPolling() {
        var bench = Bench.advertising(configuration: Self.live)
        _ = bench.send(.statusSeen(.advertising))
        // The status was read just before the wait: the next read is one poll interval later.
        let unsupported = bench.send(.statusStreamUnsupported)
        guard case .retryAfter(let delay, let token) = unsupported.first, unsupported.count == 1 else {
            Issue.record("expected a poll timer, got \(unsupported)")
            return
        }
        #expect(delay == .seconds(1))
        #expect(bench.send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
        let polled = bench.send(.statusSeen(.advertising))
        guard case .retryAfter(.seconds(1), _) = polled.first, polled.count == 1 else {
            Issue.record("expected polling to go on, got \(polled)")
            return
        }
    }

    @Test("A broken stream backs off, then the status is read again before waiting anew")
    func brokenStream() {
        var bench = Bench.advertising(configuration: Self.live)
        _ = bench.send(.statusSeen(.advertising))
        let failed = bench.send(.statusFailed(.ledgerUnreachable("connection reset")))
        guard case .retryAfter(let delay, let token) = failed.last else {
            Issue.record("expected a backoff, got \(failed)")
            return
        }
        #expect(delay == .seconds(1))
        #expect(bench.send(.timerFired(token: token)) == [.fetchStatus(sessionID: "s-1")])
        #expect(
            bench.send(.statusSeen(.advertising)).last
                == .awaitStatusChange(sessionID: "s-1", after: .advertising, timeout: .seconds(20))
        )
    }

    @Test("A cancel stops the wait at once and cancels the session")
    func cancelStopsWaiting() {
        var bench = Bench.advertising(configuration: Self.live)
        _ = bench.send(.statusSeen(.advertising))
        let actions = bench.send(.cancelRequested(id: "c-1"))
        #expect(actions.contains(.stopAwaitingStatus))
        #expect(actions.last == .cancelSession(sessionID: "s-1"))
        // A late result of the stopped wait is not taken for the cancel's answer.
        #expect(bench.send(.statusSeen(.paid)).isEmpty)
    }
}
