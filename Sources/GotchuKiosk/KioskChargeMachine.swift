package import Foundation
import GotchuAPI
package import GotchuCore

/// The kiosk's charge flow, without I/O: a charge from the point-of-sale → a ledger session created with a key that
/// survives a crash → its EID advertised → its status watched → the end recorded; with retries and a cancel that
/// waits for the ledger's word.
///
/// The driver (``Kiosk``) feeds it ``Event``s (requests from the point-of-sale, results of the I/O it performed,
/// timers) with the current time and performs the ``Action``s it returns, in order. Every change of the charge comes
/// out as ``Action/persist(_:isNew:)`` first in its batch, before anything else: if the write fails the driver sends
/// ``Event/persistFailed`` and drops the rest of the batch, and the machine goes back to where it was before the
/// event and tries again later — nothing is acted on or reported that is not on disk. Results that no longer apply (a
/// timer that was stopped, an advertisement that was stopped) are ignored and return no action.
///
/// At most one ledger call, one advertisement and one timer are under way at a time. A failure of the radio or of
/// the ledger never ends a charge; it shows as ``problem`` while the machine retries with backoff. Only the ledger
/// ends a charge (paid, expired, cancelled, or refused), or the end of its lifetime, which cancels its session first.
///
/// This machine does not replace ``ReceiverStateMachine`` (the one-shot `gotchu receive` flow): that flow lives for
/// one process, keeps nothing on disk and gives up after a bounded number of cancel attempts, where a kiosk charge
/// outlives restarts and retries until the ledger answers. The receiver would become a driver of this machine once
/// the machine takes a retry budget (give up and report after N attempts or a patience) and a record kept in memory.
package struct KioskChargeMachine: Sendable {
    /// How charges behave.
    package struct Configuration: Hashable, Sendable {
        /// How long a charge waits for a payer.
        package var sessionLifetime: Duration
        /// When the ledger's session expires before the charge's lifetime is over, advertise a new one.
        package var renewExpiredSessions: Bool
        /// How often a session's status is asked while all is well, when the ledger has no event streams (or
        /// `liveStatus` is off).
        package var statusInterval: Duration
        /// Wait on the session's event stream for its next status instead of asking at every `statusInterval`.
        package var liveStatus: Bool
        /// The longest wait on the event stream before the status is read anyway.
        package var safetyInterval: Duration
        /// Delays between retries while the ledger or the radio fails.
        package var retry: Backoff
        /// How long the end of a charge is shown before the kiosk reads idle again.
        package var idleAfter: Duration
        /// How long one EID stays on the air before the session is given a new one; `nil` never rotates. Checked
        /// whenever the status is due, so a rotation comes at most one ``statusInterval`` late.
        package var rotateEvery: Duration?
        /// How long a split charge that ended unpaid with shares paid waits for the ledger to show those shares
        /// refunded (it refunds them automatically, an expired session's within seconds) before it is reported
        /// with what was refunded by then. The status is read every ``statusInterval`` meanwhile.
        package var refundWait: Duration

        /// Creates a configuration.
        package init(
            sessionLifetime: Duration = .seconds(300),
            renewExpiredSessions: Bool = true,
            statusInterval: Duration = .milliseconds(500),
            liveStatus: Bool = true,
            safetyInterval: Duration = .seconds(30),
            retry: Backoff = Backoff(),
            idleAfter: Duration = .seconds(60),
            rotateEvery: Duration? = nil,
            refundWait: Duration = .seconds(30)
        ) {
            self.sessionLifetime = sessionLifetime
            self.renewExpiredSessions = renewExpiredSessions
            self.statusInterval = statusInterval
            self.liveStatus = liveStatus
            self.safetyInterval = safetyInterval
            self.retry = retry
            self.idleAfter = idleAfter
            self.rotateEvery = rotateEvery
            self.refundWait = refundWait
        }
    }

    /// A session the ledger created for the charge.
    package struct Session: Hashable, Sendable {
        /// The session id.
        package var sessionID: String
        /// The EID to advertise.
        package var eid: EID
        /// When the ledger expires it.
        package var expiresAt: Date
        /// Into how many shares the ledger split it (1 from a ledger that predates splits, whatever was asked).
        package var shares: Int
        /// The EID's web checkout, when the ledger has a public URL.
        package var checkoutURL: String?

        /// Creates a session.
        package init(sessionID: String, eid: EID, expiresAt: Date, shares: Int = 1, checkoutURL: String? = nil) {
            self.sessionID = sessionID
            self.eid = eid
            self.expiresAt = expiresAt
            self.shares = shares
            self.checkoutURL = checkoutURL
        }
    }

    /// A session's status as the ledger reported it, with the progress of a split.
    package struct SessionState: Hashable, Sendable {
        /// The ledger's status.
        package var status: SessionStatus
        /// How many shares are paid (1 for a paid session that is not split).
        package var sharesPaid: Int
        /// What the shares paid add up to, in cents, without tips.
        package var paidCents: Cents
        /// The tips paid on top of the shares, in cents.
        package var tipCents: Cents
        /// What the ledger returned to payers, shares and tips, in cents.
        package var refundedCents: Cents
        /// The payments of a split session, oldest first (empty for a session that is not split).
        package var payments: [KioskPayment]

        /// A session in `status`; nothing paid or refunded unless told otherwise.
        package init(
            _ status: SessionStatus,
            sharesPaid: Int = 0,
            paidCents: Cents = 0,
            tipCents: Cents = 0,
            refundedCents: Cents = 0,
            payments: [KioskPayment] = []
        ) {
            self.status = status
            self.sharesPaid = sharesPaid
            self.paidCents = paidCents
            self.tipCents = tipCents
            self.refundedCents = refundedCents
            self.payments = payments
        }
    }

    /// What the driver reports.
    package enum Event: Hashable, Sendable {
        /// The driver runs: continue the stored active charge. Until then requests are recorded but nothing is sent.
        case start
        /// The point-of-sale asks for a charge of `amountCents` split into `shares` (1: one payer); the driver chose
        /// its `id` (a UUID).
        case chargeRequested(id: String, amountCents: Cents, shares: Int, reference: String, tipPercents: [Int] = [])
        /// The point-of-sale asks to cancel the charge `id`.
        case cancelRequested(id: String)
        /// The ledger created (or, for the same key, found again) the session asked for.
        case sessionCreated(Session)
        /// Creating the session failed; ``KioskProblem/chargeRefused(_:)`` means for good.
        case createFailed(KioskProblem)
        /// The advertisement started by ``Action/advertise(_:token:)`` is on the air.
        case advertisingStarted(token: Int)
        /// That advertisement could not start, or stopped on its own.
        case advertisingFailed(token: Int, KioskProblem)
        /// The ledger gave the session a new EID, asked for by ``Action/rotateEID(sessionID:)``, and its web
        /// checkout when the ledger has a public URL.
        case eidRotated(sessionID: String, eid: EID, checkoutURL: String? = nil)
        /// The rotation failed; the current EID stays on the air.
        case rotateFailed(KioskProblem)
        /// The ledger reported the status of the session asked about.
        case statusSeen(SessionState)
        /// Reading the session's status failed, or its event stream broke.
        case statusFailed(KioskProblem)
        /// The ledger has no event streams (it predates them): the status is polled from now on.
        case statusStreamUnsupported
        /// The ledger cancelled the session.
        case sessionCancelled
        /// The ledger refused the cancel because the session is already over (paid, expired or cancelled).
        case sessionAlreadyOver
        /// The cancel got no answer, or another refusal.
        case cancelFailed(KioskProblem)
        /// The timer started by ``Action/retryAfter(_:token:)`` fired.
        case timerFired(token: Int)
        /// The first ``Action/persist(_:isNew:)`` of the last batch could not be written.
        case persistFailed
    }

    /// What the driver must do.
    package enum Action: Hashable, Sendable {
        /// Write the record (insert it when new); on failure send ``Event/persistFailed`` and skip the rest.
        case persist(KioskStore.Record, isNew: Bool)
        /// Tell subscribers the charge changed from `from` (nil for a new charge) to `to`.
        case publish(from: KioskCharge?, to: KioskCharge)
        /// Refuse the point-of-sale's request.
        case refuse(KioskError)
        /// Create a session of `amountCents` split into `shares` on the ledger, suggesting the charge's tips
        /// (`tipPercents`, whole percents; empty for none), under the charge's order `reference` (`nil` for none);
        /// report ``Event/sessionCreated(_:)`` or ``Event/createFailed(_:)``.
        case createSession(
            amountCents: Cents,
            shares: Int,
            tipPercents: [Int] = [],
            reference: String? = nil,
            idempotencyKey: String
        )
        /// Advertise this EID until told to stop; report ``Event/advertisingStarted(token:)`` once it is on the air.
        case advertise(EID, token: Int)
        /// Stop the advertisement.
        case stopAdvertising
        /// Give the session a new EID on the ledger; report ``Event/eidRotated(sessionID:eid:checkoutURL:)`` or
        /// ``Event/rotateFailed(_:)``. The new EID goes on the air as a new advertisement.
        case rotateEID(sessionID: String)
        /// Read the session's status; report ``Event/statusSeen(_:)`` or ``Event/statusFailed(_:)``.
        case fetchStatus(sessionID: String)
        /// Wait on the session's event stream for a state other than `after` (another status, or more shares paid or
        /// refunded) and report it as ``Event/statusSeen(_:)``; after `timeout` read the status and report that.
        /// Report ``Event/statusFailed(_:)`` if the stream breaks, ``Event/statusStreamUnsupported`` if the ledger
        /// has none.
        case awaitStatusChange(sessionID: String, after: SessionState, timeout: Duration)
        /// Stop waiting on the event stream; its result, if any still arrives, is not reported.
        case stopAwaitingStatus
        /// Cancel the session on the ledger; report ``Event/sessionCancelled``, ``Event/sessionAlreadyOver`` or
        /// ``Event/cancelFailed(_:)``.
        case cancelSession(sessionID: String)
        /// Send ``Event/timerFired(token:)`` after this long, replacing any timer under way.
        case retryAfter(Duration, token: Int)
        /// Stop the timer under way.
        case stopTimer
        /// An attempt to end the charge with the ledger's word is over (it ended, or the ledger did not confirm):
        /// answer the point-of-sale's cancel requests waiting for it.
        case settleAttempted
        /// Publish the status again after this long: the end of the charge then gives way to idle.
        case publishStatus(after: Duration)
    }

    /// The ledger call under way.
    enum Call: Hashable, Sendable {
        case create, status, cancel, rotate
    }

    /// How the charge ends once the ledger has confirmed that its session cannot be paid any more.
    struct Settlement: Hashable, Sendable {
        var outcome: KioskChargeState
        var reason: KioskProblem?
        /// The session is over with shares paid that the ledger has not shown refunded yet: its status is read
        /// until they are, or until then.
        var refundsBy: Date?
    }

    /// An advertisement under way.
    struct Advertising: Hashable, Sendable {
        var token: Int
        /// Whether it is on the air yet.
        var onAir: Bool
    }

    /// Everything that changes, so that a failed write can put it all back.
    struct Core: Hashable, Sendable {
        var record: KioskStore.Record?
        var problem: KioskProblem?
        var started = false
        var call: Call?
        var advertising: Advertising?
        var timer: Int?
        var settling: Settlement?
        /// Consecutive failed attempts (creating, advertising, settling), for the backoff.
        var failures = 0
        /// Consecutive failed status reads while advertising.
        var statusFailures = 0
        /// The status call under way waits on the event stream.
        var awaitingChange = false
        /// The ledger has no event streams: poll.
        var polling = false
        var nextToken = 0
        /// Since when the current EID is on the air, for its rotation.
        var eidSince: Date?
    }

    /// The configuration in use.
    package let configuration: Configuration
    private var core: Core
    /// The state before the last event that wrote something.
    private var beforeWrite: Core?
    private var writes: [Action] = []
    private var effects: [Action] = []
    private var now = Date(timeIntervalSince1970: 0)

    /// Creates a machine over the stored active charge, or the last one.
    package init(configuration: Configuration, record: KioskStore.Record?) {
        self.configuration = configuration
        core = Core(record: record, problem: record?.charge.problem.map(KioskProblem.recorded))
    }

    /// The active charge, or the last one.
    package var record: KioskStore.Record? { core.record }

    /// What keeps the active charge from progressing, or why the last one failed.
    package var problem: KioskProblem? { core.problem }

    /// Feeds one event at `now` and returns what to do, in order.
    package mutating func receive(_ event: Event, now: Date) -> [Action] {
        self.now = now
        writes = []
        effects = []
        if case .persistFailed = event {
            guard let before = beforeWrite else { return [] }
            core = before
            beforeWrite = nil
            // The event whose change was lost is not repeated: the step runs again from what is on disk (a
            // creation replays through its key), slowly.
            if isActive, core.call == nil, core.timer == nil { pause(nil) }
            return writes + effects
        }
        guard consume(event) else { return [] }
        let before = core
        process(event)
        if !writes.isEmpty { beforeWrite = before }
        return writes + effects
    }

    /// Books the end of what the event reports; `false` if it reports something no longer under way.
    private mutating func consume(_ event: Event) -> Bool {
        switch event {
        case .sessionCreated, .createFailed:
            guard core.call == .create else { return false }
            core.call = nil
        case .statusSeen, .statusFailed, .statusStreamUnsupported:
            guard core.call == .status else { return false }
            core.call = nil
            core.awaitingChange = false
        case .sessionCancelled, .sessionAlreadyOver, .cancelFailed:
            guard core.call == .cancel else { return false }
            core.call = nil
        case .eidRotated, .rotateFailed:
            guard core.call == .rotate else { return false }
            core.call = nil
        case .advertisingStarted(let token):
            guard let advertising = core.advertising, advertising.token == token, !advertising.onAir else {
                return false
            }
            core.advertising = Advertising(token: token, onAir: true)
        case .advertisingFailed(let token, _):
            guard core.advertising?.token == token else { return false }
            core.advertising = nil
        case .timerFired(let token):
            guard core.timer == token else { return false }
            core.timer = nil
        case .start:
            guard !core.started else { return false }
            core.started = true
        case .chargeRequested, .cancelRequested, .persistFailed:
            break
        }
        return true
    }

    private mutating func process(_ event: Event) {
        switch event {
        case .start:
            if let record = core.record, record.charge.state.isFinal { scheduleIdle(record.charge) }
            proceed()

        case .chargeRequested(let id, let amountCents, let shares, let reference, let tipPercents):
            requestCharge(
                id: id,
                amountCents: amountCents,
                shares: shares,
                reference: reference,
                tipPercents: tipPercents
            )

        case .cancelRequested(let id):
            requestCancel(id: id)

        case .sessionCreated(let session):
            core.failures = 0
            if core.settling != nil {
                // Recorded before it is cancelled, so that a failure below retries on this session, not a new one.
                update { next in
                    next.sessionNumber += 1
                    next.charge.sessionID = session.sessionID
                    next.charge.eid = session.eid
                    next.charge.checkoutURL = session.checkoutURL
                }
                if let sessionID = core.record?.charge.sessionID { call(.cancel, .cancelSession(sessionID: sessionID)) }
            } else if let asked = core.record?.charge.shares, session.shares != asked {
                // A ledger that predates splits makes one payer's session of the whole amount: not this charge.
                update { next in
                    next.sessionNumber += 1
                    next.charge.sessionID = session.sessionID
                    next.charge.eid = session.eid
                    next.charge.checkoutURL = session.checkoutURL
                }
                let made = session.shares == 1 ? "one share" : "\(session.shares) shares"
                settle(
                    .failed,
                    reason: .chargeRefused("the ledger made a session of \(made), not \(asked) (does it split?)")
                )
            } else {
                let renew = configuration.renewExpiredSessions
                let lifetime = configuration.sessionLifetime
                update { next in
                    next.sessionNumber += 1
                    next.charge.sessionID = session.sessionID
                    next.charge.eid = session.eid
                    next.charge.checkoutURL = session.checkoutURL
                    if !renew {
                        next.charge.expiresAt = min(Self.lifetimeEnd(of: next.charge, lifetime), session.expiresAt)
                    }
                }
                setProblem(nil)
                proceed()
            }

        case .createFailed(let problem):
            if case .chargeRefused = problem {
                // No session exists and none will.
                if let settling = core.settling {
                    finish(settling.outcome, reason: settling.reason)
                } else {
                    finish(.failed, reason: problem)
                }
            } else if core.settling != nil {
                settleFailed(problem)
            } else {
                pause(problem)
            }

        case .advertisingStarted:
            core.eidSince = now
            update { next in
                if next.charge.state == .creating { next.charge.state = .advertising }
            }
            if case .radio = core.problem { setProblem(nil) }
            core.failures = 0
            proceed()

        case .advertisingFailed(_, let problem):
            // The stream may wait long; the radio is brought back without waiting for it.
            stopAwaitingChange()
            if !isActive || core.settling != nil || core.record?.cancelRequested == true {
                proceed()
            } else {
                pause(problem)
            }

        case .eidRotated(let sessionID, let eid, let checkoutURL):
            core.eidSince = now
            if core.record?.charge.sessionID == sessionID, core.settling == nil {
                // Recorded first, so a restart advertises the EID the ledger now resolves; then a new advertisement,
                // which a radio puts on the air as a new advertising set.
                update { next in
                    next.charge.eid = eid
                    next.charge.checkoutURL = checkoutURL
                }
                stopAdvertising()
            }
            proceed()

        case .rotateFailed:
            // The current EID still resolves: keep it on the air and try again after another interval.
            core.eidSince = now
            proceed()

        case .statusSeen(let state):
            if let settling = core.settling {
                record(state)
                if settling.refundsBy != nil {
                    // The read worked: a problem shown while waiting for the refunds is over.
                    core.failures = 0
                    setProblem(nil)
                }
                if state.status == .paid {
                    finish(.paid)
                } else {
                    end(settling.outcome, reason: settling.reason, refundedCents: state.refundedCents)
                }
            } else {
                core.statusFailures = 0
                apply(state)
            }

        case .statusFailed(let problem):
            if let settling = core.settling, let refundsBy = settling.refundsBy {
                // The session is over: only the refunds' news is missing, and it is worth no more than the wait.
                if now >= refundsBy {
                    finish(settling.outcome, reason: settling.reason)
                } else {
                    setProblem(problem)
                    core.failures += 1
                    let delay = configuration.retry.delay(attempt: core.failures)
                    startTimer(after: min(delay, duration(from: now, to: refundsBy)))
                }
            } else if core.settling != nil {
                settleFailed(problem)
            } else {
                // The session may still be paid, so the charge goes on and says what is wrong.
                core.statusFailures += 1
                setProblem(problem)
                watch(after: configuration.retry.delay(attempt: core.statusFailures))
            }

        case .statusStreamUnsupported:
            // A status was read just before the wait: the polling cycle goes on from there.
            core.polling = true
            watch(after: configuration.statusInterval)

        case .sessionCancelled:
            if let settling = core.settling {
                if let current = core.record, current.charge.isSplit, let sessionID = current.charge.sessionID {
                    // Shares may have been paid since the last status: the status tells, and what was refunded.
                    call(.status, .fetchStatus(sessionID: sessionID))
                } else {
                    finish(settling.outcome, reason: settling.reason)
                }
            }

        case .sessionAlreadyOver:
            // Paid, expired or cancelled: only the status tells which.
            if core.settling != nil, let sessionID = core.record?.charge.sessionID {
                call(.status, .fetchStatus(sessionID: sessionID))
            }

        case .cancelFailed(let problem):
            settleFailed(problem)

        case .timerFired:
            proceed()

        case .persistFailed:
            break
        }
    }

    // MARK: Requests

    private mutating func requestCharge(
        id: String,
        amountCents: Cents,
        shares: Int,
        reference: String,
        tipPercents: [Int]
    ) {
        guard amountCents > 0 else { return refuse(.invalidAmount(amountCents)) }
        guard (1...KioskError.maximumShares).contains(shares), amountCents >= Cents(shares) else {
            return refuse(.invalidShares(shares, amountCents: amountCents))
        }
        // The ledger keeps the reference with the session and shows it to payers: refused here by its rule.
        if !reference.isEmpty, let problem = OrderReference.problem(in: reference) {
            return refuse(.invalidReference(problem))
        }
        if let active = core.record, !active.charge.state.isFinal { return refuse(.busy(activeID: active.charge.id)) }
        var charge = KioskCharge(
            id: id,
            amountCents: amountCents,
            shares: shares,
            reference: reference,
            createdAt: now,
            updatedAt: now
        )
        charge.tipPercents = tipPercents
        charge.expiresAt = lifetimeEnd(of: charge)
        let record = KioskStore.Record(charge: charge)
        // What was under way belonged to the last charge, which is over.
        core = Core(record: record, started: core.started, nextToken: core.nextToken)
        writes += [.persist(record, isNew: true), .publish(from: nil, to: charge)]
        proceed()
    }

    private mutating func requestCancel(id: String) {
        guard let current = core.record, current.charge.id == id else { return refuse(.notFound(id: id)) }
        guard !current.charge.state.isFinal else { return refuse(.alreadyFinal(current.charge)) }
        update { $0.cancelRequested = true }
        // Cut short what is waiting; a ledger call under way is let finish, and its result leads to the cancel. A
        // wait on the event stream is no call to finish.
        stopAwaitingChange()
        stopTimer()
        stopAdvertising()
        proceed()
    }

    private mutating func refuse(_ error: KioskError) {
        effects.append(.refuse(error))
    }

    // MARK: Steps

    private var isActive: Bool {
        guard let record = core.record else { return false }
        return !record.charge.state.isFinal
    }

    /// Takes the next step of the active charge unless something is under way that will lead to it.
    private mutating func proceed() {
        guard core.started, isActive, core.call == nil, core.timer == nil, let current = core.record else { return }
        if core.settling?.refundsBy != nil, let sessionID = current.charge.sessionID {
            // Over on the ledger; waiting for the news of its refunds.
            call(.status, .fetchStatus(sessionID: sessionID))
        } else if current.cancelRequested {
            settle(.cancelled)
        } else if now >= lifetimeEnd(of: current.charge) {
            settle(.expired)
        } else if current.charge.sessionID == nil {
            call(.create, createAction(current))
        } else if let eid = current.charge.eid {
            if let advertising = core.advertising {
                if advertising.onAir, let sessionID = current.charge.sessionID {
                    if let every = configuration.rotateEvery, let since = core.eidSince,
                        now >= since.addingTimeInterval(every.seconds)
                    {
                        call(.rotate, .rotateEID(sessionID: sessionID))
                    } else {
                        call(.status, .fetchStatus(sessionID: sessionID))
                    }
                }
            } else {
                let token = makeToken()
                core.advertising = Advertising(token: token, onAir: false)
                effects.append(.advertise(eid, token: token))
            }
        } else {
            // A stored session without a readable EID cannot be advertised: end it rather than spin.
            settle(.failed, reason: .unreadableEID)
        }
    }

    /// Records a status from the ledger while advertising.
    private mutating func apply(_ state: SessionState) {
        guard let current = core.record else { return }
        // A session with shares paid is not renewed: the ledger refunds them when it expires, and a new session
        // would start the split over.
        let renew =
            configuration.renewExpiredSessions && !current.cancelRequested && now < lifetimeEnd(of: current.charge)
            && current.charge.sharesPaid == 0 && state.sharesPaid == 0
        setProblem(nil)
        record(state)
        let status = state.status
        switch status {
        case .paid: finish(.paid)
        case .cancelled: end(.cancelled, refundedCents: state.refundedCents)
        case .expired where renew:
            stopAdvertising()
            update { next in
                next.charge.state = .creating
                next.charge.sessionID = nil
                next.charge.eid = nil
                next.charge.checkoutURL = nil
            }
            proceed()
        case .expired: end(.expired, refundedCents: state.refundedCents)
        case .locked, .created, .advertising, .partiallyPaid:
            // Partly paid, a split is still advertised for the payers of the shares left.
            update { $0.charge.state = status == .locked ? .locked : .advertising }
            if configuration.liveStatus && !core.polling {
                awaitChange(after: state)
            } else {
                watch(after: configuration.statusInterval)
            }
        }
    }

    /// Waits on the event stream for the next status while advertising (no longer than the safety interval, nor
    /// past the charge's lifetime).
    private mutating func awaitChange(after status: SessionState) {
        guard let current = core.record, core.advertising != nil, !current.cancelRequested,
            let sessionID = current.charge.sessionID
        else { return proceed() }
        let remaining = duration(from: now, to: lifetimeEnd(of: current.charge))
        guard remaining > .zero else { return watch(after: .zero) }
        core.awaitingChange = true
        call(
            .status,
            .awaitStatusChange(
                sessionID: sessionID,
                after: status,
                timeout: min(configuration.safetyInterval, remaining)
            )
        )
    }

    private mutating func stopAwaitingChange() {
        guard core.awaitingChange, core.call == .status else { return }
        core.awaitingChange = false
        core.call = nil
        effects.append(.stopAwaitingStatus)
    }

    /// Asks the status again after `delay` while advertising (sooner if the charge's lifetime ends first).
    private mutating func watch(after delay: Duration) {
        guard let current = core.record, core.advertising != nil, !current.cancelRequested else { return proceed() }
        let remaining = duration(from: now, to: lifetimeEnd(of: current.charge))
        startTimer(after: max(.zero, min(delay, remaining)))
    }

    /// Ends the charge as `outcome` once the ledger confirms that its session cannot be paid: a session that may be
    /// live is cancelled first, so no payment arrives after the charge is reported over. A session paid meanwhile
    /// ends it as paid.
    private mutating func settle(_ outcome: KioskChargeState, reason: KioskProblem? = nil) {
        guard let current = core.record else { return }
        core.settling = Settlement(outcome: outcome, reason: reason)
        stopAdvertising()
        if let sessionID = current.charge.sessionID {
            call(.cancel, .cancelSession(sessionID: sessionID))
        } else {
            // A create may have reached the ledger without its answer reaching us (a crash, a timeout): the same key
            // finds that session, or makes one that is cancelled right away.
            call(.create, createAction(current))
        }
    }

    /// Records what a status says of the shares paid: counts only grow, so a status that no longer counts the
    /// shares it refunded leaves the record of what was paid.
    private mutating func record(_ state: SessionState) {
        guard let current = core.record else { return }
        let charge = current.charge
        let sharesPaid = max(
            charge.sharesPaid,
            state.status == .paid ? max(state.sharesPaid, charge.shares) : state.sharesPaid
        )
        let paidCents = max(
            charge.paidCents,
            state.status == .paid ? max(state.paidCents, charge.amountCents) : state.paidCents
        )
        let tipCents = max(charge.tipCents, state.tipCents)
        update { next in
            next.charge.sharesPaid = min(sharesPaid, charge.shares)
            next.charge.paidCents = paidCents
            next.charge.tipCents = tipCents
            // The ledger's latest word on each payment, kept once seen: a status without them says nothing of them.
            if !state.payments.isEmpty { next.charge.payments = state.payments }
        }
    }

    /// Ends the charge unpaid as `outcome`, once the ledger shows `refundedCents` refunded. A charge with shares
    /// paid waits (at most ``Configuration/refundWait``) until the ledger shows all that was paid refunded, reading
    /// the status every ``Configuration/statusInterval``; then it ends with what was refunded.
    private mutating func end(_ outcome: KioskChargeState, reason: KioskProblem? = nil, refundedCents: Cents) {
        guard let charge = core.record?.charge else { return }
        let owed = charge.paidCents + charge.tipCents
        update { $0.charge.refundedCents = max($0.charge.refundedCents, min(refundedCents, owed)) }
        let refundsBy = core.settling?.refundsBy ?? now.addingTimeInterval(configuration.refundWait.seconds)
        guard charge.sharesPaid > 0, refundedCents < owed, now < refundsBy else {
            return finish(outcome, reason: reason)
        }
        core.settling = Settlement(outcome: outcome, reason: reason, refundsBy: refundsBy)
        stopAwaitingChange()
        stopAdvertising()
        startTimer(after: min(configuration.statusInterval, duration(from: now, to: refundsBy)))
    }

    private mutating func settleFailed(_ problem: KioskProblem) {
        core.settling = nil
        pause(.cancelNotConfirmed(problem))
        effects.append(.settleAttempted)
    }

    /// Ends the charge as `state`; `reason` is kept as the problem of a failed one.
    private mutating func finish(_ state: KioskChargeState, reason: KioskProblem? = nil) {
        core.settling = nil
        core.failures = 0
        setProblem(state == .failed ? reason : nil)
        update { $0.charge.state = state }
        stopAdvertising()
        stopTimer()
    }

    /// Shows `problem` (if any) and waits before the next attempt.
    private mutating func pause(_ problem: KioskProblem?) {
        if let problem { setProblem(problem) }
        core.failures += 1
        startTimer(after: configuration.retry.delay(attempt: core.failures))
    }

    // MARK: Effects

    private mutating func call(_ call: Call, _ action: Action) {
        core.call = call
        effects.append(action)
    }

    private func createAction(_ current: KioskStore.Record) -> Action {
        // `kiosk-<charge id>-<session number>`: the same after a crash, so the ledger answers with the session it
        // already created.
        .createSession(
            amountCents: current.charge.amountCents,
            shares: current.charge.shares,
            // Every session of the charge suggests the same tips.
            tipPercents: current.charge.tipPercents,
            // A charge recorded before references went to the ledger may hold one it refuses: kept here only.
            reference: current.charge.reference.isEmpty || OrderReference.problem(in: current.charge.reference) != nil
                ? nil : current.charge.reference,
            idempotencyKey: "kiosk-\(current.charge.id)-\(current.sessionNumber + 1)"
        )
    }

    private mutating func stopAdvertising() {
        guard core.advertising != nil else { return }
        core.advertising = nil
        effects.append(.stopAdvertising)
    }

    private mutating func startTimer(after delay: Duration) {
        let token = makeToken()
        core.timer = token
        effects.append(.retryAfter(delay, token: token))
    }

    private mutating func stopTimer() {
        guard core.timer != nil else { return }
        core.timer = nil
        effects.append(.stopTimer)
    }

    private mutating func makeToken() -> Int {
        core.nextToken += 1
        return core.nextToken
    }

    private mutating func setProblem(_ problem: KioskProblem?) {
        core.problem = problem
        update { $0.charge.problem = problem?.description }
    }

    /// Applies `change` to the active charge, and says to write it and then report it.
    private mutating func update(_ change: (inout KioskStore.Record) -> Void) {
        guard let current = core.record, !current.charge.state.isFinal else { return }
        var next = current
        change(&next)
        guard next != current else { return }
        next.charge.updatedAt = now
        core.record = next
        // One write per batch carries every change of it: the first persist is replaced by the latest record.
        if let index = writes.firstIndex(where: { if case .persist = $0 { true } else { false } }),
            case .persist(_, let isNew) = writes[index], case .publish(let from, _) = writes[index + 1]
        {
            writes[index] = .persist(next, isNew: isNew)
            writes[index + 1] = .publish(from: from, to: next.charge)
        } else {
            writes += [.persist(next, isNew: false), .publish(from: current.charge, to: next.charge)]
        }
        if next.charge.state.isFinal {
            effects.append(.settleAttempted)
            scheduleIdle(next.charge)
        }
    }

    private mutating func scheduleIdle(_ charge: KioskCharge) {
        let idleAt = charge.updatedAt.addingTimeInterval(configuration.idleAfter.seconds)
        let delay = duration(from: now, to: idleAt)
        if delay > .zero { effects.append(.publishStatus(after: delay)) }
    }

    private func lifetimeEnd(of charge: KioskCharge) -> Date {
        Self.lifetimeEnd(of: charge, configuration.sessionLifetime)
    }

    private static func lifetimeEnd(of charge: KioskCharge, _ lifetime: Duration) -> Date {
        charge.createdAt.addingTimeInterval(lifetime.seconds)
    }

    private func duration(from start: Date, to end: Date) -> Duration {
        .milliseconds(Int64((end.timeIntervalSince(start) * 1000).rounded(.up)))
    }
}
