#!/usr/bin/env python3
"""The anchor of `gotchu-bench ledger` on SQLite: the statements the SQLite store issues for one payment (create,
resolve, lock, send), as plain SQL from one Python thread with the standard sqlite3 module, on the file the benchmark
prepared (WAL, synchronous=FULL, the store's own schema and users).

    ledger_sqlite.py DATABASE PAYER_ID PAYEE_ID PAYMENTS

Prints one JSON object: payments, seconds, and the latency of each payment in microseconds (sorted).
"""
import json
import os
import sqlite3
import sys
import time
import uuid


def main():
    path, payer, payee, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    db = sqlite3.connect(path, isolation_level=None, timeout=10)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA foreign_keys = ON")
    reader = sqlite3.connect(path, isolation_level=None, timeout=10)
    reader.execute("PRAGMA query_only = ON")
    receipt_body = "r" * 640  # about a receipt's length; stored, not signed (as the C API anchor)

    def now():
        return int(time.time() * 1000)

    def new_id():
        return str(uuid.uuid4())

    wallet_by_user = "SELECT id, user_id, available_cents, kind FROM wallet_accounts WHERE user_id = ?"
    session_by_id = (
        "SELECT payment_sessions.id, payment_sessions.payee_id, payment_sessions.amount_cents, payment_sessions.status, "
        "payment_sessions.exp_at, payment_sessions.locked_by, payment_sessions.lock_exp_at, payment_sessions.paid_by, "
        "payment_sessions.paid_at FROM payment_sessions WHERE id = ?"
    )
    latencies = []
    start = time.perf_counter()
    for index in range(count):
        began = time.perf_counter()
        # Create.
        t = now()
        db.execute("BEGIN IMMEDIATE")
        db.execute(wallet_by_user, (payee,)).fetchone()
        eid = os.urandom(5).hex()
        db.execute("SELECT EXISTS (SELECT 1 FROM session_eids WHERE eid = ?)", (eid,)).fetchone()
        sid = new_id()
        db.execute(
            "INSERT INTO payment_sessions (id, payee_id, amount_cents, status, created_at, exp_at, create_key) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payee_id, create_key) DO NOTHING",
            (sid, payee, 1, "ADVERTISING", t, t + 300_000, None),
        )
        db.execute("INSERT INTO session_eids (eid, session_id, created_at) VALUES (?, ?, ?)", (eid, sid, t))
        db.execute("COMMIT")
        # Resolve.
        t = now()
        row = reader.execute(
            "SELECT s.id, s.payee_id, s.amount_cents, s.status, s.exp_at, s.locked_by, s.lock_exp_at, s.paid_by, "
            "s.paid_at, u.display_name, u.email, u.verified_name, e.retired_at "
            "FROM session_eids e JOIN payment_sessions s ON s.id = e.session_id JOIN users u ON u.id = s.payee_id "
            "WHERE e.eid = ? ORDER BY s.created_at DESC, s.rowid DESC LIMIT 1",
            (eid,),
        ).fetchone()
        assert row[0] == sid
        # Lock.
        t = now()
        db.execute("BEGIN IMMEDIATE")
        db.execute(session_by_id, (sid,)).fetchone()
        db.execute(
            "SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM payment_sessions "
            "WHERE locked_by = ? AND status = ? AND lock_exp_at > ? AND exp_at > ? AND id <> ?",
            (payer, "LOCKED", t, t, sid),
        ).fetchone()
        db.execute(wallet_by_user, (payer,)).fetchone()
        db.execute(
            "UPDATE payment_sessions SET status = ?, locked_by = ?, lock_exp_at = ? WHERE id = ?",
            ("LOCKED", payer, t + 30_000, sid),
        )
        db.execute("COMMIT")
        # Send: one transaction, as the store's (the key admitted in flight, paid, its outcome recorded).
        key = str(index)
        t = now()
        db.execute("BEGIN IMMEDIATE")
        record = (
            "SELECT sid, state, updated_at, balance_cents, problem_type, problem_detail FROM idempotency_keys "
            "WHERE user_id = ? AND key = ?"
        )
        db.execute(record, (payer, key)).fetchone()
        db.execute(session_by_id, (sid,)).fetchone()
        db.execute(
            "INSERT INTO idempotency_keys (user_id, key, sid, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (user_id, key) DO NOTHING",
            (payer, key, sid, "IN_FLIGHT", t, t),
        )
        wallets = db.execute(
            "SELECT id, user_id, available_cents, kind FROM wallet_accounts WHERE id IN () "
            "OR user_id IN (?, ?) ORDER BY id",
            (payer, payee),
        ).fetchall()
        source = next(w for w in wallets if w[1] == payer)
        target = next(w for w in wallets if w[1] == payee)
        db.execute(
            "UPDATE wallet_accounts SET available_cents = CASE id WHEN ? THEN ? WHEN ? THEN ? END WHERE id IN (?, ?)",
            (source[0], source[2] - 1, target[0], target[2] + 1, source[0], target[0]),
        )
        head = db.execute("SELECT head_hash, entry_count FROM ledger_chain WHERE id = 1").fetchone()
        transfer = new_id()
        debit_hash, credit_hash = os.urandom(32).hex(), os.urandom(32).hex()
        db.execute(
            "INSERT INTO ledger_entries (id, transfer_id, wallet_id, direction, amount_cents, type, ref_type, ref_id, "
            "created_at, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (new_id(), transfer, source[0], "DEBIT", 1, "SEND_P2P", "session", sid, t, debit_hash)
            + (new_id(), transfer, target[0], "CREDIT", 1, "RECEIVE_P2P", "session", sid, t, credit_hash),
        )
        db.execute("UPDATE ledger_chain SET head_hash = ?, entry_count = ? WHERE id = 1", (credit_hash, head[1] + 2))
        db.execute(
            "UPDATE payment_sessions SET status = ?, paid_by = ?, paid_at = ?, locked_by = NULL, lock_exp_at = NULL "
            "WHERE id = ?",
            ("PAID", payer, t, sid),
        )
        db.execute(
            "INSERT INTO receipts (id, kind, session_id, body, created_at) VALUES (?, ?, ?, ?, ?)",
            (new_id(), "payment", sid, receipt_body, t),
        )
        db.execute(
            "INSERT INTO idempotency_keys (user_id, key, sid, state, balance_cents, problem_type, problem_detail, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (user_id, key) DO UPDATE SET state = excluded.state, balance_cents = excluded.balance_cents, "
            "problem_type = excluded.problem_type, problem_detail = excluded.problem_detail, "
            "updated_at = excluded.updated_at",
            (payer, key, sid, "DONE", source[2] - 1, None, None, t, t),
        )
        db.execute("COMMIT")
        latencies.append(int((time.perf_counter() - began) * 1_000_000))
    seconds = time.perf_counter() - start
    latencies.sort()
    print(json.dumps({"payments": count, "seconds": seconds, "latencies_us": latencies}))


if __name__ == "__main__":
    main()
