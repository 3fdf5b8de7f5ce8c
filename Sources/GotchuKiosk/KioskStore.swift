package import Foundation
import GRDB
import GotchuCore

/// The kiosk's charges on disk (SQLite), so a charge survives a restart or a crash of the daemon.
///
/// At most one charge is active (not final) at a time, and the database itself enforces it: an active charge holds
/// the single value of a unique column. Every change is written before the kiosk acts on it or reports it.
package final class KioskStore: Sendable {
    /// A stored charge and the kiosk's private bookkeeping about it.
    package struct Record: Hashable, Sendable {
        /// The charge as reported.
        package var charge: KioskCharge
        /// How many ledger sessions were created for the charge; names the idempotency key of the next one.
        package var sessionNumber: Int
        /// The point-of-sale asked to cancel; the kiosk has not yet heard the ledger confirm it.
        package var cancelRequested: Bool

        /// Creates a record.
        package init(charge: KioskCharge, sessionNumber: Int = 0, cancelRequested: Bool = false) {
            self.charge = charge
            self.sessionNumber = sessionNumber
            self.cancelRequested = cancelRequested
        }
    }

    /// Why the store refused a write.
    package enum StoreError: Error, Hashable, Sendable, CustomStringConvertible {
        /// Another charge is still active.
        case busy(activeID: String)

        package var description: String {
            switch self {
            case .busy(let id): "another charge is active: \(id)"
            }
        }
    }

    /// Final charges older than this are deleted when the store opens.
    package static let retention: TimeInterval = 90 * 24 * 3600

    private let database: DatabaseQueue

    /// Opens (creating if needed) the store in `directory`: the directory is made 0700 and the database 0600.
    package init(directory: URL) throws {
        try FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let path = directory.appendingPathComponent("kiosk.sqlite").path
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        database = try DatabaseQueue(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: charges") { db in
            try db.execute(
                sql: """
                    CREATE TABLE charges (
                        id TEXT PRIMARY KEY,
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        reference TEXT NOT NULL,
                        state TEXT NOT NULL CHECK (state IN
                            ('creating', 'advertising', 'locked', 'paid', 'expired', 'cancelled', 'failed')),
                        -- 1 while the charge is active, NULL once final: the unique index allows one active charge.
                        active INTEGER CHECK (active = 1),
                        session_id TEXT,
                        eid TEXT,
                        expires_at REAL,
                        problem TEXT,
                        session_number INTEGER NOT NULL DEFAULT 0,
                        cancel_requested INTEGER NOT NULL DEFAULT 0,
                        created_at REAL NOT NULL,
                        updated_at REAL NOT NULL
                    );
                    CREATE UNIQUE INDEX charges_one_active ON charges (active);
                    CREATE INDEX charges_created_at ON charges (created_at);
                    """
            )
        }
        migrator.registerMigration("v2: splits") { db in
            // Charges stored before splits were one share each; a paid one had its one share paid, for its amount.
            try db.execute(
                sql: """
                    ALTER TABLE charges ADD COLUMN shares INTEGER NOT NULL DEFAULT 1 CHECK (shares >= 1);
                    ALTER TABLE charges ADD COLUMN shares_paid INTEGER NOT NULL DEFAULT 0 CHECK (shares_paid >= 0);
                    ALTER TABLE charges ADD COLUMN paid_cents INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE charges ADD COLUMN tip_cents INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE charges ADD COLUMN refunded_cents INTEGER NOT NULL DEFAULT 0;
                    UPDATE charges SET shares_paid = 1, paid_cents = amount_cents WHERE state = 'paid';
                    """
            )
        }
        migrator.registerMigration("v3: checkout URL") { db in
            try db.execute(sql: "ALTER TABLE charges ADD COLUMN checkout_url TEXT")
        }
        migrator.registerMigration("v4: payments and refunds") { db in
            // The payments of a split as JSON; each refund asked through the kiosk is written before it is sent.
            try db.execute(
                sql: """
                    ALTER TABLE charges ADD COLUMN payments TEXT;
                    CREATE TABLE refunds (
                        key TEXT PRIMARY KEY,
                        charge_id TEXT NOT NULL,
                        session_id TEXT NOT NULL,
                        payment_id TEXT,
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'refused')),
                        refund_id TEXT,
                        problem TEXT,
                        created_at REAL NOT NULL,
                        updated_at REAL NOT NULL
                    );
                    CREATE INDEX refunds_charge ON refunds (charge_id);
                    CREATE INDEX refunds_pending ON refunds (state) WHERE state = 'pending';
                    """
            )
        }
        migrator.registerMigration("v5: tip prompts") { db in
            // The tips a charge's sessions suggest, as whole percents (`10,15,20`); NULL for none.
            try db.execute(sql: "ALTER TABLE charges ADD COLUMN tip_percents TEXT")
        }
        try migrator.migrate(database)
        try database.write { db in
            try db.execute(
                sql: "DELETE FROM charges WHERE active IS NULL AND updated_at < ?",
                arguments: [Date().timeIntervalSince1970 - Self.retention]
            )
            try db.execute(
                sql: "DELETE FROM refunds WHERE state <> 'pending' AND updated_at < ?",
                arguments: [Date().timeIntervalSince1970 - Self.retention]
            )
        }
    }

    /// Adds a new charge; throws ``StoreError/busy(activeID:)`` if another charge is active.
    package func insert(_ record: Record) throws {
        try database.write { db in
            if let active = try String.fetchOne(db, sql: "SELECT id FROM charges WHERE active = 1") {
                throw StoreError.busy(activeID: active)
            }
            try db.execute(
                sql: """
                    INSERT INTO charges (id, amount_cents, reference, state, active, session_id, eid, expires_at,
                        problem, session_number, cancel_requested, created_at, updated_at, shares, shares_paid,
                        paid_cents, tip_cents, refunded_cents, checkout_url, payments, tip_percents)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: Self.arguments(record, leadingID: true)
            )
        }
    }

    /// Writes `record` over the stored charge with the same id. A final charge is never changed again.
    package func update(_ record: Record) throws {
        try database.write { db in
            var arguments = Self.arguments(record, leadingID: false)
            _ = arguments.append(contentsOf: [record.charge.id])
            try db.execute(
                sql: """
                    UPDATE charges SET amount_cents = ?, reference = ?, state = ?, active = ?, session_id = ?,
                        eid = ?, expires_at = ?, problem = ?, session_number = ?, cancel_requested = ?,
                        created_at = ?, updated_at = ?, shares = ?, shares_paid = ?, paid_cents = ?, tip_cents = ?,
                        refunded_cents = ?, checkout_url = ?, payments = ?, tip_percents = ?
                    WHERE id = ? AND active = 1
                    """,
                arguments: arguments
            )
        }
    }

    /// The charge with this id.
    package func record(id: String) throws -> Record? {
        try database.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM charges WHERE id = ?", arguments: [id]).map(Self.record)
        }
    }

    /// The active charge, if any.
    package func active() throws -> Record? {
        try database.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM charges WHERE active = 1").map(Self.record)
        }
    }

    /// The most recent charge, active or not.
    package func latest() throws -> Record? {
        try database.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM charges ORDER BY created_at DESC, rowid DESC LIMIT 1")
                .map(Self.record)
        }
    }

    private static func arguments(_ record: Record, leadingID: Bool) -> StatementArguments {
        let charge = record.charge
        var values: [(any DatabaseValueConvertible)?] = leadingID ? [charge.id] : []
        values += [
            charge.amountCents, charge.reference, charge.state.rawValue, charge.state.isFinal ? nil : 1,
            charge.sessionID, charge.eid?.rawValue, charge.expiresAt?.timeIntervalSince1970, charge.problem,
            record.sessionNumber, record.cancelRequested, charge.createdAt.timeIntervalSince1970,
            charge.updatedAt.timeIntervalSince1970, charge.shares, charge.sharesPaid, charge.paidCents,
            charge.tipCents, charge.refundedCents, charge.checkoutURL, Self.encode(charge.payments),
            charge.tipPercents.isEmpty ? nil : charge.tipPercents.map(String.init).joined(separator: ","),
        ]
        return StatementArguments(values)
    }

    private static func record(_ row: Row) -> Record {
        let expiresAt: Double? = row["expires_at"]
        let eid: String? = row["eid"]
        var record = Record(
            charge: KioskCharge(
                id: row["id"],
                amountCents: row["amount_cents"],
                shares: row["shares"],
                reference: row["reference"],
                // The CHECK constraint admits only known states.
                state: KioskChargeState(rawValue: row["state"]) ?? .failed,
                sessionID: row["session_id"],
                eid: eid.flatMap(EID.init(rawValue:)),
                checkoutURL: row["checkout_url"],
                expiresAt: expiresAt.map(Date.init(timeIntervalSince1970:)),
                problem: row["problem"],
                createdAt: Date(timeIntervalSince1970: row["created_at"]),
                updatedAt: Date(timeIntervalSince1970: row["updated_at"])
            ),
            sessionNumber: row["session_number"],
            cancelRequested: row["cancel_requested"]
        )
        record.charge.sharesPaid = row["shares_paid"]
        record.charge.paidCents = row["paid_cents"]
        record.charge.tipCents = row["tip_cents"]
        record.charge.refundedCents = row["refunded_cents"]
        record.charge.payments = decodePayments(row["payments"])
        // Written by this store from a checked list; anything else reads as none.
        let tips: String? = row["tip_percents"]
        record.charge.tipPercents = tips.flatMap { try? TipPrompt.parse($0).percents } ?? []
        return record
    }

    // MARK: Payments and refunds

    /// Writes the payments of charge `id` as the ledger last reported them; the one change a final charge takes.
    package func updatePayments(chargeID id: String, _ payments: [KioskPayment]) throws {
        try database.write { db in
            try db.execute(
                sql: "UPDATE charges SET payments = ? WHERE id = ?",
                arguments: [Self.encode(payments), id]
            )
        }
    }

    /// Adds refunds about to be sent, all or none.
    package func insert(_ refunds: [KioskRefund]) throws {
        try database.write { db in
            for refund in refunds {
                try db.execute(
                    sql: """
                        INSERT INTO refunds (key, charge_id, session_id, payment_id, amount_cents, state, refund_id,
                            problem, created_at, updated_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        refund.key, refund.chargeID, refund.sessionID, refund.paymentID, refund.amountCents,
                        refund.state.rawValue, refund.refundID, refund.problem, refund.createdAt.timeIntervalSince1970,
                        refund.updatedAt.timeIntervalSince1970,
                    ]
                )
            }
        }
    }

    /// Records how a refund went; a refund that is no longer pending never changes again.
    package func update(_ refund: KioskRefund) throws {
        try database.write { db in
            try db.execute(
                sql: """
                    UPDATE refunds SET state = ?, refund_id = ?, problem = ?, updated_at = ?
                    WHERE key = ? AND state = 'pending'
                    """,
                arguments: [
                    refund.state.rawValue, refund.refundID, refund.problem, refund.updatedAt.timeIntervalSince1970,
                    refund.key,
                ]
            )
        }
    }

    /// The refunds of charge `id`, oldest first.
    package func refunds(chargeID id: String) throws -> [KioskRefund] {
        try database.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM refunds WHERE charge_id = ? ORDER BY created_at, rowid",
                arguments: [id]
            ).map(Self.refund)
        }
    }

    /// Every refund not yet answered by the ledger, oldest first.
    package func pendingRefunds() throws -> [KioskRefund] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM refunds WHERE state = 'pending' ORDER BY created_at, rowid")
                .map(Self.refund)
        }
    }

    private static func refund(_ row: Row) -> KioskRefund {
        var refund = KioskRefund(
            chargeID: row["charge_id"],
            sessionID: row["session_id"],
            paymentID: row["payment_id"],
            amountCents: row["amount_cents"],
            at: Date(timeIntervalSince1970: row["created_at"]),
            key: row["key"]
        )
        // The CHECK constraint admits only known states.
        refund.state = KioskRefund.State(rawValue: row["state"]) ?? .pending
        refund.refundID = row["refund_id"]
        refund.problem = row["problem"]
        refund.updatedAt = Date(timeIntervalSince1970: row["updated_at"])
        return refund
    }

    private static func encode(_ payments: [KioskPayment]) -> String? {
        guard !payments.isEmpty, let data = try? JSONEncoder.kioskStore.encode(payments) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    private static func decodePayments(_ text: String?) -> [KioskPayment] {
        guard let text else { return [] }
        return (try? JSONDecoder.kioskStore.decode([KioskPayment].self, from: Data(text.utf8))) ?? []
    }
}

extension JSONEncoder {
    /// The store's JSON: dates as seconds since 1970, keys sorted.
    fileprivate static var kioskStore: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = .sortedKeys
        return encoder
    }
}

extension JSONDecoder {
    /// Reads the store's JSON.
    fileprivate static var kioskStore: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }
}
