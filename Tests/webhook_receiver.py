"""A webhook receiver for the ledger's tests: verifies each delivery's signature with the documented snippet
(docs/snippets/verify_webhook.py, independent of the server's code) and prints one JSON line per delivery.

    webhook_receiver.py --port 0 --secrets FILE [--answers 500,500] [--delay SECONDS] [--hold PATH]

It prints "listening on PORT" once it accepts connections, then for each request a line {"arrived": EVENT_ID,
"concurrent": N} as it arrives (N: requests in progress, this one included) and, once answered, a line
{"id": ..., "type": ..., "valid": true|false, "answered": STATUS, "signature": header, "body": raw text,
"path": ..., "duplicate": bool, "overlap": bool (another request of the same event was in progress)}. A delivery whose signature does not verify is answered 400; the first
others with the statuses of --answers in turn, every later one with 200. FILE holds the secrets, one a line, read again for each request (so a test can register the
endpoint, which needs the receiver's port, and then write the secret the ledger answered). With --hold, every
answer waits until PATH exists.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "snippets"))
from verify_webhook import SeenEvents, verify  # noqa: E402

lock = threading.Lock()
secrets_file = None
answers = []
seen = SeenEvents()
in_flight = {}
delay = 0.0
hold_file = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        header = self.headers.get("Gotchu-Signature", "")
        event_id = self.headers.get("Gotchu-Event-Id")
        with lock:
            # Two requests of one event at once would be two attempts of one delivery overlapping.
            overlap = in_flight.get(event_id, 0) > 0
            in_flight[event_id] = in_flight.get(event_id, 0) + 1
            concurrent = sum(in_flight.values())
            sys.stdout.write(json.dumps({"arrived": event_id, "concurrent": concurrent}) + "\n")
            sys.stdout.flush()
        try:
            self.answer(body, header, event_id, overlap, concurrent)
        finally:
            with lock:
                in_flight[event_id] -= 1

    def answer(self, body, header, header_id, overlap, concurrent):
        with lock:
            valid = any(verify(body, header, secret) for secret in read_secrets())
            # A delivery that is not signed with a secret of ours is refused, as a real receiver must.
            status = 400 if not valid else answers.pop(0) if answers else 200
        try:
            event = json.loads(body)
            event_id, event_type = event.get("id"), event.get("type")
        except ValueError:
            event_id, event_type = None, None
        if delay:
            time.sleep(delay)
        while hold_file and not os.path.exists(hold_file):
            time.sleep(0.05)
        duplicate = False
        if 200 <= status < 300 and event_id is not None:
            with lock:
                duplicate = not seen.first_time(event_id)
        record = {
            "id": event_id, "type": event_type, "valid": valid, "answered": status, "signature": header,
            "body": body.decode("utf-8", "replace"), "path": self.path, "duplicate": duplicate,
            "user_agent": self.headers.get("User-Agent", ""), "header_id": header_id, "overlap": overlap,
            "concurrent": concurrent,
        }
        with lock:
            sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
            sys.stdout.flush()
        payload = b"ok" if status < 400 else b"no"
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args):
        pass


def read_secrets():
    try:
        with open(secrets_file) as file:
            return [line.strip() for line in file if line.strip()]
    except OSError:
        return []


def main():
    global delay, secrets_file, hold_file
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--secrets", required=True)
    parser.add_argument("--answers", default="")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--hold", default=None)
    options = parser.parse_args()
    secrets_file = options.secrets
    answers.extend(int(status) for status in options.answers.split(",") if status)
    delay = options.delay
    hold_file = options.hold
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer((options.host, options.port), Handler)
    sys.stdout.write("listening on %d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
