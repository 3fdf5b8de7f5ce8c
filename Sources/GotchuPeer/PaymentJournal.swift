public import Foundation
import GRDB
public import GotchuCore

/// The payer's local record of payments it set out to make, written before each request leaves the machine.
///
/// Each entry carries the idempotency key the payment is sent with. After a crash, a lost response or a restart,
/// ``unfinished()`` lists what may or may not have gone through, and resending with the same key makes the server
/// either run the payment once or replay its outcome: a payment ends exactly once or not at all.
public final class PaymentJournal: Sendable {
    /// Where an entry stands.
    public enum State: String, Sendable, Codable {
        /// Written before lock and send; the outcome is not known yet.
        case pending = "PENDING"
        /// The server confirmed the payment.
        case paid = "PAID"
        /// The server refused it for good (expired, paid by someone else, insufficient funds…); no money moved.
        case failed = "FAILED"
    }

    /// One intended payment.
    public struct Entry: Sendable, Hashable {
        /// The idempotency key the payment is sent with.
        public var key: String
        /// The ledger server's base URL.
        public var server: String
        /// The session paid.
        public var sid: String
        /// The amount confirmed by the payer, without the tip; of a split session, its shares' (the lock's figure
        /// once locked).
        public var amountCents: Cents
        /// The tip sent with the payment, on top of ``amountCents`` (0: none).
        public var tipCents: Cents
        /// How many shares of a split session the payment takes (1 for a session that is not split).
        public var shares: Int
        /// The payee's name as the server gave it.
        public var payeeName: String
        /// Where it stands.
        public var state: State
        /// The balance after paying, once paid.
        public var newBalanceCents: Cents?
        /// Why it failed, if it did.
        public var failure: String?
        /// When it was written.
        public var createdAt: Date
    }

    private let database: DatabaseQueue

    /// Opens the journal at `path`, creating it readable by its owner only (0600).
    public init(path: String) throws {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        try FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        self.database = try DatabaseQueue(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: payments") { db in
            try db.execute(
                sql: """
                    CREATE TABLE payments (
                        key TEXT PRIMARY KEY,
                        server TEXT NOT NULL,
                        sid TEXT NOT NULL,
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        payee_name TEXT NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('PENDING', 'PAID', 'FAILED')),
                        new_balance_cents INTEGER,
                        failure TEXT,
                        created_at REAL NOT NULL,
                        updated_at REAL NOT NULL
                    );
                    CREATE INDEX payments_state ON payments (state);
                    """
            )
        }
        migrator.registerMigration("v2: tips and shares") { db in
            try db.execute(
                sql: """
                    ALTER TABLE payments ADD COLUMN tip_cents INTEGER NOT NULL DEFAULT 0 CHECK (tip_cents >= 0);
                    ALTER TABLE payments ADD COLUMN shares INTEGER NOT NULL DEFAULT 1 CHECK (shares >= 1);
                    """
            )
        }
        try migrator.migrate(database)
    }

    /// Records the intent to pay `sid` (`amountCents` and a tip of `tipCents` on top; of a split session, `shares`
    /// of its shares) and returns its entry with a fresh idempotency key. Call it before the first request about
    /// this payment.
    public func begin(
        server: String,
        sid: String,
        amountCents: Cents,
        payeeName: String,
        tipCents: Cents = 0,
        shares: Int = 1
    ) throws -> Entry {
        let entry = Entry(
            key: UUID().uuidString.lowercased(),
            server: server,
            sid: sid,
            amountCents: amountCents,
            tipCents: tipCents,
            shares: shares,
            payeeName: payeeName,
            state: .pending,
            newBalanceCents: nil,
            failure: nil,
            createdAt: Date()
        )
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT INTO payments (key, server, sid, amount_cents, tip_cents, shares, payee_name, state,
                        created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, 'PENDING', ?, ?)
                    """,
                arguments: [
                    entry.key, server, sid, amountCents, tipCents, shares, payeeName,
                    entry.createdAt.timeIntervalSince1970, entry.createdAt.timeIntervalSince1970,
                ]
            )
        }
        return entry
    }

    /// Records what the lock settled of a pending payment before it is sent: the amount of the shares it reserved
    /// and the tip on it. Returns the entry as it now stands (`nil` if no entry has this key).
    @discardableResult
    public func settleAmount(key: String, amountCents: Cents, tipCents: Cents) throws -> Entry? {
        try database.write { db in
            try db.execute(
                sql: """
                    UPDATE payments SET amount_cents = ?, tip_cents = ?, updated_at = ?
                    WHERE key = ? AND state = 'PENDING'
                    """,
                arguments: [amountCents, tipCents, Date().timeIntervalSince1970, key]
            )
        }
        return try entry(key: key)
    }

    /// Records the server's confirmation.
    public func markPaid(key: String, newBalanceCents: Cents) throws {
        try finish(key: key, state: .paid, balance: newBalanceCents, failure: nil)
    }

    /// Records a final refusal: no money moved and none will under this key.
    public func markFailed(key: String, reason: String) throws {
        try finish(key: key, state: .failed, balance: nil, failure: reason)
    }

    /// Entries whose outcome is not known yet, oldest first.
    public func unfinished() throws -> [Entry] {
        try entries(where: "state = 'PENDING'")
    }

    /// The most recent entries, newest first.
    public func recent(limit: Int = 20) throws -> [Entry] {
        try entries(where: "1", order: "DESC", limit: limit)
    }

    /// The entry with this key.
    public func entry(key: String) throws -> Entry? {
        try database.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM payments WHERE key = ?", arguments: [key]).map(Self.entry)
        }
    }

    private func finish(key: String, state: State, balance: Cents?, failure: String?) throws {
        try database.write { db in
            try db.execute(
                sql: """
                    UPDATE payments SET state = ?, new_balance_cents = ?, failure = ?, updated_at = ?
                    WHERE key = ? AND state = 'PENDING'
                    """,
                arguments: [state.rawValue, balance, failure, Date().timeIntervalSince1970, key]
            )
        }
    }

    private func entries(where condition: String, order: String = "ASC", limit: Int = -1) throws -> [Entry] {
        try database.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM payments WHERE \(condition) ORDER BY created_at \(order), rowid \(order) LIMIT ?",
                arguments: [limit]
            ).map(Self.entry)
        }
    }

    private static func entry(_ row: Row) -> Entry {
        Entry(
            key: row["key"],
            server: row["server"],
            sid: row["sid"],
            amountCents: row["amount_cents"],
            tipCents: row["tip_cents"],
            shares: row["shares"],
            payeeName: row["payee_name"],
            state: State(rawValue: row["state"]) ?? .pending,
            newBalanceCents: row["new_balance_cents"],
            failure: row["failure"],
            createdAt: Date(timeIntervalSince1970: row["created_at"])
        )
    }
}
