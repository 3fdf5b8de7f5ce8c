"""Verifying a Gotchu webhook in Python, with the standard library alone.

Each delivery is a POST whose body is the event, {"id": "evt_...", "type": "...", "created": UNIX_SECONDS,
"data": {...}}, with the header

    Gotchu-Signature: t=UNIX_SECONDS,v1=HEX[,v1=HEX]

where HEX is the HMAC-SHA256 of "{t}.{raw body}" keyed with the endpoint's secret (the whole whsec_... text).
While a secret is being rotated the header carries one v1= per secret; any one matching is enough.

Verify the raw bytes as they arrived, before parsing the JSON. Answer 2xx quickly once the event is stored;
anything else (or no answer within 10 s) is retried, so the same event can arrive more than once: keep the ids
you have handled and skip an id seen before.
"""

import hashlib
import hmac
import time

TOLERANCE_SECONDS = 300


def verify(payload: bytes, header: str, secret: str, tolerance: int = TOLERANCE_SECONDS, now=None) -> bool:
    """True when `header` (Gotchu-Signature) signs `payload` with `secret`, at a time within `tolerance` seconds."""
    timestamp, signatures = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            timestamp = value
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not timestamp.isdigit():
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance:
        return False
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + payload, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, signature) for signature in signatures)


class SeenEvents:
    """The ids of the events handled so far: a delivery whose id is here was handled before (keep them in your
    database, in the transaction that handles the event, for as long as deliveries are retried: 3 days)."""

    def __init__(self):
        self.ids = set()

    def first_time(self, event_id: str) -> bool:
        if event_id in self.ids:
            return False
        self.ids.add(event_id)
        return True
