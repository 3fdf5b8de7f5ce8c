package import Foundation

/// The kiosk as the customer display and the point-of-sale see it at one moment.
package struct KioskStatus: Codable, Hashable, Sendable {
    /// The kiosk's state in one word, as the D-Bus `State` property reports it.
    package enum State: String, Codable, Hashable, Sendable, CaseIterable {
        /// No charge, or the last one ended a while ago (``KioskChargeMachine/Configuration/idleAfter``); ``KioskStatus/charge`` may
        /// still hold it.
        case idle
        /// A charge is being set up on the ledger.
        case creating
        /// Waiting for a payer.
        case advertising
        /// A payer is paying.
        case locked
        /// The last charge was paid.
        case paid
        /// The last charge expired unpaid.
        case expired
        /// The last charge was cancelled.
        case cancelled
        /// The last charge failed.
        case failed
        /// Something keeps the current charge from progressing (see ``KioskStatus/problem``); the kiosk retries.
        case error
    }

    /// The state in one word.
    package var state: State
    /// The payee's name, shown to customers: the name payers' phones show, as the ledger last answered it, else
    /// the configured one.
    package var payeeName: String
    /// The current charge, or the last one (so the display can keep showing "paid").
    package var charge: KioskCharge?
    /// What is wrong, for a person, when ``state`` is ``State/error`` or ``State/failed``.
    package var problem: String?
    /// The kiosk's clock when this status was taken, so a display can count down without trusting its own clock.
    package var now: Date
    /// Whether charges go on the air; `false` for a kiosk with no radio, whose QR code is the only way to pay.
    package var onAir: Bool

    /// Creates a status.
    package init(
        state: State,
        payeeName: String,
        charge: KioskCharge?,
        problem: String?,
        now: Date,
        onAir: Bool = true
    ) {
        self.onAir = onAir
        self.state = state
        self.payeeName = payeeName
        self.charge = charge
        self.problem = problem
        self.now = now
    }

    enum CodingKeys: String, CodingKey {
        case state
        case payeeName = "payee_name"
        case charge
        case problem
        case now
        case onAir = "on_air"
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.state = try container.decode(State.self, forKey: .state)
        self.payeeName = try container.decode(String.self, forKey: .payeeName)
        self.charge = try container.decodeIfPresent(KioskCharge.self, forKey: .charge)
        self.problem = try container.decodeIfPresent(String.self, forKey: .problem)
        self.now = try container.decode(Date.self, forKey: .now)
        // Kiosks that predate it were always on the air.
        self.onAir = try container.decodeIfPresent(Bool.self, forKey: .onAir) ?? true
    }
}

/// Something that knows the kiosk's status and tells of every change: the kiosk itself, or a stand-in.
package protocol KioskStatusSource: Sendable {
    /// The status now.
    func status() async -> KioskStatus
    /// Every status from now on, starting with the current one. The stream ends when the kiosk stops.
    func statusUpdates() async -> AsyncStream<KioskStatus>
}
