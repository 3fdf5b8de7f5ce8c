import GRDB
import GotchuCore
import GotchuLedger
import PostgresNIO

// The model test's webhook outbox: the model announces one event per money movement it accepts (and per cancel and
// noted expiry), for the user it concerns; after every step the events in the store's table must be exactly those,
// read from the rows themselves. `ledger verify` holds each event to its transfer every batch besides.

extension LedgerModel {
    /// The event a movement (or a cancel, or an expiry) writes: its type, the user it goes to, what it moved.
    mutating func announce(_ type: WebhookEventType, _ user: Int, _ amount: Cents?) {
        events.append(Self.event(type.rawValue, user, amount))
    }

    static func event(_ type: String, _ user: Int, _ amount: Cents?) -> String {
        "\(type) u\(user)" + (amount.map { " \($0)" } ?? "")
    }

    /// The expiry sweep: every session expired unpaid and uncancelled is noted once, with its event; returns how many
    /// it noted.
    mutating func noteExpiries() -> Int {
        var noted = 0
        for session in sessions.values.sorted(by: { $0.sid < $1.sid })
        where !session.cancelled && session.paidBy == nil && now >= session.expiresAt
            && !expiryNoted.contains(session.sid)
        {
            expiryNoted.insert(session.sid)
            announce(.sessionExpired, session.payee, nil)
            noted += 1
        }
        return noted
    }
}

extension Driver.BalanceReader {
    /// Every webhook event's type, user id and amount, from the table.
    func webhookEvents() async throws -> [(type: String, user: String, amount: Int64?)] {
        switch self {
        case .sqlite(let database):
            return try await database.read { db in
                try Row.fetchAll(db, sql: "SELECT type, user_id, amount_cents FROM webhook_events ORDER BY seq").map {
                    (type: $0["type"], user: $0["user_id"], amount: $0["amount_cents"])
                }
            }
        case .postgres(let client):
            var events: [(type: String, user: String, amount: Int64?)] = []
            let rows = try await client.query("SELECT type, user_id, amount_cents FROM webhook_events ORDER BY seq")
            for try await (type, user, amount) in rows.decode((String, String, Int64?).self) {
                events.append((type, user, amount))
            }
            return events
        }
    }
}

extension Driver {
    /// The expiry sweep, against the model's.
    mutating func noteExpiries() async throws {
        let noted = try await store.markExpiredSessions(limit: 1_000)
        let expected = model.noteExpiries()
        guard noted == expected else {
            throw DriverFailure(message: "expiry sweep: store noted \(noted), model \(expected)")
        }
        if noted > 0 { saw("expiries noted") }
    }

    /// The events in the store's table against the model's, as multisets: one for each movement the model accepted,
    /// none for anything it refused or replayed.
    func checkWebhookEvents() async throws {
        let indices = Dictionary(uniqueKeysWithValues: users.enumerated().map { ($1.id, $0) })
        let stored = try await balances.webhookEvents().map { event in
            LedgerModel.event(event.type, indices[event.user] ?? -1, event.amount)
        }
        guard stored.sorted() == model.events.sorted() else {
            let extra = stored.filter { event in stored.count { $0 == event } > model.events.count { $0 == event } }
            let missing = model.events.filter { event in
                model.events.count { $0 == event } > stored.count { $0 == event }
            }
            throw DriverFailure(
                message: "webhook events: in the store but not the model \(Set(extra).sorted()), "
                    + "in the model but not the store \(Set(missing).sorted())"
            )
        }
    }
}
