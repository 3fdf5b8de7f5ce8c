import GRDB
import GotchuLedger

/// The SQLite schema: the spec's tables plus what idempotency and auditing need. Times are milliseconds since 1970
/// on the store's clock; amounts are integer cents.
enum SQLiteLedgerSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: ledger") { db in
            try db.execute(
                sql: """
                    CREATE TABLE users (
                        id TEXT PRIMARY KEY,
                        email TEXT NOT NULL UNIQUE,
                        display_name TEXT NOT NULL,
                        kyc_status TEXT NOT NULL DEFAULT 'NONE',
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE wallet_accounts (
                        id TEXT PRIMARY KEY,
                        user_id TEXT UNIQUE REFERENCES users(id),
                        kind TEXT NOT NULL CHECK (kind IN ('USER', 'SYSTEM')),
                        available_cents INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        CHECK (kind = 'SYSTEM' OR available_cents >= 0),
                        CHECK ((kind = 'USER') = (user_id IS NOT NULL))
                    );
                    CREATE TABLE ledger_entries (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        id TEXT NOT NULL UNIQUE,
                        transfer_id TEXT NOT NULL,
                        wallet_id TEXT NOT NULL REFERENCES wallet_accounts(id),
                        direction TEXT NOT NULL CHECK (direction IN ('DEBIT', 'CREDIT')),
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        type TEXT NOT NULL,
                        ref_type TEXT NOT NULL,
                        ref_id TEXT NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    CREATE INDEX ledger_entries_wallet ON ledger_entries (wallet_id, seq);
                    CREATE INDEX ledger_entries_ref ON ledger_entries (ref_type, ref_id);
                    CREATE TABLE payment_sessions (
                        id TEXT PRIMARY KEY,
                        payee_id TEXT NOT NULL REFERENCES users(id),
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        status TEXT NOT NULL CHECK (status IN ('CREATED', 'ADVERTISING', 'LOCKED', 'PAID', 'CANCELLED')),
                        created_at INTEGER NOT NULL,
                        exp_at INTEGER NOT NULL,
                        locked_by TEXT REFERENCES users(id),
                        lock_exp_at INTEGER,
                        paid_by TEXT REFERENCES users(id),
                        paid_at INTEGER,
                        cancelled_at INTEGER
                    );
                    CREATE TABLE session_eids (
                        eid TEXT NOT NULL,
                        session_id TEXT NOT NULL REFERENCES payment_sessions(id),
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (eid, session_id)
                    );
                    CREATE TABLE idempotency_keys (
                        user_id TEXT NOT NULL REFERENCES users(id),
                        key TEXT NOT NULL,
                        sid TEXT NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('IN_FLIGHT', 'DONE')),
                        balance_cents INTEGER,
                        problem_type TEXT,
                        problem_detail TEXT,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL,
                        PRIMARY KEY (user_id, key)
                    );
                    CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
                    """
            )
            try db.execute(
                sql:
                    "INSERT INTO wallet_accounts (id, user_id, kind, available_cents, created_at) VALUES (?, NULL, 'SYSTEM', 0, 0)",
                arguments: [LedgerAccounts.fundingWalletID]
            )
        }
        // The `Idempotency-Key` of `POST /sessions/create`, unique per payee; sessions made without one leave it NULL,
        // and NULLs never collide.
        migrator.registerMigration("v2: session create keys") { db in
            try db.execute(
                sql: """
                    ALTER TABLE payment_sessions ADD COLUMN create_key TEXT;
                    CREATE UNIQUE INDEX payment_sessions_create_key ON payment_sessions (payee_id, create_key);
                    """
            )
        }
        // The lock cap counts a payer's locked sessions on every lock: without this it scans the table.
        migrator.registerMigration("v3: locks by payer") { db in
            try db.execute(
                sql:
                    "CREATE INDEX payment_sessions_locked_by ON payment_sessions (locked_by) WHERE locked_by IS NOT NULL"
            )
        }
        // Accounts with passwords (bcrypt), disabled accounts, names an operator verified; refresh tokens stored
        // as digests; and the log of every operator's change.
        migrator.registerMigration("v4: credentials") { db in
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN password_hash TEXT;
                    ALTER TABLE users ADD COLUMN disabled_at INTEGER;
                    ALTER TABLE users ADD COLUMN verified_name TEXT;
                    CREATE TABLE refresh_tokens (
                        token_hash TEXT NOT NULL PRIMARY KEY,
                        family_id TEXT NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL,
                        used_at INTEGER,
                        revoked_at INTEGER
                    );
                    CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
                    CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id);
                    CREATE INDEX refresh_tokens_expires ON refresh_tokens (expires_at);
                    CREATE TABLE admin_audit (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        actor TEXT NOT NULL,
                        action TEXT NOT NULL,
                        subject TEXT NOT NULL,
                        detail TEXT NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    """
            )
        }
        // API keys (only a hash of each secret is kept) and the users of external identities.
        migrator.registerMigration("v5: api keys and identities") { db in
            try db.execute(
                sql: """
                    CREATE TABLE api_keys (
                        id TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        name TEXT NOT NULL,
                        secret_hash TEXT NOT NULL UNIQUE,
                        hint TEXT NOT NULL,
                        scopes TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        last_used_at INTEGER,
                        revoked_at INTEGER
                    );
                    CREATE INDEX api_keys_user ON api_keys (user_id);
                    CREATE TABLE user_identities (
                        issuer TEXT NOT NULL,
                        subject TEXT NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (issuer, subject)
                    );
                    """
            )
        }
        // Rotation: a session's EIDs over time. An EID rotated away resolves for a grace after `retired_at`; rotation
        // finds a session's EIDs by the session.
        migrator.registerMigration("v6: EID rotation") { db in
            try db.execute(
                sql: """
                    ALTER TABLE session_eids ADD COLUMN retired_at INTEGER;
                    CREATE INDEX session_eids_session ON session_eids (session_id);
                    """
            )
        }
        // Signed receipts, their keys, and the entries' hash chain (hashed by the engine after migrating, oldest
        // entry first, for entries written before this).
        migrator.registerMigration("v7: receipts and chain") { db in
            try db.execute(
                sql: """
                    ALTER TABLE ledger_entries ADD COLUMN hash TEXT;
                    CREATE INDEX ledger_entries_unchained ON ledger_entries (seq) WHERE hash IS NULL;
                    CREATE TABLE ledger_chain (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        head_hash TEXT NOT NULL,
                        entry_count INTEGER NOT NULL
                    );
                    CREATE TABLE receipt_keys (
                        id TEXT PRIMARY KEY,
                        public_key TEXT NOT NULL,
                        private_key TEXT,
                        created_at INTEGER NOT NULL,
                        retired_at INTEGER
                    );
                    CREATE TABLE receipts (
                        id TEXT PRIMARY KEY,
                        kind TEXT NOT NULL,
                        session_id TEXT NOT NULL REFERENCES payment_sessions(id),
                        body TEXT NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX receipts_payment ON receipts (session_id) WHERE kind = 'payment';
                    CREATE INDEX receipts_session ON receipts (session_id, kind);
                    """
            )
            try db.execute(
                sql: "INSERT INTO ledger_chain (id, head_hash, entry_count) VALUES (1, ?, 0)",
                arguments: [LedgerChain.genesis]
            )
        }
        // Money in and out: deposits (unique by their external reference), payouts (unique by their user's
        // Idempotency-Key) and the system accounts they move money through.
        migrator.registerMigration("v8: deposits and payouts") { db in
            try db.execute(
                sql: """
                    CREATE TABLE deposits (
                        id TEXT PRIMARY KEY,
                        reference TEXT NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        actor TEXT NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX deposits_reference ON deposits (reference);
                    CREATE TABLE payouts (
                        id TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        idempotency_key TEXT NOT NULL,
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        balance_after_cents INTEGER NOT NULL,
                        status TEXT NOT NULL CHECK (status IN ('PENDING', 'SETTLED', 'FAILED')),
                        created_at INTEGER NOT NULL,
                        resolved_at INTEGER,
                        reference TEXT,
                        reason TEXT,
                        resolved_by TEXT
                    );
                    CREATE UNIQUE INDEX payouts_key ON payouts (user_id, idempotency_key);
                    CREATE INDEX payouts_status ON payouts (status, created_at);
                    """
            )
            for account in [
                LedgerAccounts.depositsWalletID, LedgerAccounts.payoutsWalletID, LedgerAccounts.payoutsSettledWalletID,
            ] {
                try db.execute(
                    sql:
                        "INSERT INTO wallet_accounts (id, user_id, kind, available_cents, created_at) VALUES (?, NULL, 'SYSTEM', 0, 0)",
                    arguments: [account]
                )
            }
        }
        // Refunds of paid sessions: each under its requester's idempotency key, with the transfer that moved the
        // money back and its receipt; a session's refunds are summed under the session's lock.
        migrator.registerMigration("v9: refunds") { db in
            try db.execute(
                sql: """
                    CREATE TABLE refunds (
                        id TEXT PRIMARY KEY,
                        session_id TEXT NOT NULL REFERENCES payment_sessions(id),
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        requested_by TEXT NOT NULL REFERENCES users(id),
                        idempotency_key TEXT NOT NULL,
                        transfer_id TEXT NOT NULL,
                        receipt_id TEXT REFERENCES receipts(id),
                        refunded_total_cents INTEGER NOT NULL CHECK (refunded_total_cents >= amount_cents),
                        created_at INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX refunds_key ON refunds (requested_by, idempotency_key);
                    CREATE INDEX refunds_session ON refunds (session_id);
                    """
            )
        }
        // A wallet's history names the other side of each entry's transfer: found by transfer id, not by a scan.
        migrator.registerMigration("v10: entry history index") { db in
            try db.execute(sql: "CREATE INDEX ledger_entries_transfer ON ledger_entries (transfer_id)")
        }
        // One row, written by each readiness check: proof that the database takes writes now.
        migrator.registerMigration("v11: health checks") { db in
            try db.execute(
                sql: "CREATE TABLE health_checks (id INTEGER PRIMARY KEY CHECK (id = 1), checked_at INTEGER NOT NULL)"
            )
        }
        // Access tokens issued before this time are refused: set by a logout and by a reused refresh token.
        migrator.registerMigration("v12: access token revocation") { db in
            try db.execute(sql: "ALTER TABLE users ADD COLUMN tokens_not_before INTEGER")
        }
        // Open registration: the skeleton of each address (``ConfusableText/skeleton(_:)``, filled in by the engine
        // for rows stored before it), unique, so no account's address looks like another's; when each address was
        // proved to be its owner's (every account made before this counts as confirmed); and the codes mailed to
        // prove it, as digests.
        migrator.registerMigration("v13: email confirmation") { db in
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN email_skeleton TEXT;
                    CREATE UNIQUE INDEX users_email_skeleton ON users (email_skeleton);
                    ALTER TABLE users ADD COLUMN email_confirmed_at INTEGER;
                    UPDATE users SET email_confirmed_at = created_at;
                    CREATE TABLE email_confirmations (
                        user_id TEXT PRIMARY KEY REFERENCES users(id),
                        code_hash TEXT NOT NULL,
                        expires_at INTEGER NOT NULL,
                        attempts_left INTEGER NOT NULL CHECK (attempts_left >= 0)
                    );
                    """
            )
        }
        // Group splits and tips: how many shares a session is split into (1: one payer, as before), how many are
        // paid and for how much, the tips paid on top; one row per share of a split session, with its lock and the
        // payment that paid it (the shares one send paid share its payment id, and its tip sits on the first of
        // them); which payment an automatic refund returned; and when every payment of a cancelled or expired
        // split was returned (the refund sweep's index covers the sessions still owed one); which payment a send's
        // key paid, replayed with its receipt. A split has a payment receipt per payment: one per session is now
        // `ledger verify`'s check of sessions not split, no longer a unique index.
        migrator.registerMigration("v14: splits and tips") { db in
            try db.execute(
                sql: """
                    ALTER TABLE payment_sessions ADD COLUMN shares INTEGER NOT NULL DEFAULT 1
                        CHECK (shares >= 1 AND shares <= 50);
                    ALTER TABLE payment_sessions ADD COLUMN shares_paid INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE payment_sessions ADD COLUMN paid_cents INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE payment_sessions ADD COLUMN tip_cents INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE payment_sessions ADD COLUMN refunds_swept_at INTEGER;
                    UPDATE payment_sessions SET shares_paid = 1, paid_cents = amount_cents WHERE status = 'PAID';
                    CREATE INDEX payment_sessions_refunds_due ON payment_sessions (exp_at)
                        WHERE shares_paid > 0 AND status <> 'PAID' AND refunds_swept_at IS NULL;
                    CREATE TABLE session_shares (
                        session_id TEXT NOT NULL REFERENCES payment_sessions(id),
                        share INTEGER NOT NULL CHECK (share >= 1 AND share <= 50),
                        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
                        locked_by TEXT REFERENCES users(id),
                        lock_exp_at INTEGER,
                        payment_id TEXT,
                        paid_by TEXT REFERENCES users(id),
                        paid_at INTEGER,
                        tip_cents INTEGER NOT NULL DEFAULT 0 CHECK (tip_cents >= 0),
                        PRIMARY KEY (session_id, share)
                    );
                    CREATE INDEX session_shares_locked_by ON session_shares (locked_by)
                        WHERE locked_by IS NOT NULL AND payment_id IS NULL;
                    CREATE INDEX session_shares_payment ON session_shares (payment_id) WHERE payment_id IS NOT NULL;
                    ALTER TABLE refunds ADD COLUMN payment_id TEXT;
                    ALTER TABLE idempotency_keys ADD COLUMN payment_id TEXT;
                    DROP INDEX receipts_payment;
                    """
            )
        }
        // Webhooks: the endpoints users register (with their secrets, the one a rotation replaced, and whether they are
        // disabled, failing or deleted) and the event types each subscribes to, found by user and type; the events
        // every money movement writes in its own transaction (the outbox), each naming its transfer and the rows its
        // data is read from, with the body every delivery of it sends once rendered; one delivery per event and
        // subscribed endpoint, with its lease and its last attempt, found when due and by endpoint; when each
        // session's expiry was noted with its event (sessions expired before this are noted without one); and the
        // first entry written with the outbox in place, from which on every money movement has its event.
        migrator.registerMigration("v15: webhooks") { db in
            try db.execute(
                sql: """
                    ALTER TABLE payment_sessions ADD COLUMN expiry_noted_at INTEGER;
                    UPDATE payment_sessions SET expiry_noted_at = exp_at
                        WHERE status IN ('CREATED', 'ADVERTISING', 'LOCKED')
                        AND exp_at <= CAST(strftime('%s', 'now') AS INTEGER) * 1000;
                    CREATE INDEX payment_sessions_expiry_due ON payment_sessions (exp_at)
                        WHERE status IN ('CREATED', 'ADVERTISING', 'LOCKED') AND expiry_noted_at IS NULL;
                    CREATE TABLE webhook_endpoints (
                        id TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        url TEXT NOT NULL,
                        events TEXT NOT NULL,
                        secret TEXT NOT NULL,
                        previous_secret TEXT,
                        previous_secret_until INTEGER,
                        created_at INTEGER NOT NULL,
                        disabled_at INTEGER,
                        disabled_reason TEXT,
                        failing_since INTEGER,
                        deleted_at INTEGER
                    );
                    CREATE INDEX webhook_endpoints_user ON webhook_endpoints (user_id, created_at);
                    CREATE TABLE webhook_subscriptions (
                        user_id TEXT NOT NULL REFERENCES users(id),
                        event_type TEXT NOT NULL,
                        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
                        PRIMARY KEY (user_id, event_type, endpoint_id)
                    );
                    CREATE TABLE webhook_events (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        id TEXT NOT NULL UNIQUE,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        type TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        session_id TEXT,
                        payment_id TEXT,
                        refund_id TEXT,
                        payout_id TEXT,
                        deposit_id TEXT,
                        transfer_id TEXT,
                        amount_cents INTEGER,
                        body BLOB
                    );
                    CREATE TABLE webhook_deliveries (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        id TEXT NOT NULL UNIQUE,
                        event_id TEXT NOT NULL REFERENCES webhook_events(id),
                        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
                        status TEXT NOT NULL CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
                        attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                        created_at INTEGER NOT NULL,
                        next_attempt_at INTEGER,
                        lease_token TEXT,
                        lease_until INTEGER,
                        last_attempt_at INTEGER,
                        last_status_code INTEGER,
                        last_error TEXT,
                        last_duration_ms INTEGER,
                        delivered_at INTEGER,
                        UNIQUE (event_id, endpoint_id)
                    );
                    CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'PENDING';
                    CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, seq);
                    CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (endpoint_id, lease_until)
                        WHERE status = 'PENDING' AND lease_token IS NOT NULL;
                    CREATE TABLE webhook_outbox (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        first_entry_seq INTEGER NOT NULL
                    );
                    INSERT INTO webhook_outbox (id, first_entry_seq)
                        SELECT 1, COALESCE(MAX(seq), 0) + 1 FROM ledger_entries;
                    """
            )
        }
        // The web checkout's browser sessions: the SHA-256 digest of each cookie's secret, its user, and when it
        // started and ends (expired ones are pruned by the end's index).
        migrator.registerMigration("v16: browser sessions") { db in
            try db.execute(
                sql: """
                    CREATE TABLE browser_sessions (
                        token_hash TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL
                    );
                    CREATE INDEX browser_sessions_expiry ON browser_sessions (expires_at);
                    """
            )
        }
        // The tips a session's terminal suggests to its payers, as whole percents (`10,15,20`); NULL when it asks for
        // none, as every session made before did.
        migrator.registerMigration("v17: tip prompts") { db in
            try db.execute(sql: "ALTER TABLE payment_sessions ADD COLUMN tip_percents TEXT")
        }
        // The payee's order reference of a session (an order or table number); NULL when it gave none.
        migrator.registerMigration("v18: order references") { db in
            try db.execute(sql: "ALTER TABLE payment_sessions ADD COLUMN reference TEXT")
        }
        // Terminals' enrolled Ed25519 keys (base64), each signing charges for one payee while offline.
        migrator.registerMigration("v19: terminals") { db in
            try db.execute(
                sql: """
                    CREATE TABLE terminals (
                        id TEXT PRIMARY KEY,
                        payee_id TEXT NOT NULL REFERENCES users(id),
                        name TEXT NOT NULL,
                        key_id TEXT NOT NULL UNIQUE,
                        public_key TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        revoked_at INTEGER
                    )
                    """
            )
            try db.execute(sql: "CREATE INDEX terminals_payee ON terminals (payee_id, created_at)")
        }
        return migrator
    }
}
